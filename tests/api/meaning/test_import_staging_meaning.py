"""With meaning on: a running import shows nothing to hybrid or semantic search, and neither the
cleanup's backfill nor anything else embeds its items before it commits; right after, they are
embedded and found."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from helpers import eventually, jsonl, make_scope, ok, stored_vectors, tarball, upload_import

WORD = "narwhal"
MESSAGE = {"sessionId": "s", "userId": "u", "role": "user", "timestamp": 1767607200000}
RECORD = {"userId": "u", "createdAt": "2026-01-05T10:00:00.000Z"}
CONVERSATIONS, RECORDS = "conversations/2026-01-05.jsonl", "records/2026-01-05.jsonl"


def _found(api, target, route: str, mode: str) -> int:
    data = ok(api.post(f"/v3/{route}/search", target.body(user_id="u", query=f"a {WORD} tusk", mode=mode, limit=20)))
    items = data["messages" if route == "conversation" else "items"]
    return sum(WORD in item["content"] for item in items)


def test_a_running_import_is_neither_found_by_meaning_nor_embedded_until_it_commits(api, hooks):
    target = make_scope()
    body = target.body(user_id="u", session_id="s", messages=[{"role": "user", "content": "there before"}])
    ok(api.post("/v3/conversation/add", body))
    files = {
        CONVERSATIONS: jsonl([{**MESSAGE, "id": f"m-{i}", "content": f"the {WORD} tusk {i}"} for i in range(40)]),
        RECORDS: jsonl([{**RECORD, "id": f"r-{i}", "content": f"a {WORD} fact {i}"} for i in range(5)]),
        "scene_blocks/held.md": "the import is held here",
    }
    held = {"function": "TransferFunction", "operation": "PutObject", "key_contains": ".staged/scene-"}
    with hooks.paused(held) as hook:
        import_id = upload_import(api, target.team_id, target.agent_id, tarball(files))
        with ThreadPoolExecutor(1) as pool:
            started = pool.submit(api.post, "/v3/memory/import/start", {"import_id": import_id})
            assert hooks.wait(hook, timeout=120)
            vectors = len(stored_vectors())
            for route in ("conversation", "atomic"):
                for mode in ("hybrid", "semantic", "keyword"):
                    assert _found(api, target, route, mode) == 0, (route, mode)
            report = api.invoke("CleanupFunction", {})
            assert report["done"] is True, report
            assert len(stored_vectors()) == vectors  # the backfill left the staged items alone
            hooks.release(hook)
            assert ok(started.result(timeout=120))["state"] == "done"
    found = lambda: _found(api, target, "conversation", "semantic") >= 5  # noqa: E731
    eventually(found, "not found by meaning after the commit", 60)
    assert _found(api, target, "atomic", "hybrid") == 5
    assert len(stored_vectors()) >= vectors + 45
