"""Memory assets (§4): one per (team, agent), created by the first write, never by a read."""

from __future__ import annotations

from typing import Any

from pynamodb.exceptions import PutError

from .clock import format_ms, now_ms
from .dal.models import Asset
from .edge import Isolation, memory_id_of
from .errors import Conflict

COLLISION = "memory_id collision"


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
                          updated_at=stamp, epoch=0, **fields)
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
