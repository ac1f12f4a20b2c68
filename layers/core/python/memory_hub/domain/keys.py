"""API keys: who a bearer token is, and key administration within the caller's own teams.

A key reads ``mhk_<12 hex key id>_<secret>``. Only ``sha256(key)`` is stored, under the key id, so
authentication is one strongly consistent GetItem and a constant-time compare. The bootstrap admin
key (a Secrets Manager secret, when the deployment has one) is compared in memory."""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from typing import Any, cast

from ..clock import format_ms, now_ms
from ..storage import apikeys
from ..storage.audit import EventContext, NewEvent, event_items, key_event_copies
from ..storage.errors import Cancelled
from ..storage.secrets import bootstrap_admin_key
from ..storage.views import ApiKey
from .errors import Conflict, Forbidden, NotFound, Unauthenticated
from .principal import ALL_TEAMS, BOOTSTRAP_KEY_ID, Principal
from .results import KeyRole
from .results_admin import KeyCreated, KeyRevoked, KeyRow, Keys

INVALID_KEY = "authorization: invalid key"
UNKNOWN_KEY = "key_id: unknown key"
_KEY_SHAPE = re.compile(r"mhk_([0-9a-f]{12})_[A-Za-z0-9_-]{20,128}", re.ASCII)


def hash_key(api_key: str) -> str:
    return hashlib.sha256(api_key.encode("utf-8")).hexdigest()


def _new_key() -> tuple[str, str]:
    ident = secrets.token_hex(6)
    return f"key-{ident}", f"mhk_{ident}_{secrets.token_urlsafe(32)}"


def _bootstrap(token: str) -> Principal | None:
    configured = bootstrap_admin_key()
    if configured and hmac.compare_digest(hash_key(token), hash_key(configured)):
        return Principal(BOOTSTRAP_KEY_ID, "admin", (ALL_TEAMS,))
    return None


def authenticate(token: str) -> Principal:
    """The principal of a bearer token; Unauthenticated (never saying why) otherwise."""
    principal = _bootstrap(token)
    if principal is not None:
        return principal
    match = _KEY_SHAPE.fullmatch(token)
    item = apikeys.get(f"key-{match.group(1)}") if match else None
    if item is None or item.revoked or not hmac.compare_digest(item.key_hash, hash_key(token)):
        raise Unauthenticated(INVALID_KEY)
    return Principal(item.key_id, item.role, tuple(item.team_ids))


def _events(action: str, key_id: str, team_ids: list[str], principal: Principal, request_id: str) -> list[Any]:
    """One event, stored once per team of the key (same event id), so each team's admins see it."""
    first = event_items([NewEvent(action, "key", key_id, 1)], EventContext(team_ids[0], principal.key_id, request_id))[
        0
    ]
    return [first, *key_event_copies(first, team_ids[1:])]


def create(principal: Principal, role: str, team_ids: list[str], name: str | None, request_id: str) -> KeyCreated:
    teams = list(dict.fromkeys(team_ids))
    if ALL_TEAMS in teams:
        teams = [ALL_TEAMS]
    if not principal.covers_teams(teams):
        raise Forbidden("team_ids: outside this key's teams")
    key_id, secret = _new_key()
    events = _events("key_create", key_id, teams, principal, request_id)
    item = apikeys.create(key_id, hash_key(secret), role, teams, name, format_ms(now_ms()), principal.key_id, events)
    return KeyCreated(
        key_id=key_id, api_key=secret, role=cast(KeyRole, role), team_ids=teams, name=name, created_at=item.created_at
    )


def _row(item: ApiKey) -> KeyRow:
    return KeyRow(
        key_id=item.key_id,
        name=item.name,
        role=cast(KeyRole, item.role),
        team_ids=list(item.team_ids),
        created_at=item.created_at,
        revoked=bool(item.revoked),
    )


def list_keys(principal: Principal) -> Keys:
    rows = sorted(
        (_row(i) for i in apikeys.everything() if principal.covers_teams(list(i.team_ids))), key=lambda r: r.key_id
    )
    if principal.all_teams and bootstrap_admin_key():
        bootstrap = KeyRow(
            key_id=BOOTSTRAP_KEY_ID,
            name="bootstrap",
            role="admin",
            team_ids=[ALL_TEAMS],
            created_at=None,
            revoked=False,
        )
        rows.insert(0, bootstrap)
    return Keys(keys=rows)


def revoke(principal: Principal, key_id: str, request_id: str) -> KeyRevoked:
    if key_id == BOOTSTRAP_KEY_ID and bootstrap_admin_key():
        if not principal.all_teams:
            raise NotFound(UNKNOWN_KEY)
        raise Conflict("key_id: the bootstrap key cannot be revoked while the deployment has one")
    item = apikeys.get(key_id)
    if item is None or not principal.covers_teams(list(item.team_ids)):
        raise NotFound(UNKNOWN_KEY)
    if not item.revoked:
        try:
            apikeys.revoke(item, _events("key_revoke", key_id, list(item.team_ids), principal, request_id))
        except Cancelled:
            pass  # revoked by someone else meanwhile: revoking is idempotent
    return KeyRevoked(key_id=key_id, revoked=True)
