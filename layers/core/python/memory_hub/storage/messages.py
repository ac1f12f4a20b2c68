"""L0 messages of one user in one memory epoch (ItemsTable; layout in ``layout``)."""

from __future__ import annotations

import heapq
from collections import Counter as Tally
from collections.abc import Callable, Iterable, Iterator, Set
from dataclasses import dataclass
from itertools import chain, islice
from typing import Any, TypeVar

from ..clock import id_time
from . import assets, counters, layout, postings, vectors, views
from .concurrency import Deadline, in_batches, parallel
from .counters import Where
from .errors import Cancelled, Unfinished
from .models import Message, snapshot
from .transactions import MAX_ACTIONS, Transaction

LAYER = "L0"
# Writes that ride along with the messages of one add: the epoch check and the user's counter.
PER_ADD = MAX_ACTIONS - 2
Shown = TypeVar("Shown", bound=views.Message | views.Record)


@dataclass(frozen=True)
class NewMessage:
    id: str
    role: str
    content: str
    timestamp: int
    terms: Tally[str]
    recorded_at: int | None = None  # when Memory Hub stored it (an import keeps the original)


def _row(
    where: Where,
    user_id: str,
    session_id: str,
    task_id: str | None,
    message: NewMessage,
    recorded_at: int,
    staged: str | None = None,
    in_vector: bool = False,
) -> Message:
    sk = layout.message_sk(message.id)
    if sk != message.id and id_time(message.id) != message.timestamp:
        raise ValueError("a message id that carries a time carries its message's time")
    return Message(
        where.item_pk(LAYER, user_id),
        sk,
        id=message.id,
        lsi1=layout.time_key(message.timestamp, message.id) if sk == message.id else None,
        lsi2=layout.session_key(session_id, message.timestamp, message.id),
        user_id=user_id,
        session_id=session_id,
        task_id=task_id,
        role=message.role,
        content=message.content,
        timestamp=message.timestamp,
        recorded_at=message.recorded_at or recorded_at,
        terms=sum(message.terms.values()),
        index_format=postings.VECTOR_FORMAT if in_vector else postings.MESSAGE_FORMAT,
        import_id=staged,
    )


def add(
    where: Where,
    user_id: str,
    session_id: str,
    task_id: str | None,
    messages: list[NewMessage],
    recorded_at: int,
    *,
    staged: str | None = None,
    in_vectors: Set[str] = frozenset(),
) -> None:
    """Store messages with their postings and counters. The postings go first, so a message is
    searchable from the moment it is visible at all; raises Cancelled(['epoch']) — with nothing
    of this call left behind — if a clear moved the memory on meanwhile. ``staged``: the running
    import writing them (they, and their share of the counters, stay invisible until it commits).
    ``in_vectors`` (a memory whose words are in its vectors: ``Where.words``): the messages whose
    vectors the caller has and will keep — their terms go with them (``VECTOR_FORMAT``), only
    counted here; the others have postings, and the user's counter counts them (``posted``)."""
    pk = where.item_pk(LAYER, user_id)
    kept = {m.id for m in messages if m.id in in_vectors and vectors.holds_all(m.terms)} if where.words else set()
    rows = [_row(where, user_id, session_id, task_id, m, recorded_at, staged, m.id in kept) for m in messages]
    built = {
        m.id: postings.build(
            pk, m.id, m.terms, int(row.terms), timestamp=m.timestamp, session_id=session_id, task_id=task_id
        )
        for m, row in zip(messages, rows, strict=True)
    }
    index = [p for item_id, rows_of in built.items() if item_id not in kept for p in rows_of]
    counted = [p for item_id, rows_of in built.items() if item_id in kept for p in rows_of]
    parallel(lambda: postings.put(index), lambda: postings.count(counted)) if counted else postings.put(index)
    try:
        for part in in_batches(rows, PER_ADD):
            transaction = Transaction()
            assets.guard_epoch(transaction, where.team_id, where.agent_id, where.epoch)
            for row in part:
                transaction.put("message", row)
            tokens = sum(int(r.terms) for r in part)
            posted = sum(1 for r in part if r.id not in kept) if where.words else 0
            counters.change(transaction, where, LAYER, user_id, len(part), tokens, staged=staged, posted=posted)
            transaction.commit()
    except Cancelled:
        # the retry writes them again, into the new epoch
        postings.delete(index)
        postings.count(counted, -1)
        raise


STAGED_PAGE = 500


def unstaged(where: Where) -> Any:
    """The filter that leaves out items of imports still running (None when none runs)."""
    return ~Message.import_id.is_in(*sorted(where.staged)) if where.staged else None


def page_size(where: Where, limit: int | None) -> int | None:
    """A query's page while imports run: the filter drops their items after they are read, so a
    page of ``limit`` could hold none that shows; a larger one keeps it to a few requests."""
    return max(limit, STAGED_PAGE) if where.staged and limit is not None else None


def _filter(where: Where, task_id: str | None) -> Any:
    condition = Message.task_id == task_id if task_id is not None else None
    hidden = unstaged(where)
    if hidden is None or condition is None:
        return hidden if condition is None else condition
    return condition & hidden


def shown(where: Where, found: Iterable[Shown]) -> list[Shown]:
    """``found`` without the items of imports still running (messages or records)."""
    return [item for item in found if item.import_id is None or item.import_id not in where.staged]


def newest(
    where: Where,
    user_id: str,
    session_id: str | None,
    task_id: str | None,
    start: int | None,
    end: int | None,
    limit: int | None,
) -> Iterator[views.Message]:
    """Newest first (ties: larger id first); reads ``limit`` items of each kind, not the partition.
    Without a session: the messages kept by time (the table's order) and those kept by id (the
    ``by-time`` index), both read at once and merged."""
    pk = where.item_pk(LAYER, user_id)
    if session_id is not None:
        low, high = layout.session_bounds(session_id, start, end)
        return _views(
            Message.by_session.query(
                pk,
                Message.lsi2.between(low, high),
                filter_condition=_filter(where, task_id),
                scan_index_forward=False,
                consistent_read=True,
                limit=limit,
                page_size=page_size(where, limit),
            )
        )
    low, high = layout.message_time_bounds(start, end)
    options: dict[str, Any] = {
        "filter_condition": _filter(where, task_id),
        "scan_index_forward": False,
        "consistent_read": True,
        "limit": limit,
        "page_size": page_size(where, limit),
    }
    condition = Message.lsi1.between(layout.time_bound(start, upper=False), layout.time_bound(end, upper=True))
    keyed_by_time, keyed_by_id = parallel(
        lambda: _begun(_views(Message.query(pk, Message.sk.between(low, high), **options))),
        lambda: _begun(_views(Message.by_time.query(pk, condition, **options))),
    )
    both = heapq.merge(keyed_by_time, keyed_by_id, key=time_key, reverse=True)
    return both if limit is None else islice(both, limit)


def _begun(found: Iterator[views.Message]) -> Iterator[views.Message]:
    """``found`` with its first page read now (two reads begin at once)."""
    first = next(found, None)
    return iter(()) if first is None else chain([first], found)


def time_key(message: views.Message) -> str:
    """The order of messages by time (ties: by id), wherever they are kept."""
    return layout.time_key(int(message.timestamp), message.id)


def count(
    where: Where, user_id: str, session_id: str | None, task_id: str | None, start: int | None, end: int | None
) -> int:
    """Exact count: the user's counter when unfiltered, else a counting query (a session's
    messages are read from its index: see ``counters``)."""
    if start is None and end is None and task_id is None and session_id is None:
        return counters.of_user(where, LAYER, user_id)[0]
    pk = where.item_pk(LAYER, user_id)
    if session_id is not None:
        low, high = layout.session_bounds(session_id, start, end)
        return Message.by_session.count(
            pk, Message.lsi2.between(low, high), filter_condition=_filter(where, task_id), consistent_read=True
        )
    low, high = layout.message_time_bounds(start, end)
    condition = Message.lsi1.between(layout.time_bound(start, upper=False), layout.time_bound(end, upper=True))
    hidden = _filter(where, task_id)
    return sum(
        parallel(
            lambda: Message.count(pk, Message.sk.between(low, high), filter_condition=hidden, consistent_read=True),
            lambda: Message.by_time.count(pk, condition, filter_condition=hidden, consistent_read=True),
        )
    )


def get_many(where: Where, user_id: str, ids: list[str], *, settled: bool = False) -> dict[str, views.Message]:
    """The messages among ``ids`` (strongly consistent; 100 keys per call), but those of imports
    still running (``where.staged``).

    ``settled`` (a search reading its candidates): read eventually consistent first, for half the
    read units, and strongly only the ids that read did not find. A message is not changed once
    written (only a re-index's length and format, which a search does not read), so a read that
    finds one finds it as it is, and one written a moment ago is read again strongly. What this
    read may answer that a strong one would not: a message erased or overwritten (an import
    writing an id again) within the replication lag, typically well under a second — and a search
    only asks for an erased one if something that leads to it outlived its erasure, which an
    erasure's own paths do not leave (its postings, vector, waiting row and the records citing it
    go before it answers) but a failure or a race can (a vector delete that failed, left to the
    cleanup's sweep; a writer that put a vector after the erasure read). Not for a caller that
    decides on an item's existence (an erasure, a vector's put, provenance)."""
    pk = where.item_pk(LAYER, user_id)
    keys = [(pk, layout.message_sk(i)) for i in ids]
    if not settled:
        return {m.id: m for m in shown(where, _views(Message.batch_get(keys, consistent_read=True)))}
    seen = {(m.pk, m.sk): m for m in Message.batch_get(keys, consistent_read=False)}
    unseen = [key for key in keys if key not in seen]
    found = list(seen.values()) + (list(Message.batch_get(unseen, consistent_read=True)) if unseen else [])
    return {m.id: m for m in shown(where, _views(found))}


def of_user(where: Where, user_id: str) -> list[views.Message]:
    """Every message of the user, in id order (the order they were added)."""
    pk = where.item_pk(LAYER, user_id)
    found = [
        message
        for prefix in (layout.LEGACY_MESSAGES, layout.MESSAGES)
        for message in _views(Message.query(pk, Message.sk.startswith(prefix), consistent_read=True))
    ]
    return sorted(found, key=lambda m: m.id)


def delete(
    where: Where,
    doomed: list[views.Message],
    events: Callable[[list[views.Message]], list[views.AuditEvent]],
    *,
    beside: Callable[[list[views.Message]], object] | None = None,
    first: Callable[[list[views.Message]], object] | None = None,
    until: Deadline | None = None,
    staged: str | None = None,
    running: frozenset[str] = frozenset(),
) -> tuple[list[views.Message], list[views.AuditEvent]]:
    """Delete messages with their counters and their audit events, transaction by transaction —
    each part's postings erased before its transaction (``postings.erase_ahead``) — then
    ``beside`` with the messages removed; returns the messages removed and the audit events
    recorded. ``first``: what else goes before each transaction with the messages it deletes (what
    derives from them and would otherwise be left if the request died after the transaction: a
    retry no longer finds them). Each delete requires the
    message to exist, so two racing deletes never count one message twice (the loser retries
    without it). Past ``until`` it stops after the last whole transaction (with the postings of
    what it removed): Unfinished. ``staged``: the running import whose own messages these are,
    undoing them (its notes on the counters go down with them, so counts read the same throughout
    the undo). ``running``: the imports running into the memory — an erasure reaching messages one
    of them staged takes their share off its notes too, so counts stay right while it runs."""
    return _delete(
        where, doomed, events, beside=beside, first=first, indexed=True, until=until, staged=staged, running=running
    )


def delete_unindexed(
    where: Where,
    doomed: list[views.Message],
    events: Callable[[list[views.Message]], list[views.AuditEvent]],
    *,
    until: Deadline | None = None,
) -> tuple[list[views.Message], list[views.AuditEvent]]:
    """``delete`` of messages whose postings the caller erased first (a user's whole partition:
    ``postings.erase_in``), so none is looked up again."""
    return _delete(
        where, doomed, events, beside=None, first=None, indexed=False, until=until, staged=None, running=frozenset()
    )


def _delete(
    where: Where,
    doomed: list[views.Message],
    events: Callable[[list[views.Message]], list[views.AuditEvent]],
    *,
    beside: Callable[[list[views.Message]], object] | None,
    first: Callable[[list[views.Message]], object] | None,
    indexed: bool,
    until: Deadline | None,
    staged: str | None,
    running: frozenset[str],
) -> tuple[list[views.Message], list[views.AuditEvent]]:
    """``delete`` and ``delete_unindexed`` (``indexed``: their postings are still there to erase)."""
    removed: list[views.Message] = []
    recorded: list[views.AuditEvent] = []
    pending = list(doomed)
    uncounted: set[str] = set()  # a part cut by a racing erasure comes again: its terms once
    _prepare_shares(where, pending, running)
    while pending:
        if until is not None and removed and until.passed():  # each request erases at least a part
            _finish(removed, beside)
            raise Unfinished(removed)
        part = _next_chunk(pending, events)
        if indexed:  # what derives from them goes before them (see ``first``)
            postings.erase_ahead(part)
        postings.uncount_vectored(m for m in part if m.id not in uncounted)  # those without postings
        uncounted |= {m.id for m in part}
        if first is not None:
            first(part)
        transaction = Transaction()
        for message in part:
            transaction.delete(f"message:{message.id}", message, condition=Message.pk.exists())
        for user_id, n in Tally(m.user_id for m in part).items():
            mine = [m for m in part if m.user_id == user_id]
            tokens = sum(int(m.terms or 0) for m in mine)
            shares = {i: (-n, -t) for i, (n, t) in staged_shares(mine, running).items()}
            posted = -sum(1 for m in mine if not postings.in_vector(m)) if where.words else 0
            counters.change(
                transaction, where, LAYER, user_id, -n, -tokens, staged=staged, shares=shares, posted=posted
            )
        chunk_events = events(part)
        for event in chunk_events:
            transaction.put("audit", event)
        try:
            transaction.commit()
        except Cancelled as exc:
            gone = {name.split(":", 1)[1] for name in exc.failed if name.startswith("message:")}
            if not gone:
                raise
            pending = [m for m in pending if m.id not in gone]
            continue
        removed += part
        recorded += chunk_events
        pending = pending[len(part) :]
    _finish(removed, beside)
    return removed, recorded


def staged_shares(items: Iterable[Any], running: frozenset[str]) -> dict[str, tuple[int, int]]:
    """(items, tokens) of ``items`` that each of the ``running`` imports staged."""
    shares: dict[str, tuple[int, int]] = {}
    for item in items:
        if item.import_id is not None and item.import_id in running:
            n, tokens = shares.get(item.import_id, (0, 0))
            shares[item.import_id] = (n + 1, tokens + int(item.terms or 0))
    return shares


def _prepare_shares(where: Where, doomed: list[views.Message], running: frozenset[str]) -> None:
    """The counters whose notes an erasure of staged messages moves have their map (a user's
    erasure may have dropped a counter since the import prepared it)."""
    staged = [m for m in doomed if m.import_id is not None and m.import_id in running]
    if staged:
        counters.prepare_staging(where, {(LAYER, m.user_id) for m in staged})


def _finish(removed: list[views.Message], beside: Callable[[list[views.Message]], object] | None) -> None:
    if beside is not None and removed:  # their postings are gone already (``erase_ahead``, ``erase_in``)
        beside(removed)


def _next_chunk(
    pending: list[views.Message], events: Callable[[list[views.Message]], list[views.AuditEvent]]
) -> list[views.Message]:
    """As many messages as fit one transaction with their counters and audit events."""
    size = 0
    for size in range(1, len(pending) + 1):
        part = pending[:size]
        users = {m.user_id for m in part}
        if len(part) + len(users) + len(events(part)) > MAX_ACTIONS:
            return pending[: size - 1]
    return pending[:size]


def _views(found: Iterable[Message]) -> Iterator[views.Message]:
    """The views of messages as they are read (a query's pages are read as they are taken)."""
    return (snapshot(views.Message, message) for message in found)
