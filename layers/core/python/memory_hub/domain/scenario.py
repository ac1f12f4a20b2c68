"""L2 scenario files: markdown files at paths, each with a META block (version, times, summary).

The S3 object holds a file's content and META block; the scene index holds, per path, the version
``ls`` and ``count`` report. A write is a compare-and-swap on the object, then one transaction that
indexes it (forwards only) and records its audit event; a removal turns index entries into
tombstones (with its audit event), then deletes exactly the object versions it removed. Once writes
stop, ``read``, ``ls`` and ``count`` agree: the object always holds the highest version issued, and
the index only moves forwards, so it ends at that same version.
"""

from __future__ import annotations

from typing import Any

from ..clock import format_ms, now_ms
from ..storage import blobs, bucket, scenes
from ..storage.audit import EventContext, NewEvent, event_items
from ..storage.concurrency import parallel
from ..storage.counters import Where
from ..storage.errors import Cancelled
from ..storage.retry import attempts
from ..storage.views import SceneEntry
from . import assets, meta, tokens
from .errors import Conflict
from .files import Draft, compare_and_swap, number, visible
from .principal import Authorize
from .results import (
    ScenarioCounted,
    ScenarioEntry,
    ScenarioFile,
    ScenarioList,
    ScenarioRemoved,
    ScenarioWritten,
    fitting,
)
from .scope import Scope


def _missing(scope: Scope, path: str) -> ScenarioFile:
    return ScenarioFile(
        path=path,
        content=None,
        version=None,
        summary=None,
        created_at=None,
        updated_at=None,
        team_id=scope.team_id,
        agent_id=scope.agent_id,
    )


def read(scope: Scope, path: str, authorize: Authorize) -> ScenarioFile:
    raw, blob = parallel(
        lambda: assets.of_scope(scope), lambda: blobs.get(bucket.scene_key(scope.team_id, scope.agent_id, path))
    )
    authorize()
    asset = assets.owned_by(raw, scope.team_id, scope.agent_id)
    live = visible(blob, asset.epoch if asset else None)
    if live is None or live.text is None:
        return _missing(scope, path)
    keys, _ = meta.split(live.text)
    return ScenarioFile(
        path=path,
        content=live.text,
        version=number(live, "version"),
        summary=keys.get("summary") or None,
        created_at=keys.get("created_at"),
        updated_at=keys.get("updated_at"),
        team_id=scope.team_id,
        agent_id=scope.agent_id,
    )


def _mismatch(expected: int, version: int) -> Conflict:
    return Conflict(f"expected_version: {expected} but the file is at {version}", {"current_version": version})


def write(
    scope: Scope,
    path: str,
    content: str,
    summary: str | None,
    expected_version: int | None,
    authorize: Authorize,
    request_id: str,
) -> ScenarioWritten:
    """Write a file's next version: a compare-and-swap on its object (``_prepare`` reads and checks,
    ``_next_version`` renders), then ``_commit`` indexes it and records its audit event."""
    key = bucket.scene_key(scope.team_id, scope.agent_id, path)
    body = meta.strip(content)
    draft = compare_and_swap(
        key,
        "scenario/write",
        lambda: _prepare(scope, path, key, body, summary, expected_version, authorize),
        lambda draft, etag: _commit(scope, path, request_id, draft, etag),
    )
    facts = draft.facts
    return ScenarioWritten(
        path=path,
        version=facts["version"],
        created=facts["version"] == 1,
        updated_at=facts["updated_at"],
        created_at=facts["created_at"],
        team_id=scope.team_id,
        agent_id=scope.agent_id,
    )


def _prepare(
    scope: Scope,
    path: str,
    key: str,
    body: str,
    summary: str | None,
    expected_version: int | None,
    authorize: Authorize,
) -> Draft:
    """One attempt of a write: the asset (created by the first write), the index entry and the live
    object read side by side; the caller's ``expected_version`` checked against the live version."""
    raw, entry, blob = parallel(
        lambda: assets.of_scope(scope),
        lambda: scenes.get(scope.team_id, scope.agent_id, path),
        lambda: blobs.get(key),
    )
    principal = authorize()
    if raw is None and expected_version:
        raise _mismatch(expected_version, 0)  # no asset, so no file: refuse before creating one
    asset = assets.ensure(raw, scope.team_id, scope.agent_id, principal.key_id)
    epoch = int(asset.epoch)
    live = visible(blob, epoch)
    version = number(live, "version")
    if expected_version is not None and expected_version != version:
        raise _mismatch(expected_version, version)
    indexed = scenes.current(entry, epoch)
    gen = max(number(live, "gen"), int(indexed.gen) if indexed else 0) + 1
    facts: dict[str, Any] = {"epoch": epoch, "gen": gen, "version": version + 1, "principal": principal}
    return _next_version(blob, live, body, summary, facts)


def _next_version(
    blob: blobs.Blob | None, live: blobs.Blob | None, body: str, summary: str | None, facts: dict[str, Any]
) -> Draft:
    """The object's next text: ``body`` under a META block with the new version and times, the
    creation time and (unless one is given) the summary kept from the live version."""
    previous, _ = meta.split(live.text or "") if live else ({}, "")
    stamp = format_ms(now_ms())
    created_at = previous.get("created_at", stamp) if live else stamp
    new_summary = (previous.get("summary") if summary is None else summary) or None
    text = meta.render(
        version=facts["version"],
        created_at=created_at,
        updated_at=stamp,
        summary=new_summary,
        previous=previous,
        content=body,
    )
    return Draft(
        text,
        {"epoch": str(facts["epoch"]), "gen": str(facts["gen"]), "version": str(facts["version"])},
        blob,
        {
            "epoch": facts["epoch"],
            "gen": facts["gen"],
            "version": facts["version"],
            "summary": new_summary,
            "created_at": created_at,
            "updated_at": stamp,
            "principal": facts["principal"],
        },
    )


def _commit(scope: Scope, path: str, request_id: str, draft: Draft, etag: str) -> bool:
    """Index the version just put (forwards only) and record its audit event, in one transaction.
    False when a clear retired the epoch it was written into (the write goes again, into the new one)."""
    facts = draft.facts
    context = EventContext(scope.team_id, facts["principal"].key_id, request_id, scope.agent_id, scope.memory_id)
    event = event_items([NewEvent("scenario_write", "L2", path, 1)], context)[0]
    try:
        scenes.commit_write(
            scope.memory_id,
            scope.team_id,
            scope.agent_id,
            facts["epoch"],
            path,
            gen=facts["gen"],
            version=facts["version"],
            summary=facts["summary"],
            created_at=facts["created_at"],
            updated_at=facts["updated_at"],
            size=len(draft.text.encode("utf-8")),
            etag=etag,
            event=event,
        )
    except Cancelled as exc:
        if "epoch" in exc.failed:
            return False  # a clear retired the epoch we wrote into: write again, into the new one
        scenes.record_superseded(event)  # a later change already replaced this version
    return True


def _entry(scope: Scope, item: SceneEntry) -> ScenarioEntry:
    return ScenarioEntry(
        path=item.path,
        summary=item.summary or None,
        version=int(item.version),
        size=int(item.size),
        created_at=item.created_at,
        updated_at=item.updated_at,
        team_id=scope.team_id,
        agent_id=scope.agent_id,
    )


def ls(scope: Scope, prefix: str, limit: int, next_token: str | None, authorize: Authorize) -> ScenarioList:
    filters = {"route": "scenario/ls", "team": scope.team_id, "agent": scope.agent_id, "prefix": prefix}
    after = tokens.decode(next_token, filters) if next_token is not None else None

    def read(where: Where) -> list[Any]:
        return parallel(
            lambda: scenes.live(scope.team_id, scope.agent_id, where.epoch, prefix, after, limit + 1),
            lambda: scenes.count(scope.team_id, scope.agent_id, where.epoch, prefix),
        )

    asset, listed = assets.read_at_epoch(scope, authorize, read)
    if asset is None or listed is None:
        return ScenarioList(entries=[], scenes=[], total=0)
    found, total = listed
    entries = [_entry(scope, item) for item in found[:limit]]
    fit = fitting(entries, copies=2)  # entries and scenes: a page of long summaries stops short of 6 MB
    more = tokens.encode(entries[fit - 1].path, filters) if len(found) > limit or fit < len(entries) else None
    entries = entries[:fit]
    return ScenarioList(entries=entries, scenes=entries, total=total, next_token=more)


def count(scope: Scope, prefix: str, authorize: Authorize) -> ScenarioCounted:
    _, counted = assets.read_at_epoch(
        scope, authorize, lambda where: scenes.count(scope.team_id, scope.agent_id, where.epoch, prefix)
    )
    total = counted or 0
    return ScenarioCounted(count=total, total=total)


def rm(scope: Scope, path: str, authorize: Authorize, request_id: str) -> ScenarioRemoved:
    """Remove a file, or every file under a folder path ending in ``/``: what is live when the
    removal commits goes; a write that commits after it stays (never deleted by this call)."""
    principal = None
    for _ in attempts("scenario/rm"):
        if path.endswith("/"):
            raw, found = parallel(
                lambda: assets.of_scope(scope), lambda: scenes.under(scope.team_id, scope.agent_id, path)
            )
        else:
            raw, found = parallel(
                lambda: assets.of_scope(scope), lambda: [scenes.get(scope.team_id, scope.agent_id, path)]
            )
        principal = principal or authorize()
        asset = assets.owned_by(raw, scope.team_id, scope.agent_id)
        if asset is None:
            return ScenarioRemoved(success=True, deleted=0, audit_ids=[])
        epoch = int(asset.epoch)
        doomed = [e for e in found if e is not None and int(e.epoch) == epoch and not e.removed]
        if not doomed:
            return ScenarioRemoved(success=True, deleted=0, audit_ids=[])
        context = EventContext(scope.team_id, principal.key_id, request_id, scope.agent_id, scope.memory_id)
        events = event_items([NewEvent("scenario_rm", "L2", path, len(doomed))], context)
        try:
            scenes.remove(scope.memory_id, epoch, doomed, format_ms(now_ms()), events)
        except Cancelled:
            continue  # an entry moved on (or a clear happened) since we read it: look again
        blobs.delete_many(
            [bucket.scene_key(scope.team_id, scope.agent_id, e.path) for e in doomed], [e.etag for e in doomed]
        )
        assets.forget_exports(asset)  # an export may hold the removed files
        return ScenarioRemoved(success=True, deleted=len(doomed), audit_ids=[e.event_id for e in events])
    raise AssertionError("unreachable")
