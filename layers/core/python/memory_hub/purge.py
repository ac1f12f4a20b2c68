"""Physical erasure of one content epoch of a memory: every item, index entry, counter and S3
object it left. Used by clear, memory delete and the cleanup.

Visibility never depends on this: a clear first moves the asset to a new epoch (atomically, with
a durable purge record), and readers only ever look at the current epoch. This module then deletes
the old epoch's data in bulk — BatchWriteItem (25 keys) and DeleteObjects (1,000 keys) in parallel
— until done or until the deadline, when the purge record lets a continuation or the cleanup
finish the job.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Callable, Iterator

from . import items, layout
from .dal import blobs
from .dal.aws import gather
from .dal.models import Item, SceneEntry

PURGE_PK = "PURGE"
RECENT_S = 5  # objects younger than the epoch bump (with clock-skew margin) are checked one by one
BATCH = 25  # BatchWriteItem limit
PARALLEL = 8


@dataclass
class Result:
    l0: int = 0
    l1: int = 0
    l2: int = 0
    l3: int = 0
    files: int = 0
    done: bool = False

    def counts(self) -> dict[str, int]:
        return {"l0_deleted": self.l0, "l1_deleted": self.l1, "l2_deleted": self.l2, "l3_deleted": self.l3,
                "profile_deleted": self.l2 + self.l3, "files_deleted": self.files}


@dataclass
class Deadline:
    at: float

    @classmethod
    def after(cls, seconds: float) -> "Deadline":
        return cls(time.monotonic() + seconds)

    def passed(self) -> bool:
        return time.monotonic() >= self.at


@dataclass(frozen=True)
class Target:
    memory_id: str
    team_id: str
    agent_id: str
    epoch: int
    bumped_ms: int = 0  # when the epoch was retired

    @property
    def record_sk(self) -> str:
        return f"{self.team_id}:{self.agent_id}#{int(self.epoch)}"


def record(target: Target) -> Item:
    """The durable note that ``target`` still has data to erase (pk PURGE)."""
    return Item(PURGE_PK, target.record_sk, id=target.memory_id, created_at=target.bumped_ms)


def pending() -> Iterator[Target]:
    for item in Item.query(PURGE_PK, consistent_read=True):
        team_agent, _, epoch = item.sk.rpartition("#")
        team_id, _, agent_id = team_agent.partition(":")
        yield Target(item.id, team_id, agent_id, int(epoch), int(item.created_at or 0))


def forget(target: Target) -> None:
    Item(PURGE_PK, target.record_sk).delete()


def _delete_keys(keys: list[tuple[str, str]]) -> None:
    def one(chunk: list[tuple[str, str]]) -> None:
        with Item.batch_write() as batch:  # retries unprocessed items itself
            for pk, sk in chunk:
                batch.delete(Item(pk, sk))

    chunks = [keys[i : i + BATCH * 4] for i in range(0, len(keys), BATCH * 4)]
    for start in range(0, len(chunks), PARALLEL):
        gather(*[lambda c=c: one(c) for c in chunks[start : start + PARALLEL]])


def _delete_scene_entries(entries: list[SceneEntry]) -> None:
    def one(chunk: list[SceneEntry]) -> None:
        with SceneEntry.batch_write() as batch:
            for entry in chunk:
                batch.delete(entry)

    chunks = [entries[i : i + BATCH * 4] for i in range(0, len(entries), BATCH * 4)]
    for start in range(0, len(chunks), PARALLEL):
        gather(*[lambda c=c: one(c) for c in chunks[start : start + PARALLEL]])


def _paged(query: Callable[[Any], Any], deadline: Deadline, page: int = 1000) -> Iterator[list[Any]]:
    """Pages of a PynamoDB query, stopping early when the deadline passes."""
    last = None
    while True:
        results = query(last)
        batch = list(results)
        if batch:
            yield batch
        last = results.last_evaluated_key
        if not last or deadline.passed():
            return


def _retired(blob: blobs.Blob | None, epoch: int) -> bool:
    """Written in ``epoch`` or before (epochs only grow, so later ones belong to live data)."""
    try:
        return blob is not None and int(blob.metadata.get("epoch", "0")) <= epoch
    except ValueError:
        return True


def _objects(target: Target, result: Result, deadline: Deadline) -> bool:
    """Delete the S3 objects of this epoch and older ones under the memory's prefix; objects of a
    later epoch (written after the clear) stay. True when none is left."""
    prefix = layout.prefix(target.team_id, target.agent_id)
    persona = layout.persona_key(target.team_id, target.agent_id)
    paginator = blobs.s3().get_paginator("list_objects_v2")
    recent_after = datetime.fromtimestamp((target.bumped_ms / 1000) - RECENT_S, tz=timezone.utc)
    from .settings import get_settings

    for page in paginator.paginate(Bucket=get_settings().bucket, Prefix=prefix, PaginationConfig={"PageSize": 1000}):
        listed = page.get("Contents", [])
        doomed = [o for o in listed if o["LastModified"] < recent_after]
        recent = [o for o in listed if o["LastModified"] >= recent_after]
        if recent:  # written around the bump: look at each one's epoch
            heads = gather(*[lambda o=o: blobs.head(o["Key"]) for o in recent])
            doomed += [o for o, h in zip(recent, heads) if _retired(h, target.epoch)]
        if doomed:
            result.files += blobs.delete_keys([o["Key"] for o in doomed], [o.get("ETag") for o in doomed])
            result.l3 = max(result.l3, int(any(o["Key"] == persona for o in doomed)))
        if deadline.passed():
            return False
    return True


def _scenes(target: Target, result: Result, deadline: Deadline) -> bool:
    partition = layout.scene_scope(target.team_id, target.agent_id, target.epoch)
    for entries in _paged(lambda last: SceneEntry.query(partition, consistent_read=True, last_evaluated_key=last,
                                                         limit=1000, attributes_to_get=["scope", "path"]),
                          deadline):
        _delete_scene_entries(entries)
        result.l2 += len(entries)
    return not deadline.passed()


def _partition(pk: str, result: Result, deadline: Deadline) -> bool:
    for rows in _paged(lambda last: Item.query(pk, consistent_read=True, last_evaluated_key=last, limit=1000,
                                               attributes_to_get=["pk", "sk"]), deadline):
        _delete_keys([(r.pk, r.sk) for r in rows])
        result.l0 += sum(1 for r in rows if r.sk.startswith("msg-"))
        result.l1 += sum(1 for r in rows if r.sk.startswith("atom-"))
    return not deadline.passed()


def _items(target: Target, result: Result, deadline: Deadline, user_id: str | None = None) -> bool:
    counters = items.counter_pk(target.team_id, target.agent_id, target.epoch)
    users = {user_id} if user_id is not None else {
        c.sk.split(items.SEP)[1] for c in Item.query(counters, consistent_read=True, attributes_to_get=["pk", "sk"])}
    for user in sorted(users):
        for pk in (items.l0_pk(target.team_id, target.agent_id, target.epoch, user),
                   items.l1_pk(target.team_id, target.agent_id, target.epoch, user)):
            if not _partition(pk, result, deadline):
                return False
    return True


def _counters(target: Target) -> None:
    pk = items.counter_pk(target.team_id, target.agent_id, target.epoch)
    _delete_keys([(c.pk, c.sk) for c in Item.query(pk, consistent_read=True, attributes_to_get=["pk", "sk"])])


def run(target: Target, deadline: Deadline) -> Result:
    """Erase what ``target`` names, as far as the deadline allows (``done`` says if all went)."""
    result = Result()
    finished = (_objects(target, result, deadline) and _scenes(target, result, deadline)
                and _items(target, result, deadline))
    if finished:
        _counters(target)
    result.done = finished
    return result
