"""Imports are all or nothing and obey the API's own field rules: every value is checked
before anything is written; a failure midway (an error, a killed process) leaves nothing; tar
member names as ``tar -C dir -czf t.tgz .`` writes them; tar metadata counts toward the unpacked
limit; a value that imported never breaks an export; an upload URL is good for one import."""

from __future__ import annotations

import base64
import io
import json
import os
import signal
import subprocess
import tarfile
import time
from pathlib import Path
from typing import Any

import pytest
import requests
from helpers import Api, eventually, jsonl, make_scope, memory_files, ok, own_stack, tarball, upload_import
from memory_hub.storage import bucket
from test_transfer import (
    CONVERSATIONS,
    MESSAGE,
    RECORD,
    RECORDS,
    assert_nothing_kept,
    begin_import,
    export,
    import_tree,
    settle,
    snapshot,
)

ROOT = Path(__file__).resolve().parents[2]
META = "-----META-START-----\n{}\n-----META-END-----\n\nbody"
# The cleanup that undoes killed imports walks every memory: a stack of this module's own.
stack, api, hooks = own_stack()


def outside_imports(scope) -> list[str]:
    """The keys of the memory's files but its imports' uploads and working files, sorted."""
    return sorted(k for k in memory_files(scope) if not k.startswith(scope.prefix + bucket.IMPORTS))


def _raw(line: str) -> str:
    return line  # a JSONL line written by hand (a lone surrogate escape survives only this way)


def _summary(persona: dict[str, Any]) -> str:
    return json.dumps({"memory_id": "x", "persona": persona})


# ---- 1 and 4: values a route would refuse fail the import before anything is written ---------------

LATER_SURROGATE = {
    "message": {
        CONVERSATIONS: jsonl([MESSAGE])
        + json.dumps({**MESSAGE, "id": "msg-2", "content": "bad \ud800"}, ensure_ascii=True)
        + "\n"
    },
    "record": {
        RECORDS: jsonl([RECORD])
        + json.dumps({**RECORD, "id": "m_2", "content": "bad \ud800"}, ensure_ascii=True)
        + "\n"
    },
    "user": {CONVERSATIONS: json.dumps({**MESSAGE, "userId": "u\ud800"}, ensure_ascii=True) + "\n"},
    "tag": {RECORDS: json.dumps({**RECORD, "tags": ["t\udfff"]}, ensure_ascii=True) + "\n"},
    "metadata": {RECORDS: json.dumps({**RECORD, "metadata": {"k": "\ud800"}}, ensure_ascii=True) + "\n"},
}
REFUSED = {
    "persona-time-long": {"persona.md": "p", ".metadata/memory-hub.json": _summary({"created_at": "x" * 3000})},
    "persona-time-snowman": {"persona.md": "p", ".metadata/memory-hub.json": _summary({"updated_at": "☃"})},
    "persona-time-crlf": {"persona.md": "p", ".metadata/memory-hub.json": _summary({"updated_at": "a\r\nX"})},
    "persona-time-words": {"persona.md": "p", ".metadata/memory-hub.json": _summary({"created_at": "not a time"})},
    "persona-time-object": {"persona.md": "p", ".metadata/memory-hub.json": _summary({"updated_at": {"x": 1}})},
    "persona-version-true": {"persona.md": "p", ".metadata/memory-hub.json": _summary({"version": True})},
    "persona-version-huge": {"persona.md": "p", ".metadata/memory-hub.json": _summary({"version": 10**40})},
    "summary-500k": {"scene_blocks/a.md": META.format("summary: " + "s" * 500_000)},
    "summary-esc": {"scene_blocks/a.md": META.format("summary: a\x1bb")},
    "summary-cr": {"scene_blocks/a.md": META.format("version: 1\nsummary: a\rb")},
    "summary-nul": {"scene_blocks/a.md": META.format("summary: a\x00b")},
    "meta-version-superscript": {"scene_blocks/a.md": META.format("version: ²")},
    "meta-version-huge": {"scene_blocks/a.md": META.format("version: " + "9" * 40)},
    "record-version-huge": {RECORDS: jsonl([{**RECORD, "version": 10**40}])},
    "record-version-true": {RECORDS: jsonl([{**RECORD, "version": True}])},
    # 0 is TencentDB's first version, read as 1 on its own ids only: an id of ours or none needs 1..2^53
    "record-version-zero-own-id": {RECORDS: jsonl([{**RECORD, "id": "atom-" + "0" * 26, "version": 0}])},
    "record-version-zero-no-id": {RECORDS: jsonl([{k: v for k, v in RECORD.items() if k != "id"} | {"version": 0}])},
    "record-reinforced-huge": {RECORDS: jsonl([{**RECORD, "reinforced_count": 2**53 + 1}])},
    "record-metadata-nan": {RECORDS: jsonl([{**RECORD, "metadata": {"n": float("nan")}}])},
    "record-metadata-5000-bytes": {RECORDS: jsonl([{**RECORD, "metadata": {"k": "z" * 5000}}])},
    "message-session-spaced": {CONVERSATIONS: jsonl([{**MESSAGE, "sessionId": " s1", "sessionKey": " s1"}])},
    # a user no route would take ("u " is never a user of its own): nobody could read or erase it
    "message-user-spaced": {CONVERSATIONS: jsonl([{**MESSAGE, "userId": "u "}])},
    "message-user-blank": {CONVERSATIONS: jsonl([{**MESSAGE, "userId": "   "}])},
    "record-user-spaced": {RECORDS: jsonl([{**RECORD, "userId": "\u3000u"}])},
    # metadata.tdai that is not an object is the record's own: within its 4,096 bytes, never replaced
    "record-tdai-string-5000-bytes": {
        RECORDS: jsonl([{**RECORD, "id": "atom-" + "0" * 26, "metadata": {"tdai": "z" * 5000}}])
    },
    "record-foreign-id-tdai-string": {RECORDS: jsonl([{**RECORD, "metadata": {"tdai": "the client's own"}}])},
    **{f"surrogate-{k}": v for k, v in LATER_SURROGATE.items()},
}


@pytest.mark.parametrize("case", list(REFUSED), ids=list(REFUSED))
def test_a_value_a_route_would_refuse_fails_the_import_and_nothing_is_kept(api, case):
    target = make_scope()
    failed = import_tree(api, target, REFUSED[case], user_id="u")
    assert failed["state"] == "failed" and failed["error"] == "the tree is malformed", failed
    assert failed["problems"], failed
    assert all(": " in p and p.split(": ")[0] for p in failed["problems"]), failed
    assert_nothing_kept(api, target, ["u"])


def test_blank_session_and_task_in_lines_mean_none(api):
    target = make_scope()
    record = {**RECORD, "sessionId": "", "taskId": ""}
    message = {**MESSAGE, "taskId": ""}
    done = import_tree(api, target, {CONVERSATIONS: jsonl([message]), RECORDS: jsonl([record])})
    assert done["state"] == "done", done
    body = target.body(user_id="u")
    items = ok(api.post("/v3/atomic/query", body))["items"]
    assert items[0]["task_id"] is None and items[0]["session_id"] is None, items
    assert ok(api.post("/v3/conversation/query", body))["messages"][0]["task_id"] is None


# ---- 2: tar member names --------------------------------------------------------------------------------


def test_a_tree_archived_with_tar_dot_keeps_metadata_and_backups(api, tmp_path):
    source = make_scope()
    ok(api.post("/v3/core/write", source.body(content="persona one")))
    ok(api.post("/v3/core/write", source.body(content="persona two")))
    ok(api.post("/v3/core/write", source.body(content="persona three")))
    _, files = export(api, source.memory_id)
    assert any(name.startswith(".backup/persona/") for name in files)
    for name, data in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes(data)
    archive = tmp_path.parent / "t.tgz"
    subprocess.run(["tar", "-C", str(tmp_path), "-czf", str(archive), "."], check=True)
    with tarfile.open(archive) as t:
        assert "./.metadata/memory-hub.json" in t.getnames()
    target = make_scope()
    done = import_tree(api, target, archive.read_bytes())
    assert done["state"] == "done", done
    persona = ok(api.post("/v3/core/read", target.body()))
    assert persona["content"] == "persona three" and persona["version"] == 3, persona
    assert len(memory_files(target, bucket.PERSONA_BACKUPS)) == 2


def _tar(members: list[tarfile.TarInfo], data: dict[str, bytes] | None = None) -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w:gz", format=tarfile.PAX_FORMAT) as archive:
        for info in members:
            body = (data or {}).get(info.name, b"")
            info.size = len(body) if info.isfile() else 0
            archive.addfile(info, io.BytesIO(body) if info.isfile() else None)
    return raw.getvalue()


def _member(name: str, kind: bytes = tarfile.REGTYPE, link: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, link
    return info


@pytest.mark.parametrize(
    ("members", "data"),
    [
        pytest.param([_member("./../persona.md")], {"./../persona.md": b"x"}, id="dot-dot-after-dot-slash"),
        pytest.param([_member("/persona.md")], {"/persona.md": b"x"}, id="absolute"),
        pytest.param([_member("persona.md", tarfile.SYMTYPE, "/etc/passwd")], None, id="symlink"),
        pytest.param([_member("persona.md", tarfile.LNKTYPE, "x")], None, id="hardlink"),
        pytest.param([_member("persona.md", tarfile.CHRTYPE)], None, id="device"),
        pytest.param([_member("persona.md", tarfile.FIFOTYPE)], None, id="fifo"),
        pytest.param(
            [_member("persona.md"), _member("./persona.md")], {"persona.md": b"a", "./persona.md": b"b"}, id="dup"
        ),
    ],
)
def test_names_leaving_the_tree_links_devices_and_duplicates_are_refused(api, members, data):
    target = make_scope()
    failed = import_tree(api, target, _tar(members, data))
    assert failed["state"] == "failed" and failed["problems"], failed
    assert_nothing_kept(api, target, [])


# ---- 3: a value that imported never breaks an export --------------------------------------------------


def test_a_meta_heat_that_only_looks_like_digits_imports_and_exports(api):
    target = make_scope()
    scene = "-----META-START-----\ncreated: 2026-01-01T00:00:00Z\nheat: ²\n-----META-END-----\n\nbody"
    done = import_tree(api, target, {"scene_blocks/a.md": scene})
    assert done["state"] == "done", done
    _, files = export(api, target.memory_id)
    index = json.loads(files[".metadata/scene_index.json"])
    assert index[0]["heat"] == 0, index


LAST_INSTANT = "9999-12-31T23:59:59.9999Z"  # its millisecond is the last one a time can have


def test_an_imported_time_is_truncated_to_the_millisecond_as_a_requests_time_is(api):
    """A time past the millisecond is stored truncated, as the routes store it — rounded up, the
    last instant of 9999 became a year 10000 that every later read and export failed on."""
    target = make_scope()
    scene = META.format(f"created_at: {LAST_INSTANT}\nupdated_at: {LAST_INSTANT}")
    files = {
        CONVERSATIONS: jsonl(
            [
                {**MESSAGE, "timestamp": LAST_INSTANT},
                {**MESSAGE, "id": "msg-b", "timestamp": "2026-01-05T10:00:00.0005Z"},
            ]
        ),
        RECORDS: jsonl([{**RECORD, "createdAt": LAST_INSTANT, "updatedAt": LAST_INSTANT}]),
        "scene_blocks/a.md": scene,
    }
    done = import_tree(api, target, files, user_id="u")
    assert done["state"] == "done", done
    user = target.__class__(target.team_id, target.agent_id, "u")
    shown = ok(api.post("/v3/conversation/query", user.body(session_id="s")))["messages"]
    assert sorted(m["timestamp"] for m in shown) == ["2026-01-05T10:00:00.000Z", "9999-12-31T23:59:59.999Z"]
    [record] = ok(api.post("/v3/atomic/query", user.body()))["items"]
    assert record["created_at"] == record["updated_at"] == "9999-12-31T23:59:59.999Z", record
    read = ok(api.post("/v3/scenario/read", user.body(path="a.md")))
    assert "created_at: 9999-12-31T23:59:59.999Z" in read["content"], read
    export(api, target.memory_id)  # and every later export goes through


def test_a_null_in_a_line_counts_as_absent_as_in_a_request(api):
    target = make_scope()
    files = {
        CONVERSATIONS: jsonl([{**MESSAGE, "user_id": None, "taskId": None}]),
        RECORDS: jsonl(
            [
                {
                    **RECORD,
                    **dict.fromkeys(["type", "scene_name", "version", "updatedAt", "priority", "timestamps"]),
                }
            ]
        ),
    }
    done = import_tree(api, target, files)
    assert done["state"] == "done" and done["counts"]["l0"] == 1 and done["counts"]["l1"] == 1, done
    user = target.__class__(target.team_id, target.agent_id, "u")
    [record] = ok(api.post("/v3/atomic/query", user.body()))["items"]
    assert (record["type"], record["background"], record["version"]) == ("episodic", "", 1), record
    assert record["updated_at"] == record["created_at"] == "2026-01-05T10:00:00.000Z", record
    assert set(record["metadata"]["tdai"]) == {"source_id"}, "TencentDB's null values are no values"


# ---- 5: tar metadata counts toward the unpacked limit ---------------------------------------------------


def _header(name: bytes, size: int, kind: bytes) -> bytes:
    header = bytearray(512)
    header[: len(name)] = name
    header[100:108] = b"0000644\0"
    header[124:136] = f"{size:011o}\0".encode()
    header[136:148] = b"00000000000\0"
    header[156:157] = kind
    header[257:263] = b"ustar\0"
    header[263:265] = b"00"
    header[148:156] = b" " * 8
    header[148:156] = f"{sum(header):06o}\0 ".encode()
    return bytes(header)


@pytest.mark.parametrize(
    ("kind", "size"),
    [
        pytest.param(b"x", 300 * 2**20, id="pax-300MiB"),
        pytest.param(b"L", 300 * 2**20, id="gnu-longname-300MiB"),
        pytest.param(b"0", 200 * 2**20, id="file-200MiB"),
    ],
)
def test_tar_metadata_and_contents_beyond_the_limit_are_refused_before_they_are_read(api, kind, size):
    import gzip

    data = gzip.compress(_header(b"././@PaxHeader", size, kind) + b"x" * (2 * 2**20))
    target = make_scope()
    failed = import_tree(api, target, data)
    assert failed["state"] == "failed", failed
    assert failed["problems"][0].startswith("(upload): "), failed
    assert_nothing_kept(api, target, [])


# ---- 8: an upload URL is good for one import ------------------------------------------------------------


def test_a_used_upload_cannot_start_again_and_a_later_put_is_swept(api):
    target = make_scope()
    created = ok(api.post("/v3/memory/import", {"team_id": target.team_id, "agent_id": target.agent_id}))
    data = tarball({CONVERSATIONS: jsonl([MESSAGE])})
    assert requests.put(created["upload_url"], data=data, headers=created["headers"], timeout=60).status_code == 200
    done = ok(api.post("/v3/memory/import/start", {"import_id": created["import_id"]}))
    assert done["state"] == "done", done
    again = requests.put(created["upload_url"], data=os.urandom(5 * 2**20), headers=created["headers"], timeout=60)
    assert again.status_code == 200  # S3 cannot revoke a presigned URL before it expires
    answer = api.post("/v3/memory/import/start", {"import_id": created["import_id"]})
    assert answer.status == 409, answer.body
    assert memory_files(target, bucket.IMPORTS)
    report = api.invoke("CleanupFunction", {})
    assert report["done"] is True, report
    assert memory_files(target, bucket.IMPORTS) == []
    again = api.invoke("CleanupFunction", {})  # nothing is left to sweep, so nothing is counted
    assert again["done"] is True and again["exports_deleted"] == 0, again


# ---- all or nothing midway ------------------------------------------------------------------------------


def _big_tree(n: int, *, asynchronous: bool = False) -> dict[str, bytes | str]:
    """A tree writing every layer; ``asynchronous``: with 600 KB of noise the reader ignores, so the
    upload is larger than one request ingests and runs in an asynchronous invocation."""
    lines = [{**MESSAGE, "id": f"m-{i}", "content": f"message number {i}"} for i in range(n)]
    return {
        CONVERSATIONS: jsonl(lines),
        RECORDS: jsonl(
            [{**RECORD, "id": f"r-{i}", "content": f"record {i}"} for i in range(50)]
            # two lines that reinforce _seed's record (natural-key dedup)
            + [{**RECORD, "id": f"r-seeded-{i}", "content": "a record there before"} for i in range(2)]
        ),
        "scene_blocks/new.md": "a new scene",
        "scene_blocks/there.md": "imported over a live scene",
        "persona.md": "imported persona",
        **({"notes/noise.txt": base64.b64encode(os.urandom(600_000))} if asynchronous else {}),
    }


def _seed(api: Api, target: Any) -> None:
    ok(
        api.post(
            "/v3/conversation/add",
            target.body(user_id="u", session_id="s", messages=[{"role": "user", "content": "there before"}]),
        )
    )
    ok(api.post("/v3/atomic/add", target.body(user_id="u", content="a record there before")))
    ok(api.post("/v3/scenario/write", target.body(path="there.md", content="live scene")))
    ok(api.post("/v3/core/write", target.body(content="live persona")))


def test_a_failure_midway_takes_back_everything_the_import_wrote(api, hooks):
    target = make_scope()
    _seed(api, target)
    before = snapshot(api, target, ["u"])
    keys_before = outside_imports(target)
    fail = {
        "function": "TransferFunction",
        "operation": "PutObject",
        "key_contains": [target.prefix, ".staged/persona-"],
    }
    with hooks.failing(fail, code="AccessDenied", status=403):
        failed = import_tree(api, target, _big_tree(300))
    assert failed["state"] == "failed", failed
    after = snapshot(api, target, ["u"])
    assert after["users"] == before["users"]
    assert after["l3"]["content"] == "live persona"
    assert {f: v["content"] for f, v in after["l2_files"].items()} == {
        "there.md": before["l2_files"]["there.md"]["content"]
    }
    backups = target.prefix + bucket.PERSONA_BACKUPS
    assert [k for k in outside_imports(target) if not k.startswith(backups)] == [
        k for k in keys_before if not k.startswith(backups)
    ]
    assert memory_files(target, bucket.IMPORTS) == []
    done = import_tree(api, target, _big_tree(300))
    assert done["state"] == "done" and done["counts"]["l0"] == 300, done
    reinforced = [
        i for i in snapshot(api, target, ["u"])["users"]["u"]["l1"] if i["content"] == "a record there before"
    ]
    assert [i["reinforced_count"] for i in reinforced] == [3]  # what the failed one had taken back


def _transfer_processes() -> list[int]:
    """Pids of this session's TransferFunction environments (descendants of this process)."""
    mine = os.getpid()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cwd = os.readlink(f"/proc/{entry}/cwd")
        except OSError:
            continue
        if not cwd.endswith("functions/transfer"):
            continue
        pid = int(entry)
        while pid > 1:
            try:
                stat = Path(f"/proc/{pid}/stat").read_text()
            except OSError:
                break
            pid = int(stat.rsplit(")", 1)[1].split()[1])
            if pid == mine:
                found.append(int(entry))
                break
    return found


def _wait_until_gone(pids: list[int]) -> None:
    """Until every one of ``pids`` has stopped running (killed: a zombie, then gone)."""

    def running(pid: int) -> bool:
        try:
            os.readlink(f"/proc/{pid}/cwd")  # a zombie has no working directory any more
        except OSError:
            return False
        return True

    eventually(lambda: not any(running(pid) for pid in pids), f"{pids} still running after SIGKILL", timeout=30)


@pytest.mark.parametrize(
    "held_at",
    [
        "scene-",  # every message and record is written; files are staged next
        "persona-",  # the scene files are staged too (one over a live file): none ever lands
    ],
)
def test_an_import_killed_midway_leaves_nothing_after_the_cleanup_and_a_retry_succeeds(api, hooks, held_at):
    target = make_scope()
    _seed(api, target)
    before = snapshot(api, target, ["u"])
    tree = _big_tree(300, asynchronous=True)
    created = ok(api.post("/v3/memory/import", {"team_id": target.team_id, "agent_id": target.agent_id}))
    put = requests.put(created["upload_url"], data=tarball(tree), headers=created["headers"], timeout=60)
    assert put.status_code == 200
    scene = {
        "function": "TransferFunction",
        "operation": "PutObject",
        "key_contains": [target.prefix, ".staged/" + held_at],
    }
    with hooks.paused(scene) as hook:
        answer = ok(api.post("/v3/memory/import/start", {"import_id": created["import_id"]}))
        assert answer["state"] in ("queued", "running"), answer
        waited = hooks.wait(hook, timeout=120)  # every message and record is written; files are next
        assert waited, ok(api.post("/v3/memory/import/status", {"import_id": created["import_id"]}))
        body = target.body(user_id="u")
        assert ok(api.post("/v3/conversation/count", body))["total"] == 1  # midway: staged, invisible
        victims = _transfer_processes()
        assert victims
        for pid in victims:
            os.kill(pid, signal.SIGKILL)
    _wait_until_gone(victims)
    an_hour = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 3600))
    report = api.invoke("CleanupFunction", {"now": an_hour})
    assert report["done"] is True, report
    after = snapshot(api, target, ["u"])
    assert after["users"] == before["users"]
    assert after["l3"]["content"] == "live persona"
    assert after["l2_files"] == before["l2_files"]  # content and META version, as before the import
    assert memory_files(target, bucket.IMPORTS) == []
    status = ok(api.post("/v3/memory/import/status", {"import_id": created["import_id"]}))
    assert status["state"] == "failed", status
    retry = begin_import(api, target.team_id, target.agent_id, tarball(tree))
    done, _ = settle(api, "/v3/memory/import/status", "import_id", retry)
    assert done["state"] == "done" and done["counts"]["l0"] == 300, done


def test_a_killed_import_into_a_new_memory_leaves_no_memory(api, hooks):
    target = make_scope()
    tree = _big_tree(300, asynchronous=True)
    import_id = upload_import(api, target.team_id, target.agent_id, tarball(tree))
    scene = {
        "function": "TransferFunction",
        "operation": "PutObject",
        "key_contains": [target.prefix, ".staged/scene-"],
    }
    with hooks.paused(scene) as hook:
        ok(api.post("/v3/memory/import/start", {"import_id": import_id}))
        assert hooks.wait(hook, timeout=120)
        victims = _transfer_processes()
        for pid in victims:
            os.kill(pid, signal.SIGKILL)
    _wait_until_gone(victims)
    an_hour = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 3600))
    assert api.invoke("CleanupFunction", {"now": an_hour})["done"] is True
    for layer in ("conversation", "atomic"):
        assert ok(api.post(f"/v3/{layer}/count", target.body(user_id="u")))["total"] == 0
    status = ok(api.post("/v3/memory/import/status", {"import_id": import_id}))
    assert status["state"] == "failed", status
    # The cleanup undoes the killed import without deleting the memory it created (its role may not
    # delete assets): it empties it and keeps the journal. The status poll above runs in the
    # TransferFunction, whose role may: it finds the journal and deletes that memory whole.
    got = api.post("/v3/memory/get", {"memory_id": target.memory_id})
    assert got.status == 404, got.body
    assert outside_imports(target) == []
    assert memory_files(target, bucket.IMPORTS) == []
    assert ok(api.post("/v3/scenario/count", target.body()))["total"] == 0
    assert ok(api.post("/v3/core/read", target.body()))["content"] is None
