"""Assets (§4), keys (§2), audit (§11), clear (§9) and ID-based erasure (§10) request models."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, field_validator

from ...domain.principal import ALL_TEAMS
from ...domain.rules import team_or_agent_problem, trim
from .common import TEAM_PATTERN, NoControl, NoControlDoc, Strict, TeamId, rule

Role = Literal["reader", "writer", "admin"]
Visibility = Literal["private", "team", "public"]
Permission = Literal["read", "write", "admin"]
MemoryId = Annotated[str, Field(min_length=1, max_length=300)]
UserId = Annotated[str, Field(min_length=1, max_length=256), NoControl, NoControlDoc]
Name = Annotated[str, Field(max_length=256), NoControl, NoControlDoc]


class AclEntry(Strict):
    principal: Annotated[str, Field(min_length=1, max_length=256)]
    permissions: list[Permission] = Field(min_length=1, max_length=3, json_schema_extra={"uniqueItems": True})

    @field_validator("permissions")
    @classmethod
    def _distinct(cls, value: list[str]) -> list[str]:
        if len(set(value)) != len(value):
            raise ValueError("must be distinct")
        return value


class Binding(Strict):
    agent_id: TeamId
    injection_mode: Annotated[str, Field(min_length=1, max_length=64), NoControl, NoControlDoc] | None = None
    priority: Annotated[int, Field(ge=-1_000_000, le=1_000_000)] | None = None


class MemoryCreate(Strict):
    team_id: TeamId
    agent_id: TeamId
    name: Name | None = None
    visibility: Visibility | None = None
    acl: list[AclEntry] | None = Field(None, max_length=100)
    bindings: list[Binding] | None = Field(None, max_length=100)


class MemoryGet(Strict):
    memory_id: MemoryId


class MemoryList(Strict):
    team_id: TeamId | None = None
    limit: Annotated[int, Field(ge=1, le=100)] = 20
    next_token: str | None = None


class MemoryUpdate(Strict):
    memory_id: MemoryId
    name: Name | None = None
    visibility: Visibility | None = None
    acl: list[AclEntry] | None = Field(None, max_length=100)
    bindings: list[Binding] | None = Field(None, max_length=100)
    retention_days: Annotated[int, Field(ge=0, le=36_500)] | None = Field(
        None, description="null resets it to the deployment default"
    )


class MemoryDelete(Strict):
    memory_id: MemoryId


class ChatMemoryClear(Strict):
    memory_ids: list[str] = Field(
        min_length=1, max_length=100, description="trimmed, blanks dropped, duplicates removed; none left → 400"
    )


class KeyCreate(Strict):
    role: Role
    team_ids: list[
        Annotated[
            str,
            rule(lambda v: None if v == ALL_TEAMS else team_or_agent_problem(v)),
            Field(json_schema_extra={"pattern": rf"^(\*|{TEAM_PATTERN[1:-1]})$"}),
        ]
    ] = Field(
        default_factory=lambda: [ALL_TEAMS],
        min_length=1,
        max_length=100,
        description='the teams the key may act on; ["*"] (the default) for all, which only a ["*"] key may give',
    )
    name: Annotated[str, Field(min_length=1, max_length=256), NoControl, NoControlDoc] | None = None


class KeyList(Strict):
    pass


class KeyRevoke(Strict):
    key_id: str = Field(min_length=1, max_length=64)


AuditAction = Literal[
    "clear",
    "delete",
    "user_memory_delete",
    "memory_delete",
    "memory_update",
    "scenario_write",
    "scenario_rm",
    "core_write",
    "atomic_update",
    "retention_cleanup",
    "key_create",
    "key_revoke",
    "export",
    "import",
]


class AuditQuery(Strict):
    memory_id: str | None = Field(None, min_length=1, max_length=300)
    action: AuditAction | None = None
    limit: int = Field(20, ge=1, le=100)
    next_token: str | None = None


def _one_id_schema(schema: dict[str, Any]) -> None:
    """Documentation: the key may be absent, but when present it is one id (never null)."""
    schema.pop("anyOf", None)
    schema.pop("default", None)
    schema.update(type="array", items={"type": "string"}, minItems=1, maxItems=1)


_ONE_ID: Any = _one_id_schema


def _one_id(value: list[str] | None) -> list[str]:
    """Present (even as null), the list must hold exactly one non-blank id (§10)."""
    if value is None or len(value) != 1 or not trim(value[0]):
        raise ValueError("must hold exactly one non-blank id")
    return [trim(value[0])]


class UserMemoryDelete(Strict):
    memory_id: MemoryId
    user_id: UserId
    content_ids: list[str] | None = Field(  # the pipeline keeps an explicit null here
        None,
        description="when the key is present (even as null) it must hold exactly one non-blank id: that one "
        "message or record is erased instead of all of the user's L0/L1",
        json_schema_extra=_ONE_ID,
    )

    _exactly_one = field_validator("content_ids")(_one_id)  # runs only when the key is present

    @property
    def content_id(self) -> str | None:
        return self.content_ids[0] if self.content_ids else None


class DeleteUserMemory(Strict):
    """The DeleteUserMemory request shape (``POST /v2/memory?Action=DeleteUserMemory``)."""

    appId: MemoryId  # the wire names
    userMemoryId: UserId
    memoryContentId: list[str] | None = Field(
        None,
        description="when present (even as null): exactly one non-blank message or record id",
        json_schema_extra=_ONE_ID,
    )

    _exactly_one = field_validator("memoryContentId")(_one_id)

    @property
    def content_id(self) -> str | None:
        return self.memoryContentId[0] if self.memoryContentId else None
