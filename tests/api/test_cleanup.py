"""§12 scheduled cleanup: retention by the asset's retention_days (else RETENTION_DAYS), the floors
of 50 L0 / 20 L1 per memory, exact counters, audit, persona backups, leftovers of interrupted
clears, expired idempotency records, the lease against overlapping runs and the resumable cursor.

The cleanup walks every asset of the shared test stack, so assertions are about this file's own
memories only. Clocks are controlled with the event's ``now`` (and old message timestamps)."""

from __future__ import annotations

import glob
import json
import os
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone

import boto3
import pytest

from helpers import Scope, make_scope

DAY_MS = 86_400_000
BUCKET = "memory-hub-local"


# ---- helpers --------------------------------------------------------------------------------------

def ok(answer):
    assert answer.status == 200, answer.body
    assert answer.body["code"] == 0, answer.body
    return answer.data


def now_ms():
    from memory_hub.clock import now_ms as clock_now

    return clock_now()


def iso(ms):
    """A request time (milliseconds kept)."""
    dt = datetime.fromtimestamp(ms // 1000, tz=timezone.utc)
    return dt.strftime("%Y-%m-%dT%H:%M:%S") + f".{ms % 1000:03d}Z"


def event_time(ms):
    return datetime.fromtimestamp(ms // 1000, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def cleanup(api, now=None, **extra):
    report = api.invoke("CleanupFunction", {**({"now": event_time(now)} if now else {}), **extra})
    json.dumps(report)  # a JSON object, as Lambda returns it
    assert isinstance(report, dict) and "done" in report, report
    return report


def add_old(api, scope, timestamps, session="s1"):
    """Messages at the given times (ms); returns their ids in the same order."""
    ids = []
    for start in range(0, len(timestamps), 100):
        chunk = timestamps[start : start + 100]
        body = scope.body(session_id=session, messages=[
            {"role": "user", "content": f"message at {ts}", "timestamp": iso(ts)} for ts in chunk])
        ids += ok(api.post("/v3/conversation/add", body))["accepted_ids"]
    return ids


def add_new(api, scope, n, session="s1"):
    body = scope.body(session_id=session, messages=[{"role": "user", "content": f"new {i}"} for i in range(n)])
    return ok(api.post("/v3/conversation/add", body))["accepted_ids"]


_RETAINING: list[str] = []


def set_retention(api, scope, days):
    ok(api.post("/v3/memory/update", {"memory_id": scope.memory_id, "retention_days": days}))
    _RETAINING.append(scope.memory_id)


def l0_ids(api, scope):
    data = ok(api.post("/v3/conversation/query", scope.body(limit=100)))
    assert len(data["messages"]) == data["total"] or data["total"] > 100
    return {m["id"] for m in data["messages"]}, data["total"]


def l0_count(api, scope):
    return ok(api.post("/v3/conversation/count", scope.body()))["total"]


def l1_state(api, scope):
    data = ok(api.post("/v3/atomic/query", scope.body(limit=100)))
    return [r["id"] for r in data["items"]], data["total"], ok(api.post("/v3/atomic/count", scope.body()))["total"]


def counts(api, scope):
    return ok(api.post("/v3/memory/get", {"memory_id": scope.memory_id}))["counts"]


def retention_events(api, scope):
    return ok(api.post("/v3/audit/query", {"memory_id": scope.memory_id, "action": "retention_cleanup",
                                           "limit": 100}))["events"]


def deleted_by_events(api, scope):
    totals = Counter()
    for event in retention_events(api, scope):
        totals[event["layer"]] += event["count"]
    return totals


def s3():
    return boto3.client("s3", region_name=os.environ.get("AWS_DEFAULT_REGION", "us-east-1"))


def prefix_of(scope):
    return f"profiles/{scope.team_id}:{scope.agent_id}/{scope.memory_id}/"


def keys_under(prefix):
    found = []
    for page in s3().get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix):
        found += [o["Key"] for o in page.get("Contents", [])]
    return sorted(found)


def two_users_70_old_5_new(api, scope):
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
def no_leftover_cursor(api):
    """A run left unfinished would make the next one resume with its clock: every test here must
    leave the cleanup done. (Also: this test's memories keep everything from now on, so that later
    runs, which walk every memory, stay fast.)"""
    yield
    while _RETAINING:
        ok(api.post("/v3/memory/update", {"memory_id": _RETAINING.pop(), "retention_days": 0}))
    from memory_hub.cleanup import CURSOR_SK, LEASE_PK, LEASE_SK
    from memory_hub.dal.models import Item

    left = [i.sk for i in Item.query(LEASE_PK, consistent_read=True)]
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
    assert deleted_by_events(api, scope)["L0"] == 25
    assert deleted_by_events(api, scope)["L1"] == 0

    # a second run changes nothing and records nothing new
    again = cleanup(api)
    assert again["done"] is True
    assert l0_ids(api, scope)[0] == keep_a and l0_ids(api, other)[0] == keep_b
    assert counts(api, scope)["l0"] == 50
    assert len(retention_events(api, scope)) == len(events)


def test_retention_zero_and_the_default_keep_everything(api):
    from memory_hub.settings import get_settings

    assert get_settings().retention_days == 0  # the deployment default: keep forever
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


def test_null_retention_follows_the_deployment_setting(api, scope, monkeypatch):
    """RETENTION_DAYS applies to every asset whose retention_days is null (here: 30)."""
    from memory_hub import assets, cleanup as cleanup_logic
    from memory_hub.settings import get_settings

    other, keep_a, keep_b = two_users_70_old_5_new(api, scope)
    asset = assets.get(scope.memory_id)
    assert asset.retention_days is None
    assert cleanup_logic._retention(asset, now_ms()) == (0, 0)  # default 0: nothing
    configured = get_settings().model_copy(update={"retention_days": 30})
    monkeypatch.setattr(cleanup_logic, "get_settings", lambda: configured)
    assert cleanup_logic._retention(asset, now_ms()) == (25, 0)
    assert l0_ids(api, scope)[0] == keep_a and l0_ids(api, other)[0] == keep_b
    # an explicit retention_days wins over the setting
    set_retention(api, scope, 0)
    add_old(api, scope, [now_ms() - 400 * DAY_MS])
    assert cleanup_logic._retention(assets.get(scope.memory_id), now_ms()) == (0, 0)
    assert counts(api, scope)["l0"] == 51


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
    backups = prefix_of(scope) + ".backup/persona/"
    assert len(keys_under(backups)) == 2
    for version in (10, 11, 12, 13):
        s3().put_object(Bucket=BUCKET, Key=f"{backups}persona_20240101_00000{version % 10}_{version}.md",
                        Body=f"old persona {version}".encode(), Metadata={"epoch": "1", "version": str(version)})
    assert len(keys_under(backups)) == 6
    report = cleanup(api)
    assert report["done"] is True and report["backups_deleted"] >= 3
    assert [k.rsplit("_", 1)[1] for k in keys_under(backups)] == ["11.md", "12.md", "13.md"]
    assert ok(api.post("/v3/core/read", scope.body()))["content"] == "persona 2"


def test_pending_purges_and_orphans_are_finished(api, monkeypatch):
    from memory_hub import assets, purge
    from memory_hub import clear as clear_logic

    pending, raced = make_scope(), make_scope()
    for s in (pending, raced):
        add_new(api, s, 3)
        ok(api.post("/v3/scenario/write", s.body(path="a.md", content="old")))
    # an interrupted clear: its purge record is all that is left to finish it
    monkeypatch.setattr(clear_logic, "invoke_async", lambda event: None)
    monkeypatch.setattr(clear_logic, "SYNC_BUDGET_S", 0.0)
    item = ok(api.post("/v3/chat-memory/clear", {"memory_ids": [pending.memory_id]}))["items"][0]
    monkeypatch.undo()
    assert item["cleared"] is True and item["purge_pending"] is True
    assert [t.memory_id for t in purge.pending()].count(pending.memory_id) == 1

    # a completed clear, then an object a racing write left under the retired epoch
    old_epoch = int(assets.get(raced.memory_id).epoch)
    assert ok(api.post("/v3/chat-memory/clear", {"memory_ids": [raced.memory_id]}))["all_cleared"] is True
    straggler = prefix_of(raced) + "scene_blocks/straggler.md"
    s3().put_object(Bucket=BUCKET, Key=straggler, Body=b"racing write", Metadata={"epoch": str(old_epoch)})
    assert ok(api.post("/v3/scenario/read", raced.body(path="straggler.md")))["content"] is None
    ok(api.post("/v3/scenario/write", raced.body(path="new.md", content="after the clear")))

    report = cleanup(api)
    assert report["done"] is True and report["purges_completed"] >= 1 and report["orphans_deleted"] >= 1
    assert [t for t in purge.pending() if t.memory_id in (pending.memory_id, raced.memory_id)] == []
    assert keys_under(prefix_of(pending)) == []
    assert keys_under(prefix_of(raced)) == [prefix_of(raced) + "scene_blocks/new.md"]
    assert ok(api.post("/v3/scenario/read", raced.body(path="new.md")))["content"].endswith("after the clear")
    events = ok(api.post("/v3/audit/query", {"memory_id": pending.memory_id, "action": "clear", "limit": 100}))
    done = [e for e in events["events"] if e["target"] == "purge_complete"]
    assert len(done) == 1 and done[0]["actor"] == "system:cleanup" and done[0]["layer"] == "asset"
    assert done[0]["count"] >= 3
    assert l0_count(api, pending) == 0 and counts(api, pending) == {"l0": 0, "l1": 0, "l2": 0, "l3": 0}


def test_expired_idempotency_records_are_removed(api, scope):
    from memory_hub.settings import get_settings

    key = {"Idempotency-Key": "cleanup-" + uuid.uuid4().hex}
    body = scope.body(session_id="s1", messages=[{"role": "user", "content": "once"}])
    first = ok(api.post("/v3/conversation/add", body, headers=key))
    assert cleanup(api)["done"] is True  # not expired yet: still answers the replay
    assert ok(api.post("/v3/conversation/add", body, headers=key)) == first
    assert l0_count(api, scope) == 1

    later = now_ms() + 2 * 3_600_000
    report = cleanup(api, now=later)
    assert report["done"] is True and report["idempotency_deleted"] >= 1
    client = boto3.client("dynamodb", region_name=os.environ.get("AWS_DEFAULT_REGION", "us-east-1"))
    rows = client.scan(TableName=get_settings().idempotency_table)["Items"]
    assert not [r for r in rows if int(r["expiration"]["N"]) < later // 1000]
    # the record is gone, so the same key and body now write again
    second = ok(api.post("/v3/conversation/add", body, headers=key))
    assert second["accepted_ids"] != first["accepted_ids"]
    assert l0_count(api, scope) == 2


# ---- overlapping runs and resuming ----------------------------------------------------------------

def test_a_run_while_the_lease_is_held_is_skipped(api, scope):
    from memory_hub import cleanup as cleanup_logic

    other, keep_a, keep_b = two_users_70_old_5_new(api, scope)
    set_retention(api, scope, 30)
    now = now_ms()
    assert cleanup_logic._acquire("test-holder", now + 600_000, now)
    try:
        report = cleanup(api)
        assert report["skipped"] and report["done"] is False
        assert report["l0_deleted"] == 0 and report["memories"] == 0
        assert counts(api, scope)["l0"] == 75
    finally:
        cleanup_logic._release("test-holder")
    # a lease whose holder died (expired) is taken over
    assert cleanup_logic._acquire("crashed-run", now - 1, now - 2)
    report = cleanup(api)
    assert report["done"] is True and not report["skipped"]
    assert l0_ids(api, scope)[0] == keep_a and l0_ids(api, other)[0] == keep_b


def test_overlapping_runs_never_delete_beyond_the_floors(api, scope, monkeypatch):
    from memory_hub import cleanup as cleanup_logic

    other, keep_a, keep_b = two_users_70_old_5_new(api, scope)
    set_retention(api, scope, 30)
    real_run = cleanup_logic._run
    overlapping = []

    def run_with_a_second_run_inside(report, deadline, now_override):
        if not overlapping:  # the first run holds the lease: start another and let it finish
            with ThreadPoolExecutor(1) as pool:
                overlapping.append(pool.submit(cleanup, api).result())
        return real_run(report, deadline, now_override)

    monkeypatch.setattr(cleanup_logic, "_run", run_with_a_second_run_inside)
    with ThreadPoolExecutor(1) as pool:
        first = pool.submit(cleanup, api).result()
    monkeypatch.undo()
    [second] = overlapping
    assert second["skipped"] and second["l0_deleted"] == 0
    assert first["done"] is True and first["l0_deleted"] >= 25
    assert l0_ids(api, scope)[0] == keep_a and l0_ids(api, other)[0] == keep_b
    assert deleted_by_events(api, scope)["L0"] == 25


def test_concurrent_retention_passes_do_not_double_count(api, scope):
    """Even without the lease (two passes over one memory at once), conditional deletes keep the
    floor and the counters exact."""
    from memory_hub import assets, cleanup as cleanup_logic

    other, keep_a, keep_b = two_users_70_old_5_new(api, scope)
    set_retention(api, scope, 30)
    asset = assets.get(scope.memory_id)
    now = now_ms()
    with ThreadPoolExecutor(2) as pool:
        results = list(pool.map(lambda _: cleanup_logic._retention(asset, now), range(2)))
    assert sum(l0 for l0, _ in results) == 25
    assert l0_ids(api, scope)[0] == keep_a and l0_ids(api, other)[0] == keep_b
    assert counts(api, scope)["l0"] == 50 == l0_count(api, scope) + l0_count(api, other)


def test_a_run_out_of_time_saves_a_cursor_and_the_next_one_resumes(api, monkeypatch):
    from memory_hub import cleanup as cleanup_logic
    from memory_hub import purge
    from memory_hub.dal.models import Asset

    mine = [make_scope() for _ in range(2)]
    for s in mine:
        add_old(api, s, [now_ms() - 400 * DAY_MS + i for i in range(55)])
        set_retention(api, s, 30)
    everything = {a.memory_id for a in Asset.scan(consistent_read=True)}
    assert len(everything) >= 3
    processed = []
    stop_after = {"n": len(everything) // 2}

    class Budget:  # runs out after a fixed number of memories: no wall clock involved
        def passed(self):
            return stop_after["n"] is not None and len(processed) >= stop_after["n"]

    real_one = cleanup_logic._one

    def one(report, asset, now, deadline):
        real_one(report, asset, now, deadline)
        processed.append(asset.memory_id)

    monkeypatch.setattr(cleanup_logic, "_one", one)
    monkeypatch.setattr(purge.Deadline, "after", classmethod(lambda cls, seconds: Budget()))
    clock = now_ms()
    first = cleanup_logic.run(lambda: 900_000, now_override=clock)
    assert first["done"] is False and first["memories"] == stop_after["n"] >= 1
    from memory_hub.dal.models import Item

    cursor = Item.get(cleanup_logic.LEASE_PK, cleanup_logic.CURSOR_SK, consistent_read=True)
    assert int(cursor.created_at) == clock and cursor.meta

    stop_after["n"] = None
    second = cleanup_logic.run(lambda: 900_000, now_override=clock + 365 * DAY_MS)
    monkeypatch.undo()
    assert second["done"] is True
    assert second["run_started_at"] == first["run_started_at"]  # the same run, the same clock
    assert first["memories"] + second["memories"] == len(processed)
    seen = Counter(processed)
    assert set(seen) == everything and set(seen.values()) == {1}, [m for m, n in seen.items() if n > 1]
    for s in mine:
        assert counts(api, s)["l0"] == 50 == l0_count(api, s)
        assert deleted_by_events(api, s)["L0"] == 5  # once, not once per invocation


# ---- the scheduled event --------------------------------------------------------------------------

def test_the_scheduled_event_runs_the_cleanup(api, scope):
    files = sorted(glob.glob(os.path.join(os.path.dirname(__file__), "..", "events", "**", "*cleanup*.json"),
                             recursive=True))
    assert files, "events/scheduled/cleanup.json: the EventBridge event of the schedule"
    if files:
        with open(files[0], encoding="utf-8") as handle:
            event = json.load(handle)
    else:  # what EventBridge sends for a schedule
        event = {"version": "0", "id": str(uuid.uuid4()), "detail-type": "Scheduled Event", "source": "aws.events",
                 "account": "000000000000", "time": "2020-01-01T00:00:00Z", "region": "us-east-1",
                 "resources": ["arn:aws:events:us-east-1:000000000000:rule/memory-hub-cleanup"], "detail": {}}
    add_old(api, scope, [now_ms() - 400 * DAY_MS + i for i in range(55)])
    set_retention(api, scope, 30)
    report = api.invoke("CleanupFunction", event)
    assert isinstance(json.loads(json.dumps(report)), dict)
    assert report["done"] is True and report["memories"] >= 1
    assert all(isinstance(report[k], int) for k in ("l0_deleted", "l1_deleted", "backups_deleted",
                                                    "purges_completed", "idempotency_deleted"))
    assert l0_count(api, scope) == 50  # by the real clock, not the event's old `time`
