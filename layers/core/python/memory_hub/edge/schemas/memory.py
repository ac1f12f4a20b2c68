"""L0 conversation and L1 atomic request models."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from ...domain.fields import AtomType, Background, Content, ExpectedVersion, Metadata, Tags
from .common import Isolated, Limit, Offset, Query, Strict, Time, TimeRange, across

SearchMode = Annotated[
    Literal["hybrid", "keyword", "semantic"],
    Field(
        description="hybrid (words and meaning fused; the default where embeddings are on), keyword (words only; "
        "the default otherwise) or semantic (meaning only; 400 where embeddings are off). data.mode_used says what ran."
    ),
]


class Message(Strict):
    role: Literal["user", "assistant"]
    content: Content
    timestamp: Time | None = Field(None, description="default: the request time plus the message's index in ms")


class ConversationAdd(Isolated):
    """session_id is required here, from the body or the x-tdai-session-id header (400 without)."""

    messages: list[Message] = Field(
        min_length=1, max_length=100, description="session_id (body or header) is required here (400)"
    )


class ConversationQuery(Isolated, TimeRange):
    limit: Limit = 20
    offset: Offset = 0


class ConversationSearch(Isolated, TimeRange):
    query: Query
    limit: Limit = 5
    mode: SearchMode | None = None
    reference_time: Time | None = Field(
        None,
        description="what time words in the query (last week, in May 2023, yesterday) are read against; "
        "default: the request's time",
    )


class ConversationCount(Isolated, TimeRange):
    pass


class ConversationDelete(Isolated):
    """At least one non-blank id in message_ids or session_ids (else 400)."""

    message_ids: list[str] | None = Field(
        None, max_length=5000, description="trimmed, blanks dropped, duplicates removed (first seen kept)"
    )
    session_ids: list[str] | None = Field(
        None, max_length=100, description="every message of these sessions; at least one id in all → else 400"
    )


SOURCES = (
    "ids of messages of the same user (and task) this record was drawn from; each must exist (else 400 "
    "source_message_ids.<i>: unknown message); duplicates removed, order kept. Erasing one of them erases the record"
)
SourceIds = Annotated[list[str], Field(max_length=100, description=SOURCES)]


class AtomicAdd(Isolated):
    content: Content = Field(description="the same content, type and background in the scope reinforces a record")
    type: AtomType = "episodic"
    background: Background = ""
    tags: Tags = Field(default_factory=list)
    metadata: Metadata = Field(default_factory=dict, description="any object, ≤ 4096 bytes as compact JSON")
    source_message_ids: SourceIds | None = Field(None, description=SOURCES + "; a reinforcing add joins them")


class AtomicQuery(Isolated, TimeRange):
    type: AtomType | None = None
    limit: Limit = 20
    offset: Offset = 0


class AtomicSearch(Isolated, TimeRange):
    query: Query
    type: AtomType | None = None
    limit: Limit = 5
    mode: SearchMode | None = None


class AtomicCount(Isolated, TimeRange):
    type: AtomType | None = None


_CHANGES = ("content", "background", "tags", "metadata", "source_message_ids")
_NOTHING = "nothing to update: give content, background, tags, metadata or source_message_ids"


class AtomicUpdate(Isolated):
    """At least one of content, background, tags, metadata and source_message_ids (else 400); the
    others stay as they are."""

    id: Annotated[str, Field(min_length=1)]  # longer than any id issued: unknown (404)
    content: Content | None = None
    background: Background | None = None
    tags: Tags | None = None
    metadata: Metadata | None = None
    source_message_ids: SourceIds | None = Field(
        None, description=SOURCES + "; replaces the list (the record still answers to every message it cited)"
    )
    expected_version: ExpectedVersion | None = Field(
        None, description="the record's version must be this, else 409 (whole numbers 0..2^53)"
    )

    _has_changes = across(*_CHANGES, rule=lambda *changes: None if any(v is not None for v in changes) else _NOTHING)


class AtomicDelete(Isolated):
    ids: list[str] = Field(
        min_length=1, max_length=5000, description="trimmed, blanks dropped, duplicates removed; none left → 400"
    )
    expected_versions: dict[str, ExpectedVersion] | None = Field(
        None,
        description="{id: version} (whole numbers 0..2^53): every key must be in ids; any other version → 409, "
        "nothing deleted",
    )


class FormationStatusRequest(Isolated):
    """session_id narrows pending_messages; the other fields are the user's."""


class FormationRunRequest(Isolated):
    backfill: bool = Field(
        False,
        description="also form the user's messages never formed (added while formation was off, or imported)",
    )
