"""L1 records of one user in one memory epoch, their natural-key guards and postings.

Every record has a guard item ``nk␟<natural key>`` in its partition naming the record that holds
that (task, type, background, content). Creating a record puts the guard under the condition that
it does not exist, in the same transaction as the record and its counter, so racing adds of one
natural key make exactly one record."""

from __future__ import annotations

from collections import Counter as Tally
from collections.abc import Callable, Iterable, Iterator, Set
from dataclasses import dataclass, replace
from typing import Any

from pynamodb.exceptions import DoesNotExist, PutError, UpdateError
from typing_extensions import TypeIs  # typing's own from Python 3.13

from ..analysis import searchable, term_counts
from . import assets, citations, counters, layout, messages, postings, vectors, views
from .concurrency import Deadline, parallel
from .counters import Where
from .errors import Cancelled, Unfinished
from .messages import staged_shares
from .models import Guard, Record, own, snapshot
from .retry import attempts
from .transactions import MAX_ACTIONS, Transaction

LAYER = "L1"
MAX_SOURCES = 100  # the sources a record shows: the newest this many
MAX_CITED = 2000  # messages a record remembers having cited (~32 bytes each)


def shown_sources(current: list[str] | None, added: list[str]) -> list[str]:
    """A record's sources after ``added`` joined them: order kept, duplicates removed, the newest
    MAX_SOURCES kept."""
    merged = list(dict.fromkeys([*(current or []), *added]))
    return merged[-MAX_SOURCES:]


def cited_after(current: set[str] | None, added: list[str]) -> set[str]:
    """Every message a record has cited, ``added`` included (the newest MAX_CITED by id: message
    ids are time-ordered). One it forgets keeps its citation entry until that message is erased."""
    every = set(current or ()) | set(added)
    return every if len(every) <= MAX_CITED else set(sorted(every)[-MAX_CITED:])


def new(where: Where, **fields: Any) -> views.Record:
    """A new record's view, not stored yet (``create`` stores it)."""
    pk = where.item_pk(LAYER, fields["user_id"])
    fields.setdefault("index_format", postings.RECORD_FORMAT)
    return _view(Record(pk, fields["id"], lsi1=layout.time_key(fields["updated_at"], fields["id"]), **fields))


def get(where: Where, user_id: str, atom_id: str) -> views.Record | None:
    try:
        return _view(Record.get(where.item_pk(LAYER, user_id), atom_id, consistent_read=True))
    except DoesNotExist:
        return None


def holder(where: Where, user_id: str, natural_key: str) -> views.Record | None:
    """The record that holds ``natural_key``, if any."""
    pk = where.item_pk(LAYER, user_id)
    try:
        guard = Guard.get(pk, layout.natural_key_sk(natural_key), consistent_read=True)
    except DoesNotExist:
        return None
    return get(where, user_id, guard.atom_id)


def guard_holders(where: Where, user_id: str, held: list[views.Record]) -> dict[str, str | None]:
    """Of each record, the id of the record its natural key's guard names (None: no guard)."""
    pk = where.item_pk(LAYER, user_id)
    keys = {layout.natural_key_sk(r.natural_key) for r in held}
    named = {g.sk: g.atom_id for g in Guard.batch_get([(pk, sk) for sk in keys], consistent_read=True)}
    return {r.id: named.get(layout.natural_key_sk(r.natural_key)) for r in held}


def claim_guard(record: views.Record) -> bool:
    """Give a record that has none its natural key's guard; False when another record holds it."""
    try:
        Guard(record.pk, layout.natural_key_sk(record.natural_key), atom_id=record.id).save(
            condition=Guard.sk.does_not_exist()
        )
    except PutError as exc:
        if exc.cause_response_code != "ConditionalCheckFailedException":
            raise
        return False
    return True


def index(record: views.Record, counts: Tally[str]) -> list[views.Posting]:
    return postings.build(record.pk, record.id, counts, int(record.terms), type_=record.type, task_id=record.task_id)


def create(
    where: Where,
    record: views.Record,
    counts: Tally[str],
    *,
    over: views.Record | None = None,
    in_vector: bool = False,
) -> None:
    """Store a new record with its guard, counter and postings. Raises Cancelled: ['guard'] when
    another record holds its natural key, ['epoch'] when a clear moved the memory on — with
    nothing of this call left behind. ``over``: a record a running import staged that holds the
    natural key; the new record takes the guard over from it while that import still runs (as if
    the staged record were not there yet: ``staging.fold`` makes it a reinforcement once the import
    commits); 'epoch' also when the import no longer runs. ``in_vector`` (words in vectors): the
    caller has its vector — its terms go with it, only counted here; else postings (``posted``)."""
    kept = in_vector and where.words and vectors.holds_all(counts)
    if kept:
        record = replace(record, index_format=postings.VECTOR_FORMAT)
    rows = index(record, counts)
    postings.count(rows) if kept else postings.put(rows)
    transaction = Transaction()
    free: Any
    if over is None:
        assets.guard_epoch(transaction, where.team_id, where.agent_id, where.epoch)
        free = Guard.sk.does_not_exist()
    else:
        assets.guard_epoch(transaction, where.team_id, where.agent_id, where.epoch, running=over.import_id)
        free = Guard.atom_id == over.id
    transaction.put(
        "guard", Guard(record.pk, layout.natural_key_sk(record.natural_key), atom_id=record.id), condition=free
    )
    transaction.put("record", record)
    posted = int(not kept) if where.words else 0
    counters.change(
        transaction, where, LAYER, record.user_id, 1, int(record.terms), staged=record.import_id, posted=posted
    )
    try:
        transaction.commit()
    except Cancelled:
        postings.count(rows, -1) if kept else postings.delete(rows)
        raise


MAX_ABSORBED = 1000  # imported line ids a record remembers (~32 bytes each)


def reinforce(
    where: Where,
    record: views.Record,
    now_ms: int,
    absorbed: list[str] | None = None,
    sources: list[str] | None = None,
    formed: bool | None = None,
) -> int:
    """Add 1 to ``reinforced_count`` — one per line of ``absorbed``, the imported lines that do it,
    remembered on the record (at most MAX_ABSORBED in all) — and move ``updated_at``, in the epoch
    read: the new count. ``sources`` join the record's (their citation entries are the caller's, put
    first); ``formed`` given sets the mark. Cancelled: 'epoch' (cleared meanwhile), 'record' (edited,
    deleted or reinforced meanwhile)."""
    count = int(record.reinforced_count)
    times = len(absorbed) if absorbed else 1
    actions: list[Any] = [
        Record.reinforced_count.set(count + times),
        Record.updated_at.set(now_ms),
        Record.lsi1.set(layout.time_key(now_ms, record.id)),
    ]
    if absorbed:
        actions.append(Record.absorbed.add(set(absorbed)))
    if sources:
        actions.append(Record.sources.set(shown_sources(record.sources, sources)))
        actions.append(Record.cited.set(cited_after(record.cited, sources)))
    if formed is not None:
        actions.append(Record.formed.set(formed))
    transaction = Transaction()
    assets.guard_epoch(transaction, where.team_id, where.agent_id, where.epoch)
    transaction.update(
        "record",
        record,
        actions,
        condition=(Record.natural_key == record.natural_key) & (Record.reinforced_count == count),
    )
    transaction.commit()
    return count + times


def unreinforce(
    where: Where, record: views.Record, before: tuple[int, int], times: int, stamp: int, absorbed: list[str]
) -> bool:
    """Take back the ``reinforce`` of ``times`` lines (``absorbed``) made at ``stamp`` (an import
    undone): the count and ``updated_at`` of ``before``, only while the record is as that
    reinforcement left it; False when it was touched since (that change stands) or cleared."""
    count, updated_at = before
    transaction = Transaction()
    assets.guard_epoch(transaction, where.team_id, where.agent_id, where.epoch)
    transaction.update(
        "record",
        record,
        [
            Record.reinforced_count.set(count),
            Record.updated_at.set(updated_at),
            Record.lsi1.set(layout.time_key(updated_at, record.id)),
            Record.absorbed.delete(set(absorbed)),
        ],
        condition=(Record.reinforced_count == count + times) & (Record.updated_at == stamp),
    )
    try:
        transaction.commit()
    except Cancelled:
        return False
    return True


def update(
    where: Where,
    record: views.Record,
    fields: dict[str, Any],
    natural_key: str,
    terms: int,
    now_ms: int,
    event: views.AuditEvent,
    in_vector: Tally[str] | None = None,
) -> None:
    """Change a record at the version read, move its guard with its natural key, record the audit
    event — one transaction. Cancelled: 'epoch' (cleared), 'record' (changed or gone meanwhile),
    'guard' (another record holds the new natural key). Words in vectors: ``in_vector``, the new
    text's terms when the caller has its new vector (else postings again, ``reindex``'s to write)."""
    version = int(record.version)
    in_vector = in_vector if in_vector is None or vectors.holds_all(in_vector) else None
    actions = [
        Record.version.set(version + 1),
        Record.updated_at.set(now_ms),
        Record.natural_key.set(natural_key),
        Record.lsi1.set(layout.time_key(now_ms, record.id)),
        Record.terms.set(terms),
    ]
    actions += [getattr(Record, name).set(value) for name, value in fields.items()]
    if "sources" in fields:  # replaced: the record still answers to every message it cited before
        actions.append(Record.cited.set(cited_after(record.cited, list(fields["sources"]))))
    if natural_key != record.natural_key:  # the imported lines it folded in were other content
        actions.append(Record.absorbed.remove())
    posted, before = 0, None
    if where.words:  # its words in its vector, or in postings again
        kept = in_vector is not None
        actions.append(Record.index_format.set(postings.VECTOR_FORMAT if kept else postings.RECORD_FORMAT))
        posted = int(in_vector is None) - int(not postings.in_vector(record))
    transaction = Transaction()
    assets.guard_epoch(transaction, where.team_id, where.agent_id, where.epoch)
    transaction.update("record", record, actions, condition=Record.version == version)
    if natural_key != record.natural_key:
        transaction.put(
            "guard",
            Guard(record.pk, layout.natural_key_sk(natural_key), atom_id=record.id),
            condition=Guard.sk.does_not_exist(),
        )
        transaction.delete(
            "old guard",
            Guard(record.pk, layout.natural_key_sk(record.natural_key)),
            condition=Guard.atom_id == record.id,
        )
    counters.change(transaction, where, LAYER, record.user_id, 0, terms - int(record.terms or 0), posted=posted)
    transaction.put("audit", event)
    if postings.in_vector(record):
        before = term_counts(searchable(record.content, record.background or ""))
    moved = where.words and before != in_vector
    if moved:  # the old text's terms off first (a request dying after leaves none of them counted)
        postings.uncount_vectored([record])
    try:
        transaction.commit()
    except Cancelled:
        if moved:
            postings.uncount_vectored([record], sign=+1)
        raise
    if moved and in_vector:  # the new text's on — and off again if an erasure took the record meanwhile
        rows = postings.build(record.pk, record.id, in_vector, sum(in_vector.values()))
        postings.count(rows)
        if get(where, record.user_id, record.id) is None:
            postings.count(rows, -1)


def sync_postings(record: views.Record, counts: Tally[str]) -> None:
    """Make the record's postings exactly those of ``counts`` (after an update): none for a record
    whose terms are in its vector."""
    wanted = {} if postings.in_vector(record) else {row.sk: row for row in index(record, counts)}
    present = {row.sk: row for row in postings.of_item(record.pk, record.id)}
    # A kept term whose impact moved (the record's length changed) is rewritten: erased, then put.
    stale = [row for sk, row in present.items() if sk not in wanted or row.lsi3 != wanted[sk].lsi3]
    postings.replace(stale, [row for sk, row in wanted.items() if sk not in present or present[sk].lsi3 != row.lsi3])


def _filters(where: Where, type_: str | None, task_id: str | None) -> Any:
    condition = None
    hidden = [~Record.import_id.is_in(*sorted(where.staged))] if where.staged else []
    for part in (
        ([Record.type == type_] if type_ is not None else [])
        + ([Record.task_id == task_id] if task_id is not None else [])
        + hidden
    ):
        condition = part if condition is None else condition & part
    return condition


def newest(
    where: Where,
    user_id: str,
    type_: str | None,
    task_id: str | None,
    start: int | None,
    end: int | None,
    limit: int | None,
) -> Iterator[views.Record]:
    """Newest ``updated_at`` first (ties: larger id first)."""
    condition = Record.lsi1.between(layout.time_bound(start, upper=False), layout.time_bound(end, upper=True))
    return _views(
        Record.by_time.query(
            where.item_pk(LAYER, user_id),
            condition,
            filter_condition=_filters(where, type_, task_id),
            scan_index_forward=False,
            consistent_read=True,
            limit=limit,
            page_size=messages.page_size(where, limit),
        )
    )


def count(
    where: Where, user_id: str, type_: str | None, task_id: str | None, start: int | None, end: int | None
) -> int:
    if type_ is None and task_id is None and start is None and end is None:
        return counters.of_user(where, LAYER, user_id)[0]
    condition = Record.lsi1.between(layout.time_bound(start, upper=False), layout.time_bound(end, upper=True))
    return Record.by_time.count(
        where.item_pk(LAYER, user_id), condition, filter_condition=_filters(where, type_, task_id), consistent_read=True
    )


def get_many(where: Where, user_id: str, ids: list[str]) -> dict[str, views.Record]:
    """The records among ``ids``, but those of imports still running (``where.staged``)."""
    pk = where.item_pk(LAYER, user_id)
    found = _views(Record.batch_get([(pk, i) for i in ids], consistent_read=True))
    return {r.id: r for r in messages.shown(where, found)}


def is_record(item: object) -> TypeIs[views.Record]:
    """Whether an item storage handed out is an L1 record (not an L0 message)."""
    return isinstance(item, views.Record)


def of_user(where: Where, user_id: str) -> list[views.Record]:
    return list(
        _views(Record.query(where.item_pk(LAYER, user_id), Record.sk.startswith("atom-"), consistent_read=True))
    )


class VersionConflict(Exception):
    """Records listed for a version check were edited meanwhile: ``conflicts`` [{id, expected, actual}]."""

    def __init__(self, conflicts: list[dict[str, Any]]) -> None:
        super().__init__("records changed meanwhile")
        self.conflicts = conflicts


@dataclass(frozen=True)
class _Held:
    """Which records go only as they were read: those in ``ids`` only at the version read (a
    person confirmed that text); with ``young`` also only at the ``updated_at`` read (a reinforcing
    add moves it, not the version). A changed one raises VersionConflict, or with ``leave_changed``
    is left alone."""

    ids: Set[str] = frozenset()
    young: bool = False
    leave_changed: bool = False


def delete(
    where: Where,
    doomed: list[views.Record],
    events: Callable[[list[views.Record]], list[views.AuditEvent]],
    *,
    at_version: Set[str] = frozenset(),
    beside: Callable[[list[views.Record]], object] | None = None,
    until: Deadline | None = None,
    staged: str | None = None,
    running: frozenset[str] = frozenset(),
) -> tuple[list[views.Record], list[views.AuditEvent]]:
    """Delete records with their guards, counters and audit events, then their postings (and
    ``beside`` with the records removed, at the same time, when there are any); returns the records
    removed. A record in ``at_version`` goes only at the version read: one edited meanwhile raises
    VersionConflict (the person confirmed another text). A record already gone is skipped. Past
    ``until`` it stops after the last whole transaction (finishing what it removed): Unfinished.
    ``staged``: a running import undoing its own records, ``running``: the imports running (as
    ``messages.delete``). A record whose natural key another record took over (a client's add
    while the record was staged) goes without its guard, which is the other record's."""
    held = _Held(at_version)
    return _delete(
        where, doomed, events, held, beside=beside, indexed=True, until=until, staged=staged, running=running
    )


def delete_unindexed(
    where: Where,
    doomed: list[views.Record],
    events: Callable[[list[views.Record]], list[views.AuditEvent]],
    *,
    until: Deadline | None = None,
) -> tuple[list[views.Record], list[views.AuditEvent]]:
    """``delete`` of records whose postings the caller erased first (a user's whole partition:
    ``postings.erase_in``), so none is looked up again."""
    return _delete(
        where, doomed, events, _Held(), beside=None, indexed=False, until=until, staged=None, running=frozenset()
    )


def expire(
    where: Where, doomed: list[views.Record], events: Callable[[list[views.Record]], list[views.AuditEvent]]
) -> tuple[list[views.Record], list[views.AuditEvent]]:
    """The retention cleanup's delete: each record goes only as it was read — one edited or
    reinforced since (made young again) is left alone."""
    held = _Held({r.id for r in doomed}, young=True, leave_changed=True)
    return _delete(where, doomed, events, held, beside=None, indexed=True, until=None, staged=None, running=frozenset())


def _delete(
    where: Where,
    doomed: list[views.Record],
    events: Callable[[list[views.Record]], list[views.AuditEvent]],
    held: _Held,
    *,
    beside: Callable[[list[views.Record]], object] | None,
    indexed: bool,
    until: Deadline | None,
    staged: str | None,
    running: frozenset[str],
) -> tuple[list[views.Record], list[views.AuditEvent]]:
    """``delete``, ``delete_unindexed`` and ``expire`` (``indexed``: their postings are still
    there to erase)."""
    removed: list[views.Record] = []
    recorded: list[views.AuditEvent] = []
    pending = list(doomed)
    unguarded: set[str] = set()
    if staged_shares(pending, running):
        counters.prepare_staging(where, {(LAYER, r.user_id) for r in pending})
    while pending:
        if until is not None and removed and until.passed():  # each request erases at least a part
            _finish(where, removed, beside, indexed)
            raise Unfinished(removed)
        part = _next_chunk(pending, events)
        transaction = Transaction()
        for record in part:
            condition = Record.pk.exists()
            if record.id in held.ids:
                condition = condition & (Record.version == int(record.version))
                if held.young:
                    condition = condition & (Record.updated_at == int(record.updated_at))
            transaction.delete(f"record:{record.id}", record, condition=condition)
            if record.id not in unguarded:
                transaction.delete(
                    f"guard:{record.id}",
                    Guard(record.pk, layout.natural_key_sk(record.natural_key)),
                    condition=Guard.atom_id == record.id,
                )
        for user_id, n in Tally(r.user_id for r in part).items():
            mine = [r for r in part if r.user_id == user_id]
            tokens = sum(int(r.terms or 0) for r in mine)
            shares = {i: (-k, -t) for i, (k, t) in staged_shares(mine, running).items()}
            posted = -sum(1 for r in mine if not postings.in_vector(r)) if where.words else 0
            counters.change(
                transaction, where, LAYER, user_id, -n, -tokens, staged=staged, shares=shares, posted=posted
            )
        chunk_events = events(part)
        for event in chunk_events:
            transaction.put("audit", event)
        try:
            transaction.commit()
        except Cancelled as exc:
            if not any(name.startswith(("record:", "guard:")) for name in exc.failed):
                raise
            unguarded |= _guards_lost(part, exc.failed)
            pending = _refreshed(part, pending, held)
            continue
        removed += part
        recorded += chunk_events
        pending = pending[len(part) :]
    _finish(where, removed, beside, indexed)
    return removed, recorded


def _finish(
    where: Where, removed: list[views.Record], beside: Callable[[list[views.Record]], object] | None, indexed: bool
) -> None:
    """What goes with records just erased: their postings (unless erased first) — or the counts of
    their terms, those in their vectors — and citation entries, and ``beside`` at the same time."""
    postings.uncount_vectored(removed)
    if indexed:
        parallel(lambda: postings.erase_removed(removed, beside), lambda: forget_citations(where, removed))
    else:  # their postings are gone already (``erase_in``)
        parallel(
            lambda: beside(removed) if beside is not None and removed else None,
            lambda: forget_citations(where, removed),
        )


def forget_citations(where: Where, removed: list[views.Record]) -> int:
    """The citation entries of records just erased (every message each ever cited)."""
    return sum(citations.forget_record(where, r.user_id, r.id, r.cited or ()) for r in removed if r.cited)


def _guards_lost(part: list[views.Record], failed: list[str]) -> set[str]:
    """Records of ``part`` whose guard failed its check because it is not theirs (any more)."""
    named = {name.split(":", 1)[1] for name in failed if name.startswith("guard:")}
    lost: set[str] = set()
    for record in part:
        if record.id in named:
            try:
                guard = Guard.get(record.pk, layout.natural_key_sk(record.natural_key), consistent_read=True)
            except DoesNotExist:
                lost.add(record.id)
                continue
            if guard.atom_id != record.id:
                lost.add(record.id)
    return lost


def _refreshed(part: list[views.Record], pending: list[views.Record], held: _Held) -> list[views.Record]:
    """Re-read a chunk that lost a race: drop what vanished, take what changed at its new state
    (or stop at a version conflict, as ``held`` says)."""
    now = {(r.pk, r.sk): r for r in _views(Record.batch_get([(r.pk, r.sk) for r in part], consistent_read=True))}
    conflicts, keep = [], []
    for record in part:
        current = now.get((record.pk, record.sk))
        if current is None:
            continue
        moved = held.young and int(current.updated_at) != int(record.updated_at)
        if record.id in held.ids and (int(current.version) != int(record.version) or moved):
            conflicts.append({"id": record.id, "expected": int(record.version), "actual": int(current.version)})
            continue
        keep.append(current)
    if conflicts and not held.leave_changed:
        raise VersionConflict(conflicts)
    return keep + pending[len(part) :]


def _next_chunk(
    pending: list[views.Record], events: Callable[[list[views.Record]], list[views.AuditEvent]]
) -> list[views.Record]:
    size = 0
    for size in range(1, len(pending) + 1):
        part = pending[:size]
        users = {r.user_id for r in part}
        if 2 * len(part) + len(users) + len(events(part)) > MAX_ACTIONS:
            return pending[: size - 1]
    return pending[:size]


def count_formed(where: Where, user_id: str) -> int:
    """How many of a user's records formation formed (and no client has touched since)."""
    return int(
        Record.count(
            where.item_pk(LAYER, user_id),
            Record.sk.startswith("atom-"),
            filter_condition=Record.formed == True,  # noqa: E712 - a PynamoDB condition, not a comparison
            consistent_read=True,
        )
    )


def drop_sources(where: Where, user_id: str, atom_id: str, message_ids: set[str]) -> bool:
    """Take expired messages out of a record's sources (not an edit: version and ``updated_at``
    stay). False when the record is gone."""
    for _ in attempts("record sources"):
        record = get(where, user_id, atom_id)
        if record is None:
            return False
        shown = [s for s in (record.sources or []) if s not in message_ids]
        cited = set(record.cited or ()) - message_ids
        actions: list[Any] = [Record.sources.set(shown) if shown else Record.sources.remove()]
        actions.append(Record.cited.set(cited) if cited else Record.cited.remove())
        try:
            own(Record, record).update(
                actions,
                condition=(Record.reinforced_count == int(record.reinforced_count))
                & (Record.version == int(record.version)),
            )
            return True
        except UpdateError as exc:
            if exc.cause_response_code != "ConditionalCheckFailedException":
                raise
    raise AssertionError("unreachable")


def _view(record: Record) -> views.Record:
    return snapshot(views.Record, record)


def _views(found: Iterable[Record]) -> Iterator[views.Record]:
    """The views of records as they are read (a query's pages are read as they are taken)."""
    return (_view(record) for record in found)
