"""L1 atomic records: natural-key dedup on add, surgical update and delete by id."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeVar, cast

from ..analysis import query_terms, searchable, term_counts
from ..clock import format_ms, issued_here, now_ms, ordered_id, time_window
from ..storage import counters, postings, records
from ..storage.audit import EventContext, NewEvent, event_items
from ..storage.concurrency import parallel
from ..storage.counters import Where
from ..storage.errors import Cancelled, Unfinished
from ..storage.retry import attempts
from ..storage.views import Asset, AuditEvent, Record
from . import assets, erasure, meaning, provenance, retrieval, vector_words
from .errors import Conflict, Invalid, NotFound
from .principal import Authorize
from .results import Mode, RecordAdded, RecordHit, RecordHits, RecordItem, Records, RecordsDeleted, RecordUpdated, Total
from .rules import clean_ids, trim
from .scope import Scope

LAYER = "L1"
Item = TypeVar("Item", bound=RecordItem)
NOT_FOUND = "id: no such record"


def natural_key(task_id: str | None, type_: str, background: str, content: str) -> str:
    """Same content, type and background in the same task (no task is a value of its own)."""
    raw = json.dumps([task_id, type_, background, content], ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(raw.encode("utf-8")).hexdigest()


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
        source_message_ids=list(item.sources or []),
        formed=bool(item.formed),
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
    source_message_ids: list[str] | None = None,
) -> RecordAdded:
    raw = assets.of_scope(scope)
    principal = authorize()
    asset = assets.ensure(raw, scope.team_id, scope.agent_id, principal.key_id)
    draft = Draft(scope, content, type_, background, tags, metadata, source_message_ids or [])
    added = write(asset, draft, principal.key_id)
    return RecordAdded(
        id=added.id, version=added.version, created=added.created, reinforced_count=added.reinforced_count
    )


@dataclass(frozen=True)
class Draft:
    """A record to add, as a client (or formation) gives it. ``id``: the id a new record gets (a
    formation run chooses it before writing, so a replay finds what it wrote)."""

    scope: Scope
    content: str
    type: str
    background: str
    tags: list[str]
    metadata: dict[str, Any]
    sources: list[str]
    formed: bool = False
    id: str | None = None


@dataclass(frozen=True)
class Written:
    id: str
    version: int
    created: bool
    reinforced_count: int
    where: Where


def write(asset: Asset, draft: Draft, owner: str) -> Written:
    """Add a record by the rules of ``atomic/add``: a new record, or the one holding its natural key
    reinforced (its sources joined; a client's add makes a formed record a client's for good). Its
    sources are checked before and after the write: a record never outlives its sources."""
    written = _write(asset, draft, owner)
    assert written is not None  # only formation's drafts are ever skipped
    return written


def write_formed(asset: Asset, draft: Draft, owner: str) -> Written | None:
    """``write`` for a formation run: None when a client's record holds the natural key (formation
    never writes one); a replay of a draft already written changes nothing and never reinforces."""
    return _write(asset, draft, owner)


def _write(asset: Asset, draft: Draft, owner: str) -> Written | None:
    scope = draft.scope
    key = natural_key(scope.task_id, draft.type, draft.background, draft.content)
    counts = term_counts(searchable(draft.content, draft.background))
    sources = provenance.check(assets.where_of(asset), scope.user_id, scope.task_id, draft.sources)
    ahead = _ahead(assets.where_of(asset), draft, key)
    in_vector = meaning.vector_ahead(ahead)
    for _ in attempts("atomic/add"):
        where = assets.where_of(asset)
        if draft.id is not None and (done := records.get(where, scope.user_id, draft.id)) is not None:
            return Written(done.id, int(done.version), True, int(done.reinforced_count), where)  # a replay
        record = _new_record(where, draft, key, counts, sources)
        provenance.cite(where, scope.user_id, record.id, sources)
        try:
            records.create(where, record, counts, in_vector=in_vector)
            return _created(asset, where, scope, record, draft.sources, owner, ahead)
        except Cancelled as exc:
            if "epoch" in exc.failed:  # a clear moved the memory on: add into the new epoch
                provenance.uncite(where, scope.user_id, record.id, sources)
                asset = assets.ensure(assets.of_scope(scope), scope.team_id, scope.agent_id, owner)
                continue
        holder = records.holder(where, scope.user_id, key)  # the natural key is taken: reinforce its record
        if _took_over(where, record, counts, holder, in_vector):
            return _created(asset, where, scope, record, draft.sources, owner, ahead)
        provenance.uncite(where, scope.user_id, record.id, sources)
        if holder is None:
            continue  # deleted or edited meanwhile: add again
        if _staged(where, holder):  # the race for its guard lost, or its import committed: look again
            asset = assets.ensure(assets.of_scope(scope), scope.team_id, scope.agent_id, owner)
            continue
        if draft.formed and not holder.formed:
            return None  # formation never touches a client's record
        if draft.id is not None and draft.id in (holder.absorbed or set()):
            return Written(holder.id, int(holder.version), False, int(holder.reinforced_count), where)  # a replay
        provenance.cite(where, scope.user_id, holder.id, sources)
        try:
            count = records.reinforce(
                where,
                holder,
                now_ms(),
                absorbed=[draft.id] if draft.id is not None else None,
                sources=sources,
                formed=False if holder.formed and not draft.formed else None,
            )
        except Cancelled as exc:
            if "epoch" in exc.failed:  # cleared after the guard was read: add into the new epoch
                asset = assets.ensure(assets.of_scope(scope), scope.team_id, scope.agent_id, owner)
            continue
        _recheck(asset, where, scope, holder.id, draft.sources, owner)
        return Written(holder.id, int(holder.version), False, count, where)
    raise AssertionError("unreachable")


def _ahead(where: Where, draft: Draft, key: str) -> meaning.Ahead | None:
    """Words in vectors: a new record is embedded before its write, which has no postings only if
    it got its vector — unless a record holds its content already (a reinforcing add never embeds;
    should that record go meanwhile, the new one gets postings)."""
    if not where.words or records.holder(where, draft.scope.user_id, key) is not None:
        return None
    return meaning.text_ahead(where, LAYER, meaning.record_text(draft.content, draft.background))


def _created(
    asset: Asset, where: Where, scope: Scope, record: Record, raw: list[str], owner: str, ahead: meaning.Ahead | None
) -> Written:
    meaning.embed_after_write(where, [meaning.piece(record)], ahead=ahead)  # a new record: reinforcing never re-embeds
    _recheck(asset, where, scope, record.id, raw, owner)
    return Written(record.id, 1, True, 1, where)


def _staged(where: Where, holder: Record | None) -> bool:
    """The record holding a natural key was written by an import still running: not there yet."""
    return holder is not None and holder.import_id is not None and holder.import_id in where.staged


def _took_over(where: Where, record: Record, counts: Any, holder: Record | None, in_vector: bool) -> bool:
    """The natural key is held by a record a running import staged: the new record takes its guard
    over, as if the staged one were not there yet (``staging.fold`` turns it into a reinforcement
    of this record once the import commits). False when the holder is not staged, or the race for
    the guard (or the import's commit) was lost."""
    if holder is None or not _staged(where, holder):
        return False
    try:
        records.create(where, record, counts, over=holder, in_vector=in_vector)
    except Cancelled:
        return False
    return True


def _new_record(where: Where, draft: Draft, key: str, counts: Any, sources: list[str]) -> Record:
    now = now_ms()
    scope = draft.scope
    return records.new(
        where,
        id=draft.id or ordered_id("atom-"),
        user_id=scope.user_id,
        session_id=scope.session_id,
        task_id=scope.task_id,
        content=draft.content,
        type=draft.type,
        background=draft.background,
        tags=draft.tags,
        meta=draft.metadata,
        version=1,
        reinforced_count=1,
        created_at=now,
        updated_at=now,
        natural_key=key,
        terms=sum(counts.values()),
        sources=sources or None,
        cited=set(sources) or None,
        formed=True if draft.formed else None,
    )


def _recheck(asset: Asset, where: Where, scope: Scope, atom_id: str, raw: list[str], actor: str) -> None:
    """After a write that cites messages: if one of them was erased meanwhile, the record goes too
    (an erasure that read the citations before they were written could not find it)."""
    if not raw:
        return
    absent = provenance.missing(where, scope.user_id, scope.task_id, provenance.cleaned(raw))
    if not absent:
        return
    record = records.get(where, scope.user_id, atom_id)
    if record is not None:
        context = EventContext(scope.team_id, actor, None, scope.agent_id, scope.memory_id)
        erasure.erase_records(asset, where, [record], context)
    raise provenance.unknown(raw, absent)


def _get(scope: Scope, where: Where, atom_id: str) -> Record | None:
    """The record if it is in scope: a task_id in the request narrows it (session_id never does),
    and an import still running has not written it yet as far as anyone can tell."""
    if not issued_here("atom-", atom_id):
        return None
    record = records.get(where, scope.user_id, atom_id)
    if record is None or (scope.task_id is not None and record.task_id != scope.task_id):
        return None
    return None if record.import_id is not None and record.import_id in where.staged else record


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
    raw_sources = changes.get("source_message_ids")
    sources = provenance.check(where, scope.user_id, scope.task_id, raw_sources) if raw_sources is not None else None
    for attempt in attempts("atomic/update"):
        record = _expected(first if attempt == 0 else _get(scope, where, atom_id), expected_version)
        version = int(record.version)
        fields = _changed(record, changes, sources)
        content, background = fields["content"], fields["background"]
        if sources is not None:  # replaced (the record still answers to every message it cited)
            provenance.cite(where, scope.user_id, atom_id, sources)
        now = now_ms()
        event = event_items([NewEvent("atomic_update", LAYER, atom_id, 1)], context)[0]
        changed = meaning.text_changed(record, content, background)
        text = meaning.record_text(content, background)
        ahead = meaning.text_ahead(where, LAYER, text) if changed else None  # words in vectors: ahead
        if _saved(where, record, fields, now, event, ahead):
            break
        meaning.settle(ahead)
    reindex_record(scope, where, atom_id)
    if changed:  # re-embed only when the embedded text changed
        meaning.after_update(where, records.get(where, scope.user_id, atom_id), (text, ahead))
    if raw_sources:
        _recheck(asset, where, scope, atom_id, raw_sources, principal.key_id)
    return RecordUpdated(id=atom_id, version=f"v{version + 1}", updated_at=format_ms(now))


def _expected(record: Record | None, expected_version: int | None) -> Record:
    """The record to update, at the version the caller expects (if they said one)."""
    if record is None:
        raise NotFound(NOT_FOUND)
    version = int(record.version)
    if expected_version is not None and expected_version != version:
        raise Conflict(
            f"expected_version: {expected_version} but the record is at {version}", {"current_version": version}
        )
    return record


def _changed(record: Record, changes: dict[str, Any], sources: list[str] | None) -> dict[str, Any]:
    """The record's fields as the update leaves them (content and background always named)."""
    fields: dict[str, Any] = {
        "content": changes.get("content", record.content),
        "background": changes.get("background", record.background or ""),
    }
    if "tags" in changes:
        fields["tags"] = changes["tags"]
    if "metadata" in changes:
        fields["meta"] = changes["metadata"]
    if sources is not None:
        fields["sources"] = sources
    if record.formed:  # a client's update makes a formed record the client's for good
        fields["formed"] = False
    return fields


def _saved(
    where: Where, record: Record, fields: dict[str, Any], now: int, event: Any, ahead: meaning.Ahead | None
) -> bool:
    """Write the update at the version read; False when the record changed (or vanished) between
    the read and the write (read again), a domain error when it cannot be made. Words in vectors:
    its terms go with its new vector if ``ahead`` got it, or stay with the one it has if its text
    is the same; else it has postings again."""
    content, background = fields["content"], fields["background"]
    counts = term_counts(searchable(content, background))
    key = natural_key(record.task_id, record.type, background, content)
    changed = meaning.text_changed(record, content, background)
    kept = meaning.vector_ahead(ahead) if changed else postings.in_vector(record)
    try:
        records.update(where, record, fields, key, sum(counts.values()), now, event, counts if kept else None)
    except Cancelled as exc:
        if "epoch" in exc.failed:
            raise NotFound(NOT_FOUND) from None  # cleared meanwhile: the record is gone
        if "guard" in exc.failed:
            raise Conflict("content: another record already has this content, type and background") from None
        return False
    return True


def reindex_record(scope: Scope, where: Where, atom_id: str) -> None:
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
            both=partial(vector_words.halves, asked(where)) if where.words else None,
        )

    def asked(where: Where) -> vector_words.Asked:
        return vector_words.Asked(
            where, LAYER, scope.user_id, text, query_terms(text), mode, task_id=scope.task_id, type_=type_
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
        return RecordsDeleted(deleted_count=0, deleted_ids=[], not_found_ids=wanted, files_deleted=0, audit_ids=[])
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
    forgetting = erasure.Forgetting(asset, where)
    try:
        removed, recorded = records.delete(
            where, doomed, events, at_version=set(expected), beside=forgetting, until=erasure.budget()
        )
    except Unfinished as cut:  # the formed files of what it erased go before the 503
        erasure.files_of_records(asset, where, cut.removed, context)
        raise
    except records.VersionConflict as exc:
        raise Conflict(
            "expected_versions: a record was edited meanwhile; it was not deleted", {"conflicts": exc.conflicts}
        ) from None
    gone = {r.id for r in removed}
    files = erasure.files_of_records(asset, where, removed, context)
    return RecordsDeleted(
        deleted_count=len(gone),
        deleted_ids=[i for i in wanted if i in gone],
        not_found_ids=[i for i in wanted if i not in gone],
        files_deleted=files.files_deleted + forgetting.exports,
        audit_ids=[e.event_id for e in recorded + files.events],
    )
