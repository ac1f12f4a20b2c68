"""Physical erasure of one content epoch of a memory: every item, posting, counter, scene entry and
S3 object it left. Used by clear, memory delete and the cleanup.

Visibility never depends on this: a clear first moves the asset to a new epoch (atomically, with a
durable purge record), and reads only look at the current epoch. This module then deletes the old
epoch in bulk — BatchWriteItem (25 keys) and DeleteObjects (1,000 keys), in parallel — until done or
until the deadline, after which the purge record lets a continuation or the cleanup finish."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from . import assets, blobs, bucket, counters, layout, scenes, vectors, views
from .concurrency import Deadline as Deadline  # re-exported: purges and erasures share it
from .concurrency import for_each, in_batches
from .counters import Where
from .errors import Cancelled
from .models import ItemKey, PurgeRecord
from .transactions import Transaction

RECENT_S = 5  # objects younger than the epoch change (with clock-skew margin) are checked one by one
PAGE = 1000


@dataclass(frozen=True)
class Target:
    memory_id: str
    team_id: str
    agent_id: str
    epoch: int
    retired_ms: int
    actor: str | None = None
    request_id: str | None = None
    bucket: str = ""  # the memory's pinned vector bucket ('' for a memory of before)

    @classmethod
    def of(
        cls, asset: views.Asset, epoch: int, retired_ms: int, actor: str | None = None, request_id: str | None = None
    ) -> Target:
        """One epoch of the asset's memory."""
        pinned = asset.vector_bucket or ""
        return cls(asset.memory_id, asset.team_id, asset.agent_id, epoch, retired_ms, actor, request_id, pinned)

    @property
    def where(self) -> Where:
        return Where(self.team_id, self.agent_id, self.epoch, self.memory_id, bucket=self.bucket)


@dataclass
class Result:
    l0: int = 0
    l1: int = 0
    l2: int = 0
    l3: int = 0
    files: int = 0
    done: bool = False


def retire(
    asset: views.Asset,
    target: Target,
    *,
    new_epoch: int | None,
    stamp: str,
    events: list[views.AuditEvent],
    hidden_by: str | None = None,
) -> None:
    """Move the asset on from ``target``'s epoch (or delete it, with ``new_epoch`` None), with the
    durable note that the epoch still holds data to erase and the events: one transaction
    (``assets.retire_epoch``). Cancelled ('asset') if the epoch moved since it was read (or, with
    ``hidden_by``, the asset is no longer hidden by that import)."""
    note = _record(target)
    assets.retire_epoch(asset, new_epoch=new_epoch, stamp=stamp, purge_record=note, events=events, hidden_by=hidden_by)


def _record(target: Target) -> PurgeRecord:
    """The durable note that ``target`` still holds data to erase."""
    return PurgeRecord(
        layout.PURGE_PK,
        layout.purge_sk(target.team_id, target.agent_id, target.epoch),
        memory_id=target.memory_id,
        team_id=target.team_id,
        agent_id=target.agent_id,
        epoch=target.epoch,
        retired_ms=target.retired_ms,
        actor=target.actor,
        request_id=target.request_id,
        bucket=target.bucket or None,
    )


def _target(r: PurgeRecord) -> Target:
    epoch, retired = int(r.epoch), int(r.retired_ms)
    return Target(r.memory_id, r.team_id, r.agent_id, epoch, retired, r.actor, r.request_id, r.bucket or "")


def pending() -> list[Target]:
    return [_target(r) for r in PurgeRecord.query(layout.PURGE_PK, consistent_read=True)]


def get(team_id: str, agent_id: str, epoch: int) -> Target | None:
    try:
        r = PurgeRecord.get(layout.PURGE_PK, layout.purge_sk(team_id, agent_id, epoch), consistent_read=True)
    except PurgeRecord.DoesNotExist:
        return None
    return _target(r)


def finish(target: Target, events: list[views.AuditEvent]) -> bool:
    """Drop the purge record and record the events together; False if another run did it first."""
    transaction = Transaction()
    transaction.delete("purge", _record(target), condition=PurgeRecord.pk.exists())
    for event in events:
        transaction.put("audit", event)
    try:
        transaction.commit()
    except Cancelled:
        return False
    return True


def _retired(blob: blobs.Blob | None, epoch: int) -> bool:
    """Whether an object belongs to ``epoch`` or an older one (a later epoch's object stays)."""
    return blob is not None and blobs.epoch_of(blob) <= epoch


def objects(target: Target, result: Result, deadline: Deadline) -> bool:
    """Delete the objects of this epoch and older ones under the memory's prefix (files, persona,
    backups, metadata, exports); objects of a later epoch stay. True when none is left."""
    persona = bucket.persona_key(target.team_id, target.agent_id)
    marker = bucket.export_marker(target.team_id, target.agent_id)  # not a file; see below
    scenes_prefix = bucket.prefix(target.team_id, target.agent_id) + bucket.SCENES
    recent_after = datetime.fromtimestamp(target.retired_ms / 1000 - RECENT_S, tz=UTC)
    for page in blobs.listing(bucket.prefix(target.team_id, target.agent_id)):
        # the marker by its epoch whatever its time: lost beside a later epoch's archive, erasures
        # would skip that archive (a clock ahead of S3's could take one put after the change as old)
        doomed = [(o.key, o.etag or None) for o in page if o.last_modified < recent_after and o.key != marker]
        recent = [o for o in page if o.last_modified >= recent_after or o.key == marker]
        if recent:  # written around the epoch change: look at each one's epoch, and delete the version seen
            heads = for_each(lambda o: blobs.head(o.key), recent, width=16)
            doomed += [(head.key, head.etag) for head in heads if head is not None and _retired(head, target.epoch)]
        if doomed:
            gone = blobs.deleted([key for key, _ in doomed], [etag for _, etag in doomed])
            result.files += sum(1 for key in gone if key != marker)
            result.l3 = max(result.l3, int(persona in gone))
            result.l2 += sum(1 for key in gone if key.startswith(scenes_prefix))
        if deadline.passed():
            return False
    return True


def scene_entries(target: Target, result: Result, deadline: Deadline) -> bool:
    after: dict[str, Any] | None = None
    while True:
        page, after = scenes.retired(target.team_id, target.agent_id, target.epoch, PAGE, after)
        scenes.delete_retired(page, target.epoch)
        if after is None:
            return True
        if deadline.passed():
            return False


def _delete_keys(rows: list[ItemKey]) -> None:
    def one(chunk: list[ItemKey]) -> None:
        with ItemKey.batch_write() as batch:  # retries unprocessed items itself
            for row in chunk:
                batch.delete(ItemKey(row.pk, row.sk))

    for_each(one, in_batches(rows, 100))


def partition(pk: str, deadline: Deadline) -> tuple[int, int, bool]:
    """Delete every item of a partition: (messages, records, done)."""
    messages = records = 0
    after: dict[str, Any] | None = None
    while True:
        result = ItemKey.query(
            pk, consistent_read=True, limit=PAGE, last_evaluated_key=after, attributes_to_get=["pk", "sk"]
        )
        rows = list(result)
        _delete_keys(rows)
        messages += sum(1 for r in rows if layout.is_message_sk(r.sk))
        records += sum(1 for r in rows if r.sk.startswith("atom-"))
        after = result.last_evaluated_key
        if after is None:
            return messages, records, True
        if deadline.passed():
            return messages, records, False


def items(target: Target, result: Result, deadline: Deadline) -> bool:
    where = target.where
    for user_id in counters.users(where):
        for layer in ("L0", "L1"):
            messages, records, done = partition(where.item_pk(layer, user_id), deadline)
            result.l0 += messages
            result.l1 += records
            if not done:
                return False
    return True


def run(target: Target, deadline: Deadline) -> Result:
    """Erase what ``target`` names, as far as the deadline allows (``done`` says whether all went).
    The counters go last: they are how the next pass finds the users left to erase."""
    result = Result()
    finished = (
        objects(target, result, deadline)
        and scene_entries(target, result, deadline)
        and items(target, result, deadline)
    )
    if finished:  # the epoch's vectors go with it: its indexes are dropped whole
        vectors.drop_epoch(target.where.vector_bucket, target.team_id, target.agent_id, target.epoch)
    if finished:
        counters.drop(target.where)
    result.done = finished
    return result
