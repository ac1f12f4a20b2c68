"""Memory assets (§4): one per (team, agent), created by the first write, never by a read."""

from __future__ import annotations

from typing import Any

from pynamodb.exceptions import PutError

from .clock import format_ms, now_ms
from .dal.models import Asset
from .edge import Isolation, memory_id_of
from .errors import Conflict

COLLISION = "memory_id collision"


def new_epoch(previous: int) -> int:
    """A content epoch never used before for this memory id, even across a delete and re-create:
    microseconds since 1970, and always above the previous one."""
    import time

    return max(int(previous) + 1, time.time_ns() // 1000)


def get(memory_id: str) -> Asset | None:
    """The asset, read strongly consistent (its epoch fences clears)."""
    try:
        return Asset.get(memory_id, consistent_read=True)
    except Asset.DoesNotExist:
        return None


def owned_by(asset: Asset | None, team_id: str, agent_id: str) -> Asset | None:
    """The asset if it belongs to this pair; another pair spelling the same id sees none (§4)."""
    if asset is not None and asset.team_id == team_id and asset.agent_id == agent_id:
        return asset
    return None


def for_scope(scope: Isolation) -> Asset | None:
    return owned_by(get(scope.memory_id), scope.team_id, scope.agent_id)


def ensure(asset: Asset | None, team_id: str, agent_id: str, owner: str, **fields: Any) -> tuple[Asset, bool]:
    """The pair's asset, creating it if ``asset`` (as just read) is None. (asset, created).

    A conditional create decides a race; the loser re-reads and answers 409 on a collision."""
    memory_id = memory_id_of(team_id, agent_id)
    if asset is None:
        stamp = format_ms(now_ms())
        candidate = Asset(memory_id, team_id=team_id, agent_id=agent_id, owner=owner, created_at=stamp,
                          updated_at=stamp, epoch=new_epoch(0), **fields)
        try:
            candidate.save(condition=Asset.memory_id.does_not_exist())
            return candidate, True
        except PutError as exc:
            if exc.cause_response_code != "ConditionalCheckFailedException":
                raise
        asset = get(memory_id)
        if asset is None:  # deleted between our attempts: try once more
            return ensure(None, team_id, agent_id, owner, **fields)
    if asset.team_id != team_id or asset.agent_id != agent_id:
        raise Conflict(COLLISION)
    return asset, False


def as_dict(asset: Asset) -> dict[str, Any]:
    return {
        "memory_id": asset.memory_id, "team_id": asset.team_id, "agent_id": asset.agent_id,
        "owner": asset.owner, "name": asset.name, "visibility": asset.visibility, "acl": asset.acl,
        "bindings": asset.bindings, "status": asset.status,
        "retention_days": None if asset.retention_days is None else int(asset.retention_days),
        "created_at": asset.created_at, "updated_at": asset.updated_at,
        "last_cleared_at": asset.last_cleared_at,
    }


_UNREAD = object()


def authorized(principal: Any, memory_id: str, asset: Any = _UNREAD) -> Asset:
    """The named asset (read here unless given) if the key's teams cover it: unknown → 404 for a
    ``*`` key and 403 for a team key, so a team admin cannot probe other teams' ids (§2)."""
    from .errors import Forbidden, NotFound

    if asset is _UNREAD:
        asset = get(memory_id)
    if asset is None:
        if principal.all_teams:
            raise NotFound("memory_id: unknown memory")
        raise Forbidden("memory_id: outside this key's teams")
    if not principal.covers_team(asset.team_id):
        raise Forbidden("memory_id: outside this key's teams")
    return asset


def create(principal: Any, team_id: str, agent_id: str, fields: dict[str, Any]) -> dict[str, Any]:
    principal.require_team(team_id)
    asset, _ = ensure(get(memory_id_of(team_id, agent_id)), team_id, agent_id, owner=principal.key_id, **fields)
    return as_dict(asset)


def counts(asset: Asset) -> dict[str, int]:
    from . import items, layout
    from .dal import blobs
    from .dal.aws import gather
    from .dal.models import SceneEntry

    epoch = int(asset.epoch)
    totals, scenes, persona = gather(
        lambda: items.layer_totals(asset.team_id, asset.agent_id, epoch),
        lambda: SceneEntry.count(layout.scene_scope(asset.team_id, asset.agent_id, epoch), consistent_read=True),
        lambda: blobs.head(layout.persona_key(asset.team_id, asset.agent_id)),
    )
    has_persona = persona is not None and persona.metadata.get("epoch") == str(epoch)
    return {"l0": totals["L0"], "l1": totals["L1"], "l2": scenes, "l3": int(has_persona)}


def describe(principal: Any, memory_id: str) -> dict[str, Any]:
    asset = authorized(principal, memory_id)
    return dict(as_dict(asset), counts=counts(asset))


def list_assets(principal: Any, team_id: str | None, limit: int, next_token: str | None) -> dict[str, Any]:
    from . import tokens

    filters = {"route": "memory/list", "team": team_id, "teams": sorted(principal.team_ids)}
    after = tokens.decode(next_token, filters) if next_token is not None else None
    condition = Asset.memory_id > after if after else None
    if team_id is not None:
        principal.require_team(team_id)
        found = list(Asset.by_team.query(team_id, condition, limit=limit + 1))
    elif principal.all_teams:
        found = sorted(Asset.scan(condition), key=lambda a: a.memory_id)
    else:
        found = sorted((a for team in principal.team_ids
                        for a in Asset.by_team.query(team, condition, limit=limit + 1)),
                       key=lambda a: a.memory_id)
    page = found[:limit]
    answer: dict[str, Any] = {"items": [as_dict(a) for a in page]}
    if len(found) > limit:
        answer["next_token"] = tokens.encode(page[-1].memory_id, filters)
    return answer


def update(principal: Any, memory_id: str, changes: dict[str, Any], request_id: str) -> dict[str, Any]:
    from pynamodb.exceptions import UpdateError

    from . import audit
    from .audit import Event
    from .errors import NotFound

    asset = authorized(principal, memory_id)
    actions = [Asset.updated_at.set(format_ms(now_ms()))]
    for name, value in changes.items():
        attribute = getattr(Asset, name)
        actions.append(attribute.remove() if value is None else attribute.set(value))
    try:
        asset.update(actions=actions, condition=Asset.memory_id.exists())
    except UpdateError as exc:
        if exc.cause_response_code == "ConditionalCheckFailedException":
            raise NotFound("memory_id: unknown memory") from None
        raise
    audit.record([Event("memory_update", "asset", memory_id, len(changes))], memory_id=memory_id,
                 team_id=asset.team_id, actor=principal.key_id, request_id=request_id)
    return as_dict(asset)
