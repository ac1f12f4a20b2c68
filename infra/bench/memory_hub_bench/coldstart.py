"""Cold start: how long each function's handler module takes to import in a fresh interpreter, as
Lambda's runtime imports it (only the template's environment, the function's code, the layer and
the runtime's libraries on the path), next to ``import boto3`` in the same conditions; and the size
of the layer as ``sam build`` makes it."""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

REGION = "us-east-1"
ROOT = Path(__file__).resolve().parents[3]
SECRETS = {
    name: f"arn:aws:secretsmanager:{REGION}:123456789012:secret:{name}"
    for name in ("TokenSecret", "BootstrapAdminKeySecret")
}


@dataclass
class ColdRow:
    function: str
    import_ms: float
    boto3_ms: float

    @property
    def ratio(self) -> float:
        return self.import_ms / self.boto3_ms


def _time(code: str, env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-I", "-S", "-c", code], env=env, check=True)
    return (time.perf_counter() - started) * 1000


def cold_starts(runs: int) -> list[ColdRow]:
    """Each function's import against ``import boto3``, interleaved run by run (medians)."""
    from memory_hub_local.functions import runtime_site
    from memory_hub_local.template import deploy

    deployment = deploy(REGION, SECRETS, {})
    scratch = Path(tempfile.mkdtemp(prefix="memory-hub-bench-"))
    try:
        site = str(runtime_site(scratch / "site"))
        rows = []
        for function in deployment.functions.values():
            paths = [str(function.code_uri), *map(str, function.layers), site]
            env = {
                **function.environment,
                "AWS_REGION": REGION,
                "AWS_DEFAULT_REGION": REGION,
                "LANG": "C.UTF-8",
                "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                "AWS_LAMBDA_FUNCTION_NAME": function.logical_id,
            }
            handler = f"import sys; sys.path[:0] = {paths!r}; import app"
            baseline = f"import sys; sys.path[:0] = {[site]!r}; import boto3"
            _time(handler, env), _time(baseline, env)  # compile and cache the .pyc first
            mine, theirs = [], []
            for _ in range(runs):
                mine.append(_time(handler, env))
                theirs.append(_time(baseline, env))
            mine.sort()
            theirs.sort()
            rows.append(ColdRow(function.logical_id, mine[len(mine) // 2], theirs[len(theirs) // 2]))
        return rows
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _size(root: Path) -> tuple[int, int, int]:
    files = [p for p in root.rglob("*") if p.is_file()]
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in files:
            archive.write(path, path.relative_to(root).as_posix())
    return len(files), sum(p.stat().st_size for p in files), len(buffer.getvalue())


def layer_size() -> str:
    """The layer's size: the folder ``make build`` made, else a build of it here (needs the network
    for the aarch64 wheels; says so when it cannot)."""
    built = ROOT / ".aws-sam" / "build" / "CoreLayer"
    scratch = None
    if not built.is_dir():
        scratch = Path(tempfile.mkdtemp(prefix="memory-hub-layer-"))
        result = subprocess.run(
            [
                "make",
                "-s",
                "-C",
                str(ROOT / "layers" / "core"),
                "build-CoreLayer",
                f"ARTIFACTS_DIR={scratch}",
                f"PYTHON={sys.executable}",
                f"PYTHON313={sys.executable}",
            ],
            capture_output=True,
            text=True,
        )
        if result.returncode != 0:
            shutil.rmtree(scratch, ignore_errors=True)
            return f"not measured (the layer did not build here: {result.stderr.strip().splitlines()[-1:]})"
        built = scratch
    try:
        count, unzipped, zipped = _size(built)
        return f"{count} files, {unzipped / 2**20:.1f} MiB unzipped, {zipped / 2**20:.1f} MiB zipped"
    finally:
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)
