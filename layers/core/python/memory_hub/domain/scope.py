"""The isolation of a data-plane request: team + agent (+ user, session, task)."""

from __future__ import annotations

from dataclasses import dataclass

from ..memory_ids import MAX_MEMORY_ID_CHARS, MEMORY_PREFIX, memory_id_of


@dataclass(frozen=True)
class Scope:
    team_id: str
    agent_id: str
    user_id: str
    session_id: str | None = None
    task_id: str | None = None

    @property
    def memory_id(self) -> str:
        return memory_id_of(self.team_id, self.agent_id)


def spells(memory_id: str, team_id: str, agent_id: str) -> bool:
    """Whether the pair's memory_id is ``memory_id`` (several pairs may spell one)."""
    return memory_id_of(team_id, agent_id) == memory_id


def pairs_of(memory_id: str) -> list[tuple[str, str]]:
    """Every (team, agent) split that spells ``memory_id`` (``a-b`` + ``c`` and ``a`` + ``b-c``
    spell the same id), each part a valid team/agent id."""
    from .rules import team_or_agent_problem

    if not memory_id.startswith(MEMORY_PREFIX) or len(memory_id) > MAX_MEMORY_ID_CHARS:
        return []
    rest = memory_id[len(MEMORY_PREFIX) :]
    found = []
    for index, char in enumerate(rest):
        if char == "-":
            team, agent = rest[:index], rest[index + 1 :]
            if team and agent and not team_or_agent_problem(team) and not team_or_agent_problem(agent):
                found.append((team, agent))
    return found
