"""Audit events (AuditTable). Events are put in the same transaction as the change they record
(``event_items`` builds them for a ``Transaction``); this module also reads them back."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..clock import format_ms, id_ms, ordered_id
from . import layout, views
from .concurrency import for_each
from .models import AuditEvent, own, snapshot


@dataclass(frozen=True)
class NewEvent:
    action: str
    layer: str
    target: str | None
    count: int = 0


@dataclass(frozen=True)
class EventContext:
    """Who caused the events and where: a memory's (team, agent) pair, or a team for key events."""

    team_id: str
    actor: str
    request_id: str | None
    agent_id: str | None = None
    memory_id: str | None = None


def event_items(events: list[NewEvent], context: EventContext) -> list[views.AuditEvent]:
    """The events' items, each ``at`` the time its id was issued: events are listed in id order,
    so newest first by id is newest first by ``at`` too (a clock read before the ids were taken
    could stamp the later id earlier, when two threads of one erasure record events at once)."""
    if context.agent_id is not None:
        pk = layout.audit_pair_pk(context.team_id, context.agent_id)
    else:
        pk = layout.audit_key_pk(context.team_id)
    ids = [ordered_id("evt-") for _ in events]
    return [
        _view(
            pk,
            event_id,
            memory_id=context.memory_id,
            team_id=context.team_id,
            agent_id=context.agent_id,
            shard=layout.audit_all_shard(event_id),
            action=e.action,
            layer=e.layer,
            target=e.target,
            count=e.count,
            actor=context.actor,
            request_id=context.request_id,
            at=format_ms(id_ms(event_id)),
        )
        for event_id, e in zip(ids, events, strict=True)
    ]


def key_event_copies(first: views.AuditEvent, team_ids: list[str]) -> list[views.AuditEvent]:
    """The same key event for each further team of the key (same event id; only the first copy is
    in the all-teams view), so each team's admins see it."""
    fields = {
        name: getattr(first, name)
        for name in ("memory_id", "action", "layer", "target", "count", "actor", "request_id", "at")
    }
    return [_view(layout.audit_key_pk(team), first.event_id, team_id=team, shard=None, **fields) for team in team_ids]


def put(events: list[views.AuditEvent]) -> None:
    if len(events) == 1:
        own(AuditEvent, events[0]).save()
    elif events:
        with AuditEvent.batch_write() as batch:
            for event in events:
                batch.save(own(AuditEvent, event))


def _filters(action: str | None) -> Any:
    return AuditEvent.action == action if action else None


ERASING_ACTIONS = ("delete", "user_memory_delete", "retention_cleanup", "clear", "memory_delete", "scenario_rm")


def erasures_since(team_id: str, agent_id: str, since_ms: int) -> set[str]:
    """The ids of the pair's erasure events at or after ``since_ms`` (event ids begin with their
    time, so the query reads only the events since then)."""
    events = AuditEvent.query(
        layout.audit_pair_pk(team_id, agent_id),
        AuditEvent.event_id >= f"evt-{max(since_ms, 0):012x}",
        filter_condition=AuditEvent.action.is_in(*ERASING_ACTIONS),
        consistent_read=True,
    )
    return {event.event_id for event in events}


FILTERED_PAGE = 1_000  # events read per call when an action filter skips most of them


def _newest(
    query: Callable[..., Any],
    key: str,
    before: str | None,
    action: str | None,
    limit: int,
    filtered_page: int = FILTERED_PAGE,
    **more: Any,
) -> list[views.AuditEvent]:
    """Events of one partition of a table or index, newest first, older than ``before``. DynamoDB
    reads ``limit`` events a call when every one read is answered; with an action filter (applied
    after the read) a page of ``FILTERED_PAGE``, so a rare action costs a few calls — with pages of
    ``limit``, a rare action at ``limit`` 1 took one call per event of the account."""
    condition = AuditEvent.event_id < before if before else None
    return [
        snapshot(views.AuditEvent, event)
        for event in query(
            key,
            condition,
            filter_condition=_filters(action),
            scan_index_forward=False,
            limit=limit,
            page_size=limit if action is None else max(limit, filtered_page),
            **more,
        )
    ]


def of_pair(team_id: str, agent_id: str, before: str | None, action: str | None, limit: int) -> list[views.AuditEvent]:
    """A pair's events, newest first (strongly consistent)."""
    return _newest(
        AuditEvent.query, layout.audit_pair_pk(team_id, agent_id), before, action, limit, consistent_read=True
    )


def has_events(team_id: str, agent_id: str) -> bool:
    return bool(list(AuditEvent.query(layout.audit_pair_pk(team_id, agent_id), limit=1, consistent_read=True)))


def of_team(team_id: str, before: str | None, action: str | None, limit: int) -> list[views.AuditEvent]:
    """Every event of a team (memories and keys), newest first — a global index: eventually consistent."""
    return _newest(AuditEvent.by_team.query, team_id, before, action, limit)


def of_everyone(before: str | None, action: str | None, limit: int) -> list[views.AuditEvent]:
    """Every event, newest first (the all-teams view: each of its partitions at once, merged) —
    a global index: eventually consistent. Each partition reads its newest ``limit`` (the newest of
    all may sit in one), so a page costs up to 17 times a partition's; with an action filter each
    reads its share of a filtered page a call."""
    shards = layout.audit_all_partitions()
    page = FILTERED_PAGE // len(shards)

    def newest(shard: str) -> list[views.AuditEvent]:
        return _newest(AuditEvent.by_all.query, shard, before, action, limit, page)

    parts = for_each(newest, shards, width=len(shards))
    return sorted((e for part in parts for e in part), key=lambda e: e.event_id, reverse=True)[:limit]


def _view(pk: str, event_id: str, **attributes: Any) -> views.AuditEvent:
    """A new event's view (``put`` or a transaction stores it)."""
    return snapshot(views.AuditEvent, AuditEvent(pk, event_id, **attributes))
