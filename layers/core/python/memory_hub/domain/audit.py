"""Audit queries. Events never hold content and are written by the changes themselves (in their
transactions); they belong to the (team, agent) pair that caused them, never to a memory_id string."""

from __future__ import annotations

import hashlib
from typing import cast

from ..storage import assets as stored_assets
from ..storage import audit as stored
from ..storage.concurrency import parallel
from ..storage.views import AuditEvent
from . import tokens
from .errors import Forbidden, NotFound
from .principal import Principal
from .results import AuditAction, AuditLayer
from .results_admin import Event, Events
from .scope import pairs_of

SYSTEM_CLEANUP = "system:cleanup"


def user_target(user_id: str) -> str:
    """How a user-memory delete names its user: the first 16 hex of sha256(user_id)."""
    return hashlib.sha256(user_id.encode("utf-8")).hexdigest()[:16]


def as_event(item: AuditEvent) -> Event:
    return Event(
        event_id=item.event_id,
        memory_id=item.memory_id,
        action=cast(AuditAction, item.action),
        layer=cast(AuditLayer, item.layer),
        target=item.target,
        count=int(item.count or 0),
        actor=item.actor,
        request_id=item.request_id,
        at=item.at,
        team_id=item.team_id,
        agent_id=item.agent_id,
    )


def _visible_pairs(principal: Principal, memory_id: str) -> list[tuple[str, str]]:
    """The (team, agent) splits of ``memory_id`` whose team this key covers (asset or not)."""
    pairs = [p for p in pairs_of(memory_id) if principal.covers_team(p[0])]
    if not pairs:
        if principal.all_teams:
            raise NotFound("memory_id: unknown memory")
        raise Forbidden("memory_id: outside this key's teams")
    return pairs


def query(
    principal: Principal, memory_id: str | None, action: str | None, limit: int, next_token: str | None
) -> Events:
    """Events newest first. Without ``memory_id``: every event the key's teams may see."""
    filters = {"route": "audit/query", "memory_id": memory_id, "action": action, "teams": sorted(principal.team_ids)}
    before = tokens.decode(next_token, filters) if next_token is not None else None
    want = limit + 1
    if memory_id is not None:
        pairs = _visible_pairs(principal, memory_id)
        batches = parallel(*[lambda p=p: stored.of_pair(p[0], p[1], before, action, want) for p in pairs])
        found = [event for batch in batches for event in batch]
        if not found and principal.all_teams and before is None and not _exists(memory_id, pairs):
            raise NotFound("memory_id: unknown memory")
    elif principal.all_teams:
        found = stored.of_everyone(before, action, want)
    else:
        batches = parallel(*[lambda t=t: stored.of_team(t, before, action, want) for t in principal.team_ids])
        found = [event for batch in batches for event in batch]
    unique = {event.event_id: event for event in found}
    events = sorted(unique.values(), key=lambda e: e.event_id, reverse=True)[:want]
    page = events[:limit]
    more = tokens.encode(page[-1].event_id, filters) if len(events) > limit else None
    return Events(events=[as_event(e) for e in page], next_token=more)


def _exists(memory_id: str, pairs: list[tuple[str, str]]) -> bool:
    """Whether one of these splits of ``memory_id`` has an asset now (one read of its partition; an
    asset a running import created is not there yet)."""
    found = stored_assets.spelling(memory_id)
    return any((a.team_id, a.agent_id) in pairs and a.hidden_by is None for a in found)
