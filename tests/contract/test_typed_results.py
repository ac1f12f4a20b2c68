"""The domain answers in types, not in loose dicts: at most 10 % of its public functions (module
level or public methods, in ``memory_hub/domain/**``) return ``dict[str, Any]`` or ``Any``, and
every route's handler declares the answer type its 200 is documented with."""

from __future__ import annotations

import ast
from pathlib import Path

from memory_hub.domain.results import Answer

ROOT = Path(__file__).resolve().parents[2]
DOMAIN = ROOT / "layers" / "core" / "python" / "memory_hub" / "domain"
LOOSE_SHARE = 0.10


def _public_functions(tree: ast.Module) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    found: list[ast.FunctionDef | ast.AsyncFunctionDef] = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and not node.name.startswith("_"):
            found.append(node)
        elif isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
            found += [
                n
                for n in node.body
                if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and not n.name.startswith("_")
            ]
    return found


def _loose(function: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    returns = ast.unparse(function.returns) if function.returns else ""
    return "dict[str, Any]" in returns or returns == "Any"


def _census() -> tuple[list[str], list[str]]:
    public, loose = [], []
    for path in sorted(DOMAIN.rglob("*.py")):
        for function in _public_functions(ast.parse(path.read_text(encoding="utf-8"))):
            name = f"{path.relative_to(DOMAIN)}:{function.name}"
            public.append(name)
            if _loose(function):
                loose.append(name)
    return public, loose


def test_at_most_a_tenth_of_the_domains_public_functions_return_loose_dicts() -> None:
    public, loose = _census()
    assert len(public) > 100, "the census found too few functions: is DOMAIN right?"
    assert len(loose) <= LOOSE_SHARE * len(public), f"{len(loose)} of {len(public)} return dict/Any: {loose}"


def test_the_census_counts_what_it_says() -> None:
    tree = ast.parse(
        "from typing import Any\n"
        "def a() -> dict[str, Any]: ...\n"
        "def b() -> Any: ...\n"
        "def c() -> int: ...\n"
        "def _d() -> Any: ...\n"
        "class E:\n"
        "    def f(self) -> dict[str, Any]: ...\n"
        "    def _g(self) -> Any: ...\n"
    )
    functions = _public_functions(tree)
    assert [f.name for f in functions] == ["a", "b", "c", "f"]
    assert [f.name for f in functions if _loose(f)] == ["a", "b", "f"]


def test_every_route_declares_a_typed_answer() -> None:
    from memory_hub.edge.routes import ROUTES
    from memory_hub_tools.openapi.spec import _apps

    answers = {path: answer for app in _apps() for path, answer in app.answers.items()}
    assert set(answers) == set(ROUTES)
    for path, answer in answers.items():
        options = getattr(answer, "__args__", (answer,))  # a union of answers (user-memory/delete)
        assert all(isinstance(o, type) and issubclass(o, Answer) for o in options), (path, answer)
