"""Meaning through the local stack: vectors of L0 messages and L1 records in S3 Vectors, an
index per memory and group of its users — tenancy as a hard filter, erasure of vectors with their items (scanning every
vector bucket for the erased ids), Bedrock faults that never fail or lose a write, re-embedding on
update and after a model change."""

from __future__ import annotations

import time
from typing import Any

import pytest
from helpers import Scope, aws_client, eventually, make_scope, ok, stored_vectors, traces_of

THROTTLED = {"code": "ThrottlingException", "status": 429, "message": "injected by a test"}
BEDROCK_OF_MEMORY = {"operation": "InvokeModel", "function": "MemoryFunction"}
EMBED_FUNCTIONS = ("MemoryFunction", "EmbedFunction", "CleanupFunction", "TransferFunction")


# ---------------------------------------------------------------- the vector buckets, scanned
# (helpers.stored_vectors: every vector of every vector bucket; erasure through helpers.traces_of)


def wait_for_vectors(ids: list[str], timeout: float = 60.0) -> None:
    eventually(
        lambda: set(vectors_of(ids)) == set(ids),
        lambda: f"{len(set(ids) - set(vectors_of(ids)))} of {len(ids)} without a vector",
        timeout,
        every=0.5,
    )


def vectors_of(ids: list[str]) -> dict[str, Any]:
    everything = stored_vectors()
    return {i: everything[i] for i in ids if i in everything}


def wait_for_vector(scope: Scope, item_id: str, timeout: float = 30.0, model: str | None = None) -> dict[str, Any]:
    """The metadata of ``item_id``'s vector once it exists (of ``model`` when given)."""

    def found() -> dict[str, Any] | None:
        for _, _, meta in vectors_of([item_id]).get(item_id, []):
            if model is None or meta.get("model") == model:
                return dict(meta)
        return None

    return dict(eventually(found, f"no vector of {item_id} after {timeout} s", timeout, every=0.3))


def add_messages(api, scope: Scope, *contents: str, session: str = "s1", **extra: Any) -> list[str]:
    messages = [{"role": "user", "content": c, **extra} for c in contents]
    return list(ok(api.post("/v3/conversation/add", scope.body(session_id=session, messages=messages)))["accepted_ids"])


def add_record(api, scope: Scope, content: str, **fields: Any) -> str:
    return str(ok(api.post("/v3/atomic/add", scope.body(content=content, **fields)))["id"])


def two_memories_write(api) -> tuple[Scope, Scope, list[str], list[str]]:
    """Writes of two memories, to be put by a batch or a drain: in one, two messages of two sessions
    and a record; in the other, a message. (scope, other, the first's ids, the other's)."""
    scope, other = make_scope(), make_scope()
    ids = add_messages(api, scope, "I adopted a small dog named Rex")
    ids += add_messages(api, scope, "We walk along the river every morning", session="s2")
    ids.append(add_record(api, scope, "Rex is a beagle", background="pets"))
    return scope, other, ids, add_messages(api, other, "my sister plays the cello")


def semantic(api, scope: Scope, route: str, query: str, **fields: Any) -> list[str]:
    data = ok(api.post(f"/v3/{route}/search", scope.body(query=query, mode="semantic", limit=20, **fields)))
    key = "messages" if route == "conversation" else "items"
    return [item["id"] for item in data[key]]


def calls_of(hooks, since: int, operation: str, function: str | None = None) -> list[dict[str, Any]]:
    return [
        c for c in hooks.calls(since) if c["operation"] == operation and (function is None or c["function"] == function)
    ]


# ---------------------------------------------------------------- writing, privacy, tenancy


def test_each_item_gets_one_vector_of_ids_and_digests_in_its_memorys_index(api, scope):
    [message] = add_messages(api, scope, "I adopted a small dog named Rex")
    record = add_record(api, scope, "Rex is a beagle", background="pets", type="semantic")
    m, r = wait_for_vector(scope, message), wait_for_vector(scope, record)
    assert m["layer"] == "L0" and r["layer"] == "L1" and r["type"] == "semantic"
    assert m["model"] == r["model"] == "amazon.titan-embed-text-v2:0/1024"
    found = vectors_of([message, record])
    assert len(found[message]) == len(found[record]) == 1
    assert found[message][0][:2] == found[record][0][:2], "a user's messages and records share one index"
    for (_, _, meta), text in ((found[message][0], "Rex"), (found[record][0], "beagle")):
        assert text not in repr(meta) and scope.user_id not in repr(meta) and "pets" not in repr(meta)
    assert semantic(api, scope, "conversation", "puppy")[:1] == [message]


def test_a_memorys_users_are_spread_over_indexes_and_a_search_reads_its_users_only(api, scope, hooks):
    users = [scope, *(Scope(scope.team_id, scope.agent_id, f"{scope.user_id}-{i}") for i in range(11))]
    ids = {user.user_id: add_messages(api, user, "we planted tomatoes in the garden")[0] for user in users}
    for user in users:
        wait_for_vector(user, ids[user.user_id])
    placed = {user: vectors_of([item])[item][0][1] for user, item in ids.items()}
    assert all(name.endswith("of128") for name in placed.values()), placed  # the template's VectorGroups
    assert len(set(placed.values())) > 1  # twelve users, 128 groups: not one index for all
    since = hooks.last_seq()
    assert semantic(api, scope, "conversation", "tomatoes") == [ids[scope.user_id]]
    read = [arn for c in calls_of(hooks, since, "QueryVectors") for _, arn in c["actions"]]
    assert read and all(arn.endswith("/index/" + placed[scope.user_id]) for arn in read), read


def test_a_reinforcing_add_never_re_embeds(api, scope, hooks):
    record = add_record(api, scope, "likes green tea")
    wait_for_vector(scope, record)
    seq = hooks.last_seq()
    assert add_record(api, scope, "likes green tea") == record
    assert calls_of(hooks, seq, "InvokeModel", "MemoryFunction") == []
    assert calls_of(hooks, seq, "PutVectors") == []


def test_never_another_users_or_tenants_item(api, scope):
    text = "my passport number is in the blue drawer"
    other_user = Scope(scope.team_id, scope.agent_id, scope.user_id + "-other")
    other_tenant = make_scope()
    mine = add_messages(api, scope, text)
    theirs = add_messages(api, other_user, text) + add_messages(api, other_tenant, text)
    mine_l1 = add_record(api, scope, text)
    theirs_l1 = [add_record(api, other_user, text), add_record(api, other_tenant, text)]
    for item in mine + theirs + [mine_l1, *theirs_l1]:
        wait_for_vector(scope, item)
    assert semantic(api, scope, "conversation", "where is my passport") == mine
    assert semantic(api, scope, "atomic", "where is my passport") == [mine_l1]
    # the filters a request names are hard filters too (session for L0, type for L1, task)
    assert semantic(api, scope, "conversation", "where is my passport", session_id="another") == []
    assert semantic(api, scope, "atomic", "where is my passport", type="procedural") == []
    assert semantic(api, scope, "atomic", "where is my passport", task_id="a-task") == []


def test_thirty_memories_each_search_queries_only_its_own_index(api, hooks):
    scopes = [make_scope() for _ in range(30)]
    for i, s in enumerate(scopes):
        add_messages(api, s, f"memory number {i} remembers the lighthouse")
    seq = hooks.last_seq()
    indexes = []
    for s in scopes:
        before = hooks.last_seq()
        assert len(semantic(api, s, "conversation", "lighthouse")) == 1  # its own message, nothing else
        [query] = calls_of(hooks, before, "QueryVectors")
        [(_, arn)] = [a for a in query["actions"] if a[0] == "s3vectors:QueryVectors"]
        indexes.append(arn.rsplit("/index/", 1)[1])
    assert len(set(indexes)) == 30, "every memory has an index of its own"
    assert len(calls_of(hooks, seq, "QueryVectors")) == 30, "one vector query per search"


# ---------------------------------------------------------------- erasure


def test_gone_after_deletes_by_id_and_user_memory_delete(api, scope):
    m1, m2, m3 = add_messages(api, scope, "alpha one", "alpha two", "alpha three", session="sx")
    r1, r2, r3 = (add_record(api, scope, f"beta {i}") for i in range(3))
    for item in (m1, m2, m3, r1, r2, r3):
        wait_for_vector(scope, item)
    assert traces_of([m1, r1], ["vectors"], terms=False) == sorted([m1, r1])  # the scan sees them
    ok(api.post("/v3/conversation/delete", scope.body(message_ids=[m1])))
    ok(api.post("/v3/atomic/delete", scope.body(ids=[r1])))
    assert traces_of([m1, r1], ["vectors"], terms=False) == []
    ok(api.post("/v3/conversation/delete", scope.body(session_ids=["sx"])))
    assert traces_of([m2, m3], ["vectors"], terms=False) == []
    ok(
        api.post(
            "/v3/user-memory/delete", {"memory_id": scope.memory_id, "user_id": scope.user_id, "content_ids": [r2]}
        )
    )
    assert traces_of([r2], ["vectors"], terms=False) == []
    ok(api.post("/v3/user-memory/delete", {"memory_id": scope.memory_id, "user_id": scope.user_id}))
    assert traces_of([r3], ["vectors"], terms=False) == []


@pytest.mark.parametrize("how", ["clear", "memory_delete"])
def test_gone_after_a_clear_and_a_memory_delete_whole_index_dropped(api, how):
    scope = make_scope()
    ids = [*add_messages(api, scope, "gamma", "delta"), add_record(api, scope, "epsilon")]
    for item in ids:
        wait_for_vector(scope, item)
    [(bucket, index, _)] = vectors_of(ids[:1])[ids[0]]
    if how == "clear":
        ok(api.post("/v3/chat-memory/clear", {"memory_ids": [scope.memory_id]}))
    else:
        ok(api.post("/v3/memory/delete", {"memory_id": scope.memory_id}))
    assert traces_of(ids, terms=False) == []  # nor anything else of the items, in any store
    names = [i["indexName"] for i in aws_client("s3vectors").list_indexes(vectorBucketName=bucket)["indexes"]]
    assert index not in names


def test_gone_after_retention_cleanup(api, scope):
    old = "2020-01-01T00:00:00Z"
    messages = [{"role": "user", "content": f"old note {i}", "timestamp": old} for i in range(55)]
    ids = ok(api.post("/v3/conversation/add", scope.body(session_id="s", messages=messages)))["accepted_ids"]
    wait_for_vectors(ids)
    ok(api.post("/v3/memory/update", {"memory_id": scope.memory_id, "retention_days": 30}))
    try:
        report = api.invoke("CleanupFunction", {})
        while not report["done"]:
            report = api.invoke("CleanupFunction", {})
    finally:
        ok(api.post("/v3/memory/update", {"memory_id": scope.memory_id, "retention_days": 0}))
    left = ok(api.post("/v3/conversation/query", scope.body(limit=100)))["messages"]
    erased = set(ids) - {m["id"] for m in left}
    assert len(erased) == 5
    assert traces_of(sorted(erased), ["vectors"], terms=False) == []
    assert set(vectors_of(ids)) == set(ids) - erased


def test_a_vector_that_lands_after_its_item_was_erased_is_removed(api, scope, hooks):
    """The write's PutVectors is held until a delete of the same message has answered: the write
    reads its items back after the put and deletes the vector of the one that is gone."""
    with hooks.paused({"operation": "PutVectors", "function": "MemoryFunction"}) as hook:
        import threading

        added: list[str] = []
        writer = threading.Thread(target=lambda: added.extend(add_messages(api, scope, "a late vector")))
        writer.start()
        assert hooks.wait(hook)
        [item] = ok(api.post("/v3/conversation/query", scope.body()))["messages"]
        ok(api.post("/v3/conversation/delete", scope.body(message_ids=[item["id"]])))
        hooks.release(hook)
        writer.join(30)
    assert added == [item["id"]]
    assert traces_of(added, ["vectors"], terms=False) == []


def test_the_model_call_runs_beside_the_write_and_the_vector_is_put_after_it(api, scope, hooks):
    """While the add's transaction is held, its message is already being embedded; the vector is
    put only once the write has answered (an item is never found by meaning before it exists)."""
    import threading

    ok(api.post("/v3/conversation/add", scope.body(session_id="s0", messages=[{"role": "user", "content": "hi"}])))
    seq = hooks.last_seq()
    with hooks.paused({"operation": "TransactWriteItems", "function": "MemoryFunction"}) as hook:
        added: list[str] = []
        writer = threading.Thread(target=lambda: added.extend(add_messages(api, scope, "a write and its meaning")))
        writer.start()
        assert hooks.wait(hook)
        eventually(
            lambda: calls_of(hooks, seq, "InvokeModel", "MemoryFunction"), "no model call while the write was held", 20
        )
        assert calls_of(hooks, seq, "PutVectors", "MemoryFunction") == []
        hooks.release(hook)
        writer.join(30)
    assert len(added) == 1
    wait_for_vector(scope, added[0])
    assert semantic(api, scope, "conversation", "a write and its meaning")[:1] == added


# ---------------------------------------------------------------- Bedrock faults


def test_throttled_write_is_kept_found_by_words_and_embedded_from_the_queue(api, scope, hooks):
    seq = hooks.last_seq()
    hook = hooks.add({"operation": "InvokeModel", "function": "MemoryFunction"}, "fail", None, THROTTLED)
    try:
        [message] = add_messages(api, scope, "the zebra crossing on Elm street")
        record = add_record(api, scope, "prefers window seats on trains")
        words = ok(api.post("/v3/conversation/search", scope.body(query="zebra")))
        assert [m["id"] for m in words["messages"]] == [message]
        assert words.get("mode_used") in ("hybrid", "keyword")
    finally:
        hooks.remove(hook)
    assert calls_of(hooks, seq, "SendMessage", "MemoryFunction"), "queued"
    wait_for_vector(scope, message)
    wait_for_vector(scope, record)
    assert calls_of(hooks, seq, "PutVectors", "EmbedFunction")
    assert semantic(api, scope, "atomic", "train travel seating")[:1] == [record]


def test_a_query_that_cannot_be_embedded_answers_by_words(api, scope, hooks):
    [message] = add_messages(api, scope, "the orchid needs water weekly")
    with hooks.failing(BEDROCK_OF_MEMORY, code="ThrottlingException", status=429):
        data = ok(api.post("/v3/conversation/search", scope.body(query="orchid")))
    assert data["mode_used"] == "keyword"
    assert [m["id"] for m in data["messages"]] == [message]


def test_a_non_throttling_4xx_is_final_no_retry_loop_and_nothing_queued(api, scope, hooks):
    seq = hooks.last_seq()
    with hooks.failing(BEDROCK_OF_MEMORY, code="ValidationException", status=400):
        [message] = add_messages(api, scope, "a text the model refuses")
    assert len(calls_of(hooks, seq, "InvokeModel", "MemoryFunction")) == 1
    assert calls_of(hooks, seq, "SendMessage") == []
    assert ok(api.post("/v3/conversation/query", scope.body()))["messages"][0]["id"] == message
    time.sleep(2)  # were it queued, the consumer (polling all along) would have embedded it by now
    assert vectors_of([message]) == {}


# ---------------------------------------------------------------- updates


def test_update_re_embeds_only_a_changed_text_and_a_failed_re_embed_removes_the_old_vector(api, scope, hooks):
    record = add_record(api, scope, "works as a carpenter", background="job")
    wait_for_vector(scope, record)
    seq = hooks.last_seq()
    ok(api.post("/v3/atomic/update", scope.body(id=record, tags=["work"])))
    assert calls_of(hooks, seq, "InvokeModel", "MemoryFunction") == [], "tags are not embedded"
    ok(api.post("/v3/atomic/update", scope.body(id=record, content="works as a pilot for an airline")))
    assert semantic(api, scope, "atomic", "flying airplanes")[:1] == [record]
    with hooks.failing(BEDROCK_OF_MEMORY, code="ValidationException", status=400):
        ok(api.post("/v3/atomic/update", scope.body(id=record, content="works as a chef in Lyon")))
    assert vectors_of([record]) == {}, "the old text is never found by meaning"
    assert semantic(api, scope, "atomic", "flying airplanes") == []


# ---------------------------------------------------------------- model changes, Disabled -> Enabled


def test_a_model_change_searches_current_vectors_only_and_the_cleanup_re_embeds(api, scope, function_env):
    [message] = add_messages(api, scope, "the violin lesson is on Tuesday")
    wait_for_vector(scope, message)
    for function in EMBED_FUNCTIONS:
        function_env(function, EMBEDDING_DIMENSIONS="512")
    assert semantic(api, scope, "conversation", "music class") == []  # no vector of the current model yet
    report = api.invoke("CleanupFunction", {})
    while not report["done"]:
        report = api.invoke("CleanupFunction", {})
    meta = wait_for_vector(scope, message, model="amazon.titan-embed-text-v2:0/512")
    assert meta["layer"] == "L0"
    assert [m for m in vectors_of([message])[message] if m[2]["model"].endswith("/1024")] == [], "old size dropped"
    assert semantic(api, scope, "conversation", "music class")[:1] == [message]


def test_disabled_makes_no_bedrock_call_and_enabling_again_backfills(api, scope, hooks, function_env):
    for function in EMBED_FUNCTIONS:
        function_env(function, EMBEDDINGS="Disabled")
    seq = hooks.last_seq()
    [message] = add_messages(api, scope, "the kayak is stored in the garage")
    data = ok(api.post("/v3/conversation/search", scope.body(query="kayak")))
    assert data["mode_used"] == "keyword" and [m["id"] for m in data["messages"]] == [message]
    assert api.post("/v3/conversation/search", scope.body(query="kayak", mode="semantic")).status == 400
    assert calls_of(hooks, seq, "InvokeModel") == []
    for function in EMBED_FUNCTIONS:
        function_env(function, EMBEDDINGS="Enabled")
    report = api.invoke("CleanupFunction", {})
    while not report["done"]:
        report = api.invoke("CleanupFunction", {})
    wait_for_vector(scope, message)
    assert semantic(api, scope, "conversation", "boat storage")[:1] == [message]
