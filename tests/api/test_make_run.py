"""`make run` as the README prints it: the stack comes up on the given ports, prints what a person
needs (URLs, admin key, the AWS CLI's environment), and remembers: a written file and a
created key survive a stop (SIGTERM) and a restart, with the same admin key; `--ephemeral` keeps
nothing."""

from __future__ import annotations

import os
import re
import signal
import subprocess
from pathlib import Path

import pytest
import requests
from helpers import eventually, launch, output_after

ROOT = Path(__file__).resolve().parents[2]
START_S = 120


class Running:
    def __init__(self, process: subprocess.Popen[str], port: int, lines: list[str]) -> None:
        self.process, self.port, self.lines = process, port, lines
        self.url = f"http://127.0.0.1:{port}"

    @property
    def admin_key(self) -> str:
        return next(re.search(r"admin key\s+(\S+)", line).group(1) for line in self.lines if "admin key" in line)

    def post(self, path: str, body: dict, key: str | None = None) -> dict:
        answer = requests.post(
            self.url + path,
            json=body,
            timeout=60,
            headers={"Authorization": f"Bearer {key or self.admin_key}", "x-tdai-service-id": "default"},
        )
        return {"status": answer.status_code, **answer.json()}

    def stop(self) -> str:
        """SIGTERM to the process group, as a terminal's Ctrl-C or a service manager sends it. The
        output ends when the stack itself has exited (it holds the pipe until then)."""
        os.killpg(self.process.pid, signal.SIGTERM)
        out = output_after(self.process, 120)
        # `make` dies by the signal it passed on (-15); the stack itself exits cleanly after saving.
        assert self.process.returncode in (0, -signal.SIGTERM), out
        assert "Traceback" not in out, out
        return out


def start(command: list[str], port: int, **environment: str) -> Running:
    """Start the stack (with ``environment`` added to its own) and read its banner up to the blank
    line that ends it."""
    process, lines = launch(command, ROOT, START_S, **environment)
    running = Running(process, port, lines)
    answer = requests.get(running.url + "/health", timeout=60)  # a cold function on a busy machine
    assert answer.status_code == 200 and answer.json() == {"status": "ok", "formation": "off"}
    return running


def ports() -> tuple[int, int, int]:
    from memory_hub_local.stack import held_port

    return held_port(), held_port(), held_port()


def test_make_run_prints_what_a_person_needs_and_remembers_across_a_restart(tmp_path):
    api, lam, aws = ports()
    data = tmp_path / "state"
    command = ["make", "-s", "run", f"PORT={api}", f"LAMBDA_PORT={lam}", f"AWS_PORT={aws}", f"ARGS=--data-dir {data}"]
    first = start(command, api)
    try:
        banner = "".join(first.lines)
        assert f"http://127.0.0.1:{api}" in banner and f"http://127.0.0.1:{lam}" in banner
        for line in (
            f"export AWS_ENDPOINT_URL=http://127.0.0.1:{aws}",
            "export AWS_DEFAULT_REGION=",
            "export AWS_ACCESS_KEY_ID=",
            "export AWS_SECRET_ACCESS_KEY=",
        ):
            assert line in banner, banner
        scope = {"team_id": "persist", "agent_id": "agent", "user_id": "u"}
        written = first.post("/v3/scenario/write", {**scope, "path": "kept.md", "content": "still here"})
        assert written["code"] == 0, written
        key = first.post("/v3/admin/keys/create", {"role": "reader", "team_ids": ["persist"]})["data"]["api_key"]
        admin_key = first.admin_key
    finally:
        out = first.stop()
    assert "saving the state" in out
    assert any(data.iterdir()), "the state was written to the data dir"

    second = start(command, api)
    try:
        assert second.admin_key == admin_key, "the generated admin key is kept with the state"
        read = second.post("/v3/scenario/read", {**scope, "path": "kept.md"}, key=key)
        assert read["code"] == 0 and read["data"]["content"].endswith("still here"), read
        assert read["data"]["version"] == 1
    finally:
        second.stop()


def test_ephemeral_keeps_nothing(tmp_path):
    api, lam, aws = ports()
    command = [
        str(ROOT / ".venv" / "bin" / "memory-hub"),
        "local",
        "--ephemeral",
        "--port",
        str(api),
        "--lambda-port",
        str(lam),
        "--aws-port",
        str(aws),
        "--data-dir",
        str(tmp_path / "unused"),
    ]
    first = start(command, api)
    scope = {"team_id": "gone", "agent_id": "agent", "user_id": "u"}
    try:
        assert "ephemeral" in "".join(first.lines)
        assert first.post("/v3/scenario/write", {**scope, "path": "a.md", "content": "x"})["code"] == 0
        admin_key = first.admin_key
    finally:
        first.stop()
    assert not (tmp_path / "unused").exists()
    second = start(command, api)
    try:
        assert second.admin_key != admin_key
        assert second.post("/v3/scenario/read", {**scope, "path": "a.md"})["data"]["content"] is None
    finally:
        second.stop()


@pytest.mark.parametrize("taken", ["api", "aws"])
def test_a_port_in_use_is_one_clear_line_and_a_non_zero_exit(taken):
    import socket

    api, lam, aws = ports()
    with socket.socket() as holder:
        holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # beside the port's reservation
        holder.bind(("127.0.0.1", api if taken == "api" else aws))
        holder.listen()
        result = subprocess.run(
            [
                str(ROOT / ".venv" / "bin" / "memory-hub"),
                "local",
                "--ephemeral",
                "--port",
                str(api),
                "--lambda-port",
                str(lam),
                "--aws-port",
                str(aws),
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=START_S,
        )
    assert result.returncode != 0
    assert "Traceback" not in result.stderr + result.stdout, result.stderr


def _children(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (from /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                found.append(int(entry.name))
    return found


def _running(pid: int) -> bool:
    """Alive and not a zombie waiting to be reaped."""
    try:
        return (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_a_killed_stack_leaves_nothing_running_and_the_next_start_keeps_what_was_answered(tmp_path):
    """SIGKILL to the stack's own process alone (an OOM kill, a debugger): the processes it started —
    the emulated AWS side, the functions' environments — do not live on holding the ports and the
    data directory; the next start on that directory serves what was answered before the kill."""
    api, lam, aws = ports()
    data = tmp_path / "state"
    command = [str(ROOT / ".venv" / "bin" / "memory-hub"), "local", "--port", str(api), "--lambda-port", str(lam)]
    command += ["--aws-port", str(aws), "--data-dir", str(data)]
    # A temporary folder of its own: a stack that another test starts meanwhile in the shared one
    # would remove the killed stack's runtime-site folder before this test looks for it.
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    first = start(command, api, TMPDIR=str(scratch))
    scope = {"team_id": "killed", "agent_id": "agent", "user_id": "u"}
    written = first.post("/v3/scenario/write", {**scope, "path": "kept.md", "content": "answered before the kill"})
    assert written["code"] == 0, written
    started = _children(first.process.pid)
    sides = [p for p in started if b"memory_hub_local.aws" in Path(f"/proc/{p}/cmdline").read_bytes()]
    assert len(sides) == 1, started
    os.kill(first.process.pid, signal.SIGKILL)
    first.process.wait(timeout=60)
    eventually(
        lambda: not any(_running(p) for p in started),
        lambda: f"still running after their stack was killed: {[p for p in started if _running(p)]}",
    )
    killed = str(first.process.pid)
    assert killed in _runtime_dir_owners(scratch)  # its runtime-site folder, which it could not remove
    second = start(command, api, TMPDIR=str(scratch))
    try:
        read = second.post("/v3/scenario/read", {**scope, "path": "kept.md"})
        assert read["code"] == 0 and read["data"]["content"].endswith("answered before the kill"), read
        assert read["data"]["version"] == 1
        assert killed not in _runtime_dir_owners(scratch)  # the next start removed it
    finally:
        second.stop()


def _runtime_dir_owners(parent: Path) -> list[str]:
    from memory_hub_local.functions import RUNTIME_PREFIX

    owners = []
    for folder in parent.glob(RUNTIME_PREFIX + "*"):
        try:
            owners.append((folder / "owner").read_text())
        except OSError:
            pass
    return owners
