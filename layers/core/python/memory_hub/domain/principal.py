"""Who is calling: a key's id, role (reader < writer < admin) and teams, and what they may do."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .errors import Forbidden

ROLES = ("reader", "writer", "admin")
ROLE_RANK = {role: rank for rank, role in enumerate(ROLES)}
ALL_TEAMS = "*"
BOOTSTRAP_KEY_ID = "bootstrap"
OUTSIDE_TEAMS = "team_id: outside this key's teams"


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

    def has_role(self, role: str) -> bool:
        return ROLE_RANK[self.role] >= ROLE_RANK[role]

    def require_team(self, team_id: str, message: str = OUTSIDE_TEAMS) -> None:
        if not self.covers_team(team_id):
            raise Forbidden(message)


# What a route hands the domain: waits for the caller's key, checks role and team, returns the
# principal (raises Unauthenticated or Forbidden). Called after the first reads have started, so
# the key lookup costs no round trip of its own.
Authorize = Callable[[], Principal]


def already(principal: Principal) -> Authorize:
    return lambda: principal
