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
