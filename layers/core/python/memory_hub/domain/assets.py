"""Memory assets (§4): one per (team, agent), created by the first write, never by a read."""

from __future__ import annotations

import time
from typing import Any

from ..clock import format_ms, now_ms
from ..storage import assets as stored
from ..storage import blobs, counters, layout, scenes
from ..storage.audit import EventContext, NewEvent, event_items
from ..storage.concurrency import parallel
from ..storage.models import Asset
from . import tokens
from .errors import Conflict, Forbidden, NotFound
from .principal import Principal
from .scope import Scope

COLLISION = "memory_id collision"
UNKNOWN = "memory_id: unknown memory"
OUTSIDE = "memory_id: outside this key's teams"


def new_epoch(previous: int) -> int:
    """A content epoch never used before for this memory id, even across a delete and re-create:
    microseconds since 1970, and always above the previous one."""
    return max(int(previous) + 1, time.time_ns() // 1000)


def get(memory_id: str) -> Asset | None:
    return stored.get(memory_id)


def owned_by(asset: Asset | None, team_id: str, agent_id: str) -> Asset | None:
    """The asset if it belongs to this pair; another pair spelling the same id sees none (§4)."""
    if asset is not None and asset.team_id == team_id and asset.agent_id == agent_id:
        return asset
    return None


def of_scope(scope: Scope) -> Asset | None:
    return owned_by(stored.get(scope.memory_id), scope.team_id, scope.agent_id)


def forget_exports(asset: Asset) -> int:
    """Erase every export of a memory (§15): after a delete by id, one may hold what was just
    deleted. One listing when there is none."""
    keys = blobs.keys_under(layout.export_prefix(asset.team_id, asset.agent_id))
    return blobs.delete_many(keys) if keys else 0


def ensure(asset: Asset | None, team_id: str, agent_id: str, owner: str, **fields: Any) -> Asset:
    """The pair's asset, creating it when ``asset`` (as just read) is None. A conditional create
    decides a race; another pair that spells the same memory_id gets 409 (§4)."""
    memory_id = layout.memory_id_of(team_id, agent_id)
    while asset is None:
        stamp = format_ms(now_ms())
        candidate = stored.new(
            memory_id=memory_id,
            team_id=team_id,
            agent_id=agent_id,
            owner=owner,
            created_at=stamp,
            updated_at=stamp,
            epoch=new_epoch(0),
            **fields,
        )
        if stored.create(candidate):
            return candidate
        asset = stored.get(memory_id)  # someone else created it (or created and deleted it) meanwhile
    if asset.team_id != team_id or asset.agent_id != agent_id:
        raise Conflict(COLLISION)
    return asset


def authorized(principal: Principal, memory_id: str, asset: Asset | None) -> Asset:
    """The named asset if the key's teams cover it: unknown → 404 for a ``*`` key and 403 for a
    team key, so a team admin cannot probe other teams' ids (§2)."""
    if asset is None:
        if principal.all_teams:
            raise NotFound(UNKNOWN)
        raise Forbidden(OUTSIDE)
    if not principal.covers_team(asset.team_id):
        raise Forbidden(OUTSIDE)
    return asset


def as_dict(asset: Asset) -> dict[str, Any]:
    return {
        "memory_id": asset.memory_id,
        "team_id": asset.team_id,
        "agent_id": asset.agent_id,
        "owner": asset.owner,
        "name": asset.name,
        "visibility": asset.visibility,
        "acl": asset.acl,
        "bindings": asset.bindings,
        "status": asset.status,
        "retention_days": None if asset.retention_days is None else int(asset.retention_days),
        "created_at": asset.created_at,
        "updated_at": asset.updated_at,
        "last_cleared_at": asset.last_cleared_at,
    }


def counts(asset: Asset) -> dict[str, int]:
    where = counters.Where(asset.team_id, asset.agent_id, int(asset.epoch), asset.memory_id)
    totals, files, persona = parallel(
        lambda: counters.layer_totals(where),
        lambda: scenes.count(asset.team_id, asset.agent_id, int(asset.epoch), ""),
        lambda: blobs.head(layout.persona_key(asset.team_id, asset.agent_id)),
    )
    has_persona = persona is not None and persona.metadata.get("epoch") == str(int(asset.epoch))
    return {"l0": totals["L0"], "l1": totals["L1"], "l2": files, "l3": int(has_persona)}


def create(principal: Principal, team_id: str, agent_id: str, fields: dict[str, Any]) -> dict[str, Any]:
    principal.require_team(team_id)
    asset = ensure(stored.get(layout.memory_id_of(team_id, agent_id)), team_id, agent_id, principal.key_id, **fields)
    return as_dict(asset)


def describe(principal: Principal, memory_id: str) -> dict[str, Any]:
    asset = authorized(principal, memory_id, stored.get(memory_id))
    return dict(as_dict(asset), counts=counts(asset))


def list_assets(principal: Principal, team_id: str | None, limit: int, next_token: str | None) -> dict[str, Any]:
    filters = {"route": "memory/list", "team": team_id, "teams": sorted(principal.team_ids)}
    after = tokens.decode(next_token, filters) if next_token is not None else None
    if team_id is not None:
        principal.require_team(team_id)
        ids = stored.of_team(team_id, after, limit + 1)
    elif principal.all_teams:
        ids = _all_ids(after, limit + 1)
    else:
        ids = sorted({m for team in principal.team_ids for m in stored.of_team(team, after, limit + 1)})[: limit + 1]
    page = stored.get_many(ids[:limit])
    answer: dict[str, Any] = {"items": [as_dict(a) for a in page]}
    if len(ids) > limit:
        answer["next_token"] = tokens.encode(ids[limit - 1], filters)
    return answer


def _all_ids(after: str | None, want: int) -> list[str]:
    """Memory ids of every asset in order (a '*' key without a team: a scan, sorted)."""
    ids = sorted(a.memory_id for a in stored.everything() if after is None or a.memory_id > after)
    return ids[:want]


def update(principal: Principal, memory_id: str, changes: dict[str, Any], request_id: str) -> dict[str, Any]:
    asset = authorized(principal, memory_id, stored.get(memory_id))
    context = EventContext(asset.team_id, principal.key_id, request_id, asset.agent_id, memory_id)
    events = event_items([NewEvent("memory_update", "asset", memory_id, len(changes))], context)
    updated = stored.update(asset, changes, format_ms(now_ms()), events)
    if updated is None:
        raise NotFound(UNKNOWN)
    return as_dict(updated)
