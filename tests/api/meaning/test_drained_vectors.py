"""Batched vector writes drained on a schedule (the template's defaults: ``VectorWrites: Batched``,
``VectorDrainMinutes: 60``): the writes' vectors wait in DynamoDB (found by meaning from what waits)
and are queued to VectorQueue, which no event source polls, until EmbedFunction's scheduled run
receives it whole and puts each memory group's vectors with one ``PutVectors``, under its own IAM
policy; what a write could not embed goes to EmbedQueue, whose event source embeds it within
minutes, without waiting for the drain."""

from __future__ import annotations

import time

from helpers import TABLES, eventually, own_stack, scan, stored_vectors
from test_vectors import THROTTLED, add_messages, calls_of, semantic, two_memories_write, wait_for_vector

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
    time.sleep(3)  # EmbedQueue's event source (a 1 s window here) would have put them by now
    assert calls_of(hooks, seq, "PutVectors", "EmbedFunction") == [], "nothing polls the drain's queue"
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


def test_what_a_write_could_not_embed_is_embedded_within_minutes_not_at_the_next_drain(api, hooks):
    scope, _, _, _ = two_memories_write(api)
    seq = hooks.last_seq()
    hook = hooks.add({"operation": "InvokeModel", "function": "MemoryFunction"}, "fail", None, THROTTLED)
    try:
        [message] = add_messages(api, scope, "the zebra crossing on Elm street")
    finally:
        hooks.remove(hook)
    wait_for_vector(scope, message)  # EmbedQueue's event source, no drain
    assert [c["status"] for c in calls_of(hooks, seq, "PutVectors", "EmbedFunction")][-1:] == [200]
    assert semantic(api, scope, "conversation", "pedestrian crossing")[:1] == [message]
