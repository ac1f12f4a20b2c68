"""Batched vector writes drained on a schedule (the template's defaults: ``VectorWrites: Batched``,
``VectorDrainMinutes: 60``): the embedding queue's event source is off, the writes' vectors wait in
DynamoDB (found by meaning from what waits) until EmbedFunction's scheduled run receives the whole
queue and puts each memory group's vectors with one ``PutVectors``, under its own IAM policy."""

from __future__ import annotations

import time

from helpers import TABLES, eventually, own_stack, scan, stored_vectors
from test_vectors import calls_of, semantic, two_memories_write

stack, api, hooks = own_stack("Enabled", vectors_batched_s=1, vectors_drain_min=60)


def _waiting() -> set[str]:
    rows = scan(TABLES["items"], "begins_with(sk, :wv)", {":wv": {"S": "wv\x1f"}})
    return {row["sk"]["S"].split("\x1f", 1)[1] for row in rows}


def test_the_schedule_replaces_the_event_source_and_its_run_puts_a_memorys_writes_together(stack, api, hooks):
    [timer] = [t for t in stack._timers if t.function == "EmbedFunction"]
    assert (timer.period_s, timer.event) == (3600.0, {"drain": True}), "the template's schedule, fired locally"
    seq = hooks.last_seq()
    scope, other, ids, theirs = two_memories_write(api)
    assert semantic(api, scope, "conversation", "puppy")[:1] == [ids[0]], "found by meaning from what waits"
    time.sleep(3)  # the event source's 1 s window would have run by now, were it on
    assert calls_of(hooks, seq, "ReceiveMessage", "EmbedFunction") == [], "the event source is off"
    assert set(ids + theirs) <= _waiting() and not set(ids + theirs) & set(stored_vectors())

    drained = api.invoke("EmbedFunction", {"drain": True})

    assert drained["messages"] == 4 and drained["again"] == 0
    assert set(ids + theirs) <= set(stored_vectors())
    eventually(lambda: not set(ids + theirs) & _waiting(), "what waited was deleted once put", 30)
    puts = [c for c in calls_of(hooks, seq, "PutVectors", "EmbedFunction") if c["status"] == 200]
    indexes = [a[1].rsplit("/index/", 1)[1] for c in puts for a in c["actions"] if a[0] == "s3vectors:PutVectors"]
    assert sorted(indexes.count(i) for i in set(indexes)) == [1, 1], f"one PutVectors per memory: {indexes}"
    assert calls_of(hooks, seq, "InvokeModel", "EmbedFunction") == [], "what waited is put as it is"
    assert semantic(api, other, "conversation", "puppy") == [theirs[0]]
    again = api.invoke("EmbedFunction", {"drain": True})
    assert again == {"messages": 0, "again": 0, "rounds": 0}, "the queue was taken whole"
