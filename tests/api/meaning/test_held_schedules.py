"""A stack whose schedules are held (``Stack(fire_schedules=False)``, what the recall bench runs
with ``--vector-writes Drained``): no timer runs, however long the stack is up, so the writes'
vectors wait until someone runs the drain — the bench's searches read the same waiting vectors at
every size of the memory, and the drain runs exactly when invoked."""

from __future__ import annotations

from helpers import TABLES, own_stack, scan, stored_vectors
from test_vectors import semantic, two_memories_write

stack, api, hooks = own_stack("Enabled", vectors_batched_s=1, vectors_drain_min=60, fire_schedules=False)


def test_held_schedules_start_no_timer_and_the_drain_runs_when_invoked(stack, api):
    assert stack._timers == [], "no schedule fires by itself"
    scope, _, ids, theirs = two_memories_write(api)
    rows = scan(TABLES["items"], "begins_with(sk, :wv)", {":wv": {"S": "wv\x1f"}})
    assert set(ids + theirs) <= {row["sk"]["S"].split("\x1f", 1)[1] for row in rows}
    assert semantic(api, scope, "conversation", "puppy")[:1] == [ids[0]], "found by meaning from what waits"
    drained = api.invoke("EmbedFunction", {"drain": True})
    assert drained["messages"] == 4 and set(ids + theirs) <= set(stored_vectors())
