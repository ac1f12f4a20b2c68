"""A memory's id, written once: ``chat_memory-<team>-<agent>`` (TencentDB's spelling; team and
agent ids ≤ 64 characters each). Several (team, agent) pairs may spell one id; the asset of a pair
is found by its pair, never by the string alone."""

from __future__ import annotations

MEMORY_PREFIX = "chat_memory-"
MAX_MEMORY_ID_CHARS = len(MEMORY_PREFIX) + 64 + 1 + 64


def memory_id_of(team_id: str, agent_id: str) -> str:
    return f"{MEMORY_PREFIX}{team_id}-{agent_id}"
