"""Where a memory's files are kept in the bucket: the one place S3 object keys are built.

One prefix per memory, ``profiles/<team>:<agent>/<memory_id>/`` (``<memory_id>`` as
``memory_id_of`` spells it), holding TencentDB's ``memory-tdai`` tree and this service's own
working files:

    scene_blocks/<path>                  L2 scene files (``<path>`` as the API names it)
    persona.md                           the L3 persona
    .backup/persona/persona_<stamp>_<version>.md   persona backups
    .metadata/…                          the tree's metadata (exports)
    .exports/<job>.tar.gz                an export archive (``user-<u>-<job>`` for one user)
    .exports/.marker                     put by each export before its archive: erasures list
                                         the exports only when it is there (``EXPORT_MARKER``)
    .imports/<job>.tar.gz                an import's upload
    .imports/<job>.journal.json          what the import is about to write (its undo)
    .imports/<job>.saved/<n>             live files it overwrites, kept for the undo
    .imports/<job>.staged/<kind>-<n>     its files until it commits

``<u>``, ``<n>``: SHA-256 digests of a user id and of a path. Team and agent ids (≤ 64 of
``[A-Za-z0-9._@-]``) and L2 paths (≤ 255 bytes) keep every key within S3's 1,024 bytes.
The domain names files by these keys and never spells one itself.
"""

from __future__ import annotations

from ..memory_ids import memory_id_of
from .layout import digest, pair

SCENES = "scene_blocks/"
PERSONA = "persona.md"
PERSONA_BACKUPS = ".backup/persona/"
METADATA = ".metadata/"
EXPORTS = ".exports/"
EXPORT_MARKER = ".marker"  # under EXPORTS, never an archive's name (those end in .tar.gz)
IMPORTS = ".imports/"
FORMED_FOLDER = "formed/"  # an L2 folder only formation writes under


def prefix(team_id: str, agent_id: str) -> str:
    return f"profiles/{pair(team_id, agent_id)}/{memory_id_of(team_id, agent_id)}/"


def scene_key(team_id: str, agent_id: str, path: str) -> str:
    return prefix(team_id, agent_id) + SCENES + path


def persona_key(team_id: str, agent_id: str) -> str:
    return prefix(team_id, agent_id) + PERSONA


def backup_prefix(team_id: str, agent_id: str) -> str:
    return prefix(team_id, agent_id) + PERSONA_BACKUPS


def backup_key(team_id: str, agent_id: str, stamp: str, version: int) -> str:
    return f"{backup_prefix(team_id, agent_id)}persona_{stamp}_{version}.md"


def backup_named(team_id: str, agent_id: str, name: str) -> str:
    """A persona backup by the file name an export gave it (``persona_<stamp>_<version>.md``)."""
    return backup_prefix(team_id, agent_id) + name


def export_prefix(team_id: str, agent_id: str) -> str:
    return prefix(team_id, agent_id) + EXPORTS


def export_marker(team_id: str, agent_id: str) -> str:
    return export_prefix(team_id, agent_id) + EXPORT_MARKER


def export_key(team_id: str, agent_id: str, job_id: str, user_id: str | None) -> str:
    """An export's archive: the whole memory, or one user's part of it."""
    name = f"user-{digest(user_id)}-{job_id}" if user_id else job_id
    return f"{export_prefix(team_id, agent_id)}{name}.tar.gz"


def import_prefix(team_id: str, agent_id: str) -> str:
    return prefix(team_id, agent_id) + IMPORTS


def import_upload_key(team_id: str, agent_id: str, import_id: str) -> str:
    return f"{import_prefix(team_id, agent_id)}{import_id}.tar.gz"


def import_files_prefix(team_id: str, agent_id: str, import_id: str) -> str:
    """Every working file of one import (journal, saved copies, staged files), not its upload."""
    return f"{import_prefix(team_id, agent_id)}{import_id}."


def journal_key(team_id: str, agent_id: str, import_id: str) -> str:
    return f"{import_files_prefix(team_id, agent_id, import_id)}journal.json"


def saved_key(team_id: str, agent_id: str, import_id: str, name: str) -> str:
    return f"{import_files_prefix(team_id, agent_id, import_id)}saved/{digest(name)}"


def staged_key(team_id: str, agent_id: str, import_id: str, kind: str, name: str) -> str:
    return f"{import_files_prefix(team_id, agent_id, import_id)}staged/{kind}-{digest(name)}"


def formed_folder(user_id: str) -> str:
    """A user's formed scenes and persona: ``formed/<first 16 hex of sha256(user_id)>/`` (an L2 path)."""
    return f"{FORMED_FOLDER}{digest(user_id, 16)}/"
