"""Scheduled retention cleanup, one resumable run across invocations.

Each invocation:
  1. takes a lease (a conditional put), so overlapping runs never work at the same time;
  2. finishes pending purges of interrupted clears and deletes (the purge records);
  3. walks the assets from the saved cursor: deletes L0 items older than the retention by
     ``timestamp`` and L1 items by ``updated_at`` — never the memory's newest 50 L0 / 20 L1 — with
     the same conditional, counter-keeping deletes as the API (each transaction with its audit
     event); prunes persona backups beyond 3; removes objects a write left under a retired epoch
     around a recent clear, exports older than a day, and tombstones older than a day;
     brings items indexed by an older analysis to the current one (``reindex``);
  4. removes idempotency records past their expiry (DynamoDB's TTL does this on AWS, late);
  5. saves the cursor and answers ``done: false`` when its time runs short, so the next invocation
     continues the same run (same clock) where this one stopped.
"""

from __future__ import annotations

import heapq
import os
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from ..clock import format_ms, iso, now_ms, parse_ms
from ..observability import logger
from ..settings import get_settings
from ..storage import assets as stored_assets
from ..storage import blobs, bucket, counters, idempotency, jobs, leases, messages, purge, records, scenes
from ..storage import formation as formation_store
from ..storage.audit import EventContext, NewEvent, event_items
from ..storage.counters import Where
from ..storage.views import Asset
from . import assets, clear, persona, provenance, reindex, vector_erasure, vector_upkeep
from .audit import SYSTEM_CLEANUP

DAY_MS = 86_400_000
ORPHAN_WINDOW_MS = 2 * DAY_MS  # how long after a clear its epoch's stragglers are looked for
EXPORT_LIFETIME_MS = DAY_MS
MARKER_MARGIN_MS = 60 * 60 * 1000  # longer than an export's run (a Lambda runs 15 minutes at most)
TOMBSTONE_LIFETIME_MS = DAY_MS
MARGIN_S = 5.0
PAGE = 25


@dataclass
class Report:
    done: bool = False
    memories: int = 0
    l0_deleted: int = 0
    l1_deleted: int = 0
    backups_deleted: int = 0
    purges_completed: int = 0
    orphans_deleted: int = 0
    exports_deleted: int = 0
    tombstones_dropped: int = 0
    items_reindexed: int = 0
    vectors_embedded: int = 0
    vectors_swept: int = 0
    idempotency_deleted: int = 0
    imports_undone: int = 0
    run_started_at: str | None = None
    skipped: str | None = None
    audit_ids: list[str] = field(default_factory=list)


def run(remaining_ms: Callable[[], int], now_override: int | None = None) -> dict[str, Any]:
    report = Report()
    deadline = purge.Deadline.after(max(1.0, remaining_ms() / 1000 - MARGIN_S))
    owner = f"cleanup-{os.getpid()}-{now_ms()}"
    if not leases.acquire(owner, now_ms() + remaining_ms() + 60_000, now_ms()):
        report.skipped = "another cleanup run holds the lease"
        return asdict(report)
    try:
        _run(report, deadline, now_override)
    finally:
        leases.release(owner)
    return asdict(report)


def _run(report: Report, deadline: purge.Deadline, now_override: int | None) -> None:
    cursor = leases.cursor()
    started = int(cursor.run_started) if cursor is not None and cursor.run_started else (now_override or now_ms())
    report.run_started_at = iso(started)
    position = cursor.position if cursor is not None else None
    for target in purge.pending():
        if deadline.passed():
            return leases.save_cursor(started, position)
        outcome = clear.complete(target, deadline, hand_on=False, actor=SYSTEM_CLEANUP)
        if outcome["done"] and "ignored" not in outcome:
            report.purges_completed += 1
    while True:
        page, following = stored_assets.scan_page(position, PAGE)
        for asset in page:
            if deadline.passed():
                return leases.save_cursor(started, position)
            _one(report, asset, started, deadline)
            position = stored_assets.position_after(asset)  # resume after the last finished asset
        if not following:
            break
        position = following
    report.exports_deleted += _abandoned_imports(report, started)
    report.idempotency_deleted = idempotency.expired_records(started // 1000)
    if cursor is not None:
        leases.drop_cursor()
    report.done = True


def _abandoned_imports(report: Report, now: int) -> int:
    """Uploads of imports never started, older than a day — also into a pair whose memory does not
    exist (so no memory's listing finds them); anything put at the upload key of an import that
    started (an upload URL is good for one import); and what imports that failed or stopped midway
    (a killed process, a timeout) wrote, taken back by their journals."""
    from .transfer import importing  # the transfer package imports this module's neighbours

    gone = 0
    for job in jobs.waiting("import", now - EXPORT_LIFETIME_MS):
        gone += _sweep(bucket.import_upload_key(job.team_id, job.agent_id, job.sk))
        jobs.settle(job, "failed", error="nothing was ingested within a day; the upload was deleted")
    report.imports_undone += importing.recover(now)
    for job in jobs.started("import"):
        if job.state != "running":
            gone += _sweep(bucket.import_upload_key(job.team_id, job.agent_id, job.sk))
    return gone


def imports_left_running() -> dict[str, Any]:
    """Every import still queued or running taken as stopped and undone, at once (its process is
    known to be gone: the local stack starting again over its data). How many were undone."""
    from .transfer import importing

    return {"imports_undone": importing.recover(now_ms(), all_running=True)}


def _sweep(key: str) -> int:
    """Delete the object at ``key`` if there is one; 1 when one went (S3 answers a delete of a
    missing key as a success, so the count would otherwise grow with every run)."""
    found = blobs.head(key)
    return int(found is not None and blobs.delete(key, if_match=found.etag))


def _newest(where: Where, layer: str, users: list[str], floor: int) -> set[str]:
    """Ids of the ``floor`` newest items (by time) across the memory's users."""
    if floor <= 0:
        return set()
    newest = messages.newest if layer == "L0" else records.newest
    time_key: Callable[[Any], str] = messages.time_key if layer == "L0" else lambda record: str(record.lsi1)
    candidates = []
    for user in users:
        args = (where, user, None, None, None, None, floor)
        candidates += [(time_key(item), item.id) for item in newest(*args)]
    return {item_id for _, item_id in heapq.nlargest(floor, candidates)}


def _expired(where: Where, layer: str, users: list[str], cutoff: int, keep: set[str]) -> list[Any]:
    newest = messages.newest if layer == "L0" else records.newest
    found = []
    for user in users:
        args = (where, user, None, None, None, cutoff - 1, None)
        found += [item for item in newest(*args) if item.id not in keep]
    return found


def _retention(report: Report, asset: Asset, now: int) -> None:
    settings = get_settings()
    days = settings.retention_days if asset.retention_days is None else int(asset.retention_days)
    if days <= 0:
        return
    cutoff = now - days * DAY_MS
    where = assets.where_of(asset)  # a running import's items are not expired before it commits
    users = counters.users(where)
    context = EventContext(asset.team_id, SYSTEM_CLEANUP, None, asset.agent_id, asset.memory_id)

    def events(layer: str) -> Callable[[list[Any]], list[Any]]:
        return lambda chunk: event_items([NewEvent("retention_cleanup", layer, asset.memory_id, len(chunk))], context)

    old_l0 = _expired(where, "L0", users, cutoff, _newest(where, "L0", users, settings.retention_min_l0))
    old_l1 = _expired(where, "L1", users, cutoff, _newest(where, "L1", users, settings.retention_min_l1))
    removed_l0, recorded_l0 = messages.delete(where, old_l0, events("L0"))
    # a record edited or reinforced since it was read is younger than thought: its version and
    # updated_at checks keep it
    removed_l1, recorded_l1 = records.expire(where, old_l1, events("L1"))
    vector_erasure.erase(where, [(item.user_id, item.id) for item in removed_l0 + removed_l1])
    for user_id, gone in _by_user(removed_l0).items():  # expiry drops the ids from records citing them
        provenance.expired(where, user_id, [m.id for m in gone])
        formation_store.unmark_messages(where, user_id, gone)
    report.l0_deleted += len(removed_l0)
    report.l1_deleted += len(removed_l1)
    report.audit_ids += [e.event_id for e in recorded_l0 + recorded_l1]


def _by_user(items: list[Any]) -> dict[str, list[Any]]:
    found: dict[str, list[Any]] = {}
    for item in items:
        found.setdefault(item.user_id, []).append(item)
    return found


def _orphans(asset: Asset, now: int, deadline: purge.Deadline) -> int:
    """Objects a racing write left under a retired epoch (invisible, but not yet erased)."""
    if not asset.last_cleared_at or now - parse_ms(asset.last_cleared_at) > ORPHAN_WINDOW_MS:
        return 0
    result = purge.Result()
    target = purge.Target.of(asset, int(asset.epoch) - 1, parse_ms(asset.last_cleared_at))
    purge.objects(target, result, deadline)
    return result.files


def _exports(asset: Asset, now: int) -> int:
    """Exports (and leftover import uploads) older than a day; then the export marker, once older
    than a day and an export's longest run (``MARKER_MARGIN_MS``): every archive put after it was
    put older than a day, and went first. Only the marker as listed goes (an export that puts it
    again meanwhile keeps it), and erasures list the exports again only after the next export."""
    marker = bucket.export_marker(asset.team_id, asset.agent_id)
    listed = [
        o
        for prefix in (
            bucket.export_prefix(asset.team_id, asset.agent_id),
            bucket.import_prefix(asset.team_id, asset.agent_id),
        )
        for page in blobs.listing(prefix)
        for o in page
    ]
    old = [o for o in listed if o.key != marker and o.last_modified.timestamp() * 1000 < now - EXPORT_LIFETIME_MS]
    deleted = blobs.delete_many([o.key for o in old], [o.etag or None for o in old]) if old else 0
    for o in listed:
        if o.key == marker and o.last_modified.timestamp() * 1000 < now - EXPORT_LIFETIME_MS - MARKER_MARGIN_MS:
            blobs.delete(marker, if_match=o.etag)
    return deleted


def _one(report: Report, asset: Asset, now: int, deadline: purge.Deadline) -> None:
    report.memories += 1
    _retention(report, asset, now)
    report.backups_deleted += persona.prune_backups(asset.team_id, asset.agent_id)
    report.orphans_deleted += _orphans(asset, now, deadline)
    report.exports_deleted += _exports(asset, now)
    stale = scenes.old_tombstones(asset.team_id, asset.agent_id, format_ms(now - TOMBSTONE_LIFETIME_MS))
    report.tombstones_dropped += scenes.drop_tombstones(stale)
    where = Where.of(asset)
    report.items_reindexed += reindex.memory(where, deadline.passed).items
    _meaning(report, asset, deadline)


def _meaning(report: Report, asset: Asset, deadline: purge.Deadline) -> None:
    """Vectors: indexes of retired epochs and old vector sizes dropped, vectors of erased items
    swept, and items without a vector of the current model embedded, oldest first (a failure is
    logged and left for the next run: it never stops the cleanup). Items of an import still
    running are never embedded: it embeds them when it commits, and an undo deletes them."""
    where = assets.where_of(asset)
    try:
        done = vector_upkeep.backfill(where, deadline.passed)
    except Exception:
        logger.exception("vector backfill of one memory failed; the next run tries again")
        return
    report.vectors_embedded += done.embedded
    report.vectors_swept += done.swept
