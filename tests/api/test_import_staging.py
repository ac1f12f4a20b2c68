"""Nothing of an import is visible until it succeeds: while it runs (held at a write, or a 4,000
message import polled throughout) no count, query, search, scene listing or read, export or memory
total shows any of it, and right after it commits all of it does; a crashed import is invisible
from the crash on and rolled back by the cleanup (never embedded) and by a restart of the stack."""

from __future__ import annotations

import os
import signal
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import requests
from helpers import Api, eventually, jsonl, make_scope, ok, own_stack, tarball, upload_import
from test_durability import Running, start
from test_transfer import CONVERSATIONS, MESSAGE, RECORD, RECORDS, begin_import, export
from test_transfer_hardening import _transfer_processes, _wait_until_gone

ROOT = Path(__file__).resolve().parents[2]
# Killed imports and the cleanup walk every memory: a stack of this module's own.
stack, api, hooks = own_stack()

WORD = "okapi"  # in every imported message and record, in nothing seeded


def _tree(n: int, *, reinforcing: bool = True) -> dict[str, bytes | str]:
    """``n`` messages and 20 records about the word, a line reinforcing the seeded record, a new
    scene file (the last thing written before the commit) and no persona."""
    lines = [
        {**MESSAGE, "id": f"m-{i}", "content": f"{WORD} sighting {i}", "timestamp": 1767607200000 + i} for i in range(n)
    ]
    records = [{**RECORD, "id": f"r-{i}", "content": f"{WORD} fact {i}"} for i in range(20)]
    if reinforcing:
        records.append({**RECORD, "id": "r-seeded", "content": "a record there before"})
    return {CONVERSATIONS: jsonl(lines), RECORDS: jsonl(records), "scene_blocks/imported.md": f"{WORD} scene"}


def _seed(api: Api, target: Any) -> None:
    body = target.body(user_id="u", session_id="s", messages=[{"role": "user", "content": "there before"}])
    ok(api.post("/v3/conversation/add", body))
    ok(api.post("/v3/atomic/add", target.body(user_id="u", content="a record there before")))
    ok(api.post("/v3/scenario/write", target.body(path="live.md", content="live scene")))


def seen(api: Api, target: Any) -> dict[str, Any]:
    """What a client sees of the memory: every read route that could show an import."""
    user = target.body(user_id="u")
    query = ok(api.post("/v3/conversation/query", {**user, "limit": 50}))
    records = ok(api.post("/v3/atomic/query", {**user, "limit": 50}))["items"]
    return {
        "l0": ok(api.post("/v3/conversation/count", user))["total"],
        "l0 since": ok(api.post("/v3/conversation/count", {**user, "time_start": "2026-01-01T00:00:00Z"}))["total"],
        "query": (len(query["messages"]), query["total"]),
        "l0 found": len(
            ok(api.post("/v3/conversation/search", {**user, "query": WORD, "mode": "keyword"}))["messages"]
        ),
        "l1": ok(api.post("/v3/atomic/count", user))["total"],
        "records": sorted((r["content"], r["reinforced_count"]) for r in records),
        "l1 found": len(ok(api.post("/v3/atomic/search", {**user, "query": WORD, "mode": "keyword"}))["items"]),
        "files": sorted(f["path"] for f in ok(api.post("/v3/scenario/ls", target.body()))["entries"]),
        "file read": api.post("/v3/scenario/read", target.body(path="imported.md")).status,
        "l2": ok(api.post("/v3/scenario/count", target.body()))["total"],
        "totals": ok(api.post("/v3/memory/get", {"memory_id": target.memory_id}))["counts"],
    }


def _exported(api: Api, target: Any) -> tuple[int, int]:
    answer, _ = export(api, target.memory_id)
    return answer["counts"]["l0"], answer["counts"]["l1"]


def test_a_running_import_shows_nothing_and_its_commit_shows_all_of_it(api, hooks):
    target = make_scope()
    _seed(api, target)
    before = seen(api, target)
    exported_before = _exported(api, target)
    files = _tree(300)
    # held at its scene file: every message and record is written, the commit is next
    held = {"function": "TransferFunction", "operation": "PutObject", "key_contains": [target.prefix, ".staged/scene-"]}
    with hooks.paused(held) as hook:
        import_id = upload_import(api, target.team_id, target.agent_id, tarball(files))
        with ThreadPoolExecutor(1) as pool:
            started = pool.submit(api.post, "/v3/memory/import/start", {"import_id": import_id})
            assert hooks.wait(hook, timeout=120)
            assert ok(api.post("/v3/memory/import/status", {"import_id": import_id}))["state"] == "running"
            assert seen(api, target) == before
            assert _exported(api, target) == exported_before
            hooks.release(hook)
            done = ok(started.result(timeout=120))
    assert done["state"] == "done", done
    after = seen(api, target)
    assert after["l0"] == after["l0 since"] == after["query"][1] == 1 + 300
    assert (after["l0 found"], after["l1 found"]) == (5, 5)  # a search's default limit
    assert after["l1"] == 1 + 20 and ("a record there before", 2) in after["records"]
    assert after["files"] == ["imported.md", "live.md"] and after["file read"] == 200
    assert after["totals"]["l0"] == 301 and after["totals"]["l1"] == 21
    assert _exported(api, target) == (301, 21)


def _files(api: Api, target: Any) -> dict[str, Any]:
    """What a client sees of the memory's files: L2 by listing, count and read, and L3."""
    persona = ok(api.post("/v3/core/read", target.body()))
    read = ok(api.post("/v3/scenario/read", target.body(path="live.md")))
    return {
        "ls": sorted((f["path"], f["version"]) for f in ok(api.post("/v3/scenario/ls", target.body()))["entries"]),
        "count": ok(api.post("/v3/scenario/count", target.body()))["total"],
        "imported.md": ok(api.post("/v3/scenario/read", target.body(path="imported.md")))["content"],
        "live.md": (read["version"], read["content"].split("\n\n", 1)[-1].strip()),
        "persona": (persona["content"], persona["version"]),
    }


def test_an_imports_files_and_persona_show_only_once_it_commits(api, hooks):
    """Held at its commit (every item written, every file staged): scene listing, count, read
    and core/read show the memory's own files; right after, the import's."""
    target = make_scope()
    _seed(api, target)
    ok(api.post("/v3/core/write", target.body(content="live persona")))
    before = _files(api, target)
    assert before["ls"] == [("live.md", 1)] and before["live.md"] == (1, "live scene")
    assert before["persona"] == ("live persona", 1)
    files = {**_tree(20), "scene_blocks/live.md": f"{WORD} over the live scene", "persona.md": f"{WORD} persona"}
    commit = {"function": "TransferFunction", "operation": "TransactWriteItems", "body_contains": "DELETE"}
    with hooks.paused(commit) as hook:
        import_id = upload_import(api, target.team_id, target.agent_id, tarball(files))
        with ThreadPoolExecutor(1) as pool:
            started = pool.submit(api.post, "/v3/memory/import/start", {"import_id": import_id})
            assert hooks.wait(hook, timeout=120), "the import never reached its commit"
            assert _files(api, target) == before
            hooks.release(hook)
            done = ok(started.result(timeout=120))
    assert done["state"] == "done", done
    after = _files(api, target)
    assert after["ls"] == [("imported.md", 1), ("live.md", 2)] and after["count"] == 2
    assert after["imported.md"].endswith(f"{WORD} scene") and after["live.md"] == (2, f"{WORD} over the live scene")
    assert after["persona"] == (f"{WORD} persona", 2)


def test_polls_during_a_4000_message_import_see_nothing_of_it_until_it_is_done(api):
    """The probe's case: count and search polled throughout an asynchronous import."""
    target = make_scope()
    _seed(api, target)
    answer = begin_import(api, target.team_id, target.agent_id, tarball(_tree(4000, reinforcing=False)))
    polls, leaks = 0, []
    user = target.body(user_id="u")
    while answer["state"] in ("queued", "running"):
        count = ok(api.post("/v3/conversation/count", user))["total"]
        found = ok(api.post("/v3/conversation/search", {**user, "query": WORD, "mode": "keyword"}))["messages"]
        answer = ok(api.post("/v3/memory/import/status", {"import_id": answer["import_id"]}))
        if answer["state"] in ("queued", "running"):
            polls += 1
            if count != 1 or found:
                leaks.append((count, len(found)))
    assert answer["state"] == "done", answer
    print(f"polls while the import ran: {polls}, that saw any of it: {len(leaks)}")
    assert polls > 0 and leaks == []
    assert ok(api.post("/v3/conversation/count", user))["total"] == 4001


def _kill_midway(api: Api, hooks: Any, target: Any) -> str:
    """An import killed (SIGKILL of its process) once its messages and records are written."""
    files = {**_tree(600), "notes/noise.txt": os.urandom(600_000).hex()}  # asynchronous
    import_id = upload_import(api, target.team_id, target.agent_id, tarball(files))
    held = {"function": "TransferFunction", "operation": "PutObject", "key_contains": [target.prefix, ".staged/scene-"]}
    with hooks.paused(held) as hook:
        ok(api.post("/v3/memory/import/start", {"import_id": import_id}))
        assert hooks.wait(hook, timeout=120)
        victims = _transfer_processes()
        assert victims
        for pid in victims:
            os.kill(pid, signal.SIGKILL)
    _wait_until_gone(victims)
    return import_id


def test_a_killed_import_is_invisible_at_once_and_the_cleanup_rolls_it_back_without_embedding_it(api, hooks):
    target = make_scope()
    _seed(api, target)
    before = seen(api, target)
    import_id = _kill_midway(api, hooks, target)
    assert seen(api, target) == before  # from the crash on: not 16 minutes later
    in_four_minutes = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 4 * 60))
    began = time.monotonic()
    report = api.invoke("CleanupFunction", {"now": in_four_minutes})  # its heartbeat stopped > 3 minutes ago
    print(f"the cleanup's run, the undo of a 621-item import included: {time.monotonic() - began:.1f} s")
    assert report["done"] is True and report["imports_undone"] >= 1, report
    assert report["vectors_embedded"] == 0
    assert seen(api, target) == before
    assert ok(api.post("/v3/memory/import/status", {"import_id": import_id}))["state"] == "failed"


def test_an_import_a_crash_of_the_stack_cut_off_is_rolled_back_by_the_next_start(tmp_path):
    data = tmp_path / "state"
    first = start(data)
    team = {"team_id": "staged", "agent_id": "agent"}
    try:
        first.post("/v3/conversation/add", {**team, "user_id": "u", "session_id": "s", "messages": [MESSAGE_BODY]})
        import_id = _start_async_import(first, team)
        eventually(lambda: _status(first, import_id) == "running", "the import never ran", timeout=120)
        time.sleep(2)  # it writes its messages meanwhile
        assert first.post("/v3/conversation/count", {**team, "user_id": "u"})["total"] == 1
    finally:
        first.kill()
    began = time.monotonic()
    second = start(data)
    print(f"the restart, the undo of the import it cut off included: {time.monotonic() - began:.1f} s")
    try:
        assert _status(second, import_id) == "failed"  # undone before the stack answered
        assert second.post("/v3/conversation/count", {**team, "user_id": "u"})["total"] == 1
        found = second.post("/v3/conversation/search", {**team, "user_id": "u", "query": WORD, "mode": "keyword"})
        assert found["messages"] == []
        retried = _start_async_import(second, team)
        eventually(lambda: _status(second, retried) == "done", "the retry did not finish", timeout=300)
        assert second.post("/v3/conversation/count", {**team, "user_id": "u"})["total"] == 1 + 3000
    finally:
        second.stop()


MESSAGE_BODY = {"role": "user", "content": "there before"}


def _start_async_import(stack: Running, team: dict[str, str]) -> str:
    created = stack.post("/v3/memory/import", team)
    data = tarball(_tree(3000, reinforcing=False))  # more than one request ingests: asynchronous
    assert requests.put(created["upload_url"], data=data, headers=created["headers"], timeout=60).status_code == 200
    stack.post("/v3/memory/import/start", {"import_id": created["import_id"]})
    return str(created["import_id"])


def _status(stack: Running, import_id: str) -> str:
    return str(stack.post("/v3/memory/import/status", {"import_id": import_id})["state"])
