"""A ``memory-tdai`` tree as read: its messages, records, files and persona, whose lines to take
(Selection), and Malformed, which refuses a tree with every problem found."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

TDAI_KEY = "tdai"  # what TencentDB keeps and Memory Hub has no field for, under metadata.tdai
NEUTRAL_PRIORITY = 50
# MemoryRecord fields TencentDB has and Memory Hub lacks: kept under metadata.tdai, written back as fields
TDAI_KEPT = ("priority", "timestamps")
# A record's provenance: its own field, and for records imported before it was one, a copy
# kept under metadata.tdai (read back, written once at the line's top level, never kept again)
SOURCES = "source_message_ids"
TDAI_FIELDS = (*TDAI_KEPT, SOURCES)  # never written back inside metadata.tdai


class Malformed(Exception):
    """The tree cannot be imported: every problem found, as ``<file>:<line>: <problem>``."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems[:20]))
        self.problems = problems


@dataclass
class Message:
    source_id: str | None
    user_id: str
    session_id: str
    task_id: str | None
    role: str
    content: str
    timestamp: int
    recorded_at: int


@dataclass
class Record:
    source_id: str | None
    user_id: str
    session_id: str | None
    task_id: str | None
    content: str
    type: str
    background: str
    tags: list[str]
    metadata: dict[str, Any]
    version: int
    reinforced_count: int
    created_at: int
    updated_at: int
    sources: list[str] = field(default_factory=list)  # the tree's message ids it cites, as the line gives them
    formed: bool = False  # formed by a service's formation (absent = false)


@dataclass
class Tree:
    messages: list[Message] = field(default_factory=list)
    records: list[Record] = field(default_factory=list)
    files: dict[str, str] = field(default_factory=dict)  # scene path → text as it will be stored
    persona: str | None = None
    persona_meta: dict[str, Any] = field(default_factory=dict)
    backups: dict[str, str] = field(default_factory=dict)

    def size(self) -> int:
        """How many items and files the tree brings."""
        return sum(self.counts().values()) + len(self.backups)

    def counts(self) -> dict[str, int]:
        return {
            "l0": len(self.messages),
            "l1": len(self.records),
            "l2": len(self.files),
            "l3": int(self.persona is not None),
        }


@dataclass
class Selection:
    """Whose lines to take from a tree: the target user for lines without one (``--user``), and the
    source pair when the tree holds several (``--from-team``/``--from-agent``)."""

    user_id: str | None = None
    from_team: str | None = None
    from_agent: str | None = None
