"""L3 persona (§6): ``persona.md`` exactly as written; version and times in object metadata.

Before an overwrite the previous persona is copied server-side (CopySourceIfMatch, so the copy is
exactly the version we replace) to ``.backup/persona/persona_<stamp>_<version>.md``. The backup
name is derived from the replaced persona itself, so writers that race copy to the same name.
"""

from __future__ import annotations

import random
import re
import time
from typing import Any

from . import assets, audit, layout
from .audit import Event
from .clock import compact_stamp, format_ms, now_ms, parse_time
from .dal import blobs
from .dal.aws import gather
from .edge import Isolation, current
from .errors import Unavailable
from .scenario import WRITE_DEADLINE_S, _version, _visible

_BACKUP_NAME = re.compile(r"persona_(\d{8}_\d{6})_(\d+)\.md$")


def _empty(scope: Isolation) -> dict[str, Any]:
    return {"content": None, "version": None, "created_at": None, "updated_at": None,
            "team_id": scope.team_id, "agent_id": scope.agent_id}


def read(scope: Isolation) -> dict[str, Any]:
    key = layout.persona_key(scope.team_id, scope.agent_id)
    asset, blob = gather(lambda: assets.for_scope(scope), lambda: blobs.get(key))
    current().check_access()
    blob = _visible(blob, asset)
    if blob is None:
        return _empty(scope)
    return {"content": blob.text, "version": _version(blob), "created_at": blob.metadata.get("created-at"),
            "updated_at": blob.metadata.get("updated-at"), "team_id": scope.team_id, "agent_id": scope.agent_id}


def count(scope: Isolation) -> dict[str, Any]:
    key = layout.persona_key(scope.team_id, scope.agent_id)
    asset, blob = gather(lambda: assets.for_scope(scope), lambda: blobs.head(key))
    current().check_access()
    return {"total": 1 if _visible(blob, asset) else 0, "team_id": scope.team_id, "agent_id": scope.agent_id}


def write(scope: Isolation, content: str) -> dict[str, Any]:
    ctx = current()
    key = layout.persona_key(scope.team_id, scope.agent_id)
    deadline = time.monotonic() + WRITE_DEADLINE_S
    for attempt in range(10_000):
        raw_asset, blob = gather(lambda: assets.get(scope.memory_id), lambda: blobs.head(key))
        principal = ctx.check_access()
        asset, _ = assets.ensure(raw_asset, scope.team_id, scope.agent_id, owner=principal.key_id)
        live = _visible(blob, asset)
        version = _version(live)
        if live is not None:
            _backup(scope, live, version)
        stamp = format_ms(now_ms())
        created_at = live.metadata.get("created-at", stamp) if live else stamp
        metadata = {"epoch": str(int(asset.epoch)), "version": str(version + 1), "created-at": created_at,
                    "updated-at": stamp}
        try:
            blobs.put(key, content, metadata, if_match=blob.etag if blob else None)
        except blobs.PreconditionFailed:
            if time.monotonic() > deadline:
                raise Unavailable("core/write: too many concurrent writers, try again") from None
            time.sleep(random.uniform(0, min(0.05, 0.002 * (attempt + 1))))
            continue
        now_asset, _, _ = gather(
            lambda: assets.get(scope.memory_id), lambda: prune_backups(scope.team_id, scope.agent_id),
            lambda: audit.record([Event("core_write", "L3", layout.PERSONA, 1)], memory_id=scope.memory_id,
                                 team_id=scope.team_id, actor=principal.key_id, request_id=ctx.request_id))
        if now_asset is not None and int(now_asset.epoch) == int(asset.epoch):
            break
        # a clear retired this epoch while we wrote: the persona is invisible, write it again
    return {"version": version + 1, "updated_at": stamp, "created_at": created_at,
            "team_id": scope.team_id, "agent_id": scope.agent_id}


def _backup(scope: Isolation, live: blobs.Blob, version: int) -> None:
    updated = live.metadata.get("updated-at")
    stamp = compact_stamp(parse_time(updated)) if updated else compact_stamp(now_ms())
    target = layout.backup_key(scope.team_id, scope.agent_id, stamp, version)
    blobs.copy(live.key, target, if_match=live.etag)


def prune_backups(team_id: str, agent_id: str, keep: int = layout.KEEP_PERSONA_BACKUPS) -> int:
    """Delete all but the ``keep`` newest persona backups (by version); returns how many went."""
    prefix = layout.prefix(team_id, agent_id) + layout.PERSONA_BACKUPS
    backups = []
    for key, _ in blobs.list_keys(prefix):
        match = _BACKUP_NAME.search(key)
        if match:
            backups.append((int(match.group(2)), match.group(1), key))
    backups.sort(reverse=True)
    doomed = [key for _, _, key in backups[keep:]]
    return blobs.delete_keys(doomed) if doomed else 0
