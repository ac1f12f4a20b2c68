"""Scheduled cleanup: retention by the asset's retention_days (else RETENTION_DAYS), the floors
of 50 L0 / 20 L1 per memory, exact counters, audit, persona backups, leftovers of interrupted
clears, old exports, import uploads never ingested and scene tombstones, expired idempotency
records, the lease against overlapping runs and the resumable cursor.

The cleanup is CleanupFunction, run in its own process through the Lambda Invoke API; what it left
is read back over HTTP (the API) and with boto3 (the emulated AWS). Interleavings are made with the
test hooks of the emulated AWS side: a run is held inside one of its AWS calls while something else
happens. The cleanup walks every asset of the account: the module has a stack of its own, and
assertions are about each test's own memories only. Clocks are controlled with the event's ``now`` (and old message
timestamps), budgets with its ``budget_s``."""

from __future__ import annotations

import json
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import requests
from helpers import (
    BUCKET,
    TABLES,
    Scope,
    aws_client,
    epoch_of,
    eventually,
    jsonl,
    make_scope,
    memory_files,
    ok,
    own_stack,
    partition,
    scan,
    tarball,
)
from memory_hub.storage import bucket
from memory_hub.storage.assets import LEGACY_SK, PAIR_PREFIX
from memory_hub.storage.layout import CLEANUP_PK, PURGE_PK, counter_pk, item_pk, scene_scope
from memory_hub.storage.leases import CURSOR_SK, LEASE_SK
from test_transfer import CONVERSATIONS, MESSAGE

ROOT = Path(__file__).resolve().parents[2]
DAY_MS = 86_400_000
HOUR_MS = 3_600_000
CLEANUP = "CleanupFunction"
SHORTEST_BUDGET_S = 1.0  # a run's deadline is never closer than this, whatever its budget_s
# Every run walks every memory of the account: a stack of this module's own keeps that to its own.
stack, api, hooks = own_stack()


# ---- helpers --------------------------------------------------------------------------------------


def now_ms() -> int:
    return int(time.time() * 1000)


def iso(ms: int) -> str:
    """A request time (milliseconds kept)."""
    dt = datetime.fromtimestamp(ms // 1000, tz=UTC)
    return dt.strftime("%Y-%m-%dT%H:%M:%S") + f".{ms % 1000:03d}Z"


def event_time(ms: int) -> str:
    return datetime.fromtimestamp(ms // 1000, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def cleanup(api, now: int | None = None, **extra: Any) -> dict[str, Any]:
    """One invocation of CleanupFunction (``now`` in ms: the clock it runs against); its report."""
    report = api.invoke(CLEANUP, {**({"now": event_time(now)} if now is not None else {}), **extra})
    json.dumps(report)  # a JSON object, as Lambda returns it
    assert isinstance(report, dict) and "done" in report, report
    return report


@contextmanager
def cleanup_held(api, hooks, match: dict[str, Any], **event: Any) -> Iterator[Future]:
    """A cleanup run in the background, held at its first AWS call matching ``match`` for as long
    as the block runs; yields the future of its report (the run goes on when the block ends)."""
    with ThreadPoolExecutor(1) as pool:
        hook = hooks.add({"function": CLEANUP, **match}, "pause", times=1)
        try:
            run = pool.submit(cleanup, api, **event)

            def held() -> bool:
                assert not run.done(), f"the run ended without making the call: {run.result()}"
                return hooks.wait(hook, timeout=0.5)

            eventually(held, "the run never made the call", timeout=60, every=0)
            yield run
        finally:
            hooks.remove(hook)


def add_old(api, scope: Scope, timestamps: list[int], session: str = "s1") -> list[str]:
    """Messages at the given times (ms); returns their ids in the same order."""
    ids = []
    for start in range(0, len(timestamps), 100):
        chunk = timestamps[start : start + 100]
        body = scope.body(
            session_id=session,
            messages=[{"role": "user", "content": f"message at {ts}", "timestamp": iso(ts)} for ts in chunk],
        )
        ids += ok(api.post("/v3/conversation/add", body))["accepted_ids"]
    return ids


def add_new(api, scope: Scope, n: int, session: str = "s1") -> list[str]:
    body = scope.body(session_id=session, messages=[{"role": "user", "content": f"new {i}"} for i in range(n)])
    return ok(api.post("/v3/conversation/add", body))["accepted_ids"]


_RETAINING: list[str] = []


def set_retention(api, scope: Scope, days: int) -> None:
    ok(api.post("/v3/memory/update", {"memory_id": scope.memory_id, "retention_days": days}))
    _RETAINING.append(scope.memory_id)


def l0_ids(api, scope: Scope) -> tuple[set[str], int]:
    data = ok(api.post("/v3/conversation/query", scope.body(limit=100)))
    assert len(data["messages"]) == data["total"] or data["total"] > 100
    return {m["id"] for m in data["messages"]}, data["total"]


def l0_count(api, scope: Scope) -> int:
    return ok(api.post("/v3/conversation/count", scope.body()))["total"]


def l1_state(api, scope: Scope) -> tuple[list[str], int, int]:
    data = ok(api.post("/v3/atomic/query", scope.body(limit=100)))
    return [r["id"] for r in data["items"]], data["total"], ok(api.post("/v3/atomic/count", scope.body()))["total"]


def counts(api, scope: Scope) -> dict[str, int]:
    return ok(api.post("/v3/memory/get", {"memory_id": scope.memory_id}))["counts"]


def audit_events(api, scope: Scope, action: str) -> list[dict[str, Any]]:
    return ok(api.post("/v3/audit/query", {"memory_id": scope.memory_id, "action": action, "limit": 100}))["events"]


def retention_events(api, scope: Scope) -> list[dict[str, Any]]:
    return audit_events(api, scope, "retention_cleanup")


def deleted_by_events(api, scope: Scope) -> Counter:
    totals: Counter = Counter()
    for event in retention_events(api, scope):
        totals[event["layer"]] += event["count"]
    return totals


def put_object(key: str, body: bytes, **metadata: str) -> None:
    aws_client("s3").put_object(Bucket=BUCKET, Key=key, Body=body, Metadata=metadata)


def asset_total() -> int:
    """How many memories the cleanup walks."""
    rows = scan(TABLES["assets"])  # an asset of the earlier design (LEGACY_SK) counts until it is moved
    return sum(
        1 for r in rows if r["sk"]["S"].startswith(PAIR_PREFIX) or (r["sk"]["S"] == LEGACY_SK and "moved_to" not in r)
    )


def lease_items() -> dict[str, dict[str, Any]]:
    """The cleanup's lease and cursor items, by sort key."""
    return {row["sk"]["S"]: row for row in partition(TABLES["items"], CLEANUP_PK)}


def hold_lease(owner: str, until_ms: int) -> None:
    """Another run's lease, as that run's conditional put leaves it."""
    aws_client("dynamodb").put_item(
        TableName=TABLES["items"],
        Item={"pk": {"S": CLEANUP_PK}, "sk": {"S": LEASE_SK}, "owner": {"S": owner}, "until": {"N": str(until_ms)}},
    )


def drop_lease() -> None:
    aws_client("dynamodb").delete_item(TableName=TABLES["items"], Key={"pk": {"S": CLEANUP_PK}, "sk": {"S": LEASE_SK}})


def purge_records(scope: Scope) -> list[dict[str, Any]]:
    return [row for row in partition(TABLES["items"], PURGE_PK) if row["memory_id"]["S"] == scope.memory_id]


def two_users_70_old_5_new(api, scope: Scope) -> tuple[Scope, set[str], set[str]]:
    """70 messages 400 days old, alternating between two users, and 5 new ones of the first user.
    Returns (the other user's scope, the ids that the floor of 50 keeps per user)."""
    other = Scope(scope.team_id, scope.agent_id, scope.user_id + "-b")
    base = now_ms() - 400 * DAY_MS
    stamps = [base + i * 1000 for i in range(70)]  # index 69 is the newest old message
    a_ids = add_old(api, scope, stamps[0::2])
    b_ids = add_old(api, other, stamps[1::2])
    new = add_new(api, scope, 5)
    by_index = {}
    for n, i in enumerate(range(0, 70, 2)):
        by_index[i] = ("a", a_ids[n])
    for n, i in enumerate(range(1, 70, 2)):
        by_index[i] = ("b", b_ids[n])
    kept = [by_index[i] for i in range(25, 70)]  # the 45 newest old ones
    keep_a = set(new) | {i for who, i in kept if who == "a"}
    keep_b = {i for who, i in kept if who == "b"}
    return other, keep_a, keep_b


@pytest.fixture(autouse=True)
def no_leftover_cursor(api, hooks):
    """A run left unfinished would make the next one resume with its clock: every test here must
    leave the cleanup done. (Also: this test's memories keep everything from now on, so that later
    runs, which walk every memory, stay fast.)"""
    yield
    hooks.clear()  # a run a failed test still holds goes on
    while _RETAINING:
        ok(api.post("/v3/memory/update", {"memory_id": _RETAINING.pop(), "retention_days": 0}))
    left = lease_items()
    client = aws_client("dynamodb")
    for sk in left:  # not to spoil the following tests too
        client.delete_item(TableName=TABLES["items"], Key={"pk": {"S": CLEANUP_PK}, "sk": {"S": sk}})
    assert CURSOR_SK not in left and LEASE_SK not in left, left


# ---- retention ------------------------------------------------------------------------------------


def test_70_old_and_5_new_messages_keep_the_newest_50(api, scope):
    other, keep_a, keep_b = two_users_70_old_5_new(api, scope)
    set_retention(api, scope, 30)
    assert counts(api, scope)["l0"] == 75

    report = cleanup(api)
    assert report["done"] is True and report["l0_deleted"] >= 25
    ids_a, total_a = l0_ids(api, scope)
    ids_b, total_b = l0_ids(api, other)
    assert ids_a == keep_a and ids_b == keep_b
    assert total_a + total_b == 50 and len(keep_a) + len(keep_b) == 50
    assert l0_count(api, scope) == total_a and l0_count(api, other) == total_b
    assert counts(api, scope)["l0"] == 50

    events = retention_events(api, scope)
    assert events and all(e["actor"] == "system:cleanup" and e["action"] == "retention_cleanup" for e in events)
    assert set(report["audit_ids"]) >= {e["event_id"] for e in events}
    assert deleted_by_events(api, scope)["L0"] == 25
    assert deleted_by_events(api, scope)["L1"] == 0

    # a second run changes nothing and records nothing new
    again = cleanup(api)
    assert again["done"] is True
    assert l0_ids(api, scope)[0] == keep_a and l0_ids(api, other)[0] == keep_b
    assert counts(api, scope)["l0"] == 50
    assert len(retention_events(api, scope)) == len(events)


def test_the_audit_event_is_in_the_same_transaction_as_the_deletes(api, scope, hooks):
    """The emulated AWS refuses the cleanup's first transaction in this memory, and every one that
    carries a retention_cleanup event. The run dies at its first refusal, and both hooks saw one
    call: the same one. Nothing of it happened — the deletes, the counters and the event go together."""
    other, keep_a, keep_b = two_users_70_old_5_new(api, scope)
    set_retention(api, scope, 30)
    transactions = {"function": CLEANUP, "operation": "TransactWriteItems"}
    refuse = ("ValidationException", 400)
    with (
        hooks.failing({**transactions, "body_contains": scope.team_id}, *refuse) as ours,
        hooks.failing({**transactions, "body_contains": "retention_cleanup"}, *refuse) as audited,
    ):
        with pytest.raises(AssertionError, match="injected by a test"):
            cleanup(api)
        assert hooks.state(ours)["hits"] == 1 and hooks.state(audited)["hits"] == 1
    assert counts(api, scope)["l0"] == 75 == l0_count(api, scope) + l0_count(api, other)
    assert retention_events(api, scope) == []

    report = cleanup(api)
    assert report["done"] is True
    events = retention_events(api, scope)
    assert events and all(e["layer"] == "L0" and e["count"] > 0 for e in events)
    assert sum(e["count"] for e in events) == 25
    assert l0_ids(api, scope)[0] == keep_a and l0_ids(api, other)[0] == keep_b


def test_retention_zero_and_the_default_keep_everything(api, stack):
    deployed = stack.pool.environment_of(stack.pool.function(CLEANUP))
    assert deployed["RETENTION_DAYS"] == "0"  # the deployment default: keep forever
    zero, default = make_scope(), make_scope()
    base = now_ms() - 4000 * DAY_MS
    for s in (zero, default):
        add_old(api, s, [base + i for i in range(70)])
    set_retention(api, zero, 0)
    memory = ok(api.post("/v3/memory/get", {"memory_id": default.memory_id}))
    assert memory["retention_days"] is None
    assert cleanup(api)["done"] is True
    assert cleanup(api, now=now_ms() + 30_000 * DAY_MS)["done"] is True
    for s in (zero, default):
        assert l0_count(api, s) == 70 and counts(api, s)["l0"] == 70
        assert retention_events(api, s) == []


def test_null_retention_follows_the_deployment_setting(api, scope, function_env):
    """RETENTION_DAYS applies to every asset whose retention_days is null (here: 30); an explicit
    retention_days wins over it."""
    other, keep_a, keep_b = two_users_70_old_5_new(api, scope)
    assert ok(api.post("/v3/memory/get", {"memory_id": scope.memory_id}))["retention_days"] is None
    assert cleanup(api)["done"] is True  # the default (0): nothing
    assert counts(api, scope)["l0"] == 75 and retention_events(api, scope) == []

    function_env(CLEANUP, RETENTION_DAYS="30")
    assert cleanup(api)["done"] is True
    assert l0_ids(api, scope)[0] == keep_a and l0_ids(api, other)[0] == keep_b
    assert deleted_by_events(api, scope) == Counter({"L0": 25})

    set_retention(api, scope, 0)
    add_old(api, scope, [now_ms() - 400 * DAY_MS])
    assert cleanup(api)["done"] is True
    assert counts(api, scope)["l0"] == 51 and deleted_by_events(api, scope)["L0"] == 25


def test_l1_keeps_the_newest_20_by_updated_at(api, scope):
    records = [ok(api.post("/v3/atomic/add", scope.body(content=f"fact {n}")))["id"] for n in range(25)]
    # reinforcing moves updated_at: the oldest record becomes the newest
    assert ok(api.post("/v3/atomic/add", scope.body(content="fact 0")))["created"] is False
    set_retention(api, scope, 30)
    assert cleanup(api)["done"] is True  # nothing is 30 days old yet
    assert l1_state(api, scope)[1] == 25

    report = cleanup(api, now=now_ms() + 40 * DAY_MS)
    assert report["done"] is True and report["l1_deleted"] >= 5
    ids, total, count = l1_state(api, scope)
    assert total == count == 20 and counts(api, scope)["l1"] == 20
    assert set(ids) == {records[0]} | set(records[6:])
    assert deleted_by_events(api, scope)["L1"] == 5 and deleted_by_events(api, scope)["L0"] == 0
    # the natural key of a deleted record is free again
    assert ok(api.post("/v3/atomic/add", scope.body(content="fact 1")))["created"] is True
    assert cleanup(api, now=now_ms() + 40 * DAY_MS)["done"] is True
    assert l1_state(api, scope)[1] == 20


# ---- other chores ---------------------------------------------------------------------------------


def test_persona_backups_beyond_3_are_pruned(api, scope):
    for n in range(3):
        ok(api.post("/v3/core/write", scope.body(content=f"persona {n}")))
    backups = scope.prefix + bucket.PERSONA_BACKUPS
    assert len(memory_files(scope, bucket.PERSONA_BACKUPS)) == 2
    for version in (10, 11, 12, 13):
        put_object(
            f"{backups}persona_20240101_00000{version % 10}_{version}.md",
            f"old persona {version}".encode(),
            epoch="1",
            version=str(version),
        )
    assert len(memory_files(scope, bucket.PERSONA_BACKUPS)) == 6
    report = cleanup(api)
    assert report["done"] is True and report["backups_deleted"] >= 3
    assert [k.rsplit("_", 1)[1] for k in memory_files(scope, bucket.PERSONA_BACKUPS)] == ["11.md", "12.md", "13.md"]
    assert ok(api.post("/v3/core/read", scope.body()))["content"] == "persona 2"


def test_a_pending_purge_is_finished(api, function_env):
    """A clear that ran out of time and could not hand its purge on leaves its purge record; the
    cleanup erases the old epoch, drops the record and records purge_complete."""
    pending = make_scope()
    add_new(api, pending, 3)
    ok(api.post("/v3/scenario/write", pending.body(path="a.md", content="old")))
    old_epoch = epoch_of(pending)
    # no time for the purge, and the asynchronous continuation cannot be started
    function_env("ClearFunction", MEMORY_HUB_CLEAR_BUDGET_S="0", AWS_ENDPOINT_URL_LAMBDA="http://127.0.0.1:9")
    item = ok(api.post("/v3/chat-memory/clear", {"memory_ids": [pending.memory_id]}))["items"][0]
    assert item["cleared"] is True and item["purge_pending"] is True
    assert [int(r["epoch"]["N"]) for r in purge_records(pending)] == [old_epoch]
    old_messages = item_pk("L0", pending.team_id, pending.agent_id, old_epoch, pending.user_id)
    assert len([r for r in partition(TABLES["items"], old_messages) if "role" in r]) == 3  # the messages kept

    report = cleanup(api)
    assert report["done"] is True and report["purges_completed"] >= 1
    assert purge_records(pending) == []
    assert memory_files(pending) == []
    assert partition(TABLES["items"], old_messages) == []
    assert partition(TABLES["items"], counter_pk(pending.team_id, pending.agent_id, old_epoch)) == []
    done = [e for e in audit_events(api, pending, "clear") if e["target"] == "purge_complete"]
    assert len(done) == 1 and done[0]["layer"] == "asset"
    assert done[0]["count"] >= 3  # the messages it erased
    assert l0_count(api, pending) == 0 and counts(api, pending) == {"l0": 0, "l1": 0, "l2": 0, "l3": 0}


def test_purge_complete_by_the_cleanup_is_recorded_as_system_cleanup(api, function_env):
    pending = make_scope()
    add_new(api, pending, 3)
    function_env("ClearFunction", MEMORY_HUB_CLEAR_BUDGET_S="0", AWS_ENDPOINT_URL_LAMBDA="http://127.0.0.1:9")
    assert ok(api.post("/v3/chat-memory/clear", {"memory_ids": [pending.memory_id]}))["items"][0]["purge_pending"]
    assert cleanup(api)["done"] is True
    done = [e for e in audit_events(api, pending, "clear") if e["target"] == "purge_complete"]
    assert [e["actor"] for e in done] == ["system:cleanup"]


def test_an_object_left_under_a_retired_epoch_is_removed(api):
    """A write racing a clear can land an object in the epoch the clear retired, after its purge
    listed the prefix: invisible, but stored. The cleanup removes it; the new epoch's objects stay."""
    raced = make_scope()
    add_new(api, raced, 3)
    ok(api.post("/v3/scenario/write", raced.body(path="a.md", content="old")))
    old_epoch = epoch_of(raced)
    assert ok(api.post("/v3/chat-memory/clear", {"memory_ids": [raced.memory_id]}))["all_cleared"] is True
    assert purge_records(raced) == []
    straggler = raced.prefix + bucket.SCENES + "straggler.md"
    put_object(straggler, b"racing write", epoch=str(old_epoch))
    assert ok(api.post("/v3/scenario/read", raced.body(path="straggler.md")))["content"] is None
    ok(api.post("/v3/scenario/write", raced.body(path="new.md", content="after the clear")))

    report = cleanup(api)
    assert report["done"] is True and report["orphans_deleted"] >= 1
    assert memory_files(raced) == [raced.prefix + bucket.SCENES + "new.md"]
    assert ok(api.post("/v3/scenario/read", raced.body(path="new.md")))["content"].endswith("after the clear")


def test_expired_idempotency_records_are_removed(api, scope):
    key = {"Idempotency-Key": "cleanup-" + uuid.uuid4().hex}
    body = scope.body(session_id="s1", messages=[{"role": "user", "content": "once"}])
    first = ok(api.post("/v3/conversation/add", body, headers=key))
    assert cleanup(api)["done"] is True  # not expired yet: still answers the replay
    assert ok(api.post("/v3/conversation/add", body, headers=key)) == first
    assert l0_count(api, scope) == 1

    later = now_ms() + 2 * HOUR_MS
    report = cleanup(api, now=later)
    assert report["done"] is True and report["idempotency_deleted"] >= 1
    rows = scan(TABLES["idempotency"])
    assert not [r for r in rows if int(r["expiration"]["N"]) < later // 1000]
    # the record is gone, so the same key and body now write again
    second = ok(api.post("/v3/conversation/add", body, headers=key))
    assert second["accepted_ids"] != first["accepted_ids"]
    assert l0_count(api, scope) == 2


# ---- overlapping runs and resuming ----------------------------------------------------------------


def test_a_run_while_the_lease_is_held_is_skipped(api, scope):
    other, keep_a, keep_b = two_users_70_old_5_new(api, scope)
    set_retention(api, scope, 30)
    hold_lease("test-holder", now_ms() + 600_000)
    try:
        report = cleanup(api)
        assert report["skipped"] and report["done"] is False
        assert report["l0_deleted"] == 0 and report["memories"] == 0
        assert counts(api, scope)["l0"] == 75
        assert lease_items()[LEASE_SK]["owner"]["S"] == "test-holder"  # not taken, not released
    finally:
        drop_lease()
    assert cleanup(api)["done"] is True
    assert l0_ids(api, scope)[0] == keep_a and l0_ids(api, other)[0] == keep_b


def test_a_lease_whose_holder_died_is_taken_over(api, scope):
    other, keep_a, keep_b = two_users_70_old_5_new(api, scope)
    set_retention(api, scope, 30)
    hold_lease("crashed-run", now_ms() - 1)  # expired
    report = cleanup(api)
    assert report["done"] is True and not report["skipped"]
    assert l0_ids(api, scope)[0] == keep_a and l0_ids(api, other)[0] == keep_b
    assert LEASE_SK not in lease_items()  # released by the run that took it


def test_overlapping_runs_never_delete_beyond_the_floors(api, scope, hooks):
    other, keep_a, keep_b = two_users_70_old_5_new(api, scope)
    set_retention(api, scope, 30)
    # the first run holds the lease, stopped at its deletes in this memory; another run starts
    with cleanup_held(api, hooks, {"operation": "TransactWriteItems", "body_contains": scope.team_id}) as first_run:
        second = cleanup(api)
        assert counts(api, scope)["l0"] == 75
    first = first_run.result()
    assert second["skipped"] and second["done"] is False
    assert second["l0_deleted"] == 0 and second["memories"] == 0
    assert first["done"] is True and first["l0_deleted"] >= 25
    assert l0_ids(api, scope)[0] == keep_a and l0_ids(api, other)[0] == keep_b
    assert deleted_by_events(api, scope)["L0"] == 25


def test_concurrent_retention_passes_do_not_double_count(api, scope, hooks):
    """Even without the lease (here: lost by the first run while it waits inside its delete), two
    passes over one memory at once keep the floor and the counters exact: conditional deletes."""
    other, keep_a, keep_b = two_users_70_old_5_new(api, scope)
    set_retention(api, scope, 30)
    with cleanup_held(api, hooks, {"operation": "TransactWriteItems", "body_contains": scope.team_id}) as first_run:
        drop_lease()
        second = cleanup(api)
        assert second["done"] is True and not second["skipped"] and second["l0_deleted"] >= 25
        assert counts(api, scope)["l0"] == 50
    first = first_run.result()  # its delete of the same 25 messages now finds them gone
    assert first["done"] is True
    assert l0_ids(api, scope)[0] == keep_a and l0_ids(api, other)[0] == keep_b
    assert counts(api, scope)["l0"] == 50 == l0_count(api, scope) + l0_count(api, other)
    assert deleted_by_events(api, scope)["L0"] == 25


def test_a_run_out_of_time_saves_a_cursor_and_the_next_one_resumes(api, hooks):
    """budget_s: 0 leaves a run the shortest deadline; held inside its first memory past that
    deadline, it stops after that memory, saves its place and its clock, and answers done=false.
    The next invocation goes on from there with the same clock, and every memory is walked once."""
    team = make_scope().team_id
    mine = [Scope(team, f"agent-{n}-{uuid.uuid4().hex[:8]}", "user") for n in range(2)]
    clock = now_ms() // 1000 * 1000
    for s in mine:
        # 5 messages beyond the retention by any clock; 60 only by a clock a year later
        add_old(api, s, [clock - 400 * DAY_MS + i for i in range(5)] + [clock - 10 * DAY_MS + i for i in range(60)])
        set_retention(api, s, 30)
    assert cleanup(api, now=clock)["done"] is True  # settles whatever other tests left (pending purges)
    walked = asset_total()
    assert walked >= len(mine)  # at least these two: the second run has one left to resume with

    # every memory's walk lists its persona backups: hold the first such listing past the deadline
    with cleanup_held(api, hooks, {"operation": "ListObjectsV2"}, now=clock, budget_s=0) as run:
        time.sleep(SHORTEST_BUDGET_S)  # the deadline, computed before this call, passes meanwhile
    first = run.result()
    assert first["done"] is False and not first["skipped"] and first["memories"] == 1
    cursor = lease_items()[CURSOR_SK]
    assert int(cursor["run_started"]["N"]) == clock and json.loads(cursor["position"]["S"])
    assert LEASE_SK not in lease_items()  # released: the next invocation may go on

    second = cleanup(api, now=clock + 365 * DAY_MS)
    assert second["done"] is True
    assert second["run_started_at"] == first["run_started_at"]  # the same run, the same clock
    assert first["memories"] + second["memories"] == walked  # none twice, none left out
    for s in mine:
        assert counts(api, s)["l0"] == 60 == l0_count(api, s)
        assert deleted_by_events(api, s)["L0"] == 5  # once, not once per invocation
    assert CURSOR_SK not in lease_items()


# ---- exports and scene tombstones -----------------------------------------------------------------


def test_exports_older_than_a_day_are_removed(api, scope):
    ok(api.post("/v3/scenario/write", scope.body(path="keep.md", content="kept")))
    export = scope.prefix + bucket.EXPORTS + "export-1.jsonl"
    upload = scope.prefix + bucket.IMPORTS + "upload-1.jsonl"
    put_object(export, b"{}\n")
    put_object(upload, b"{}\n")
    assert cleanup(api)["done"] is True  # less than a day old: kept
    assert memory_files(scope, bucket.EXPORTS) == [export]
    report = cleanup(api, now=now_ms() + 2 * DAY_MS)
    assert report["done"] is True and report["exports_deleted"] >= 2
    assert memory_files(scope, bucket.EXPORTS) == [] and memory_files(scope, bucket.IMPORTS) == []
    assert ok(api.post("/v3/scenario/read", scope.body(path="keep.md")))["content"].endswith("kept")


def test_scene_tombstones_older_than_a_day_are_dropped(api, scope):
    ok(api.post("/v3/scenario/write", scope.body(path="gone.md", content="x")))
    ok(api.post("/v3/scenario/write", scope.body(path="stays.md", content="y")))
    ok(api.post("/v3/scenario/rm", scope.body(path="gone.md")))

    def entries():
        return {
            row["path"]["S"]: row
            for row in scan(TABLES["scenes"])
            if row["scope"]["S"] == scene_scope(scope.team_id, scope.agent_id)
        }

    assert entries()["gone.md"]["removed"]["BOOL"] is True
    assert cleanup(api)["done"] is True  # removed just now: kept
    assert "gone.md" in entries()
    report = cleanup(api, now=now_ms() + 2 * DAY_MS)
    assert report["done"] is True and report["tombstones_dropped"] >= 1
    assert set(entries()) == {"stays.md"}
    listed = ok(api.post("/v3/scenario/ls", scope.body()))
    assert "stays.md" in json.dumps(listed) and "gone.md" not in json.dumps(listed)


# ---- the scheduled event --------------------------------------------------------------------------


def test_the_scheduled_event_runs_the_cleanup(api, scope):
    with open(ROOT / "events" / "scheduled" / "cleanup.json", encoding="utf-8") as handle:
        event = json.load(handle)
    assert event["source"] == "aws.events" and event["detail-type"] == "Scheduled Event"
    event["time"] = "2020-01-01T00:00:00Z"  # a late retry of an old schedule: its time is not the clock
    add_old(api, scope, [now_ms() - 400 * DAY_MS + i for i in range(55)])
    set_retention(api, scope, 30)
    report = api.invoke(CLEANUP, event)
    assert isinstance(json.loads(json.dumps(report)), dict)
    assert report["done"] is True and report["memories"] >= 1
    assert all(
        isinstance(report[k], int)
        for k in ("l0_deleted", "l1_deleted", "backups_deleted", "purges_completed", "idempotency_deleted")
    )
    assert l0_count(api, scope) == 50  # by the real clock, not the event's old `time`


# ---- import uploads ------------------------------------------------------------------------------


def test_uploads_never_ingested_are_deleted_even_without_a_memory(api):
    """Here, not beside the other import tests: a run two days ahead expires every export and upload
    of the stack, which tests sharing a module's export would see."""
    target = make_scope()
    created = ok(api.post("/v3/memory/import", {"team_id": target.team_id, "agent_id": target.agent_id}))
    assert (
        requests.put(
            created["upload_url"],
            data=tarball({CONVERSATIONS: jsonl([MESSAGE])}),
            headers=created["headers"],
            timeout=60,
        ).status_code
        == 200
    )
    assert memory_files(target, bucket.IMPORTS)
    two_days = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 2 * 86_400))
    report = api.invoke("CleanupFunction", {"now": two_days})
    assert report["done"] is True, report
    assert memory_files(target, bucket.IMPORTS) == []
    assert ok(api.post("/v3/memory/import/status", {"import_id": created["import_id"]}))["state"] == "failed"
