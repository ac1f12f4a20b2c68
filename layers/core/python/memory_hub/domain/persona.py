"""L3 persona: ``persona.md`` exactly as written; version and times in the object's metadata.

Before an overwrite the previous persona is copied server-side (``CopySourceIfMatch``, so the copy
is exactly the version replaced) to ``.backup/persona/persona_<stamp>_<version>.md``; the name is
derived from the replaced persona itself, so racing writers copy to the same name. Only the 3
newest backups are kept.
"""

from __future__ import annotations

import re

from ..clock import compact_stamp, format_ms, now_ms, parse_ms
from ..observability import logger
from ..storage import assets as stored_assets
from ..storage import blobs, bucket
from ..storage.audit import EventContext, NewEvent, event_items
from ..storage.concurrency import parallel
from ..storage.errors import Cancelled
from . import assets
from .files import Draft, compare_and_swap, number, visible
from .principal import Authorize
from .results import Persona, PersonaCount, PersonaWritten
from .scope import Scope

KEEP_BACKUPS = 3
BACKUP_NAME = re.compile(r"persona_(\d{8}_\d{6})_(\d+)\.md$")


def _empty(scope: Scope) -> Persona:
    return Persona(
        content=None, version=None, created_at=None, updated_at=None, team_id=scope.team_id, agent_id=scope.agent_id
    )


def _current(scope: Scope, authorize: Authorize, *, body: bool) -> blobs.Blob | None:
    key = bucket.persona_key(scope.team_id, scope.agent_id)
    raw, blob = parallel(lambda: assets.of_scope(scope), lambda: (blobs.get if body else blobs.head)(key))
    authorize()
    asset = assets.owned_by(raw, scope.team_id, scope.agent_id)
    return visible(blob, asset.epoch if asset else None)


def read(scope: Scope, authorize: Authorize) -> Persona:
    live = _current(scope, authorize, body=True)
    if live is None:
        return _empty(scope)
    return Persona(
        content=live.text,
        version=number(live, "version"),
        created_at=live.metadata.get("created-at"),
        updated_at=live.metadata.get("updated-at"),
        team_id=scope.team_id,
        agent_id=scope.agent_id,
    )


def count(scope: Scope, authorize: Authorize) -> PersonaCount:
    live = _current(scope, authorize, body=False)
    return PersonaCount(total=1 if live is not None else 0, team_id=scope.team_id, agent_id=scope.agent_id)


def write(scope: Scope, content: str, authorize: Authorize, request_id: str) -> PersonaWritten:
    key = bucket.persona_key(scope.team_id, scope.agent_id)
    backed_up: list[tuple[int, str]] = []  # (epoch, key) of the backups this write made

    def prepare() -> Draft:
        raw, blob = parallel(lambda: assets.of_scope(scope), lambda: blobs.get(key))
        principal = authorize()
        asset = assets.ensure(raw, scope.team_id, scope.agent_id, principal.key_id)
        epoch = int(asset.epoch)
        # An earlier attempt that lost to a clear may have copied the retired persona after the
        # purge listed the backups: that copy must not outlive the clear.
        retired = [k for e, k in backed_up if e < epoch]
        if retired:
            blobs.delete_many(retired)
            backed_up[:] = [(e, k) for e, k in backed_up if e >= epoch]
        live = visible(blob, epoch)
        version = number(live, "version")
        if live is not None:
            backed_up.append((epoch, backup(scope, live, version)))
        stamp = format_ms(now_ms())
        created_at = live.metadata.get("created-at", stamp) if live else stamp
        metadata = {"epoch": str(epoch), "version": str(version + 1), "created-at": created_at, "updated-at": stamp}
        return Draft(
            content,
            metadata,
            blob,
            {
                "epoch": epoch,
                "version": version + 1,
                "created_at": created_at,
                "updated_at": stamp,
                "principal": principal,
            },
        )

    def commit(draft: Draft, etag: str) -> bool:
        facts = draft.facts
        context = EventContext(scope.team_id, facts["principal"].key_id, request_id, scope.agent_id, scope.memory_id)
        events = event_items([NewEvent("core_write", "L3", bucket.PERSONA, 1)], context)
        try:
            parallel(
                lambda: stored_assets.record_in_epoch(scope.team_id, scope.agent_id, facts["epoch"], events),
                lambda: _prune_quietly(scope),
            )
        except Cancelled:
            return False  # a clear retired the epoch we wrote into: write again, into the new one
        return True

    facts = compare_and_swap(key, "core/write", prepare, commit).facts
    return PersonaWritten(
        version=facts["version"],
        updated_at=facts["updated_at"],
        created_at=facts["created_at"],
        team_id=scope.team_id,
        agent_id=scope.agent_id,
    )


def backup(scope: Scope, live: blobs.Blob, version: int) -> str:
    updated = live.metadata.get("updated-at")
    stamp = compact_stamp(parse_ms(updated)) if updated else compact_stamp(now_ms())
    target = bucket.backup_key(scope.team_id, scope.agent_id, stamp, version)
    blobs.copy(live.key, target, if_match=live.etag)
    return target


def prune_backups(team_id: str, agent_id: str, keep: int = KEEP_BACKUPS) -> int:
    """Delete all but the ``keep`` newest persona backups (by version); how many went."""
    backups = []
    for key in blobs.keys_under(bucket.backup_prefix(team_id, agent_id)):
        match = BACKUP_NAME.search(key)
        if match:
            backups.append((int(match.group(2)), match.group(1), key))
    backups.sort(reverse=True)
    doomed = [key for _, _, key in backups[keep:]]
    return blobs.delete_many(doomed) if doomed else 0


def _prune_quietly(scope: Scope) -> None:
    """Keeping only 3 backups is housekeeping: a failure here must not fail the write (the
    scheduled cleanup prunes too)."""
    try:
        prune_backups(scope.team_id, scope.agent_id)
    except Exception:
        logger.exception("persona backups not pruned")
