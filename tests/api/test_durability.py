"""The local stack keeps what it acknowledged: the stack is started as `make run` starts it
(a data directory, its own process group), writes are answered, the whole group is killed with
SIGKILL right after the last answer, and a start on the same directory has every one of them —
also when the kill lands in the middle of a compaction (nothing lost, nothing applied twice), and
when the journal's last record was cut short (that record alone is dropped; the stack starts)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
from pathlib import Path

import pytest
import requests
from helpers import eventually, launch, output_after, stored_vectors
from memory_hub_local.aws import journal

ROOT = Path(__file__).resolve().parents[2]
START_S = 180


class Running:
    def __init__(self, process: subprocess.Popen[str], port: int, lines: list[str]) -> None:
        self.process, self.port, self.lines = process, port, lines
        self.url = f"http://127.0.0.1:{port}"
        banner = "".join(lines)
        self.admin_key = re.search(r"admin key\s+(\S+)", banner).group(1)
        self.aws = dict(re.findall(r"export (AWS_[A-Z_]+)=(\S+)", banner))

    def post(self, path: str, body: dict, key: str | None = None) -> dict:
        answer = requests.post(
            self.url + path,
            json=body,
            timeout=120,
            headers={"Authorization": f"Bearer {key or self.admin_key}", "x-tdai-service-id": "default"},
        )
        data = answer.json()
        assert answer.status_code == 200 and data.get("code") == 0, data
        return data["data"]

    def kill(self) -> str:
        """SIGKILL to the whole process group: the stack, the emulated AWS side, the functions and
        any compaction child die at once, as in a crash."""
        os.killpg(self.process.pid, signal.SIGKILL)
        out = output_after(self.process, 60)
        return out

    def stop(self) -> str:
        os.killpg(self.process.pid, signal.SIGTERM)
        out = output_after(self.process, 120)
        return out

    def vectors(self) -> set[tuple[str, str, str]]:
        """Every vector the emulated S3 Vectors holds (bucket, index, key), through its endpoint."""
        return {(bucket, index, key) for key, held in stored_vectors(self.aws).items() for bucket, index, _ in held}


def ports() -> tuple[int, int, int]:
    from memory_hub_local.stack import held_port

    return held_port(), held_port(), held_port()


def start(data: Path, **environment: str) -> Running:
    api, lam, aws = ports()
    command = [str(ROOT / ".venv" / "bin" / "memory-hub"), "local", "--data-dir", str(data)]
    command += ["--port", str(api), "--lambda-port", str(lam), "--aws-port", str(aws)]
    process, lines = launch(command, ROOT, START_S, **environment)
    return Running(process, api, lines)


SCOPE = {"team_id": "kept", "agent_id": "agent", "user_id": "u"}


def write_everything(stack: Running, round_: str, n: int) -> dict:
    """n acknowledged writes of each kind; returns what must be there after a crash."""
    for i in range(n):
        messages = [{"role": "user", "content": f"round {round_} call {i} message {j}"} for j in range(5)]
        stack.post("/v3/conversation/add", {**SCOPE, "session_id": f"s-{round_}", "messages": messages})
        stack.post("/v3/scenario/write", {**SCOPE, "path": f"{round_}/{i}.md", "content": f"file {round_} {i}"})
        stack.post("/v3/atomic/add", {**SCOPE, "content": f"fact {round_} {i}"})
    key = stack.post("/v3/admin/keys/create", {"role": "reader", "team_ids": [SCOPE["team_id"]]})["api_key"]
    return {"round": round_, "n": n, "messages": 5 * n, "key": key}


def check_everything(stack: Running, written: dict) -> None:
    round_, n = written["round"], written["n"]
    assert stack.post("/v3/conversation/count", {**SCOPE, "session_id": f"s-{round_}"})["total"] == written["messages"]
    for i in range(n):
        read = stack.post("/v3/scenario/read", {**SCOPE, "path": f"{round_}/{i}.md"}, key=written["key"])
        assert read["content"].endswith(f"file {round_} {i}"), read
        assert read["version"] == 1  # written once, applied once
    facts = stack.post("/v3/atomic/query", {**SCOPE, "limit": 100})["items"]
    contents = [f["content"] for f in facts if f["content"].startswith(f"fact {round_} ")]
    assert sorted(contents) == sorted(f"fact {round_} {i}" for i in range(n))


def test_every_acknowledged_write_survives_a_sigkill(tmp_path):
    data = tmp_path / "state"
    first = start(data)
    try:
        written = write_everything(first, "a", 4)
        vectors = first.vectors()
    finally:
        first.kill()  # right after the last answer
    second = start(data)
    try:
        assert second.admin_key == first.admin_key, "the generated admin key was on disk before the first answer"
        check_everything(second, written)
        assert vectors <= second.vectors()
    finally:
        second.stop()


@pytest.mark.parametrize("pause", ["replayed", "saved"])
def test_a_crash_during_a_compaction_loses_nothing_and_applies_nothing_twice(tmp_path, pause):
    """A compaction starts after the first change (a threshold of one record) and stops either
    before it writes the new snapshot or after it (when the old segments are not deleted yet)."""
    data = tmp_path / "state"
    first = start(data, MEMORY_HUB_COMPACT_RECORDS="1", MEMORY_HUB_TEST_COMPACT_PAUSE=pause)
    try:
        before = write_everything(first, "before", 3)
        paused = (data / journal.PAUSED_MARKER).exists
        eventually(paused, "the compaction did not reach its pause point", timeout=120)
        during = write_everything(first, "during", 3)  # answered while the compaction is under way
    finally:
        first.kill()
    (data / journal.PAUSED_MARKER).unlink()
    second = start(data)
    try:
        check_everything(second, before)
        check_everything(second, during)
        second.post("/v3/scenario/write", {**SCOPE, "path": "after.md", "content": "after"})
    finally:
        second.stop()
    third = start(data)  # the journal the second run wrote on top of the recovered state is kept too
    try:
        check_everything(third, before)
        check_everything(third, during)
        assert third.post("/v3/scenario/read", {**SCOPE, "path": "after.md"})["content"].endswith("after")
    finally:
        third.stop()


def test_a_torn_last_record_is_dropped_and_the_stack_starts(tmp_path):
    data = tmp_path / "state"
    first = start(data)
    try:
        written = write_everything(first, "t", 2)
    finally:
        first.kill()
    last = max(journal.segments(data))
    path = journal.segment_path(data, last)
    records, end, size = journal.read(path)
    assert records and end == size, "every answered write is whole on disk"
    with open(path, "r+b") as handle:  # the crash cut the last record short
        handle.truncate(size - 3)
    second = start(data)
    try:
        kept, end, size = journal.read(path)
        assert len(kept) == len(records) - 1 and end == size, "that record alone was dropped"
        assert kept == records[:-1]
        second.post("/v3/scenario/write", {**SCOPE, "path": "next.md", "content": "next"})
        assert second.post("/v3/scenario/read", {**SCOPE, "path": "next.md"})["content"].endswith("next")
        # the last request of the last key creation may be gone; everything before it is there
        assert second.post("/v3/conversation/count", {**SCOPE, "session_id": "s-t"})["total"] == written["messages"]
    finally:
        out = "".join(second.lines) + second.stop()
    assert "cut short by a crash" in out, out


def _on_disk(data: Path) -> bytes:
    """Everything the data directory holds, the snapshot decompressed."""
    import gzip

    held = b""
    for path in sorted(data.rglob("*")):
        if path.is_file():
            raw = path.read_bytes()
            held += gzip.decompress(raw) if path.suffix == ".gz" else raw
    return held


def test_erased_content_leaves_the_data_directory_soon_after_the_delete(tmp_path):
    """A delete removes content from storage: on the local stack that includes the journal and the
    snapshot, which still hold what was written until a compaction folds them. An erasure starts
    one within seconds (the thresholds of 5,000 records or 64 MiB are not reached here), and what
    was not deleted is still there after a crash and a restart."""
    data = tmp_path / "state"
    first = start(data)
    try:
        first.post(
            "/v3/conversation/add",
            {
                **SCOPE,
                "session_id": "s",
                "messages": [
                    {"role": "user", "content": "my passport is quokkasecret"},
                    {"role": "user", "content": "this message stays"},
                ],
            },
        )
        first.post("/v3/atomic/add", {**SCOPE, "content": "the locker code is wombatsecret"})
        first.post("/v3/atomic/add", {**SCOPE, "content": "this record stays"})
        first.post("/v3/scenario/write", {**SCOPE, "path": "q.md", "content": "the alarm is numbatsecret"})
        first.post("/v3/scenario/write", {**SCOPE, "path": "kept.md", "content": "this file stays"})
        secrets = [b"quokkasecret", b"wombatsecret", b"numbatsecret"]
        assert all(secret in _on_disk(data) for secret in secrets)  # the journal holds them as written

        messages = first.post("/v3/conversation/query", {**SCOPE, "session_id": "s", "limit": 10})["messages"]
        message = next(m["id"] for m in messages if "quokkasecret" in m["content"])
        records = first.post("/v3/atomic/query", {**SCOPE, "limit": 10})["items"]
        record = next(r["id"] for r in records if "wombatsecret" in r["content"])
        assert first.post("/v3/conversation/delete", {**SCOPE, "message_ids": [message]})["deleted_count"] == 1
        assert first.post("/v3/atomic/delete", {**SCOPE, "ids": [record]})["deleted_count"] == 1
        assert first.post("/v3/scenario/rm", {**SCOPE, "path": "q.md"})["deleted"] == 1

        eventually(
            lambda: not any(secret in _on_disk(data) for secret in secrets),
            lambda: f"still on disk: {[s for s in secrets if s in _on_disk(data)]}",
            timeout=90,
        )
    finally:
        first.kill()
    second = start(data)
    try:
        left = second.post("/v3/conversation/query", {**SCOPE, "session_id": "s", "limit": 10})["messages"]
        assert [m["content"] for m in left] == ["this message stays"]
        left = second.post("/v3/atomic/query", {**SCOPE, "limit": 10})["items"]
        assert [r["content"] for r in left] == ["this record stays"]
        assert second.post("/v3/scenario/read", {**SCOPE, "path": "kept.md"})["content"].endswith("this file stays")
        assert second.post("/v3/scenario/count", SCOPE)["total"] == 1
    finally:
        second.stop()


def test_an_erasure_whose_compaction_a_crash_cut_off_is_compacted_after_the_restart(tmp_path):
    """The stack dies right after the delete is answered, before its compaction: the journal the
    next start replays holds the erasure, so a compaction follows that start."""
    data = tmp_path / "state"
    first = start(data)
    try:
        first.post("/v3/atomic/add", {**SCOPE, "content": "the pin is echidnasecret"})
        record = first.post("/v3/atomic/query", {**SCOPE, "limit": 10})["items"][0]["id"]
        assert first.post("/v3/atomic/delete", {**SCOPE, "ids": [record]})["deleted_count"] == 1
    finally:
        first.kill()  # well within the second of quiet an erasure waits for
    assert b"echidnasecret" in _on_disk(data)
    second = start(data)
    try:
        eventually(lambda: b"echidnasecret" not in _on_disk(data), "still on disk after the restart", timeout=90)
        assert second.post("/v3/atomic/query", {**SCOPE, "limit": 10})["items"] == []
    finally:
        second.stop()
