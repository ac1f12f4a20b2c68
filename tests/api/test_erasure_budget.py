"""An erasure by id, by session or of a user's memory that cannot finish within its request's budget
answers 503 (retryable) after erasing a first part; nothing it erased is visible from the next
request on, no record outlives an erased source, and repeating the request finishes it."""

from __future__ import annotations

from helpers import make_scope, ok

BUDGET = {"MEMORY_HUB_ERASE_BUDGET_S": "0.001"}  # the least allowed: a request erases one part, then answers 503


def add(api, scope, n, session="s1", prefix="note"):
    ids = []
    for start in range(0, n, 100):
        body = scope.body(
            session_id=session,
            messages=[
                {"role": "user", "content": f"{prefix} {i} about walrus"} for i in range(start, min(n, start + 100))
            ],
        )
        ids += ok(api.post("/v3/conversation/add", body))["accepted_ids"]
    return ids


def total(api, scope, what="conversation"):
    return ok(api.post(f"/v3/{what}/count", scope.body()))["total"]


def repeat_until_done(api, path, body, limit=200):
    """Send the erasure until it answers 200; the 503s it answered on the way."""
    cut = []
    for _ in range(limit):
        answer = api.post(path, body)
        if answer.status == 200:
            return answer.data, cut
        assert answer.status == 503 and answer.body["retryable"] is True, answer.body
        assert "repeat it to finish" in answer.message
        cut.append(answer)
    raise AssertionError("the erasure never finished")


def test_a_large_user_erasure_is_finished_by_repeating_it(api, function_env):
    scope = make_scope()
    add(api, scope, 400)
    for i in range(30):
        ok(api.post("/v3/atomic/add", scope.body(content=f"record {i} about walrus")))
    function_env("DeleteFunction", **BUDGET)
    body = {"memory_id": scope.memory_id, "user_id": scope.user_id}
    first = api.post("/v3/user-memory/delete", body)
    assert first.status == 503 and first.body["retryable"] is True, first.body
    left = total(api, scope)
    assert 0 < left <= 400  # a first part may be gone; never a half-visible item
    done, _ = repeat_until_done(api, "/v3/user-memory/delete", body)
    assert total(api, scope) == 0 and total(api, scope, "atomic") == 0
    assert ok(api.post("/v3/conversation/search", scope.body(query="walrus", mode="keyword")))["messages"] == []
    assert done["user_id"] == scope.user_id


def test_a_large_session_delete_takes_its_records_even_when_cut(api, function_env):
    scope = make_scope()
    ids = add(api, scope, 300, session="big")
    for i in range(30):
        ok(api.post("/v3/atomic/add", scope.body(content=f"fact {i}", source_message_ids=[ids[i * 10]])))
    function_env("DeleteFunction", **BUDGET)
    first = api.post("/v3/conversation/delete", scope.body(session_ids=["big"]))
    assert first.status == 503, first.body
    # every message erased so far took the records citing it along, before the 503
    alive = set()
    for offset in range(0, 300, 100):
        page = ok(api.post("/v3/conversation/query", scope.body(limit=100, offset=offset, session_id="big")))
        alive |= {m["id"] for m in page["messages"]}
    assert len(alive) < 300
    records = ok(api.post("/v3/atomic/query", scope.body(limit=100)))["items"]
    assert all(set(r["source_message_ids"]) <= alive for r in records)
    repeat_until_done(api, "/v3/conversation/delete", scope.body(session_ids=["big"]))
    assert total(api, scope) == 0
    assert ok(api.post("/v3/atomic/query", scope.body(limit=100)))["items"] == []
