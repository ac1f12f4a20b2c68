"""Audit events (§11): who did what, when and how many. Never content."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any, Iterable

from .clock import format_ms, now_ms, ordered_id
from .dal.models import AuditEvent

SYSTEM_CLEANUP = "system:cleanup"


@dataclass(frozen=True)
class Event:
    action: str
    layer: str
    target: str | None
    count: int = 0


def user_target(user_id: str) -> str:
    return hashlib.sha256(user_id.encode("utf-8")).hexdigest()[:16]


def build(events: Iterable[Event], *, memory_id: str | None, team_id: str, actor: str,
          request_id: str | None, pk: str | None = None) -> list[AuditEvent]:
    at = format_ms(now_ms())
    items = []
    for event in events:
        items.append(AuditEvent(pk or memory_id, ordered_id("evt-"), memory_id=memory_id, team_id=team_id,
                                action=event.action, layer=event.layer, target=event.target,
                                count=event.count, actor=actor, request_id=request_id, at=at))
    return items


def record(events: Iterable[Event], *, memory_id: str | None, team_id: str, actor: str,
           request_id: str | None, pk: str | None = None) -> list[str]:
    """Write the events; returns their ids (one batch call)."""
    items = build(events, memory_id=memory_id, team_id=team_id, actor=actor, request_id=request_id, pk=pk)
    if len(items) == 1:
        items[0].save()
    elif items:
        with AuditEvent.batch_write() as batch:
            for item in items:
                batch.save(item)
    return [item.event_id for item in items]


def as_dict(item: AuditEvent) -> dict[str, Any]:
    return {"event_id": item.event_id, "memory_id": item.memory_id, "action": item.action,
            "layer": item.layer, "target": item.target, "count": int(item.count or 0), "actor": item.actor,
            "request_id": item.request_id, "at": item.at, "team_id": item.team_id}


def _scope_of(memory_id: str) -> str | None:
    """The team a memory belongs to: its asset's, or (asset deleted) its events'."""
    from . import assets

    asset = assets.get(memory_id)
    if asset is not None:
        return asset.team_id
    for item in AuditEvent.query(memory_id, limit=1, consistent_read=True):
        return item.team_id
    return None


def query(principal: Any, memory_id: str | None, action: str | None, limit: int,
          next_token: str | None) -> dict[str, Any]:
    """Events newest first. Without ``memory_id``: every event the key's teams may see."""
    from . import tokens
    from .errors import Forbidden, NotFound

    filters = {"route": "audit/query", "memory_id": memory_id, "action": action,
               "teams": sorted(principal.team_ids)}
    after = tokens.decode(next_token, filters) if next_token is not None else None
    condition = AuditEvent.event_id < after if after else None
    action_filter = AuditEvent.action == action if action else None
    want = limit + 1

    if memory_id is not None:
        team = _scope_of(memory_id)
        if team is None or not principal.covers_team(team):
            if principal.all_teams:
                raise NotFound("memory_id: unknown memory")
            raise Forbidden("memory_id: outside this key's teams")
        items = list(AuditEvent.query(memory_id, condition, filter_condition=action_filter,
                                      scan_index_forward=False, limit=want, consistent_read=True))
    elif principal.all_teams:
        items = list(AuditEvent.by_all.query("all", condition, filter_condition=action_filter,
                                             scan_index_forward=False, limit=want))
    else:
        merged: dict[str, AuditEvent] = {}
        for team in principal.team_ids:
            for item in AuditEvent.by_team.query(team, condition, filter_condition=action_filter,
                                                 scan_index_forward=False, limit=want):
                merged.setdefault(item.event_id, item)
        items = sorted(merged.values(), key=lambda i: i.event_id, reverse=True)[:want]
    page = items[:limit]
    answer: dict[str, Any] = {"events": [as_dict(item) for item in page]}
    if len(items) > limit:
        answer["next_token"] = tokens.encode(page[-1].event_id, filters)
    return answer
