"""The wheel built from pyproject.toml ships every module of the core.

An editable install puts the source folders themselves on the path, so a package the build
configuration misses still imports in the checkout; only the built wheel shows it. The build runs on
a copy of what pyproject.toml names (so no build/ or *.egg-info lands in the checkout)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ("pyproject.toml", "README.md", "layers/core/python", "infra/local", "infra/tools", "infra/bench")


def _build(tmp_path: Path) -> set[str]:
    source = tmp_path / "src"
    for name in SOURCES:
        origin, target = ROOT / name, source / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if origin.is_dir():
            shutil.copytree(origin, target, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info"))
        else:
            shutil.copy2(origin, target)
    out = tmp_path / "out"
    command = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "--wheel-dir", str(out), str(source)]
    subprocess.run(command, check=True, capture_output=True, timeout=600)
    (wheel,) = out.glob("memory_hub-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        return set(archive.namelist())


def _modules(root: Path) -> list[str]:
    return sorted(
        str(path.relative_to(root))
        for top in root.glob("memory_hub*")
        for path in top.rglob("*.py")
        if "__pycache__" not in path.parts
    )


def test_the_wheel_holds_every_package_and_module_of_the_project(tmp_path):
    names = _build(tmp_path)
    core = _modules(ROOT / "layers" / "core" / "python")
    packages = sorted({str(Path(m).parent) for m in core})
    assert "memory_hub/domain/transfer" in packages
    missing_packages = [p for p in packages if not any(n.startswith(p + "/") and n.endswith(".py") for n in names)]
    assert not missing_packages, f"packages missing from the wheel: {missing_packages}"
    others = [m for root in ("infra/local", "infra/tools", "infra/bench") for m in _modules(ROOT / root)]
    missing_modules = [m for m in core + others if m not in names]
    assert not missing_modules, f"modules missing from the wheel: {missing_modules}"
    # the data the functions serve comes along too
    assert "memory_hub/edge/openapi.json" in names
    console = ROOT / "layers" / "core" / "python" / "memory_hub" / "edge" / "static" / "console"
    shipped = sorted(f"memory_hub/edge/static/console/{p.name}" for p in console.iterdir())
    assert any(n.endswith("/app.js") for n in shipped) and any(n.endswith("/api.js") for n in shipped)
    assert [n for n in shipped if n not in names] == [], "every file of the console (each ES module) ships"
