"""Request models of the memory data plane: L0 conversation (§7), L1 records (§8), assets (§4)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, ValidationError, field_validator, model_validator
from pydantic_core import PydanticCustomError

from .clock import parse_time
from .schemas import Isolated, NoControl, Strict, TeamId


def _time(value: str) -> str:
    parse_time(value)
    return value


Time = Annotated[str, AfterValidator(_time)]
Limit = Annotated[int, Field(ge=1, le=100)]
Offset = Annotated[int, Field(ge=0, le=10_000)]
Query = Annotated[str, Field(min_length=1, max_length=2048)]
Content = Annotated[str, Field(min_length=1, max_length=8192)]
AtomType = Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[a-z_]+$")]
Tag = Annotated[str, Field(min_length=1, max_length=64)]
Background = Annotated[str, Field(max_length=2048)]


class TimeRange(Strict):
    time_start: Time | None = None
    time_end: Time | None = None

    @model_validator(mode="wrap")
    @classmethod
    def _ordered(cls, data: Any, handler: Any) -> Any:
        """time_start ≤ time_end — reported next to any field errors, not instead of them (§1)."""
        reversed_range = _reversed(data)
        try:
            model = handler(data)
        except ValidationError as exc:
            if not reversed_range:
                raise
            errors = [{"type": e["type"], "loc": e["loc"], "input": e["input"], **({"ctx": e["ctx"]} if "ctx" in e
                                                                                  else {})} for e in exc.errors()]
            raise ValidationError.from_exception_data(cls.__name__, errors + [_ORDER_ERROR]) from None
        if reversed_range:
            raise ValidationError.from_exception_data(cls.__name__, [_ORDER_ERROR])
        return model


_ORDER_ERROR: Any = {"type": PydanticCustomError("time_order", "time_start must not be after time_end"),
                     "loc": (), "input": None}


def _reversed(data: Any) -> bool:
    if not isinstance(data, dict):
        return False
    start, end = data.get("time_start"), data.get("time_end")
    try:
        return isinstance(start, str) and isinstance(end, str) and parse_time(start) > parse_time(end)
    except ValueError:  # a malformed time is its own field error
        return False


class Message(Strict):
    role: Literal["user", "assistant"]
    content: Content
    timestamp: Time | None = None


class ConversationAdd(Isolated):
    messages: list[Message] = Field(min_length=1, max_length=100)


class ConversationQuery(Isolated, TimeRange):
    limit: Limit = 20
    offset: Offset = 0


class ConversationSearch(Isolated):
    query: Query
    limit: Limit = 5


class ConversationCount(Isolated, TimeRange):
    pass


class ConversationDelete(Isolated):
    message_ids: list[str] | None = Field(None, max_length=5000)
    session_ids: list[str] | None = Field(None, max_length=100)


def _metadata_size(value: dict[str, Any] | None) -> dict[str, Any] | None:
    import json

    if value is not None and len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()) > 4096:
        raise ValueError("must be at most 4096 bytes as compact JSON")
    return value


Metadata = Annotated[dict[str, Any], AfterValidator(_metadata_size)]


class AtomicAdd(Isolated):
    content: Content
    type: AtomType = "episodic"
    background: Background = ""
    tags: list[Tag] = Field(default_factory=list, max_length=20)
    metadata: Metadata = Field(default_factory=dict)


class AtomicQuery(Isolated, TimeRange):
    type: AtomType | None = None
    limit: Limit = 20
    offset: Offset = 0


class AtomicSearch(Isolated):
    query: Query
    type: AtomType | None = None
    limit: Limit = 5


class AtomicCount(Isolated, TimeRange):
    type: AtomType | None = None


class AtomicUpdate(Isolated):
    id: Annotated[str, Field(min_length=1, max_length=256)]
    content: Content | None = None
    background: Background | None = None
    tags: list[Tag] | None = Field(None, max_length=20)
    metadata: Metadata | None = None
    expected_version: int | None = Field(None, ge=0)

    @model_validator(mode="after")
    def _something(self) -> "AtomicUpdate":
        if all(v is None for v in (self.content, self.background, self.tags, self.metadata)):
            raise ValueError("nothing to update: give content, background, tags or metadata")
        return self


class AtomicDelete(Isolated):
    ids: list[str] = Field(min_length=1, max_length=5000)
    expected_versions: dict[str, int] | None = None


Visibility = Literal["private", "team", "public"]
Permission = Literal["read", "write", "admin"]


class AclEntry(Strict):
    principal: Annotated[str, Field(min_length=1, max_length=256)]
    permissions: list[Permission] = Field(min_length=1, max_length=3)


class Binding(Strict):
    agent_id: TeamId
    injection_mode: Annotated[str, Field(min_length=1, max_length=64), NoControl] | None = None
    priority: int | None = None


class MemoryCreate(Strict):
    team_id: TeamId
    agent_id: TeamId
    name: Annotated[str, Field(max_length=256), NoControl] | None = None
    visibility: Visibility | None = None
    acl: list[AclEntry] | None = Field(None, max_length=100)
    bindings: list[Binding] | None = Field(None, max_length=100)


MemoryId = Annotated[str, Field(min_length=1, max_length=300)]


class MemoryGet(Strict):
    memory_id: MemoryId


class MemoryList(Strict):
    team_id: TeamId | None = None
    limit: Annotated[int, Field(ge=1, le=100)] = 20
    next_token: str | None = None


class MemoryUpdate(Strict):
    memory_id: MemoryId
    name: Annotated[str, Field(max_length=256), NoControl] | None = None
    visibility: Visibility | None = None
    acl: list[AclEntry] | None = Field(None, max_length=100)
    bindings: list[Binding] | None = Field(None, max_length=100)
    retention_days: Annotated[int, Field(ge=0, le=36_500)] | None = None


class ChatMemoryClear(Strict):
    memory_ids: list[str] = Field(min_length=1, max_length=100)


class MemoryDelete(Strict):
    memory_id: MemoryId


UserId = Annotated[str, Field(min_length=1, max_length=256), NoControl]


def _one_id(value: list[str] | None) -> list[str]:
    """Present (even as null), the list must hold exactly one non-blank id (§10)."""
    if value is None or len(value) != 1 or not value[0].strip():
        raise ValueError("must hold exactly one non-blank id")
    return [value[0].strip()]


class UserMemoryDelete(Strict):
    memory_id: MemoryId
    user_id: UserId
    content_ids: list[str] | None = None  # the edge keeps an explicit null here

    _exactly_one = field_validator("content_ids")(_one_id)  # runs only when the key is present

    @property
    def content_id(self) -> str | None:
        return self.content_ids[0] if self.content_ids else None


class DeleteUserMemory(Strict):
    """The DeleteUserMemory request shape (``POST /v2/memory?Action=DeleteUserMemory``)."""

    appId: MemoryId  # noqa: N815 - the wire name
    userMemoryId: UserId  # noqa: N815
    memoryContentId: list[str] | None = None  # noqa: N815

    _exactly_one = field_validator("memoryContentId")(_one_id)

    @property
    def content_id(self) -> str | None:
        return self.memoryContentId[0] if self.memoryContentId else None
