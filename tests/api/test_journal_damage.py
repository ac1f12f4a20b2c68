"""A damaged journal record is never cut off silently with the acknowledged writes after it. The
stack is started as `make run` starts it, ten adds are answered, the whole group is killed with
SIGKILL. One byte flipped in a record in the middle of the journal: the stack refuses to start,
naming the file and the byte offset, and leaves every file of the data directory as it was;
`memory-hub local repair --drop-damaged` keeps a copy and drops that record alone, and the stack then
has every other add. A tail a crash tore (a record cut short, zeros, garbage) is dropped and the
stack starts with every acknowledged add, as before."""

from __future__ import annotations

import os
import random
import re
import shutil
import signal
import subprocess
from pathlib import Path

import pytest
import requests
from helpers import launch, output_after
from memory_hub_local.aws import journal

ROOT = Path(__file__).resolve().parents[2]
MEMORY_HUB = str(ROOT / ".venv" / "bin" / "memory-hub")
START_S = 180
SCOPE = {"team_id": "damage", "agent_id": "agent", "user_id": "u"}
ADDS = 10


class Running:
    def __init__(self, process: subprocess.Popen[str], port: int, lines: list[str]) -> None:
        self.process, self.url, self.lines = process, f"http://127.0.0.1:{port}", lines
        self.admin_key = re.search(r"admin key\s+(\S+)", "".join(lines)).group(1)

    def post(self, path: str, body: dict) -> dict:
        answer = requests.post(
            self.url + path,
            json=body,
            timeout=120,
            headers={"Authorization": f"Bearer {self.admin_key}", "x-tdai-service-id": "default"},
        )
        data = answer.json()
        assert answer.status_code == 200 and data.get("code") == 0, data
        return data["data"]

    def facts(self) -> list[str]:
        return sorted(f["content"] for f in self.post("/v3/atomic/query", {**SCOPE, "limit": 100})["items"])

    def end(self, how: int) -> str:
        os.killpg(self.process.pid, how)
        out = output_after(self.process, 120)
        return "".join(self.lines) + out


def command(data: Path) -> list[str]:
    from memory_hub_local.stack import held_port

    api, lam, aws = held_port(), held_port(), held_port()
    ports = ["--port", str(api), "--lambda-port", str(lam), "--aws-port", str(aws)]
    return [MEMORY_HUB, "local", "--data-dir", str(data), *ports]


def start(data: Path) -> Running:
    started = command(data)
    process, lines = launch(started, ROOT, START_S)
    return Running(process, int(started[started.index("--port") + 1]), lines)


def fact(i: int) -> str:
    return f"fact number {i} of the damage test"


@pytest.fixture(scope="module")
def killed(tmp_path_factory) -> Path:
    """A data directory whose stack answered ten adds and was killed right after (SIGKILL)."""
    data = tmp_path_factory.mktemp("killed") / "state"
    first = start(data)
    try:
        for i in range(ADDS):
            first.post("/v3/atomic/add", {**SCOPE, "content": fact(i)})
        assert first.facts() == sorted(fact(i) for i in range(ADDS))
    finally:
        first.end(signal.SIGKILL)
    return data


def copy_of(killed: Path, tmp_path: Path) -> tuple[Path, Path]:
    data = tmp_path / "state"
    shutil.copytree(killed, data)
    (number,) = journal.segments(data)  # ten adds: one segment, no compaction
    return data, journal.segment_path(data, number)


def on_disk(data: Path) -> dict[str, bytes]:
    return {str(p.relative_to(data)): p.read_bytes() for p in sorted(data.rglob("*")) if p.is_file()}


def test_a_damaged_record_in_the_middle_stops_the_start_and_repair_keeps_every_intact_write(killed, tmp_path):
    data, path = copy_of(killed, tmp_path)
    records, end, size = journal.read(path)
    assert end == size and len(records) > 2 * ADDS  # each add journals its record, counter and more
    # the request that put add 3's item (in the middle of the journal: later adds' records follow)
    damaged = next(i for i, r in enumerate(records) if fact(3).encode() in r.body)
    offset, after = journal.layout(path).spans[damaged]
    whole = bytearray(path.read_bytes())
    whole[after - len(records[damaged].body) // 2] ^= 0x01  # a byte in the middle of its body
    path.write_bytes(bytes(whole))
    before = on_disk(data)

    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "MEMORY_HUB_"))}
    refused = subprocess.run(command(data), cwd=ROOT, env=env, capture_output=True, text=True, timeout=START_S)
    out = refused.stdout + refused.stderr
    assert refused.returncode != 0, out
    assert f"{path} at byte offset {offset}" in out, out
    assert f"{len(records) - damaged - 1} intact records follow" in out and "memory-hub local repair" in out, out
    assert on_disk(data) == before, "the refused start changed nothing on disk"

    repaired = subprocess.run(
        [MEMORY_HUB, "local", "repair", "--data-dir", str(data), "--drop-damaged"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert repaired.returncode == 0, repaired.stdout + repaired.stderr
    (backup,) = data.glob("journal-damaged-*")
    assert (backup / path.name).read_bytes() == before[path.name], "a copy of the journal as it was"
    assert len(journal.read(path)[0]) == len(records) - 1

    second = start(data)
    try:  # every add but the one whose record was damaged, those after it included
        assert second.facts() == sorted(fact(i) for i in range(ADDS) if i != 3)
        second.post("/v3/atomic/add", {**SCOPE, "content": "after the repair"})
        assert "after the repair" in second.facts()
    finally:
        second.end(signal.SIGTERM)


def torn(tail: str) -> bytes:
    never_answered = b"".join(journal.encode({"m": "PUT", "p": "/memory-hub-local/x", "h": {}}, b"y" * 4000))
    if tail == "cut":
        return never_answered[:1500]
    if tail == "zeros":
        return b"\0" * 65536
    return random.Random(5).randbytes(65536)


@pytest.mark.parametrize("tail", ["cut", "zeros", "garbage"])
def test_a_torn_tail_is_dropped_and_every_acknowledged_write_is_there(killed, tmp_path, tail):
    data, path = copy_of(killed, tmp_path)
    whole = path.read_bytes()
    path.write_bytes(whole + torn(tail))
    second = start(data)
    try:
        assert second.facts() == sorted(fact(i) for i in range(ADDS))
        assert journal.read(path)[1:] == (len(whole), len(whole)), "the tail was cut off, nothing before it"
    finally:
        out = second.end(signal.SIGTERM)
    assert f"dropped {len(torn(tail))} bytes of a record cut short by a crash" in out, out
