"""L2 scenario files (§5).

The S3 object is the source of truth for a file's content and version: every write is a
compare-and-swap on it (``IfMatch`` on the ETag we read, ``IfNoneMatch: *`` for a new file), so
concurrent writers get distinct, gap-free versions and the stored file is always the one with the
highest version issued. The scene index in DynamoDB (path → version, summary, times, size) serves
``ls`` and ``count``; it is updated after the object, only ever forwards (``version < :new``).
"""

from __future__ import annotations

import random
import time
from typing import Any

from pynamodb.exceptions import TransactWriteError

from . import assets, audit, items, layout, meta, tokens
from .audit import Event
from .clock import format_ms, now_ms
from .dal import blobs
from .dal.aws import gather
from .dal.models import Asset, AuditEvent, SceneEntry
from .edge import Isolation, current
from .errors import Conflict, Unavailable

WRITE_DEADLINE_S = 20.0


def _visible(blob: blobs.Blob | None, asset: Asset | None) -> blobs.Blob | None:
    """The object if it belongs to the asset's current epoch (older epochs are cleared)."""
    if blob is None or asset is None or blob.metadata.get("epoch") != str(int(asset.epoch)):
        return None
    return blob


def _version(blob: blobs.Blob | None) -> int:
    try:
        return int(blob.metadata.get("version", "0")) if blob else 0
    except ValueError:
        return 0


def _missing(scope: Isolation, path: str) -> dict[str, Any]:
    return {"path": path, "content": None, "version": None, "summary": None, "created_at": None,
            "updated_at": None, "team_id": scope.team_id, "agent_id": scope.agent_id}


def read(scope: Isolation, path: str) -> dict[str, Any]:
    key = layout.scene_key(scope.team_id, scope.agent_id, path)
    asset, blob = gather(lambda: assets.for_scope(scope), lambda: blobs.get(key))
    current().check_access()
    blob = _visible(blob, asset)
    if blob is None or blob.text is None:
        return _missing(scope, path)
    keys, _ = meta.split(blob.text)
    return {"path": path, "content": blob.text, "version": _version(blob), "summary": keys.get("summary") or None,
            "created_at": keys.get("created_at"), "updated_at": keys.get("updated_at"),
            "team_id": scope.team_id, "agent_id": scope.agent_id}


def _mismatch(expected: int, version: int) -> Conflict:
    return Conflict(f"expected_version: {expected} but the file is at {version}", {"current_version": version})


def write(scope: Isolation, path: str, content: str, summary: str | None,
          expected_version: int | None) -> dict[str, Any]:
    ctx = current()
    key = layout.scene_key(scope.team_id, scope.agent_id, path)
    body = meta.strip(content)
    deadline = time.monotonic() + WRITE_DEADLINE_S
    for attempt in range(10_000):
        raw_asset, blob = gather(lambda: assets.get(scope.memory_id), lambda: blobs.get(key))
        principal = ctx.check_access()
        if raw_asset is None and expected_version:
            # no asset, so no file: refuse before ensure() creates the asset (nothing is written)
            raise _mismatch(expected_version, 0)
        asset, _ = assets.ensure(raw_asset, scope.team_id, scope.agent_id, owner=principal.key_id)
        live = _visible(blob, asset)
        version = _version(live)
        if expected_version is not None and expected_version != version:
            raise _mismatch(expected_version, version)
        previous, _ = meta.split(live.text or "") if live else ({}, "")
        stamp = format_ms(now_ms())
        created_at = previous.get("created_at", stamp) if live else stamp
        new_summary = previous.get("summary") if summary is None else summary
        text = meta.render(version=version + 1, created_at=created_at, updated_at=stamp,
                           summary=new_summary or None, previous=previous, content=body)
        try:
            blobs.put(key, text, {"epoch": str(int(asset.epoch)), "version": str(version + 1)},
                      if_match=blob.etag if blob else None)
        except blobs.PreconditionFailed:
            if time.monotonic() > deadline:
                raise Unavailable("scenario/write: too many concurrent writers, try again") from None
            time.sleep(random.uniform(0, min(0.05, 0.002 * (attempt + 1))))
            continue
        size = len(text.encode("utf-8"))
        event = audit.build([Event("scenario_write", "L2", path, 1)], memory_id=scope.memory_id,
                            team_id=scope.team_id, actor=principal.key_id, request_id=ctx.request_id)[0]
        if _index(scope, asset, path, version + 1, new_summary or None, created_at, stamp, size, event):
            break
        # a clear retired this epoch between our read and now: write again, into the new one
    new_version = version + 1
    return {"path": path, "version": new_version, "created": new_version == 1, "updated_at": stamp,
            "created_at": created_at, "team_id": scope.team_id, "agent_id": scope.agent_id}


def _index(scope: Isolation, asset: Asset, path: str, version: int, summary: str | None, created_at: str,
           updated_at: str, size: int, event: AuditEvent) -> bool:
    """Index the version just stored, only ever forwards, and record its audit event — one
    transaction, so a write costs three sequential round trips (read, put, this). False if the
    asset's epoch moved on (a clear happened): the object we wrote is then invisible and the
    write must be redone."""
    entry = SceneEntry(layout.scene_scope(scope.team_id, scope.agent_id, asset.epoch), path)
    actions = [SceneEntry.version.set(version), SceneEntry.created_at.set(created_at),
               SceneEntry.updated_at.set(updated_at), SceneEntry.size.set(size),
               SceneEntry.summary.set(summary) if summary else SceneEntry.summary.remove()]

    def build(transaction: Any) -> None:
        items.epoch_guard(transaction, scope.memory_id, int(asset.epoch))
        transaction.update(entry, actions=actions,
                           condition=SceneEntry.version.does_not_exist() | (SceneEntry.version < version))
        transaction.save(event)

    try:
        items.transact(build)
    except TransactWriteError as exc:
        failed = items.failed_conditions(exc)
        if 0 in failed:
            return False
        if failed != [1]:
            raise
        event.save()  # only the version condition failed: a newer version is already indexed
    return True


def _entry(scope: Isolation, item: SceneEntry) -> dict[str, Any]:
    return {"path": item.path, "summary": item.summary or None, "version": int(item.version),
            "size": int(item.size), "created_at": item.created_at, "updated_at": item.updated_at,
            "team_id": scope.team_id, "agent_id": scope.agent_id}


def _prefix_condition(prefix: str) -> Any:
    return SceneEntry.path.startswith(prefix) if prefix else None


def ls(scope: Isolation, prefix: str, limit: int, next_token: str | None) -> dict[str, Any]:
    filters = {"route": "scenario/ls", "team": scope.team_id, "agent": scope.agent_id, "prefix": prefix}
    after = tokens.decode(next_token, filters) if next_token is not None else None
    asset = assets.for_scope(scope)
    current().check_access()
    if asset is None:
        return {"entries": [], "scenes": [], "total": 0}
    partition = layout.scene_scope(scope.team_id, scope.agent_id, asset.epoch)
    start = {"scope": {"S": partition}, "path": {"S": after}} if after else None

    def page() -> list[SceneEntry]:
        return list(SceneEntry.query(partition, _prefix_condition(prefix), consistent_read=True,
                                     limit=limit + 1, last_evaluated_key=start, page_size=limit + 1))

    items, total = gather(page, lambda: SceneEntry.count(partition, _prefix_condition(prefix),
                                                         consistent_read=True))
    entries = [_entry(scope, item) for item in items[:limit]]
    answer: dict[str, Any] = {"entries": entries, "scenes": entries, "total": total}
    if len(items) > limit:
        answer["next_token"] = tokens.encode(entries[-1]["path"], filters)
    return answer


def count(scope: Isolation, prefix: str) -> dict[str, Any]:
    asset = assets.for_scope(scope)
    current().check_access()
    total = 0
    if asset is not None:
        partition = layout.scene_scope(scope.team_id, scope.agent_id, asset.epoch)
        total = SceneEntry.count(partition, _prefix_condition(prefix), consistent_read=True)
    return {"count": total, "total": total}


def rm(scope: Isolation, path: str) -> dict[str, Any]:
    ctx = current()
    asset = assets.for_scope(scope)
    principal = ctx.check_access()
    if asset is None:
        return {"success": True, "deleted": 0, "audit_ids": []}
    partition = layout.scene_scope(scope.team_id, scope.agent_id, asset.epoch)
    if path.endswith("/"):
        entries = list(SceneEntry.query(partition, SceneEntry.path.startswith(path), consistent_read=True))
        stored = [k for k, _ in blobs.list_keys(layout.scene_key(scope.team_id, scope.agent_id, path))]
    else:
        key = layout.scene_key(scope.team_id, scope.agent_id, path)
        entry, blob = gather(lambda: _get_entry(partition, path), lambda: blobs.head(key))
        entries = [entry] if entry else []
        if not entries and _visible(blob, asset):
            entries = [SceneEntry(partition, path)]
        stored = [key] if blob else []
    keys = sorted(set(stored) | {layout.scene_key(scope.team_id, scope.agent_id, e.path) for e in entries})
    gather(lambda: blobs.delete_keys(keys), lambda: _unindex(entries))
    audit_ids = audit.record([Event("scenario_rm", "L2", path, len(entries))], memory_id=scope.memory_id,
                             team_id=scope.team_id, actor=principal.key_id, request_id=ctx.request_id)
    return {"success": True, "deleted": len(entries), "audit_ids": audit_ids}


def _get_entry(partition: str, path: str) -> SceneEntry | None:
    try:
        return SceneEntry.get(partition, path, consistent_read=True)
    except SceneEntry.DoesNotExist:
        return None


def _unindex(entries: list[SceneEntry]) -> None:
    if not entries:
        return
    with SceneEntry.batch_write() as batch:
        for entry in entries:
            batch.delete(entry)
