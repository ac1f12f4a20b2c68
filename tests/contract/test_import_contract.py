"""The runtime package's import contract: import-linter's contracts in pyproject.toml
([tool.importlinter], run by ``make lint`` as ``lint-imports``) — layers import only downward, only
storage speaks to AWS, the edge reaches storage through three seams, no cycles; and the tools
reach neither storage nor the local stack, whose own modules import in no cycle either. Checked on
the real tree, and each contract shown to catch its kind of breach, planted in a copy of the tree."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "layers" / "core" / "python" / "memory_hub"
FUNCTIONS = ROOT / "functions"
TOOLS = ROOT / "infra" / "tools" / "memory_hub_tools"
LOCAL = ROOT / "infra" / "local" / "memory_hub_local"
CONFIG = ROOT / "pyproject.toml"
CONTRACTS = {c["id"]: c["name"] for c in tomllib.loads(CONFIG.read_text())["tool"]["importlinter"]["contracts"]}


def _lint(*python_path: Path, cwd: Path) -> tuple[int, dict[str, bool]]:
    """lint-imports' exit status and, per contract id, whether it was kept."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(map(str, python_path)), "COLUMNS": "500"}
    run = subprocess.run(
        [Path(sys.executable).with_name("lint-imports"), "--no-cache", "--no-logo", str(CONFIG)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    lines = run.stdout.splitlines()
    kept = {}
    for contract_id, name in CONTRACTS.items():
        (verdict,) = [line.removeprefix(name).split()[0] for line in lines if line.startswith(name + " ")]
        kept[contract_id] = verdict == "KEPT"
    return run.returncode, kept


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A copy of memory_hub, functions, the tools and the local stack, first on the path of the
    lint-imports it runs."""
    ignore = shutil.ignore_patterns("__pycache__")
    shutil.copytree(PACKAGE, tmp_path / "memory_hub", ignore=ignore)
    shutil.copytree(FUNCTIONS, tmp_path / "functions", ignore=ignore)
    shutil.copytree(TOOLS, tmp_path / "memory_hub_tools", ignore=ignore)
    shutil.copytree(LOCAL, tmp_path / "memory_hub_local", ignore=ignore)
    return tmp_path


def test_the_package_keeps_its_import_contract():
    status, kept = _lint(PACKAGE.parent, ROOT, cwd=ROOT)
    assert kept == dict.fromkeys(CONTRACTS, True)
    assert status == 0


def test_a_clean_copy_keeps_it_and_the_edge_may_use_its_seams(tree: Path):
    (tree / "memory_hub" / "edge" / "planted.py").write_text(
        "from ..storage import concurrency, errors, idempotency\n\nSEAMS = (concurrency, errors, idempotency)\n"
    )
    assert _lint(tree, cwd=tree) == (0, dict.fromkeys(CONTRACTS, True))


# An upward import breaks the layers, and with the downward imports already there it closes a cycle.
UPWARD = {"layers", "no-cycles"}
# what is planted (file → source appended) and the contracts it breaks
PLANTED: dict[str, tuple[dict[str, str], set[str]]] = {
    "domain imports boto3": ({"memory_hub/domain/planted.py": "import boto3\n"}, {"aws-sdks"}),
    "the edge imports pynamodb": ({"memory_hub/edge/planted.py": "from pynamodb.models import Model\n"}, {"aws-sdks"}),
    "a function imports botocore": ({"functions/planted/app.py": "import botocore.config\n"}, {"aws-sdks"}),
    "storage imports the edge": ({"memory_hub/storage/planted.py": "from ..edge import pipeline\n"}, UPWARD),
    "domain imports the edge inside a function": (
        {"memory_hub/domain/planted.py": "def f():\n    from ..edge import errors\n\n    return errors\n"},
        UPWARD,
    ),
    # (the tools read the clock through the shapes they import: they would reach storage too)
    "a base module imports storage": (
        {"memory_hub/clock.py": "\n\ndef _f():\n    from .storage import aws\n"},
        UPWARD | {"tools-no-storage"},
    ),
    "the edge imports storage beside its seams": (
        {"memory_hub/edge/planted.py": "from ..storage import models\n"},
        {"edge-seams"},
    ),
    "domain imports a PynamoDB model": (
        {"memory_hub/domain/planted.py": "from ..storage.models import Record\n"},
        {"domain-no-storage-internals"},
    ),
    "domain builds a table key": (
        {"memory_hub/domain/planted.py": "from ..storage import layout\n"},
        {"domain-no-storage-internals"},
    ),
    "a function imports storage": (
        {"functions/planted/app.py": "from memory_hub.storage import records\n"},
        {"functions-no-storage"},
    ),
    "a tool imports storage's key layout": (
        {"memory_hub_tools/planted.py": "from memory_hub.storage import layout\n"},
        {"tools-no-storage"},
    ),
    "a tool reaches storage through the pipeline (not its conventions)": (
        {"memory_hub_tools/planted.py": "def f():\n    from memory_hub.edge import pipeline\n"},
        {"tools-no-storage"},
    ),
    "the OpenAPI tool imports the local stack's template inside a function": (
        {"memory_hub_tools/openapi/planted.py": "def f():\n    from memory_hub_local import template\n"},
        {"tools-no-local-stack"},
    ),
    "the CLI imports the local stack beside its entry points": (
        {"memory_hub_tools/cli/local.py": "\n\ndef _f():\n    from memory_hub_local import stack\n"},
        {"tools-no-local-stack"},
    ),
    "two domain modules import each other": (
        {
            "memory_hub/domain/planted_a.py": "from . import planted_b\n",
            "memory_hub/domain/planted_b.py": "def f():\n    from . import planted_a\n\n    return planted_a\n",
        },
        {"no-cycles"},
    ),
    "two emulator modules import each other": (
        {
            "memory_hub_local/aws/planted_a.py": "from . import planted_b\n",
            "memory_hub_local/aws/planted_b.py": "def f():\n    from . import planted_a\n\n    return planted_a\n",
        },
        {"local-no-cycles"},
    ),
}


@pytest.mark.parametrize("case", PLANTED)
def test_a_planted_breach_breaks_its_contracts_and_only_them(tree: Path, case: str):
    files, broken = PLANTED[case]
    for relative, source in files.items():
        path = tree / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a", encoding="utf-8") as planted:  # appended: a base module keeps its own code
            planted.write(source)
    status, kept = _lint(tree, cwd=tree)
    assert status == 1
    assert kept == {contract: contract not in broken for contract in CONTRACTS}
