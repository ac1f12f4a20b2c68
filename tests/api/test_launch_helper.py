"""The tests' ``launch`` reads what a started stack prints after its banner as it prints it. A pipe
holds 64 KiB: unread, a stack that logs more blocks in its next write, and the request it was
serving hangs until the test's client gives up (a 3,000-message import's poll, 120 s)."""

from __future__ import annotations

import sys
from pathlib import Path

from helpers import launch, output_after

# Prints a banner as a stack does, then 256 KiB of log lines, then a last line, and exits.
TALKATIVE = """
import sys
print("admin key k\\n", flush=True)
for i in range(4096):
    sys.stdout.write(f"log line {i:05d} " + "x" * 48 + "\\n")
print("the end", flush=True)
"""


def test_a_stack_that_prints_more_than_a_pipe_holds_is_never_blocked(tmp_path: Path):
    process, banner = launch([sys.executable, "-c", TALKATIVE], tmp_path, 30)
    assert "admin key k\n" in banner
    out = output_after(process, 30)  # TimeoutExpired: blocked in a write nobody read
    assert process.returncode == 0
    assert out.count("log line ") == 4096 and out.endswith("the end\n")
