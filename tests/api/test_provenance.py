"""Provenance of client-written records: ``source_message_ids`` accepted, checked and returned, and
a record never outlives its sources — every erasure of a message at a person's or client's request
erases the records citing it before it answers; retention expiry only drops the id."""

from __future__ import annotations

import pytest
from helpers import Scope, make_scope, ok, own_stack

# The retention test runs the cleanup, which walks every memory of the stack: a stack of its own.
stack, api, hooks = own_stack()


def add_messages(api, scope: Scope, contents, session="s1", **fields):
    body = scope.body(session_id=session, messages=[{"role": "user", "content": c} for c in contents], **fields)
    return ok(api.post("/v3/conversation/add", body))["accepted_ids"]


def add_record(api, scope: Scope, content, **fields):
    return api.post("/v3/atomic/add", scope.body(content=content, **fields))


def records(api, scope: Scope):
    return {r["id"]: r for r in ok(api.post("/v3/atomic/query", scope.body(limit=100)))["items"]}


@pytest.fixture
def scope() -> Scope:
    return make_scope()


def test_sources_are_checked_cleaned_and_returned_on_every_read(api, scope):
    m1, m2, m3 = add_messages(api, scope, ["I moved to Lisbon", "I work from home", "I like fado"])
    made = ok(add_record(api, scope, "lives in Lisbon", source_message_ids=[m2, m1, m2]))
    item = records(api, scope)[made["id"]]
    assert item["source_message_ids"] == [m2, m1] and item["formed"] is False  # duplicates removed, order kept
    found = ok(api.post("/v3/atomic/search", scope.body(query="Lisbon")))["items"]
    assert found[0]["source_message_ids"] == [m2, m1]
    # a reinforcing add joins the new ids; an update replaces the list (an update of only them is valid)
    again = ok(add_record(api, scope, "lives in Lisbon", source_message_ids=[m3]))
    assert again["id"] == made["id"] and again["created"] is False
    assert records(api, scope)[made["id"]]["source_message_ids"] == [m2, m1, m3]
    ok(api.post("/v3/atomic/update", scope.body(id=made["id"], source_message_ids=[m3])))
    assert records(api, scope)[made["id"]]["source_message_ids"] == [m3]
    ok(api.post("/v3/atomic/update", scope.body(id=made["id"], source_message_ids=[])))
    assert records(api, scope)[made["id"]]["source_message_ids"] == []


def test_an_unknown_or_foreign_source_is_a_400_naming_it(api, scope):
    (mine,) = add_messages(api, scope, ["mine"])
    other = Scope(scope.team_id, scope.agent_id, scope.user_id + "-other")
    (theirs,) = add_messages(api, other, ["theirs"])
    (tasked,) = add_messages(api, scope, ["in a task"], task_id="t1")
    unknown = "msg-00000000000000000000000000"
    answer = add_record(api, scope, "x", source_message_ids=[mine, theirs, unknown, "junk", "", theirs])
    assert answer.status == 400, answer.body
    assert answer.message == (
        "source_message_ids.1: unknown message; source_message_ids.2: unknown message; "
        "source_message_ids.3: unknown message; source_message_ids.4: unknown message"
    )
    # a request naming a task may cite only that task's messages
    in_task = add_record(api, scope, "x", task_id="t2", source_message_ids=[tasked])
    assert in_task.status == 400 and in_task.message == "source_message_ids.0: unknown message"
    assert ok(add_record(api, scope, "x", task_id="t1", source_message_ids=[tasked]))["created"] is True
    for bad in ("msg-1", [1], ["m"] * 101):
        refused = add_record(api, scope, "y", source_message_ids=bad)
        assert refused.status == 400 and refused.message.startswith("source_message_ids"), refused.body
    assert records(api, other) == {}
    made = ok(add_record(api, scope, "z"))
    update = api.post("/v3/atomic/update", scope.body(id=made["id"], source_message_ids=[theirs]))
    assert update.status == 400 and update.message == "source_message_ids.0: unknown message"


def test_erasing_a_message_erases_the_records_citing_it_and_only_those(api, scope):
    m1, m2, m3 = add_messages(api, scope, ["one", "two", "three"])
    (m4,) = add_messages(api, scope, ["four"], session="s2")
    ok(add_record(api, scope, "from one", source_message_ids=[m1]))
    r12 = ok(add_record(api, scope, "from one and two", source_message_ids=[m1, m2]))["id"]
    r3 = ok(add_record(api, scope, "from three", source_message_ids=[m3]))["id"]
    r4 = ok(add_record(api, scope, "from four", source_message_ids=[m4]))["id"]
    plain = ok(add_record(api, scope, "cites nothing"))["id"]
    gone = ok(api.post("/v3/conversation/delete", scope.body(message_ids=[m1])))
    assert gone["deleted_ids"] == [m1] and gone["records_deleted"] == 2 and gone["files_deleted"] == 0
    assert set(records(api, scope)) == {r3, r4, plain}
    assert len(gone["audit_ids"]) >= 3  # the message and each record erased with it
    # the search index and the meaning of an erased record are gone too
    assert ok(api.post("/v3/atomic/search", scope.body(query="one", mode="keyword")))["items"] == []
    # m2 stays; the record citing it went with m1 (a record never outlives any of its sources)
    by_session = ok(api.post("/v3/conversation/delete", scope.body(session_ids=["s2"])))
    assert by_session["records_deleted"] == 1 and set(records(api, scope)) == {r3, plain}
    assert r4 not in records(api, scope) and r12 not in records(api, scope)


def test_a_user_item_delete_of_a_message_takes_its_records(api, scope):
    (m1,) = add_messages(api, scope, ["hello"])
    r1 = ok(add_record(api, scope, "greets", source_message_ids=[m1]))["id"]
    kept = ok(add_record(api, scope, "other"))["id"]
    body = {"memory_id": scope.memory_id, "user_id": scope.user_id, "content_ids": [m1]}
    answer = ok(api.post("/v3/user-memory/delete", body))
    assert answer["deleted_ids"] == [m1] and answer["records_deleted"] == 1 and answer["files_deleted"] == 0
    assert set(records(api, scope)) == {kept} and r1 not in records(api, scope)
    answer = ok(api.post("/v3/user-memory/delete", dict(body, content_ids=[kept])))
    assert answer["deleted_ids"] == [kept] and answer["records_deleted"] == 0


def test_a_record_written_while_its_source_is_erased_never_remains(api, hooks, scope):
    """The add's record commit is held until the message's delete has answered: the add checks its
    sources again after writing, finds the message gone, and erases its own record."""
    import threading

    (m1,) = add_messages(api, scope, ["short-lived"])
    answers = {}
    match = {"function": "MemoryFunction", "operation": "TransactWriteItems", "body_contains": "atom-"}
    with hooks.paused(match) as hook:
        writer = threading.Thread(
            target=lambda: answers.setdefault("add", add_record(api, scope, "racing", source_message_ids=[m1]))
        )
        writer.start()
        assert hooks.wait(hook)
        gone = ok(api.post("/v3/conversation/delete", scope.body(message_ids=[m1])))
        assert gone["deleted_ids"] == [m1]
        hooks.release(hook)
        writer.join(60)
    assert answers["add"].status == 400 and answers["add"].message == "source_message_ids.0: unknown message"
    assert records(api, scope) == {}


def test_a_record_written_while_its_users_erasure_runs_never_outlives_its_source(api, hooks, scope):
    """A user's whole erasure is held after it has read the user's items, before it erases any;
    meanwhile an add cites one of the messages, and its own look at its sources finds the message
    there. Once the erasure goes on, that record goes with the message, counted in l1_deleted."""
    import threading

    (m1,) = add_messages(api, scope, ["erased with its user"])
    answers = {}
    body = {"memory_id": scope.memory_id, "user_id": scope.user_id}
    match = {"function": "DeleteFunction", "operation": "BatchWriteItem"}
    with hooks.paused(match) as hook:
        eraser = threading.Thread(target=lambda: answers.setdefault("erase", api.post("/v3/user-memory/delete", body)))
        eraser.start()
        assert hooks.wait(hook)  # the user's items are read; nothing is erased yet
        added = ok(add_record(api, scope, "cites the message", source_message_ids=[m1]))
        assert added["created"] is True
        hooks.release(hook)
        eraser.join(60)
    erased = ok(answers["erase"])
    assert (erased["l0_deleted"], erased["l1_deleted"]) == (1, 1), erased
    assert records(api, scope) == {}


def test_retention_expiry_drops_the_id_and_keeps_the_record(api, scope):
    """Expiry is not an erasure request: the message goes, its id leaves the records citing it."""
    old = "2020-01-01T00:00:00Z"
    body = scope.body(
        session_id="old", messages=[{"role": "user", "content": f"old {i}", "timestamp": old} for i in range(3)]
    )
    old_ids = ok(api.post("/v3/conversation/add", body))["accepted_ids"]
    fresh = add_messages(api, scope, [f"fresh {i}" for i in range(50)])  # the newest 50 are always kept
    record = ok(add_record(api, scope, "remembered", source_message_ids=[old_ids[0], fresh[0]]))["id"]
    ok(api.post("/v3/memory/update", {"memory_id": scope.memory_id, "retention_days": 30}))
    report = api.invoke("CleanupFunction", {})
    assert report["l0_deleted"] >= 3
    kept = records(api, scope)[record]
    assert kept["source_message_ids"] == [fresh[0]]
    # and erasing the expired message's id finds nothing to take with it
    answer = ok(api.post("/v3/conversation/delete", scope.body(message_ids=[old_ids[0], fresh[0]])))
    assert answer["deleted_ids"] == [fresh[0]] and answer["records_deleted"] == 1


def search(api, scope: Scope, query: str, **fields):
    return ok(api.post("/v3/conversation/search", scope.body(query=query, **fields)))["messages"]


def test_by_keyword_a_turn_holding_every_word_ranks_above_one_only_its_record_leads_to(api, scope):
    """A record lends a turn it cites its words' score; in keyword mode a turn holding every query
    word still ranks above one holding none (found only through its record), however the two
    would have scored fused — and the led turn is still found, after it, best first."""
    long_turn = "we talked about the pangolin for a while and then, much later that evening, a zebra " * 6
    short, long_one, led = add_messages(api, scope, ["pangolin zebra", long_turn, "I went somewhere nice with my kids"])
    ok(add_record(api, scope, "pangolin zebra outing", source_message_ids=[led]))
    found = search(api, scope, "pangolin zebra", mode="keyword", limit=10)
    assert [m["id"] for m in found] == [short, long_one, led], found
    scores = [m["score"] for m in found]
    assert scores == sorted(scores, reverse=True), scores


def test_a_turn_is_found_by_the_words_of_the_records_citing_it(api, scope):
    said, other = add_messages(api, scope, ["we finally picked him up today!", "the weather was nice"])
    record = ok(add_record(api, scope, "Caroline adopted a golden retriever puppy", source_message_ids=[said]))["id"]
    found = search(api, scope, "retriever puppy", mode="keyword")
    assert [m["id"] for m in found] == [said] and found[0]["content"] == "we finally picked him up today!"
    # a record never leads to another user's turn, nor past the request's filters
    stranger = Scope(scope.team_id, scope.agent_id, scope.user_id + "-x")
    assert search(api, stranger, "retriever puppy", mode="keyword") == []
    assert search(api, scope, "retriever puppy", mode="keyword", session_id="elsewhere") == []
    assert search(api, scope, "retriever", mode="keyword", time_end="2000-01-01T00:00:00Z") == []
    # the turn's own words and its record's words add up: it ranks above a turn holding one of them
    (topical,) = add_messages(api, scope, ["a retriever is a dog breed"], session="s9")
    ranked = [m["id"] for m in search(api, scope, "retriever puppy picked", mode="keyword")]
    assert ranked[0] == said and topical in ranked and other not in ranked
    # erased, the record stops leading to it from the next request on
    ok(api.post("/v3/atomic/delete", scope.body(ids=[record])))
    assert [m["id"] for m in search(api, scope, "retriever puppy", mode="keyword")] == [topical]
