"""The import contract of the runtime package, checked from the code (``python -m memory_hub_tools.imports``).

    functions/<name>/app.py  →  memory_hub.edge, memory_hub.domain, the base modules
    memory_hub.edge          →  memory_hub.domain, three named seams of storage (EDGE_SEAMS)
    memory_hub.domain        →  memory_hub.storage (and below)
    memory_hub.storage       →  memory_hub.{clock, settings, observability} and the AWS SDKs
    the base modules: clock, settings, observability → nothing of memory_hub but each other

Rules:
- a layer never imports a layer above it (imports inside functions count too);
- only ``memory_hub.storage`` imports the AWS SDKs (boto3, botocore, pynamodb) — the domain speaks
  of items and files, never of requests to AWS;
- the functions never reach into storage: they go through the domain;
- no import cycles between modules (function-level imports included).

Exit status 1 with one line per breach; 0 and a one-line summary otherwise."""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
PACKAGE = ROOT / "layers" / "core" / "python" / "memory_hub"
FUNCTIONS = ROOT / "functions"
AWS_SDKS = ("boto3", "botocore", "pynamodb")
BASE = ("memory_hub.clock", "memory_hub.settings", "memory_hub.observability")
# The edge's three seams into storage, each for a reason: the errors it maps to statuses (Busy,
# Unavailable), the thread pool that starts the key lookup beside a route's first reads, and the
# persistence layer Powertools' idempotency keeps its records in.
EDGE_SEAMS = ("memory_hub.storage.errors", "memory_hub.storage.concurrency", "memory_hub.storage.idempotency")
# What each layer may import of memory_hub (a prefix match on module names).
ALLOWED: dict[str, tuple[str, ...]] = {
    "memory_hub.edge": ("memory_hub.edge", "memory_hub.domain", *EDGE_SEAMS, *BASE),
    "memory_hub.domain": ("memory_hub.domain", "memory_hub.storage", *BASE),
    "memory_hub.storage": ("memory_hub.storage", *BASE),
    "memory_hub.clock": BASE,
    "memory_hub.settings": BASE,
    "memory_hub.observability": BASE,
    "functions": ("memory_hub.edge", "memory_hub.domain", *BASE),
}


@dataclass(frozen=True)
class Import:
    source: str  # the importing module
    target: str  # the imported module
    path: Path
    line: int


def module_name(path: Path) -> str:
    if path.is_relative_to(FUNCTIONS):
        return "functions." + ".".join(path.relative_to(FUNCTIONS).with_suffix("").parts)
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _resolve(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


def imports_of(path: Path, known: set[str], module: str | None = None) -> list[Import]:
    """Every import in the file, wherever it stands (module level or inside a function)."""
    module = module or module_name(path)
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [Import(module, alias.name, path, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            target = _resolve(module, path.name == "__init__.py", node)
            # `from . import x` names a module when x is one; otherwise the package itself
            for alias in node.names:
                candidate = f"{target}.{alias.name}"
                found.append(Import(module, candidate if candidate in known else target, path, node.lineno))
    return found


def _layer(module: str) -> str | None:
    for layer in ALLOWED:
        if module == layer or module.startswith(layer + "."):
            return layer
    return None


def breaches(imports: list[Import]) -> list[str]:
    problems = []
    for imp in imports:
        shown = imp.path.relative_to(ROOT) if imp.path.is_relative_to(ROOT) else imp.path
        where = f"{shown}:{imp.line}"
        layer = _layer(imp.source)
        top = imp.target.split(".")[0]
        if top in AWS_SDKS and not imp.source.startswith("memory_hub.storage"):
            problems.append(f"{where}: {imp.source} imports {imp.target}: only memory_hub.storage speaks to AWS")
        if layer is None or not imp.target.startswith("memory_hub"):
            continue
        allowed = ALLOWED[layer]
        if not any(imp.target == a or imp.target.startswith(a + ".") for a in allowed):
            problems.append(
                f"{where}: {imp.source} imports {imp.target} (a {layer} module may import {', '.join(allowed)})"
            )
    return problems


def cycles(imports: list[Import]) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan), each as a sorted list."""
    graph: dict[str, set[str]] = {}
    for imp in imports:
        if imp.target.startswith("memory_hub") and imp.target != imp.source:
            graph.setdefault(imp.source, set()).add(imp.target)
            graph.setdefault(imp.target, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for following in sorted(graph[node]):
            if following not in index:
                visit(following)
                low[node] = min(low[node], low[following])
            elif following in on_stack:
                low[node] = min(low[node], index[following])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return groups


def _parent_package_edges(imports: list[Import]) -> list[Import]:
    """Importing ``a.b.c`` runs ``a/__init__`` and ``a/b/__init__`` first: a package's __init__ that
    imports its own submodule is not a cycle, so edges into a module's own ancestors are dropped."""
    return [i for i in imports if not i.source.startswith(i.target + ".")]


def collect() -> list[Import]:
    files = sorted(PACKAGE.rglob("*.py")) + sorted(FUNCTIONS.glob("*/app.py"))
    known = {module_name(p) for p in files}
    return [imp for path in files for imp in imports_of(path, known)]


def main() -> int:
    imports = collect()
    problems = breaches(imports)
    problems += ["import cycle: " + " ↔ ".join(group) for group in cycles(_parent_package_edges(imports))]
    for problem in problems:
        print(problem)
    if problems:
        return 1
    modules = {i.source for i in imports}
    print(f"import contract holds: {len(modules)} modules, {len(imports)} imports, no cycles")
    return 0


if __name__ == "__main__":
    sys.exit(main())
