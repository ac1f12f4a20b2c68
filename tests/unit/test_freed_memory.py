"""The local AWS side gives the memory it freed back to the system (``malloc_trim``): what glibc
keeps for later allocations after a grown account's start or a burst of requests."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

FRAGMENTED = """
import json, os
def rss():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS"):
            return int(line.split()[1]) / 1024
from memory_hub_local.aws.server import give_back_freed_memory
held = [os.urandom(1) * 4000 for _ in range(60_000)]  # ~230 MiB of glibc's heap
kept = held[::50]  # one in fifty stays: the heap cannot shrink from its top
del held
before = rss()
give_back_freed_memory()
print(json.dumps({"before": before, "after": rss(), "kept": len(kept)}))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc_trim, /proc")
def test_memory_freed_between_live_objects_goes_back_to_the_system():
    env = {**os.environ, "MALLOC_ARENA_MAX": "2"}
    done = subprocess.run([sys.executable, "-c", FRAGMENTED], capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    found = json.loads(done.stdout)
    assert found["kept"] == 1200
    assert found["before"] - found["after"] > 100  # MiB: the free pages between the kept objects


SESSIONS_AFTER_CREATE = """
import gc, json
import boto3, botocore.session
from moto import mock_aws
from memory_hub_local.aws import moto_patches
from memory_hub_local.aws.state import State
from memory_hub_local.template import expanded, local_names

moto_patches.install()
mock_aws().start()
names, _ = local_names("us-east-1", {})
State(expanded("us-east-1"), names, "us-east-1", None, None).create()
gc.collect()
alive = [o for o in gc.get_objects() if isinstance(o, (botocore.session.Session, boto3.session.Session))]
print(json.dumps({"sessions": len(alive), "default": boto3.DEFAULT_SESSION is not None}))
"""


def test_no_boto3_session_outlives_the_making_of_the_resources():
    """Each session holds botocore's endpoint data and the service models it loaded (~10 MiB in
    all); the AWS side makes its resources with one, and moto keeps another to list regions."""
    env = {**os.environ, "AWS_DEFAULT_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "x"}
    env.pop("AWS_ENDPOINT_URL", None)
    done = subprocess.run(
        [sys.executable, "-c", SESSIONS_AFTER_CREATE], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout) == {"sessions": 0, "default": False}
