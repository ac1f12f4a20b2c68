"""The scene index (ScenesTable): one entry per L2 path of a (team, agent).

An entry names the content epoch it belongs to (entries of a cleared epoch are invisible at once
and purged later) and the ``gen`` and ETag of the object version it indexes. ``gen`` grows with
every write and removal of the path within an epoch — a removal leaves a tombstone (``removed``) —
so the index only ever moves forward and a removal can tell exactly which object version it
removed. The partition holds no epoch, so a write reads its entry in the same round trip as the
asset that tells it the epoch.
"""

from __future__ import annotations

from typing import Any

from pynamodb.exceptions import DoesNotExist

from . import assets, audit, layout, views
from .concurrency import for_each, in_batches
from .errors import Cancelled
from .models import SceneEntry, snapshot
from .transactions import MAX_ACTIONS, Transaction


def get(team_id: str, agent_id: str, path: str) -> views.SceneEntry | None:
    try:
        return _view(SceneEntry.get(layout.scene_scope(team_id, agent_id), path, consistent_read=True))
    except DoesNotExist:
        return None


def current(entry: views.SceneEntry | None, epoch: int) -> views.SceneEntry | None:
    """The entry if it belongs to ``epoch`` (tombstones included)."""
    return entry if entry is not None and int(entry.epoch) == int(epoch) else None


def commit_write(
    memory_id: str,
    team_id: str,
    agent_id: str,
    epoch: int,
    path: str,
    *,
    gen: int,
    version: int,
    summary: str | None,
    created_at: str,
    updated_at: str,
    size: int,
    etag: str,
    event: views.AuditEvent | None,
) -> None:
    """Index the object version just written — unless the entry already passed this gen in this
    epoch — and record its audit event, in one transaction. Cancelled: 'epoch' (a clear moved the
    memory on), 'entry' (a later write or a removal got there first)."""
    entry = SceneEntry(layout.scene_scope(team_id, agent_id), path)
    actions = [
        SceneEntry.epoch.set(epoch),
        SceneEntry.gen.set(gen),
        SceneEntry.version.set(version),
        SceneEntry.created_at.set(created_at),
        SceneEntry.updated_at.set(updated_at),
        SceneEntry.size.set(size),
        SceneEntry.etag.set(etag),
        SceneEntry.removed.set(False),
        SceneEntry.summary.set(summary) if summary else SceneEntry.summary.remove(),
    ]
    newer = (
        SceneEntry.gen.does_not_exist()
        | (SceneEntry.epoch < epoch)
        | ((SceneEntry.epoch == epoch) & (SceneEntry.gen < gen))
    )
    transaction = Transaction()
    assets.guard_epoch(transaction, team_id, agent_id, epoch)
    transaction.update("entry", entry, actions, condition=newer)
    if event is not None:
        transaction.put("audit", event)
    transaction.commit()


def record_superseded(event: views.AuditEvent) -> None:
    """The audit event of a write whose version a later change already replaced in the index."""
    audit.put([event])


def remove(
    memory_id: str, epoch: int, entries: list[views.SceneEntry], stamp: str, events: list[views.AuditEvent]
) -> None:
    """Turn live entries into tombstones at exactly the gen read, with the audit events — one
    transaction per chunk (the events ride with the first). Cancelled: 'epoch', or
    'entry:<path>' when an entry moved on since it was read."""
    for index, part in enumerate(in_batches(entries, MAX_ACTIONS - 1 - len(events))):
        transaction = Transaction()
        team_id, agent_id = part[0].scope.split(":", 1)  # the entries' scope is their pair
        assets.guard_epoch(transaction, team_id, agent_id, epoch)
        for entry in part:
            unchanged = (SceneEntry.epoch == epoch) & (SceneEntry.gen == int(entry.gen)) & (SceneEntry.removed == False)  # noqa: E712
            transaction.update(
                f"entry:{entry.path}",
                entry,
                [SceneEntry.removed.set(True), SceneEntry.updated_at.set(stamp)],
                condition=unchanged,
            )
        if index == 0:
            for event in events:
                transaction.put("audit", event)
        transaction.commit()


def _live(epoch: int) -> Any:
    return (SceneEntry.epoch == epoch) & (SceneEntry.removed == False)  # noqa: E712


def live(team_id: str, agent_id: str, epoch: int, prefix: str, after: str | None, limit: int) -> list[views.SceneEntry]:
    """Up to ``limit`` live entries of ``epoch`` under ``prefix``, in path (UTF-8 byte) order,
    after ``after``."""
    scope = layout.scene_scope(team_id, agent_id)
    key = SceneEntry.path > after if after is not None else SceneEntry.path.startswith(prefix) if prefix else None
    found: list[views.SceneEntry] = []
    for entry in SceneEntry.query(
        scope, key, filter_condition=_live(epoch), consistent_read=True, page_size=min(limit, 1000)
    ):
        if prefix and not entry.path.startswith(prefix):
            break  # past the prefix: nothing later can match
        found.append(_view(entry))
        if len(found) >= limit:
            break
    return found


def count(team_id: str, agent_id: str, epoch: int, prefix: str) -> int:
    condition = SceneEntry.path.startswith(prefix) if prefix else None
    return SceneEntry.count(
        layout.scene_scope(team_id, agent_id), condition, filter_condition=_live(epoch), consistent_read=True
    )


def retired(
    team_id: str, agent_id: str, epoch: int, limit: int = 1000, after: dict[str, Any] | None = None
) -> tuple[list[views.SceneEntry], dict[str, Any] | None]:
    """One page of the entries of ``epoch`` or older (live ones and tombstones)."""
    result = SceneEntry.query(
        layout.scene_scope(team_id, agent_id),
        filter_condition=SceneEntry.epoch <= epoch,
        consistent_read=True,
        limit=limit,
        last_evaluated_key=after,
    )
    page = [_view(entry) for entry in result]
    return page, result.last_evaluated_key


def delete_retired(entries: list[views.SceneEntry], epoch: int) -> int:
    """Delete entries still of ``epoch`` or older; an entry rewritten in a later epoch meanwhile stays."""

    def one(part: list[views.SceneEntry]) -> int:
        transaction = Transaction()
        for entry in part:
            transaction.delete(f"entry:{entry.path}", entry, condition=SceneEntry.epoch <= epoch)
        try:
            transaction.commit()
            return len(part)
        except Cancelled as exc:
            moved = {name.split(":", 1)[1] for name in exc.failed}
            return one([e for e in part if e.path not in moved]) if len(moved) < len(part) else 0

    return sum(for_each(one, in_batches(entries, MAX_ACTIONS)))


def under(team_id: str, agent_id: str, folder: str) -> list[views.SceneEntry]:
    """Every entry under a folder path, of any epoch (callers pick the current one)."""
    return [
        _view(entry)
        for entry in SceneEntry.query(
            layout.scene_scope(team_id, agent_id), SceneEntry.path.startswith(folder), consistent_read=True
        )
    ]


def old_tombstones(team_id: str, agent_id: str, before: str) -> list[views.SceneEntry]:
    """Tombstones of files removed before ``before`` (a time in the response format)."""
    return [
        _view(entry)
        for entry in SceneEntry.query(
            layout.scene_scope(team_id, agent_id),
            filter_condition=(SceneEntry.removed == True) & (SceneEntry.updated_at < before),  # noqa: E712
            consistent_read=True,
        )
    ]


def drop_tombstones(entries: list[views.SceneEntry]) -> int:
    """Forget tombstones (still unchanged) — they only matter while a write could race the removal."""
    dropped = 0
    for entry in entries:
        transaction = Transaction()
        transaction.delete(
            "entry",
            entry,
            condition=(SceneEntry.removed == True)  # noqa: E712
            & (SceneEntry.gen == int(entry.gen))
            & (SceneEntry.epoch == int(entry.epoch)),
        )
        try:
            transaction.commit()
            dropped += 1
        except Cancelled:
            pass
    return dropped


def _view(entry: SceneEntry) -> views.SceneEntry:
    return snapshot(views.SceneEntry, entry)
