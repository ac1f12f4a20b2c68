"""Scenarios run against moto in a fresh interpreter, patched by the local stack or not, so that
unpatched and patched moto never share a process: the contract tests of the patches
(tests/contract/test_moto_vectors.py, test_vector_text_search.py, test_moto_capacity.py) write
only what each checks."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from typing import Any

# What every scenario starts with: credentials, moto (patched when ``PATCHED``) and ``outcome(call)``:
# "accepted" or the error's code.
PRELUDE = textwrap.dedent("""
    import json, os
    os.environ.update(AWS_ACCESS_KEY_ID="x", AWS_SECRET_ACCESS_KEY="x", AWS_DEFAULT_REGION="us-east-1")
    import boto3
    from moto import mock_aws
    if PATCHED:
        from memory_hub_local.aws import moto_patches
        moto_patches.install()
    mock = mock_aws(); mock.start()
    def outcome(call):
        try:
            call()
            return "accepted"
        except Exception as exc:
            code = getattr(exc, "response", {}).get("Error", {}).get("Code")
            return code or type(exc).__name__
""")
# An S3 Vectors scenario's: a client (``vectors``) and the bucket ``memory-vectors``.
VECTORS = PRELUDE + textwrap.dedent("""
    vectors = boto3.client("s3vectors", region_name="us-east-1")
    vectors.create_vector_bucket(vectorBucketName="memory-vectors")
""")


def run(patched: bool, setup: str, body: str, start: str = VECTORS) -> Any:
    """What the scenario printed last (JSON), after ``start``, ``setup`` and ``body`` ran."""
    code = f"PATCHED = {patched}\n" + start + textwrap.dedent(setup) + textwrap.dedent(body)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])
