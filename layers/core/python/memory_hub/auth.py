"""API keys and principals (§2).

A key reads ``mhk_<12 hex key id>_<secret>``. Only ``sha256(key)`` is stored, under the key id,
so a lookup is one GetItem and the hash comparison is constant-time. The bootstrap admin key
(``MEMORY_HUB_BOOTSTRAP_ADMIN_KEY``) is compared in memory and needs no lookup at all.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass

from .errors import Forbidden, Unauthorized
from .settings import get_settings

ROLES = ("reader", "writer", "admin")
ROLE_RANK = {role: rank for rank, role in enumerate(ROLES)}
BOOTSTRAP_KEY_ID = "bootstrap"
ALL_TEAMS = "*"
INVALID_KEY = "authorization: invalid key"
UNKNOWN_SERVICE = "x-tdai-service-id: unknown service"

_KEY_SHAPE = re.compile(r"^mhk_([0-9a-f]{12})_[A-Za-z0-9_-]{20,128}$")


@dataclass(frozen=True)
class Principal:
    key_id: str
    role: str
    team_ids: tuple[str, ...]

    @property
    def all_teams(self) -> bool:
        return ALL_TEAMS in self.team_ids

    def covers_team(self, team_id: str) -> bool:
        return self.all_teams or team_id in self.team_ids

    def covers_teams(self, team_ids: list[str] | tuple[str, ...]) -> bool:
        """A key may manage keys whose teams lie within its own (``*`` only by a ``*`` key)."""
        if self.all_teams:
            return True
        return ALL_TEAMS not in team_ids and all(t in self.team_ids for t in team_ids)

    def require_role(self, role: str) -> None:
        if ROLE_RANK[self.role] < ROLE_RANK[role]:
            raise Forbidden(f"role {self.role} may not call this route (needs {role})")

    def require_team(self, team_id: str) -> None:
        if not self.covers_team(team_id):
            raise Forbidden("team_id: outside this key's teams")


def hash_key(api_key: str) -> str:
    return hashlib.sha256(api_key.encode("utf-8")).hexdigest()


def new_key() -> tuple[str, str]:
    """(key_id, api_key) for a fresh random key."""
    ident = secrets.token_hex(6)
    return f"key-{ident}", f"mhk_{ident}_{secrets.token_urlsafe(32)}"


def key_id_of(api_key: str) -> str | None:
    match = _KEY_SHAPE.match(api_key)
    return f"key-{match.group(1)}" if match else None


def bearer_token(header: str | None) -> str | None:
    if not header:
        return None
    scheme, _, token = header.strip().partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        return None
    return token


def check_service(service_id: str | None) -> None:
    if service_id is None or not hmac.compare_digest(service_id.strip().encode(),
                                                     get_settings().service_id.encode()):
        raise Unauthorized(UNKNOWN_SERVICE)


def bootstrap_principal(token: str) -> Principal | None:
    configured = get_settings().bootstrap_admin_key
    if configured and hmac.compare_digest(hash_key(token), hash_key(configured)):
        return Principal(BOOTSTRAP_KEY_ID, "admin", (ALL_TEAMS,))
    return None


def lookup_principal(token: str) -> Principal:
    """The principal of a stored key; Unauthorized (never saying why) otherwise.

    Always a strongly consistent read: a revoked key fails on the very next request."""
    from .dal.models import ApiKey

    key_id = key_id_of(token)
    if key_id is None:
        raise Unauthorized(INVALID_KEY)
    try:
        item = ApiKey.get(key_id, consistent_read=True)
    except ApiKey.DoesNotExist:
        raise Unauthorized(INVALID_KEY) from None
    if item.revoked or not hmac.compare_digest(item.key_hash, hash_key(token)):
        raise Unauthorized(INVALID_KEY)
    return Principal(item.key_id, item.role, tuple(item.team_ids))
