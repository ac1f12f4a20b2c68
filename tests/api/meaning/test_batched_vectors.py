"""Batched vector writes (the template's ``VectorWrites: Batched``): a write embeds its items and
keeps their vectors waiting in DynamoDB, and queues them; the embedding queue's consumer gathers
writes for the batching window and puts the vectors of one memory in one ``PutVectors`` (S3
Vectors bills each at least 128 KB) without asking the model again. Words and meaning find an item
at once (meaning from what waits, then from S3 Vectors); an update's old text is never found by
meaning; an item erased before its batch ran gets no vector."""

from __future__ import annotations

from helpers import TABLES, eventually, make_scope, ok, own_stack, scan, stored_vectors
from test_vectors import add_messages, add_record, calls_of, semantic, two_memories_write, vectors_of, wait_for_vectors

WINDOW_S = 8  # long enough that the writes below fall into one batch on a busy machine
stack, api, hooks = own_stack("Enabled", vectors_batched_s=WINDOW_S)


def _waiting() -> list[str]:
    """The item ids of every vector waiting in ItemsTable (``wv␟<id>``)."""
    rows = scan(TABLES["items"], "begins_with(sk, :wv)", {":wv": {"S": "wv\x1f"}})
    return sorted(row["sk"]["S"].split("\x1f", 1)[1] for row in rows)


def _index_of(call: dict) -> str:
    [(_, arn)] = [a for a in call["actions"] if a[0] == "s3vectors:PutVectors"]
    return str(arn.rsplit("/index/", 1)[1])


def test_writes_queue_their_embeddings_and_one_put_carries_a_memorys_batch(api, hooks):
    seq = hooks.last_seq()
    scope, other, ids, theirs = two_memories_write(api)
    # the writes embedded their items but put no vector: their vectors wait, and were queued
    assert len(calls_of(hooks, seq, "InvokeModel", "MemoryFunction")) == 4
    assert calls_of(hooks, seq, "PutVectors", "MemoryFunction") == []
    assert len(calls_of(hooks, seq, "SendMessage", "MemoryFunction")) == 4
    found = ok(api.post("/v3/conversation/search", scope.body(query="beagle Rex", mode="keyword")))
    assert ids[0] in [m["id"] for m in found["messages"]], "words find it at once"
    assert semantic(api, scope, "conversation", "puppy")[:1] == [ids[0]], "and meaning, from what waits"
    assert not set(ids) & set(stored_vectors())

    assert set(_waiting()) >= set(ids + theirs)
    wait_for_vectors(ids + theirs, timeout=WINDOW_S + 60)
    assert calls_of(hooks, seq, "InvokeModel", "EmbedFunction") == [], "what waited is put as it is"
    eventually(lambda: not set(_waiting()) & set(ids + theirs), "what waited was not deleted once put", 30)
    # (a memory's first PutVectors finds no index, creates it and is sent again: count those that put)
    puts = [c for c in calls_of(hooks, seq, "PutVectors", "EmbedFunction") if c["status"] == 200]
    by_index: dict[str, int] = {}
    for call in puts:
        by_index[_index_of(call)] = by_index.get(_index_of(call), 0) + 1
    assert sorted(by_index.values()) == [1, 1], f"one PutVectors per memory: {by_index}"
    assert semantic(api, scope, "conversation", "puppy")[:1] == [ids[0]]
    assert semantic(api, other, "conversation", "puppy") == [theirs[0]]  # a memory's own index only


def test_an_update_drops_the_old_vector_at_once_and_the_new_one_comes_with_the_batch(api, hooks):
    scope = make_scope()
    record = add_record(api, scope, "likes green tea")
    wait_for_vectors([record], timeout=WINDOW_S + 60)
    assert semantic(api, scope, "atomic", "green tea")[:1] == [record]
    ok(api.post("/v3/atomic/update", scope.body(id=record, content="plays chess on sundays")))
    assert record not in vectors_of([record]), "the old text is never found by meaning"
    # (what a search by meaning finds now is the new text's vector, waiting: found for "chess")
    assert semantic(api, scope, "atomic", "chess")[:1] == [record], "the new text is, from what waits"
    wait_for_vectors([record], timeout=WINDOW_S + 60)
    assert semantic(api, scope, "atomic", "chess")[:1] == [record]


def test_an_item_erased_before_its_batch_ran_gets_no_vector(api, hooks):
    scope = make_scope()
    seq = hooks.last_seq()
    [gone] = add_messages(api, scope, "a message erased at once")
    [kept] = add_messages(api, scope, "a message that stays")
    assert gone in _waiting()
    ok(api.post("/v3/conversation/delete", scope.body(message_ids=[gone])))
    assert gone not in _waiting(), "its erasure deleted what waited of it before it answered"
    assert gone not in semantic(api, scope, "conversation", "a message erased at once")
    wait_for_vectors([kept], timeout=WINDOW_S + 60)
    eventually(lambda: calls_of(hooks, seq, "DeleteMessageBatch", "EmbedFunction"), "the batch was not consumed", 30)
    assert gone not in stored_vectors() and gone not in _waiting()
