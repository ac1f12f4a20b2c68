"""The layer as layers/core/Makefile builds it: it keeps botocore's data only for the services the
functions call, so that list must name every service the code reaches."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "layers" / "core" / "python" / "memory_hub"
# Reached through libraries rather than a client(...) call of ours.
IMPLICIT = {"dynamodb": "PynamoDB models, Powertools idempotency", "secretsmanager": "Powertools parameters"}


def kept_services() -> set[str]:
    makefile = (ROOT / "layers" / "core" / "Makefile").read_text()
    match = re.search(r"^KEEP_SERVICES := (.+)$", makefile, re.MULTILINE)
    assert match, "KEEP_SERVICES is not set in layers/core/Makefile"
    return set(match.group(1).split())


def called_services() -> set[str]:
    found = set(IMPLICIT)
    for path in PACKAGE.rglob("*.py"):
        found |= set(re.findall(r"""\bclient\(\s*["']([a-z0-9-]+)["']""", path.read_text()))
    return found


def test_the_layer_keeps_the_data_of_every_service_the_code_calls():
    called = called_services()
    assert {"s3", "lambda"} <= called, "the scan found the clients of storage/aws.py and storage/invoke.py"
    assert {"bedrock-runtime", "s3vectors", "sqs"} <= called, "embeddings, vectors and the embedding queue"
    assert called <= kept_services(), f"add to KEEP_SERVICES: {sorted(called - kept_services())}"


def test_the_layer_drops_the_other_services_data():
    makefile = (ROOT / "layers" / "core" / "Makefile").read_text()
    assert 'find "$(TARGET)/botocore/data"' in makefile and "-exec rm -rf" in makefile
    assert len(kept_services()) <= 12  # of botocore's ~440
