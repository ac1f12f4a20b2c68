"""The repo's size rules, so that a module does one job and a function reads at a glance: no module
over 600 lines and no function over 80 lines, outside the tests (the service, the functions, the
tools, the bench, the local stack, the console's JavaScript)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ("layers", "functions", "infra")
MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 80


def _sources(suffix: str) -> list[Path]:
    found = []
    for top in SOURCES:
        for path in (ROOT / top).rglob(f"*{suffix}"):
            parts = set(path.relative_to(ROOT).parts)
            if not parts & {".venv", ".aws-sam", "__pycache__", "build", "data"}:
                found.append(path)
    return sorted(found)


def test_the_rules_look_at_the_code():
    assert len(_sources(".py")) > 100 and _sources(".js")


def test_no_module_over_600_lines():
    long = {
        str(p.relative_to(ROOT)): n
        for p in _sources(".py") + _sources(".js")
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    }
    assert long == {}


def test_no_function_over_80_lines():
    long = {}
    for path in _sources(".py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    long[f"{path.relative_to(ROOT)}:{node.lineno} {node.name}"] = lines
    assert long == {}
