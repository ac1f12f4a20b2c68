"""An answer's entries written, by the rules of ``atomic/add`` and ``atomic/update``, idempotently.

The plan stored before anything is written names every id: an ``add`` the id its new record gets,
an ``update`` or ``supersede`` the record (and the version it was offered at). So applying a plan
again — a retry, a redelivered message — finds what it wrote and writes nothing twice: an add whose
record exists is done, one folded into a record holding its natural key is remembered there (and
never reinforces twice), an update whose record moved past the offered version is done, a
supersede whose record is gone is done. Formation writes only records it formed: an entry whose
natural key a client's record holds is skipped, and so is an update or supersede of a record a
client has touched since. A supersede stands only beside what replaces it: it is applied after the
answer's adds and updates, and skipped when none of them wrote."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ...analysis import searchable, term_counts
from ...clock import now_ms
from ...storage import postings, records
from ...storage.audit import EventContext, NewEvent, event_items
from ...storage.counters import Where
from ...storage.errors import Cancelled
from ...storage.views import Asset, AuditEvent
from .. import assets, atomic, erasure, meaning, provenance
from ..errors import Invalid
from ..scope import Scope

LAYER = "L1"
SYSTEM_FORMATION = "system:formation"


@dataclass
class Applied:
    """What a plan did: the records it added or folded into (``added``), updated and superseded,
    what it skipped, and the audit events of the run."""

    added: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    superseded: list[str] = field(default_factory=list)
    replayed: list[str] = field(default_factory=list)  # updated by an earlier try of the same plan
    skipped: int = 0
    events: list[AuditEvent] = field(default_factory=list)

    @property
    def touched(self) -> list[str]:
        return list(dict.fromkeys(self.added + self.updated))


def apply(asset: Asset, scope: Scope, plan: list[dict[str, Any]], context: EventContext) -> Applied:
    """Adds and updates first; then the supersedes, kept only when the answer added to or updated
    a record (one skipped — a client's natural key, a source erased meanwhile — replaces nothing),
    and never of a record the same answer updated."""
    done = Applied()
    superseding: list[dict[str, Any]] = []
    for entry in plan:
        op = entry.get("op")
        if op == "add":
            _add(asset, scope, entry, done)
        elif op == "update":
            _update(asset, scope, entry, context, done)
        elif op == "supersede":
            superseding.append(entry)
    for entry in superseding:
        wrote = done.touched or done.replayed  # a replay's updates were written by its first try
        if wrote and str(entry["record"]) not in done.updated + done.replayed:
            _supersede(asset, scope, entry, context, done)
        else:
            done.skipped += 1
    done.events = (
        event_items([NewEvent("formation", LAYER, i, 1) for i in done.added + done.updated + done.superseded], context)
        + done.events
    )
    return done


def _add(asset: Asset, scope: Scope, entry: dict[str, Any], done: Applied) -> None:
    draft = atomic.Draft(
        scope,
        str(entry["content"]),
        str(entry["type"]),
        "",
        [],
        {},
        list(entry["sources"]),
        formed=True,
        id=str(entry["id"]),
    )
    try:
        written = atomic.write_formed(asset, draft, SYSTEM_FORMATION)
    except Invalid:  # a source was erased meanwhile: the entry goes with it
        done.skipped += 1
        return
    if written is None:
        done.skipped += 1
    else:
        done.added.append(written.id)


def _update(asset: Asset, scope: Scope, entry: dict[str, Any], context: EventContext, done: Applied) -> None:
    where = assets.where_of(asset)
    record = records.get(where, scope.user_id, str(entry["record"]))
    sources = list(entry["sources"])
    if record is not None and record.formed and int(record.version) > int(entry["version"]):
        # updated by an earlier try of this plan (runs never overlap), which may have stopped
        # before its check after the write
        if not _outlived(asset, where, scope, record.id, sources, context, done):
            done.replayed.append(record.id)
        return
    if record is None or not record.formed or int(record.version) != int(entry["version"]):
        done.skipped += 1  # gone, or a client's since
        return
    if provenance.missing(where, scope.user_id, None, sources):
        done.skipped += 1  # a source was erased meanwhile
        return
    content = str(entry["content"])
    background = record.background or ""
    counts = term_counts(searchable(content, background))
    provenance.cite(where, scope.user_id, record.id, sources)
    fields = {"content": content, "sources": records.shown_sources(record.sources, sources)}
    key = atomic.natural_key(record.task_id, record.type, background, content)
    event = event_items([NewEvent("formation", LAYER, record.id, 1)], context)[0]
    changed = meaning.text_changed(record, content, background)
    text = meaning.record_text(content, background)
    ahead = meaning.text_ahead(where, LAYER, text) if changed else None  # words in vectors: as atomic/update
    kept = meaning.vector_ahead(ahead) if changed else postings.in_vector(record)
    try:
        records.update(where, record, fields, key, sum(counts.values()), now_ms(), event, counts if kept else None)
    except Cancelled:
        done.skipped += 1  # cleared, changed meanwhile, or another record holds that content
        return
    if _outlived(asset, where, scope, record.id, sources, context, done):
        return
    atomic.reindex_record(scope, where, record.id)
    if changed:
        meaning.after_update(where, records.get(where, scope.user_id, record.id), (text, ahead))
    done.updated.append(record.id)


def _outlived(
    asset: Asset, where: Where, scope: Scope, record_id: str, sources: list[str], context: EventContext, done: Applied
) -> bool:
    """After an update cited ``sources``: if one was erased between the check before and the
    citation, its erasure could not find the record, so the record goes now (as that erasure would
    have taken it) and the update counts as skipped. True when it went."""
    if not provenance.missing(where, scope.user_id, None, sources):
        return False
    record = records.get(where, scope.user_id, record_id)
    if record is not None:
        done.events += erasure.erase_records(asset, where, [record], context).events
    done.skipped += 1
    return True


def _supersede(asset: Asset, scope: Scope, entry: dict[str, Any], context: EventContext, done: Applied) -> None:
    where = assets.where_of(asset)
    record = records.get(where, scope.user_id, str(entry["record"]))
    if record is None or not record.formed:
        done.skipped += 1
        return
    erased = erasure.erase_records(asset, where, [record], context)
    done.events += erased.events
    if erased.records:
        done.superseded.append(record.id)
