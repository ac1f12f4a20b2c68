"""L0 conversation messages (§7)."""

from __future__ import annotations

from collections import Counter
from concurrent.futures import Future
from typing import Any

from . import assets, audit, items, search
from .audit import Event
from .clock import now_ms, ordered_id, parse_time
from .dal.aws import gather
from .dal.models import Item
from .edge import Isolation, current
from .errors import BadRequest, Unavailable

US = items.SEP


def _full(scope: Isolation, item: Item) -> dict[str, Any]:
    return {"id": item.id, "session_id": item.session_id, "team_id": scope.team_id, "agent_id": scope.agent_id,
            "user_id": item.user_id, "task_id": item.task_id, "role": item.role, "content": item.content,
            "timestamp": items.iso(item.timestamp)}


def add(scope: Isolation, messages: list[dict[str, Any]], asset_read: Future[Any] | None = None) -> dict[str, Any]:
    """``asset_read``: the asset read the caller already started (in parallel with the key)."""
    ctx = current()
    principal = ctx.check_access()
    if not scope.session_id:
        raise BadRequest("session_id: is required (body or x-tdai-session-id header)")
    raw_asset = asset_read.result() if asset_read is not None else assets.get(scope.memory_id)
    start = now_ms()
    for _ in range(20):
        asset, _ = assets.ensure(raw_asset, scope.team_id, scope.agent_id, owner=principal.key_id)
        ids = _store(scope, int(asset.epoch), messages, start)
        if ids is not None:
            return {"accepted_ids": ids, "accepted_versions": ["v1"] * len(ids), "total_count": len(ids)}
        raw_asset = assets.get(scope.memory_id)  # a clear moved the memory on: write into the new epoch
    raise Unavailable("conversation/add: the memory was cleared repeatedly meanwhile, try again")


def _store(scope: Isolation, epoch: int, messages: list[dict[str, Any]], start: int) -> list[str] | None:
    """Write the messages and their counters into ``epoch``; None if that epoch was retired."""
    from pynamodb.exceptions import TransactWriteError

    pk = items.l0_pk(scope.team_id, scope.agent_id, epoch, scope.user_id)
    counters = items.counter_pk(scope.team_id, scope.agent_id, epoch)
    rows = []
    for index, message in enumerate(messages):
        ts = parse_time(message["timestamp"]) if message.get("timestamp") else start + index
        msg_id = ordered_id("msg-")
        rows.append(Item(pk, msg_id, id=msg_id, lsi1=items.time_key(ts, msg_id),
                         lsi2=f"{scope.session_id}{US}{items.time_key(ts, msg_id)}", user_id=scope.user_id,
                         session_id=scope.session_id, task_id=scope.task_id, role=message["role"],
                         content=message["content"], timestamp=ts))
    chunk = items.TRANSACTION_MAX - 3  # the epoch check and two counters ride along
    for begin in range(0, len(rows), chunk):
        part = rows[begin : begin + chunk]

        def build(transaction: Any, part: list[Item] = part) -> None:
            items.epoch_guard(transaction, scope.memory_id, epoch)
            for row in part:
                transaction.save(row)
            items.counter_delta(transaction, counters, {
                items.counter_sk("L0", scope.user_id): len(part),
                items.counter_sk("L0", scope.user_id, scope.session_id): len(part)})

        try:
            items.transact(build)
        except TransactWriteError as exc:
            if 0 in items.failed_conditions(exc):
                return None
            raise
    return [row.id for row in rows]


def _query(scope: Isolation, epoch: int, session_id: str | None, start: int | None, end: int | None,
           limit: int | None) -> Any:
    pk = items.l0_pk(scope.team_id, scope.agent_id, epoch, scope.user_id)
    task = Item.task_id == scope.task_id if scope.task_id is not None else None
    if session_id is not None:
        low = f"{session_id}{US}{items.time_bound(start, upper=False)}"
        high = f"{session_id}{US}{items.time_bound(end, upper=True)}"
        return Item.by_session.query(pk, Item.lsi2.between(low, high), filter_condition=task,
                                     scan_index_forward=False, consistent_read=True, limit=limit)
    condition = Item.lsi1.between(items.time_bound(start, False), items.time_bound(end, True))
    return Item.by_time.query(pk, condition, filter_condition=task, scan_index_forward=False,
                              consistent_read=True, limit=limit)


def _total(scope: Isolation, epoch: int, session_id: str | None, start: int | None, end: int | None) -> int:
    if start is None and end is None and scope.task_id is None:
        sk = items.counter_sk("L0", scope.user_id, session_id)
        return items.counter_values(items.counter_pk(scope.team_id, scope.agent_id, epoch), [sk])[sk]
    return sum(1 for _ in _query(scope, epoch, session_id, start, end, None))


def query(scope: Isolation, limit: int, offset: int, time_start: str | None, time_end: str | None) -> dict:
    start, end = items.time_range(time_start, time_end)
    asset = assets.for_scope(scope)
    current().check_access()
    if asset is None:
        return {"messages": [], "total": 0}
    epoch = int(asset.epoch)
    page, total = gather(lambda: list(_query(scope, epoch, scope.session_id, start, end, offset + limit)),
                         lambda: _total(scope, epoch, scope.session_id, start, end))
    return {"messages": [_full(scope, item) for item in page[offset : offset + limit]], "total": total}


def count(scope: Isolation, time_start: str | None, time_end: str | None) -> dict:
    start, end = items.time_range(time_start, time_end)
    asset = assets.for_scope(scope)
    current().check_access()
    if asset is None:
        return {"total": 0}
    return {"total": _total(scope, int(asset.epoch), scope.session_id, start, end)}


def search_messages(scope: Isolation, text: str, limit: int) -> dict:
    asset = assets.for_scope(scope)
    current().check_access()
    if asset is None:
        return {"messages": []}
    docs = [(item, item.content or "") for item in
            _query(scope, int(asset.epoch), scope.session_id, None, None, None)]
    ranked = search.rank(text, docs, limit)
    return {"messages": [{"id": item.id, "session_id": item.session_id, "role": item.role,
                          "content": item.content, "timestamp": items.iso(item.timestamp), "score": score}
                         for item, score in ranked]}


def clean_ids(raw: list[str] | None) -> list[str]:
    """Trimmed, blanks dropped, duplicates removed in first-seen order (§7)."""
    if raw is None:
        return []
    return list(dict.fromkeys(value.strip() for value in raw if value.strip()))


def delete(scope: Isolation, message_ids: list[str] | None, session_ids: list[str] | None,
           actor: str | None = None) -> dict[str, Any]:
    ctx = current()
    msg_ids, sessions = clean_ids(message_ids), clean_ids(session_ids)
    if not msg_ids and not sessions:
        raise BadRequest("(root): give at least one non-blank id in message_ids or session_ids")
    asset = assets.for_scope(scope)
    principal = ctx.check_access()
    if asset is None:
        return {"deleted_count": 0, "deleted_ids": [], "deleted_session_ids": [],
                "not_found_ids": msg_ids + sessions, "audit_ids": []}
    epoch = int(asset.epoch)
    pk = items.l0_pk(scope.team_id, scope.agent_id, epoch, scope.user_id)
    found = items.batch_get([(pk, m) for m in msg_ids if items.could_be_id(m)])
    # a task_id in the request narrows the scope (§3), exactly as the session path's _query does
    doomed: dict[str, Item] = {sk: item for (_, sk), item in found.items()
                               if item.id and (scope.task_id is None or item.task_id == scope.task_id)}
    by_session: dict[str, list[str]] = {}
    for session in sessions:
        members = list(_query(scope, epoch, session, None, None, None)) if items.could_be_id(session) else []
        by_session[session] = [m.id for m in members]
        for member in members:
            doomed.setdefault(member.id, member)
    removed = erase(scope.team_id, scope.agent_id, epoch, list(doomed.values()))
    deleted_ids = [m for m in msg_ids if m in removed]
    deleted_sessions = [s for s in sessions if any(m in removed for m in by_session[s])]
    not_found = [m for m in msg_ids if m not in removed] + [s for s in sessions if s not in deleted_sessions]
    events = [Event("delete", "L0", m, 1) for m in deleted_ids]
    events += [Event("delete", "L0", s, sum(1 for m in by_session[s] if m in removed)) for s in deleted_sessions]
    audit_ids = audit.record(events, memory_id=scope.memory_id, team_id=scope.team_id,
                             actor=actor or principal.key_id, request_id=ctx.request_id) if events else []
    return {"deleted_count": len(removed), "deleted_ids": deleted_ids, "deleted_session_ids": deleted_sessions,
            "not_found_ids": not_found, "audit_ids": audit_ids}


def _counter_deltas(messages: list[Item]) -> dict[str, int]:
    deltas: Counter[str] = Counter()
    for message in messages:
        deltas[items.counter_sk("L0", message.user_id)] -= 1
        deltas[items.counter_sk("L0", message.user_id, message.session_id)] -= 1
    return dict(deltas)


def _next_chunk(pending: list[Item]) -> list[Item]:
    """As many messages as fit one transaction together with the counters they change."""
    counters: set[str] = set()
    size = 0
    for message in pending:
        extra = {items.counter_sk("L0", message.user_id),
                 items.counter_sk("L0", message.user_id, message.session_id)} - counters
        if size + 1 + len(counters) + len(extra) > items.TRANSACTION_MAX:
            break
        counters |= extra
        size += 1
    return pending[:size]


def erase(team_id: str, agent_id: str, epoch: int, doomed: list[Item]) -> set[str]:
    """Delete messages and their counters, transaction by transaction; returns the ids removed.

    Each delete is conditional on the item still existing, so two racing deletes never count one
    message twice; a chunk that loses such a race is retried without the vanished items."""
    from pynamodb.exceptions import TransactWriteError

    counters = items.counter_pk(team_id, agent_id, epoch)
    removed: set[str] = set()
    pending = list(doomed)
    while pending:
        part = _next_chunk(pending)

        def build(transaction: Any, part: list[Item] = part) -> None:
            for message in part:
                transaction.delete(message, condition=Item.pk.exists())
            items.counter_delta(transaction, counters, _counter_deltas(part))

        try:
            items.transact(build)
        except TransactWriteError as exc:
            gone = set(items.failed_conditions(exc))
            if not gone:
                raise
            pending = [m for i, m in enumerate(part) if i not in gone] + pending[len(part):]
            continue
        removed.update(m.id for m in part)
        pending = pending[len(part):]
    return removed
