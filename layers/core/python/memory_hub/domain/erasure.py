"""What an erasure by id removes besides its items. Apart from ``assets`` so that the functions that
never erase by id (scenario files, keys, the clear) do not load the meaning and search modules at
their cold start.

A record never outlives its sources: when messages are erased at a person's or a client's request,
every record citing one of them is erased before the request answers (``cascade``), by the rules of
a delete by id — its index entries, vectors and citation entries, an audit event each — and every
formed file drawn from such a record is removed too (``formed``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ..settings import get_settings
from ..storage import citations, messages, records
from ..storage.audit import EventContext, NewEvent, event_items
from ..storage.concurrency import Deadline, parallel
from ..storage.counters import Where
from ..storage.errors import Unfinished
from ..storage.views import Asset, AuditEvent, Message, Record
from . import formed, vector_erasure
from .assets import forget_exports

LAYER = "L1"


def budget() -> Deadline:
    """How long an erasure by id may run in one request (``MEMORY_HUB_ERASE_BUDGET_S``, within API
    Gateway's 29 s): past it, it stops after a whole transaction and answers 503 (retryable);
    what it erased is gone, and repeating the request finishes the rest."""
    return Deadline.after(get_settings().erase_budget_s)


def forget_erased(asset: Asset, where: Where, erased: Sequence[Message | Record]) -> int:
    """Both before the request answers and at once (one round trip less): the erased items'
    vectors and every export of the memory (an export may hold what was deleted). How many
    exports it erased (an answer's ``files_deleted`` counts them)."""
    owned = [(item.user_id, item.id) for item in erased]
    _, exports = parallel(lambda: vector_erasure.erase(where, owned), lambda: forget_exports(asset))
    return int(exports)


class Forgetting:
    """What an erasure by id does beside its items as they go (storage's ``beside``):
    ``forget_erased``, counting the exports it erased in ``exports``."""

    def __init__(self, asset: Asset, where: Where) -> None:
        self.asset, self.where, self.exports = asset, where, 0

    def __call__(self, erased: Sequence[Message | Record]) -> None:
        self.exports += forget_erased(self.asset, self.where, erased)


@dataclass
class Cascade:
    """What went with erased messages: the records that cited them, the formed files drawn from
    those records, and the audit events of both."""

    records: list[Record] = field(default_factory=list)
    files_deleted: int = 0  # formed files, and the memory's exports when these records took them
    events: list[AuditEvent] = field(default_factory=list)


def erase_messages(
    asset: Asset,
    where: Where,
    user_id: str,
    doomed: list[Message],
    events: Callable[[list[Message]], list[AuditEvent]],
    context: EventContext,
    *,
    beside: Callable[[list[Message]], object],
    until: Deadline | None = None,
    running: frozenset[str] = frozenset(),
) -> tuple[list[Message], list[AuditEvent], Cascade]:
    """Messages erased by id (``messages.delete``) with the records citing them: those go before
    each part's transaction (storage's ``first``), so a request that dies after it leaves none — its
    retry no longer finds the messages — and once more after them, for what a writer racing the
    erasure came to cite (with formation's marks: ``cascade``). Cut by ``until``, what it erased
    takes them along before the 503. The messages removed, their audit events, what went with them."""
    ahead: list[Cascade] = []

    def first(part: list[Message]) -> None:
        ahead.append(cascade(asset, where, user_id, part, context, formation=False))

    try:
        removed, recorded = messages.delete(
            where, doomed, events, beside=beside, first=first, until=until, running=running
        )
    except Unfinished as cut:
        cascade(asset, where, user_id, cut.removed, context)
        raise
    went = [*ahead, cascade(asset, where, user_id, removed, context)]
    return (
        removed,
        recorded,
        Cascade(
            [r for c in went for r in c.records],
            sum(c.files_deleted for c in went),
            [e for c in went for e in c.events],
        ),
    )


def record_events(context: EventContext) -> Callable[[list[Record]], list[AuditEvent]]:
    """One ``delete`` event per erased record."""

    def events(chunk: list[Record]) -> list[AuditEvent]:
        return event_items([NewEvent("delete", LAYER, r.id, 1) for r in chunk], context)

    return events


def cascade(
    asset: Asset, where: Where, user_id: str, erased: list[Message], context: EventContext, *, formation: bool = True
) -> Cascade:
    """Erase every record of ``user_id`` that cites one of the ``erased`` messages, with what goes
    with such a record; then the erased messages' own citation entries. Also drops what formation
    kept of those messages (their waiting marks, a run's answer not yet written) unless
    ``formation`` is False: a cascade ahead of the messages' erasure leaves that to the one after
    it (a run's own checks keep what it left from citing an erased message)."""
    if not erased:
        return Cascade()
    message_ids = [m.id for m in erased]
    cited = citations.citing(where, user_id, message_ids)
    atom_ids = list(dict.fromkeys(a for found in cited.values() for a in found))
    result = Cascade()
    if atom_ids:
        found = records.get_many(where.everything(), user_id, atom_ids)  # a running import's too
        result = erase_records(asset, where, list(found.values()), context)
    citations.forget(where, user_id, ((m, a) for m, found in cited.items() for a in found))
    if formation:
        formed.forget_messages(where, user_id, erased)
    return result


def erase_records(asset: Asset, where: Where, doomed: list[Record], context: EventContext) -> Cascade:
    """Erase records by the rules of a delete by id (whatever their version), and the formed files
    drawn from them."""
    if not doomed:
        return Cascade()
    forgetting = Forgetting(asset, where)
    removed, recorded = records.delete(where, doomed, record_events(context), beside=forgetting, running=where.staged)
    files, file_events = formed.after_records_erased(asset, where, removed, context)
    return Cascade(removed, files + forgetting.exports, recorded + file_events)


def files_of_records(asset: Asset, where: Where, removed: list[Record], context: EventContext) -> Cascade:
    """After records were erased some other way (a delete by id): the formed files drawn from them."""
    files, events = formed.after_records_erased(asset, where, removed, context)
    return Cascade([], files, events)
