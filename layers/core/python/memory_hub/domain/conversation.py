"""L0 conversation messages."""

from __future__ import annotations

from functools import partial
from typing import Any, cast

from ..analysis import query_terms, term_counts
from ..clock import format_ms, issued_here, lower_bound_ms, now_ms, parse_ms, time_window
from ..clock import message_id as new_message_id
from ..storage import counters, messages, postings, records
from ..storage import formation as formation_store
from ..storage.audit import EventContext, NewEvent, event_items
from ..storage.concurrency import parallel
from ..storage.counters import Where
from ..storage.errors import Cancelled
from ..storage.retry import attempts
from ..storage.views import AuditEvent, Message
from . import assets, erasure, meaning, retrieval, timewords, vector_words
from .errors import Invalid
from .formation import schedule
from .principal import Authorize
from .results import Added, MessageHit, MessageHits, MessageItem, Messages, MessagesDeleted, Mode, Role, Total
from .rules import MAX_ID_CHARS, SESSION_REQUIRED, clean_ids
from .scope import Scope

LAYER = "L0"
RECORDS = "L1"


def as_item(scope: Scope, item: Message) -> MessageItem:
    return MessageItem(
        id=item.id,
        session_id=item.session_id,
        team_id=scope.team_id,
        agent_id=scope.agent_id,
        user_id=item.user_id,
        task_id=item.task_id,
        role=cast(Role, item.role),
        content=item.content,
        timestamp=format_ms(int(item.timestamp)),
    )


def add(scope: Scope, batch: list[dict[str, Any]], authorize: Authorize) -> Added:
    raw = assets.of_scope(scope)
    principal = authorize()
    if not scope.session_id:
        raise Invalid(SESSION_REQUIRED)
    start = now_ms()
    times = [parse_ms(m["timestamp"]) if m.get("timestamp") else start + index for index, m in enumerate(batch)]
    new = [
        messages.NewMessage(new_message_id(at), m["role"], m["content"], at, term_counts(m["content"]))
        for at, m in zip(times, batch, strict=True)
    ]
    pieces = meaning.new_messages(scope.user_id, scope.session_id, scope.task_id, new)
    ahead = meaning.embed_ahead(pieces)  # the model calls run beside the write; the vectors go after it
    ids = [m.id for m in new]
    try:
        for _ in attempts("conversation/add"):
            asset = assets.ensure(raw, scope.team_id, scope.agent_id, principal.key_id)
            where = assets.where_of(asset)
            waiting = schedule.marks(asset, where, scope, ids)  # formation's: written first, like the postings
            formation_store.mark(waiting)
            try:
                kept = meaning.embedded(pieces, ahead) if where.words else frozenset()
                messages.add(where, scope.user_id, scope.session_id, scope.task_id, new, start, in_vectors=kept)
                break
            except Cancelled as exc:
                formation_store.unmark(waiting)
                if "epoch" not in exc.failed:
                    raise
                raw = assets.of_scope(scope)  # a clear moved the memory on: write into the new epoch
    except BaseException:
        meaning.settle(ahead)
        raise
    parallel(
        lambda: meaning.embed_after_write(where, pieces, ahead=ahead),
        lambda: schedule.after_add(asset, where, scope, ids),
    )
    return Added(accepted_ids=ids, accepted_versions=["v1"] * len(ids), total_count=len(ids))


def query(
    scope: Scope, limit: int, offset: int, time_start: str | None, time_end: str | None, authorize: Authorize
) -> Messages:
    start, end = time_window(time_start, time_end)

    def read(where: Where) -> list[Any]:
        return parallel(
            lambda: list(
                messages.newest(where, scope.user_id, scope.session_id, scope.task_id, start, end, offset + limit)
            ),
            lambda: messages.count(where, scope.user_id, scope.session_id, scope.task_id, start, end),
        )

    asset, found = assets.read_at_epoch(scope, authorize, read)
    if asset is None or found is None:
        return Messages(messages=[], total=0)
    page, total = found
    return Messages(messages=[as_item(scope, m) for m in page[offset : offset + limit]], total=total)


def count(scope: Scope, time_start: str | None, time_end: str | None, authorize: Authorize) -> Total:
    start, end = time_window(time_start, time_end)
    _, total = assets.read_at_epoch(
        scope,
        authorize,
        lambda where: messages.count(where, scope.user_id, scope.session_id, scope.task_id, start, end),
    )
    return Total(total=total or 0)


def search(
    scope: Scope,
    text: str,
    limit: int,
    time_start: str | None,
    time_end: str | None,
    authorize: Authorize,
    mode: str | None = None,
    reference_time: str | None = None,
) -> MessageHits:
    """The user's turns best first. Time words in ``text`` ("last week", "in May 2023") are read
    against ``reference_time`` (default now) and lift the turns said then (hybrid only)."""
    start, end = time_window(time_start, time_end)
    span = timewords.window(text, lower_bound_ms(reference_time) if reference_time else now_ms())
    mode = retrieval.resolve_mode(mode, meaning.enabled())

    def run(where: Where) -> retrieval.Found:
        def by_meaning(depth: int) -> retrieval.Meant | None:
            return meaning.semantic(
                where,
                LAYER,
                scope.user_id,
                text,
                depth,
                session_id=scope.session_id,
                task_id=scope.task_id,
                with_places=True,
            )

        asked = vector_words.Asked(
            where, LAYER, scope.user_id, text, query_terms(text), mode, scope.session_id, scope.task_id, start, end
        )
        return retrieval.search(
            pk=where.item_pk(LAYER, scope.user_id),
            text=text,
            limit=limit,
            mode=mode,
            filters=postings.Filters(session_id=scope.session_id, task_id=scope.task_id, start_ms=start, end_ms=end),
            stats=lambda: counters.of_user(where, LAYER, scope.user_id),
            fetch=lambda ids: messages.get_many(where, scope.user_id, ids, settled=True),
            text_of=lambda m: m.content,
            keep=lambda m: _admits(m, scope, start, end),
            semantic=by_meaning if mode != "keyword" else None,
            context=True,
            leads=lambda: leads(where, scope, text, limit, mode),
            per_result=TURN_POSTINGS,
            span=span,
            both=partial(vector_words.halves, asked) if where.words else None,
        )

    asset, result = assets.read_at_epoch(scope, authorize, run)
    if asset is None or result is None:
        return MessageHits(messages=[], mode_used=cast(Mode, mode))
    found = result.items
    return MessageHits(
        messages=[
            MessageHit(
                id=m.id,
                session_id=m.session_id,
                role=cast(Role, m.role),
                content=m.content,
                timestamp=format_ms(int(m.timestamp)),
                score=score,
            )
            for m, score in found
        ],
        mode_used=cast(Mode, result.mode_used),
    )


# A conversation search reads about 10 DynamoDB items per result asked for, whatever the memory
# holds: the turns' word half 7 postings per result, and, when the user has records, as many records
# as results — found by meaning in hybrid (a vector query, no postings; by words in keyword mode,
# 2 postings each) and read to know what they cite. At limit 10 on LoCoMo: p95 100 items read with
# its observations stored as records, 89 without (measured: 20 records by words and meaning beside
# 8 postings per turn read 206).
TURN_POSTINGS = 7
LEAD_POSTINGS = 2


def leads(where: Where, scope: Scope, text: str, limit: int, mode: str) -> list[tuple[str, float]] | None:
    """A turn is found by what was learnt from it: the user's ``limit`` records (of the task, when
    the request names one) that best match the query — by meaning when the search is hybrid, else
    in its mode — lend each message they cite the best such record's score. None when the user has
    no record (nothing is read beyond the counter)."""
    counted = counters.held(where, RECORDS, scope.user_id)
    if counted.items == 0:
        return None

    def by_meaning(depth: int) -> retrieval.Meant | None:
        return meaning.semantic(where, RECORDS, scope.user_id, text, depth, task_id=scope.task_id)

    lead_mode = "semantic" if mode == "hybrid" else mode
    asked = vector_words.Asked(
        where, RECORDS, scope.user_id, text, query_terms(text), lead_mode, task_id=scope.task_id, known=counted
    )
    found = retrieval.search(
        pk=where.item_pk(RECORDS, scope.user_id),
        text=text,
        limit=limit,
        mode=lead_mode,
        filters=postings.Filters(task_id=scope.task_id),
        stats=lambda: (counted.items, counted.tokens),
        fetch=lambda ids: records.get_many(where, scope.user_id, ids),
        text_of=lambda r: f"{r.content}\n{r.background or ''}",
        keep=lambda r: scope.task_id is None or r.task_id == scope.task_id,
        semantic=by_meaning if mode != "keyword" else None,
        per_result=LEAD_POSTINGS,
        both=partial(vector_words.halves, asked) if where.words else None,
    )
    lent: dict[str, float] = {}
    for record, score in found.items:
        for message_id in record.sources or []:
            lent[message_id] = max(lent.get(message_id, 0.0), score)
    return sorted(lent.items(), key=lambda pair: -pair[1])


def _admits(message: Message, scope: Scope, start: int | None, end: int | None) -> bool:
    """A message found by meaning passes the same filters as one found by words."""
    if scope.session_id is not None and message.session_id != scope.session_id:
        return False
    if scope.task_id is not None and message.task_id != scope.task_id:
        return False
    return (start is None or int(message.timestamp) >= start) and (end is None or int(message.timestamp) <= end)


def delete(
    scope: Scope, message_ids: list[str] | None, session_ids: list[str] | None, authorize: Authorize, request_id: str
) -> MessagesDeleted:
    named, sessions = clean_ids(message_ids), clean_ids(session_ids)
    if not named and not sessions:
        raise Invalid("(root): give at least one non-blank id in message_ids or session_ids")
    lookable = [m for m in named if issued_here("msg-", m)]

    def look(seen: Where) -> tuple[dict[str, Message], dict[str, list[Message]]]:
        where = seen.everything()  # an erasure reaches what a running import staged, too
        found = messages.get_many(where, scope.user_id, lookable) if lookable else {}
        listed = {
            session: list(messages.newest(where, scope.user_id, session, scope.task_id, None, None, None))
            if len(session) <= MAX_ID_CHARS
            else []
            for session in sessions
        }
        return found, listed

    asset, looked = assets.read_at_epoch(scope, authorize, look)
    principal = authorize()
    if asset is None or looked is None:
        return MessagesDeleted(
            deleted_count=0,
            deleted_ids=[],
            deleted_session_ids=[],
            not_found_ids=named + sessions,
            records_deleted=0,
            files_deleted=0,
            audit_ids=[],
        )
    where = assets.where_of(asset)
    in_task = (lambda m: True) if scope.task_id is None else (lambda m: m.task_id == scope.task_id)
    found, listed_by_session = looked
    doomed: dict[str, Message] = {i: m for i, m in found.items() if in_task(m)}
    members: dict[str, list[str]] = {}
    for session, listed in listed_by_session.items():
        members[session] = [m.id for m in listed]
        for message in listed:
            doomed.setdefault(message.id, message)
    context = EventContext(scope.team_id, principal.key_id, request_id, scope.agent_id, scope.memory_id)
    named_set = set(named)

    def events(chunk: list[Message]) -> list[AuditEvent]:
        ids = {m.id for m in chunk}
        wanted = [NewEvent("delete", LAYER, m.id, 1) for m in chunk if m.id in named_set]
        wanted += [NewEvent("delete", LAYER, s, n) for s in sessions if (n := sum(1 for i in members[s] if i in ids))]
        return event_items(wanted, context)

    forgetting = erasure.Forgetting(asset, where)
    removed, recorded, followed = erasure.erase_messages(
        asset,
        where,
        scope.user_id,
        list(doomed.values()),
        events,
        context,
        beside=forgetting,
        until=erasure.budget(),
        running=where.staged,
    )
    gone = {m.id for m in removed}
    deleted_ids = [m for m in named if m in gone]
    deleted_sessions = [s for s in sessions if any(i in gone for i in members[s])]
    return MessagesDeleted(
        deleted_count=len(gone),
        deleted_ids=deleted_ids,
        deleted_session_ids=deleted_sessions,
        not_found_ids=[m for m in named if m not in gone] + [s for s in sessions if s not in deleted_sessions],
        records_deleted=len(followed.records),
        files_deleted=followed.files_deleted + forgetting.exports,
        audit_ids=list(dict.fromkeys(e.event_id for e in recorded + followed.events)),
    )
