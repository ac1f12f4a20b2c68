"""A stack a test started dies with the test run, however the run ends. A child process starts a
stack as the tests start one (``helpers.launch``: `memory-hub local`, or `make run`, in a session
of its own), makes sure its functions run, and is killed with SIGKILL, as a test run killed by a
timeout or a CI runner is. Every process of that stack — `make`, `memory-hub local`, the emulated
AWS side, the functions' environments — is gone within seconds and its ports are free."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import eventually

ROOT = Path(__file__).resolve().parents[2]
START_S = 180

# The test run that is killed: it starts the stack as the tests do and waits until it is killed.
RUN = """
import json, sys, time, urllib.request
sys.path.insert(0, sys.argv[1])
from helpers import launch

command, api = json.loads(sys.argv[2]), sys.argv[3]
process, lines = launch(command, sys.argv[4], float(sys.argv[5]))
urllib.request.urlopen(f"http://127.0.0.1:{api}/health", timeout=120).read()  # a function runs
print(json.dumps({"pid": process.pid}), flush=True)
time.sleep(3600)
"""


def ports() -> tuple[int, int, int]:
    from memory_hub_local.stack import held_port

    return held_port(), held_port(), held_port()


def in_session(session: int) -> dict[int, str]:
    """The live processes of a session (zombies aside), with their command lines."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rpartition(")")[2].split()
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:  # it ended meanwhile
            continue
        if int(fields[3]) == session and fields[0] != "Z":
            found[int(entry.name)] = command
    return found


def free(port: int) -> bool:
    """Whether a new stack could listen on the port as the stack's servers do (SO_REUSEADDR: the
    connections of the stack's last minute may wait out TIME_WAIT; no socket may listen there)."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("how", ["memory-hub local", "make run"])
def test_a_stack_dies_with_the_test_run_that_started_it(tmp_path, how):
    api, lam, aws = ports()
    data = tmp_path / "state"
    if how == "make run":
        command = ["make", "-s", "run", f"PORT={api}", f"LAMBDA_PORT={lam}", f"AWS_PORT={aws}"]
        command.append(f"ARGS=--data-dir {data}")
    else:
        command = [str(ROOT / ".venv" / "bin" / "memory-hub"), "local", "--data-dir", str(data), "--port", str(api)]
        command += ["--lambda-port", str(lam), "--aws-port", str(aws)]
    arguments = [str(ROOT / "tests"), json.dumps(command), str(api), str(ROOT), str(START_S)]
    run = subprocess.Popen([sys.executable, "-c", RUN, *arguments], stdout=subprocess.PIPE, text=True)
    session = 0
    try:
        assert run.stdout is not None
        line = run.stdout.readline()
        assert line, f"the test run did not start its stack (exit {run.wait()})"
        session = json.loads(line)["pid"]  # launch starts the stack in a session of its own
        running = " | ".join(in_session(session).values())
        for part in ("memory_hub_local.aws", "lambda_runtime", "memory-hub local"):
            assert part in running, running
        assert not any(free(port) for port in (api, lam, aws)), "the stack listens on its ports"
        run.send_signal(signal.SIGKILL)
        run.wait()
        killed = time.monotonic()
        eventually(lambda: not in_session(session), lambda: f"still running: {in_session(session)}", timeout=60)
        gone = time.monotonic() - killed
        assert all(free(port) for port in (api, lam, aws)), "a port of the stack is still held"
        print(f"{how}: every process of the stack gone {gone:.1f} s after the SIGKILL")
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
        for pid in in_session(session) if session else {}:  # what this test started and left behind
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
