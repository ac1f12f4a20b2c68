"""Key administration (§2): create, list, revoke — within the caller's own teams."""

from __future__ import annotations

from typing import Any

from . import audit
from .audit import Event
from .auth import ALL_TEAMS, BOOTSTRAP_KEY_ID, Principal, hash_key, new_key
from .clock import format_ms, now_ms
from .dal.models import ApiKey, AuditEvent
from .errors import Conflict, Forbidden, NotFound
from .settings import get_settings

_UNKNOWN = "key_id: unknown key"


_COPIED = ("memory_id", "action", "layer", "target", "count", "actor", "request_id", "at")


def _record(principal: Principal, action: str, key_id: str, team_ids: list[str], request_id: str) -> str:
    """One event, stored once per team of the key so each team's admins see it. The copies share
    the event id (a reader of several teams sees it once); only the first feeds the all-teams view."""
    first = audit.build([Event(action, "key", key_id, 1)], memory_id=None, team_id=team_ids[0],
                        actor=principal.key_id, request_id=request_id, pk=f"key#{team_ids[0]}")[0]
    with AuditEvent.batch_write() as batch:
        batch.save(first)
        for team in team_ids[1:]:
            # shard is not nullable; any value but "all" keeps the copy out of the all-teams view
            batch.save(AuditEvent(f"key#{team}", first.event_id, team_id=team, shard="copy",
                                  **{name: getattr(first, name) for name in _COPIED}))
    return first.event_id


def create(principal: Principal, role: str, team_ids: list[str], name: str | None, request_id: str) -> dict:
    teams = list(dict.fromkeys(team_ids))
    if ALL_TEAMS in teams:
        teams = [ALL_TEAMS]
    if not principal.covers_teams(teams):
        raise Forbidden("team_ids: outside this key's teams")
    key_id, secret = new_key()
    item = ApiKey(key_id, key_hash=hash_key(secret), role=role, team_ids=teams, name=name,
                  created_at=format_ms(now_ms()), created_by=principal.key_id)
    item.save(condition=ApiKey.key_id.does_not_exist())
    _record(principal, "key_create", key_id, teams, request_id)
    return {"key_id": key_id, "api_key": secret, "role": role, "team_ids": teams, "name": name,
            "created_at": item.created_at}


def _bootstrap_entry() -> dict[str, Any] | None:
    if not get_settings().bootstrap_admin_key:
        return None
    return {"key_id": BOOTSTRAP_KEY_ID, "name": "bootstrap", "role": "admin", "team_ids": [ALL_TEAMS],
            "created_at": None, "revoked": False}


def list_keys(principal: Principal) -> dict:
    rows = []
    boot = _bootstrap_entry()
    if boot and principal.all_teams:
        rows.append(boot)
    for item in ApiKey.scan(consistent_read=True):
        if principal.covers_teams(list(item.team_ids)):
            rows.append({"key_id": item.key_id, "name": item.name, "role": item.role,
                         "team_ids": list(item.team_ids), "created_at": item.created_at,
                         "revoked": bool(item.revoked)})
    rows[1 if boot and principal.all_teams else 0 :] = sorted(
        rows[1 if boot and principal.all_teams else 0 :], key=lambda r: r["key_id"])
    return {"keys": rows}


def revoke(principal: Principal, key_id: str, request_id: str) -> dict:
    if key_id == BOOTSTRAP_KEY_ID and get_settings().bootstrap_admin_key:
        if not principal.all_teams:
            raise NotFound(_UNKNOWN)
        raise Conflict("key_id: the bootstrap key cannot be revoked while MEMORY_HUB_BOOTSTRAP_ADMIN_KEY is set")
    try:
        item = ApiKey.get(key_id, consistent_read=True)
    except ApiKey.DoesNotExist:
        raise NotFound(_UNKNOWN) from None
    if not principal.covers_teams(list(item.team_ids)):
        raise NotFound(_UNKNOWN)
    if not item.revoked:
        item.update(actions=[ApiKey.revoked.set(True)])
        _record(principal, "key_revoke", key_id, list(item.team_ids), request_id)
    return {"key_id": key_id, "revoked": True}
