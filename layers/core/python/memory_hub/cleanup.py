"""Scheduled retention cleanup (§12), one resumable run across invocations.

Each invocation:
  1. takes a lease (a conditional put), so overlapping runs never work at the same time;
  2. finishes pending purges of interrupted clears and deletes (the PURGE records);
  3. walks the assets from the saved cursor: deletes L0 items older than the retention by
     ``timestamp`` and L1 items by ``updated_at`` — never the memory's newest 50 L0 / 20 L1 —
     with the same conditional, counter-keeping deletes as the API; prunes persona backups beyond
     3; removes S3 objects a write left under a retired epoch around a recent clear;
  4. removes idempotency records past their expiry (DynamoDB TTL does this on AWS, late);
  5. saves the cursor and answers ``done: false`` when its time runs short, so the next
     invocation continues the same run (same clock) where this one stopped.
"""

from __future__ import annotations

import heapq
import os
from dataclasses import asdict, dataclass, field
from typing import Any, Callable

from pynamodb.exceptions import DeleteError, PutError

from . import atomic, audit, clear, conversation, items, persona, purge
from .audit import Event
from .clock import now_ms, parse_time
from .dal.models import Asset, Item
from .settings import get_settings

LEASE_PK, LEASE_SK, CURSOR_SK = "CLEANUP", "lease", "cursor"
DAY_MS = 86_400_000
ORPHAN_WINDOW_MS = 2 * DAY_MS  # how long after a clear its epoch's stragglers are looked for
MARGIN_S = 5.0


@dataclass
class Report:
    done: bool = False
    memories: int = 0
    l0_deleted: int = 0
    l1_deleted: int = 0
    backups_deleted: int = 0
    purges_completed: int = 0
    orphans_deleted: int = 0
    idempotency_deleted: int = 0
    run_started_at: str | None = None
    skipped: str | None = None
    audit_ids: list[str] = field(default_factory=list)


def _acquire(owner: str, until_ms: int, now: int) -> bool:
    lease = Item(LEASE_PK, LEASE_SK, id=owner, n=until_ms)
    try:
        lease.save(condition=Item.sk.does_not_exist() | (Item.n < now))
        return True
    except PutError as exc:
        if exc.cause_response_code == "ConditionalCheckFailedException":
            return False
        raise


def _release(owner: str) -> None:
    try:
        Item(LEASE_PK, LEASE_SK).delete(condition=Item.id == owner)
    except DeleteError as exc:
        if exc.cause_response_code != "ConditionalCheckFailedException":
            raise


def _cursor() -> Item | None:
    try:
        return Item.get(LEASE_PK, CURSOR_SK, consistent_read=True)
    except Item.DoesNotExist:
        return None


def _newest(pks: list[str], floor: int) -> set[str]:
    """Ids of the ``floor`` newest items (by lsi1) across the memory's user partitions."""
    if floor <= 0:
        return set()
    candidates: list[tuple[str, str]] = []
    for pk in pks:
        for item in Item.by_time.query(pk, scan_index_forward=False, consistent_read=True, limit=floor):
            candidates.append((item.lsi1, item.id))
    return {item_id for _, item_id in heapq.nlargest(floor, candidates)}


def _expired(pks: list[str], cutoff_ms: int, keep: set[str]) -> list[Item]:
    bound = items.time_bound(cutoff_ms, upper=False)
    return [item for pk in pks
            for item in Item.by_time.query(pk, Item.lsi1 < bound, consistent_read=True)
            if item.id not in keep]


def _retention(asset: Asset, now: int) -> tuple[int, int]:
    settings = get_settings()
    days = settings.retention_days if asset.retention_days is None else int(asset.retention_days)
    if days <= 0:
        return 0, 0
    cutoff = now - days * DAY_MS
    epoch = int(asset.epoch)
    counters = items.counter_pk(asset.team_id, asset.agent_id, epoch)
    users = sorted({c.sk.split(items.SEP)[1] for c in Item.query(counters, consistent_read=True)})
    l0_pks = [items.l0_pk(asset.team_id, asset.agent_id, epoch, u) for u in users]
    l1_pks = [items.l1_pk(asset.team_id, asset.agent_id, epoch, u) for u in users]
    old_l0 = _expired(l0_pks, cutoff, _newest(l0_pks, settings.retention_min_l0))
    old_l1 = _expired(l1_pks, cutoff, _newest(l1_pks, settings.retention_min_l1))
    removed_l0 = conversation.erase(asset.team_id, asset.agent_id, epoch, old_l0)
    # a record edited since we read it is younger than we thought: its version check keeps it
    removed_l1 = atomic.erase(asset.team_id, asset.agent_id, epoch, old_l1, check_version={r.id for r in old_l1},
                              skip_conflicts=True)
    return len(removed_l0), len(removed_l1)


def _orphans(asset: Asset, now: int, deadline: purge.Deadline) -> int:
    """S3 objects a racing write left under a retired epoch (they are invisible, but not erased)."""
    if not asset.last_cleared_at:
        return 0
    cleared = parse_time(asset.last_cleared_at)
    if now - cleared > ORPHAN_WINDOW_MS:
        return 0
    result = purge.Result()
    target = purge.Target(asset.memory_id, asset.team_id, asset.agent_id, int(asset.epoch) - 1, cleared)
    purge._objects(target, result, deadline)
    return result.files


def _idempotency(now: int) -> int:
    """Records past their expiry (seconds since 1970), as DynamoDB TTL would remove them."""
    from .dal.aws import client

    table = get_settings().idempotency_table
    dynamodb = client("dynamodb")
    removed = 0
    for page in dynamodb.get_paginator("scan").paginate(
            TableName=table, FilterExpression="#e < :now", ProjectionExpression="id",
            ExpressionAttributeNames={"#e": "expiration"}, ExpressionAttributeValues={":now": {"N": str(now // 1000)}}):
        for row in page.get("Items", []):
            dynamodb.delete_item(TableName=table, Key={"id": row["id"]})
            removed += 1
    return removed


def run(remaining_ms: Callable[[], int], now_override: int | None = None) -> dict[str, Any]:
    report = Report()
    deadline = purge.Deadline.after(max(1.0, remaining_ms() / 1000 - MARGIN_S))
    owner = f"cleanup-{os.getpid()}-{now_ms()}"
    if not _acquire(owner, now_ms() + remaining_ms() + 60_000, now_ms()):
        report.skipped = "another cleanup run holds the lease"
        return asdict(report)
    try:
        _run(report, deadline, now_override)
    finally:
        _release(owner)
    return asdict(report)


def _run(report: Report, deadline: purge.Deadline, now_override: int | None) -> None:
    cursor = _cursor()
    started = int(cursor.created_at) if cursor is not None else (now_override or now_ms())
    report.run_started_at = items.iso(started)
    for target in list(purge.pending()):
        if deadline.passed():
            return _save(cursor, started, cursor.meta if cursor else None)
        if clear.complete(target, deadline, actor=audit.SYSTEM_CLEANUP, request_id=None)["done"]:
            report.purges_completed += 1
    position = cursor.meta if cursor is not None else None
    while True:
        page = Asset.scan(last_evaluated_key=position, limit=25, consistent_read=True)
        for asset in page:
            if deadline.passed():
                return _save(cursor, started, position)
            _one(report, asset, started, deadline)
            position = {"memory_id": {"S": asset.memory_id}}  # resume after the last finished asset
        if not page.last_evaluated_key:
            break
        position = page.last_evaluated_key
    report.idempotency_deleted = _idempotency(started)
    if cursor is not None:
        cursor.delete()
    report.done = True


def _one(report: Report, asset: Asset, now: int, deadline: purge.Deadline) -> None:
    report.memories += 1
    l0, l1 = _retention(asset, now)
    report.l0_deleted += l0
    report.l1_deleted += l1
    report.backups_deleted += persona.prune_backups(asset.team_id, asset.agent_id)
    report.orphans_deleted += _orphans(asset, now, deadline)
    if l0 or l1:
        report.audit_ids += audit.record(
            [Event("retention_cleanup", "L0", asset.memory_id, l0), Event("retention_cleanup", "L1", asset.memory_id, l1)],
            memory_id=asset.memory_id, team_id=asset.team_id, actor=audit.SYSTEM_CLEANUP, request_id=None)


def _save(cursor: Item | None, started: int, position: Any) -> None:
    """Remember where this run stopped; the next invocation resumes it (same clock)."""
    item = cursor or Item(LEASE_PK, CURSOR_SK)
    item.created_at = started
    item.meta = position
    item.save()
