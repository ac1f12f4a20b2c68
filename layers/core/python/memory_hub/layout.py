"""Where a memory's files live in S3 (§5, §6): ``profiles/<team>:<agent>/<memory_id>/``.

    scene_blocks/<path>                      L2 files (META block + content)
    persona.md                               L3 persona, exactly as written
    .backup/persona/persona_<stamp>_<v>.md   the 3 newest previous personas
    .metadata/                               reserved for the memory-tdai tree

Every object carries ``x-amz-meta-epoch``: the asset's content epoch when it was written. A
clear bumps the asset's epoch first, so an object from an older epoch is invisible at once,
whether or not its deletion has finished (see README, "Clear fence").
"""

from __future__ import annotations

from .edge import memory_id_of

SCENES = "scene_blocks/"
PERSONA = "persona.md"
PERSONA_BACKUPS = ".backup/persona/"
KEEP_PERSONA_BACKUPS = 3


def prefix(team_id: str, agent_id: str) -> str:
    return f"profiles/{team_id}:{agent_id}/{memory_id_of(team_id, agent_id)}/"


def scene_key(team_id: str, agent_id: str, path: str) -> str:
    return prefix(team_id, agent_id) + SCENES + path


def persona_key(team_id: str, agent_id: str) -> str:
    return prefix(team_id, agent_id) + PERSONA


def backup_key(team_id: str, agent_id: str, stamp: str, version: int) -> str:
    return f"{prefix(team_id, agent_id)}{PERSONA_BACKUPS}persona_{stamp}_{version}.md"


def scene_scope(team_id: str, agent_id: str, epoch: int) -> str:
    """Partition key of the scene index: one partition per (team, agent, epoch)."""
    return f"{team_id}:{agent_id}#{int(epoch)}"
