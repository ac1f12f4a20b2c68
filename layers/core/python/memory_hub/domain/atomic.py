"""L1 atomic records: natural-key dedup on add, surgical update and delete by id."""

from __future__ import annotations

import hashlib
import json
from typing import Any, TypeVar, cast

from ..clock import format_ms, issued_here, now_ms, ordered_id
from ..storage import counters, postings, records
from ..storage.audit import EventContext, NewEvent, event_items
from ..storage.concurrency import parallel
from ..storage.counters import Where
from ..storage.errors import Cancelled
from ..storage.models import AuditEvent, Record
from ..storage.retry import attempts
from . import assets, erasure, meaning, retrieval
from .conversation import time_window
from .errors import Conflict, Invalid, NotFound
from .principal import Authorize
from .results import Mode, RecordAdded, RecordHit, RecordHits, RecordItem, Records, RecordsDeleted, RecordUpdated, Total
from .rules import clean_ids, trim
from .scope import Scope
from .search import term_counts

LAYER = "L1"
Item = TypeVar("Item", bound=RecordItem)
NOT_FOUND = "id: no such record"


def natural_key(task_id: str | None, type_: str, background: str, content: str) -> str:
    """Same content, type and background in the same task (no task is a value of its own)."""
    raw = json.dumps([task_id, type_, background, content], ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(raw.encode("utf-8")).hexdigest()


def searchable(content: str, background: str) -> str:
    return f"{content}\n{background}"


def as_item(scope: Scope, item: Record) -> RecordItem:
    return _answer(RecordItem, scope, item)


def _answer(kind: type[Item], scope: Scope, item: Record, **extra: Any) -> Item:
    """The record as answered (``RecordHit`` with ``score=…`` for a search hit)."""
    return kind(
        id=item.id,
        type=item.type,
        content=item.content,
        background=item.background or "",
        tags=list(item.tags or []),
        metadata=item.meta or {},
        version=int(item.version),
        reinforced_count=int(item.reinforced_count),
        team_id=scope.team_id,
        agent_id=scope.agent_id,
        user_id=item.user_id,
        task_id=item.task_id,
        session_id=item.session_id,
        created_at=format_ms(int(item.created_at)),
        updated_at=format_ms(int(item.updated_at)),
        **extra,
    )


def add(
    scope: Scope,
    content: str,
    type_: str,
    background: str,
    tags: list[str],
    metadata: dict[str, Any],
    authorize: Authorize,
) -> RecordAdded:
    raw = assets.of_scope(scope)
    principal = authorize()
    asset = assets.ensure(raw, scope.team_id, scope.agent_id, principal.key_id)
    key = natural_key(scope.task_id, type_, background, content)
    counts = term_counts(searchable(content, background))
    for _ in attempts("atomic/add"):
        where = assets.where_of(asset)
        now = now_ms()
        record = records.new(
            where,
            id=ordered_id("atom-"),
            user_id=scope.user_id,
            session_id=scope.session_id,
            task_id=scope.task_id,
            content=content,
            type=type_,
            background=background,
            tags=tags,
            meta=metadata,
            version=1,
            reinforced_count=1,
            created_at=now,
            updated_at=now,
            natural_key=key,
            terms=sum(counts.values()),
        )
        try:
            records.create(where, record, counts)
            meaning.embed_after_write(where, [meaning.piece(record)])  # only a new record: reinforcing never re-embeds
            return RecordAdded(id=record.id, version=1, created=True, reinforced_count=1)
        except Cancelled as exc:
            if "epoch" in exc.failed:  # a clear moved the memory on: add into the new epoch
                asset = assets.ensure(assets.of_scope(scope), scope.team_id, scope.agent_id, principal.key_id)
                continue
        holder = records.holder(where, scope.user_id, key)  # the natural key is taken: reinforce its record
        if holder is None:
            continue  # deleted or edited meanwhile: add again
        try:
            count = records.reinforce(where, holder, now_ms())
        except Cancelled as exc:
            if "epoch" in exc.failed:  # cleared after the guard was read: add into the new epoch
                asset = assets.ensure(assets.of_scope(scope), scope.team_id, scope.agent_id, principal.key_id)
            continue
        return RecordAdded(id=holder.id, version=int(holder.version), created=False, reinforced_count=count)
    raise AssertionError("unreachable")


def _get(scope: Scope, where: Where, atom_id: str) -> Record | None:
    """The record if it is in scope: a task_id in the request narrows it (session_id never does)."""
    if not issued_here("atom-", atom_id):
        return None
    record = records.get(where, scope.user_id, atom_id)
    if record is None or (scope.task_id is not None and record.task_id != scope.task_id):
        return None
    return record


def update(
    scope: Scope,
    atom_id: str,
    changes: dict[str, Any],
    expected_version: int | None,
    authorize: Authorize,
    request_id: str,
) -> RecordUpdated:
    asset, first = assets.read_at_epoch(scope, authorize, lambda where: _get(scope, where, atom_id))
    principal = authorize()
    if asset is None:
        raise NotFound(NOT_FOUND)
    where = assets.where_of(asset)
    context = EventContext(scope.team_id, principal.key_id, request_id, scope.agent_id, scope.memory_id)
    for attempt in attempts("atomic/update"):
        record = first if attempt == 0 else _get(scope, where, atom_id)
        if record is None:
            raise NotFound(NOT_FOUND)
        version = int(record.version)
        if expected_version is not None and expected_version != version:
            raise Conflict(
                f"expected_version: {expected_version} but the record is at {version}", {"current_version": version}
            )
        content = changes.get("content", record.content)
        background = changes.get("background", record.background or "")
        fields = {"content": content, "background": background}
        if "tags" in changes:
            fields["tags"] = changes["tags"]
        if "metadata" in changes:
            fields["meta"] = changes["metadata"]
        counts = term_counts(searchable(content, background))
        now = now_ms()
        event = event_items([NewEvent("atomic_update", LAYER, atom_id, 1)], context)[0]
        try:
            records.update(
                where,
                record,
                fields,
                natural_key(record.task_id, record.type, background, content),
                sum(counts.values()),
                now,
                event,
            )
            break
        except Cancelled as exc:
            if "epoch" in exc.failed:
                raise NotFound(NOT_FOUND) from None  # cleared meanwhile: the record is gone
            if "guard" in exc.failed:
                raise Conflict("content: another record already has this content, type and background") from None
            # the record changed (or vanished) between our read and our write: read again
    _reindex(scope, where, atom_id)
    if meaning.text_changed(record, content, background):  # re-embed only when the embedded text changed
        meaning.after_update(where, records.get(where, scope.user_id, atom_id))
    return RecordUpdated(id=atom_id, version=f"v{version + 1}", updated_at=format_ms(now))


def _reindex(scope: Scope, where: Where, atom_id: str) -> None:
    """Bring the record's postings to its current content; repeat while racing updates move it on,
    so the last one to finish always leaves the index matching the record."""
    for _ in attempts("atomic/update index"):
        record = records.get(where, scope.user_id, atom_id)
        if record is None:
            postings.erase_items(where.item_pk(LAYER, scope.user_id), [atom_id])
            return
        records.sync_postings(record, term_counts(searchable(record.content, record.background or "")))
        after = records.get(where, scope.user_id, atom_id)
        if after is not None and int(after.version) == int(record.version):
            return


def query(
    scope: Scope,
    type_: str | None,
    limit: int,
    offset: int,
    time_start: str | None,
    time_end: str | None,
    authorize: Authorize,
) -> Records:
    start, end = time_window(time_start, time_end)

    def read(where: Where) -> list[Any]:
        return parallel(
            lambda: list(records.newest(where, scope.user_id, type_, scope.task_id, start, end, offset + limit)),
            lambda: records.count(where, scope.user_id, type_, scope.task_id, start, end),
        )

    asset, found = assets.read_at_epoch(scope, authorize, read)
    if asset is None or found is None:
        return Records(items=[], total=0)
    page, total = found
    return Records(items=[as_item(scope, r) for r in page[offset : offset + limit]], total=total)


def count(scope: Scope, type_: str | None, time_start: str | None, time_end: str | None, authorize: Authorize) -> Total:
    start, end = time_window(time_start, time_end)
    _, total = assets.read_at_epoch(
        scope, authorize, lambda where: records.count(where, scope.user_id, type_, scope.task_id, start, end)
    )
    return Total(total=total or 0)


def search(
    scope: Scope,
    text: str,
    type_: str | None,
    limit: int,
    time_start: str | None,
    time_end: str | None,
    authorize: Authorize,
    mode: str | None = None,
) -> RecordHits:
    start, end = time_window(time_start, time_end)
    mode = retrieval.resolve_mode(mode, meaning.enabled())

    def keep(record: Record) -> bool:  # L1 time filters apply to updated_at
        if type_ is not None and record.type != type_:
            return False
        if scope.task_id is not None and record.task_id != scope.task_id:
            return False
        return (start is None or int(record.updated_at) >= start) and (end is None or int(record.updated_at) <= end)

    def run(where: Where) -> retrieval.Found:
        def by_meaning(depth: int) -> retrieval.Meant | None:
            return meaning.semantic(where, LAYER, scope.user_id, text, depth, task_id=scope.task_id, type_=type_)

        return retrieval.search(
            pk=where.item_pk(LAYER, scope.user_id),
            text=text,
            limit=limit,
            mode=mode,
            filters=postings.Filters(task_id=scope.task_id, type=type_),
            stats=lambda: counters.of_user(where, LAYER, scope.user_id),
            fetch=lambda ids: records.get_many(where, scope.user_id, ids),
            text_of=lambda r: searchable(r.content, r.background or ""),
            keep=keep,
            semantic=by_meaning if mode != "keyword" else None,
        )

    asset, result = assets.read_at_epoch(scope, authorize, run)
    if asset is None or result is None:
        return RecordHits(items=[], mode_used=cast(Mode, mode))
    return RecordHits(
        items=[_answer(RecordHit, scope, r, score=score) for r, score in result.items],
        mode_used=cast(Mode, result.mode_used),
    )


def delete(
    scope: Scope, ids: list[str], expected_versions: dict[str, int] | None, authorize: Authorize, request_id: str
) -> RecordsDeleted:
    wanted = clean_ids(ids)
    if not wanted:
        raise Invalid("ids: give at least one non-blank id")
    expected = {trim(k): v for k, v in (expected_versions or {}).items()}
    stray = [k for k in expected if k not in wanted]
    if stray:
        raise Invalid("expected_versions: keys must be in ids (" + ", ".join(stray[:5]) + ")")
    lookable = [i for i in wanted if issued_here("atom-", i)]
    asset, found = assets.read_at_epoch(
        scope, authorize, lambda where: records.get_many(where, scope.user_id, lookable) if lookable else {}
    )
    principal = authorize()
    if asset is None or found is None:
        return RecordsDeleted(deleted_count=0, deleted_ids=[], not_found_ids=wanted, audit_ids=[])
    where = assets.where_of(asset)
    in_scope = {i: r for i, r in found.items() if scope.task_id is None or r.task_id == scope.task_id}
    conflicts = [
        {"id": i, "expected": expected[i], "actual": int(in_scope[i].version)}
        for i in wanted
        if i in expected and i in in_scope and int(in_scope[i].version) != expected[i]
    ]
    if conflicts:
        raise Conflict(
            "expected_versions: some records have another version; nothing was deleted", {"conflicts": conflicts}
        )
    context = EventContext(scope.team_id, principal.key_id, request_id, scope.agent_id, scope.memory_id)

    def events(chunk: list[Record]) -> list[AuditEvent]:
        return event_items([NewEvent("delete", LAYER, r.id, 1) for r in chunk], context)

    # version-checked records first, so that (up to a transaction's worth) they go all or nothing
    doomed = sorted((in_scope[i] for i in wanted if i in in_scope), key=lambda r: r.id not in expected)
    try:
        removed, recorded = records.delete(
            where,
            doomed,
            events,
            at_version=set(expected),
            beside=lambda erased: erasure.forget_erased(asset, where, [r.id for r in erased]),
        )
    except records.VersionConflict as exc:
        raise Conflict(
            "expected_versions: a record was edited meanwhile; it was not deleted", {"conflicts": exc.conflicts}
        ) from None
    gone = {r.id for r in removed}
    return RecordsDeleted(
        deleted_count=len(gone),
        deleted_ids=[i for i in wanted if i in gone],
        not_found_ids=[i for i in wanted if i not in gone],
        audit_ids=[e.event_id for e in recorded],
    )
