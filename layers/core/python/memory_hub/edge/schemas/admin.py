"""Assets, keys, audit, clear and ID-based erasure request models."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator

from ...domain.assets import Named
from ...domain.principal import ALL_TEAMS
from ...domain.results import AuditAction
from ...domain.rules import team_or_agent_problem, trim
from ...domain.scope import spells
from .common import TEAM_PATTERN, FreeId, Limit, NoControl, NoControlDoc, Strict, TeamId, across, rule

Role = Literal["reader", "writer", "admin"]
Visibility = Literal["private", "team", "public"]
Permission = Literal["read", "write", "admin"]
# No upper bound: an id longer than any this service issues names no memory (404, or 403 as the route says).
MemoryId = Annotated[str, Field(min_length=1)]
# a user named by itself (not an isolation field with a header to fall back on): blank → 400
UserId = Annotated[
    FreeId,
    rule(
        lambda v: (
            "must not be blank"
            if not trim(v)
            else "must not have leading or trailing white space"
            if trim(v) != v
            else None
        )
    ),
]
Formation = Annotated[
    Literal["off", "records", "all"],
    Field(
        description="what the service forms from the conversation: off, records (L1, the default) or all "
        "(L1 plus each user's scenes and persona under formed/<user digest>/, readable by all the agent's users)"
    ),
]
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
    formation: Formation | None = None


PAIR_APART = "give team_id and agent_id together"
NOT_SPELLED = "team_id and agent_id do not spell memory_id"


def spelling_problem(memory_id: str, team_id: str | None, agent_id: str | None) -> str | None:
    """Why a body's pair cannot narrow its memory_id (both must be given and spell it), or None."""
    if team_id is None and agent_id is None:
        return None
    if team_id is None or agent_id is None:
        return PAIR_APART
    return None if spells(memory_id, team_id, agent_id) else NOT_SPELLED


class NamesMemory(Strict):
    """A route that names a memory_id: it acts on the pair that spells it, has an asset and lies
    within the key's teams; when several do (team ``a-b`` + agent ``c``, team ``a`` + agent
    ``b-c``), ``team_id`` and ``agent_id`` say which (else 409 ``memory_id ambiguous``). Only the
    body narrows: the x-tdai-* headers never do."""

    memory_id: MemoryId
    team_id: TeamId | None = Field(None, description="with agent_id: which pair, when several spell memory_id")
    agent_id: TeamId | None = Field(None, description="with team_id: which pair, when several spell memory_id")

    _spells = across("memory_id", "team_id", "agent_id", rule=spelling_problem)

    @property
    def named(self) -> Named:
        return Named(self.memory_id, self.team_id, self.agent_id)


class MemoryGet(NamesMemory):
    pass


class MemoryList(Strict):
    team_id: TeamId | None = None
    limit: Limit = 20
    next_token: str | None = None


class MemoryUpdate(NamesMemory):
    name: Name | None = None
    visibility: Visibility | None = None
    acl: list[AclEntry] | None = Field(None, max_length=100)
    bindings: list[Binding] | None = Field(None, max_length=100)
    retention_days: Annotated[int, Field(ge=0, le=36_500)] | None = Field(
        None, description="null resets it to the deployment default"
    )
    formation: Formation | None = None


class MemoryDelete(NamesMemory):
    pass


class ClearTarget(Strict):
    memory_id: MemoryId
    team_id: TeamId
    agent_id: TeamId

    @model_validator(mode="after")
    def _spells(self) -> ClearTarget:
        problem = spelling_problem(self.memory_id, self.team_id, self.agent_id)
        if problem:
            raise ValueError(problem)
        return self


def _stray_targets(memory_ids: list[str], targets: list[dict[str, Any]]) -> str | None:
    """Targets (as sent) whose memory_id is not one of ``memory_ids``."""
    ids = {trim(m) for m in memory_ids}
    strays = [str(i) for i, t in enumerate(targets) if trim(t["memory_id"]) not in ids]
    return f"targets {', '.join(strays)}: memory_id is not one of memory_ids" if strays else None


class ChatMemoryClear(Strict):
    memory_ids: list[str] = Field(
        min_length=1, max_length=100, description="trimmed, blanks dropped, duplicates removed; none left → 400"
    )
    targets: list[ClearTarget] | None = Field(
        None,
        max_length=100,
        description="which pair(s) an id of memory_ids means when several spell it (each target's id must be "
        "one of memory_ids; several targets of one id clear each named pair)",
    )

    _targets_named = across("memory_ids", "targets", rule=lambda ids, targets: _stray_targets(ids, targets or []))


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

    @field_validator("team_ids")
    @classmethod
    def _all_alone(cls, team_ids: list[str]) -> list[str]:
        if ALL_TEAMS in team_ids and len(team_ids) > 1:
            raise ValueError('["*"] (all teams) stands alone, never beside team ids')
        return team_ids


class KeyList(Strict):
    pass


class KeyRevoke(Strict):
    key_id: str = Field(min_length=1)  # an id longer than any issued is an unknown key (404)


class AuditQuery(Strict):
    memory_id: MemoryId | None = None
    action: AuditAction | None = None
    limit: Limit = 20
    next_token: str | None = None


def _one_id_schema(schema: dict[str, Any]) -> None:
    """Documentation: the key may be absent, but when present it is one id (never null)."""
    schema.pop("anyOf", None)
    schema.pop("default", None)
    schema.update(type="array", items={"type": "string"}, minItems=1, maxItems=1)


_ONE_ID: Any = _one_id_schema


def _one_id(value: list[str] | None) -> list[str]:
    """Present (even as null), the list must hold exactly one non-blank id: it is never read as absent."""
    if value is None or len(value) != 1 or not trim(value[0]):
        raise ValueError("must hold exactly one non-blank id")
    return [trim(value[0])]


class UserMemoryDelete(NamesMemory):
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


def _in_wire_names(problem: str | None) -> str | None:
    return problem.replace("memory_id", "appId") if problem else None


class DeleteUserMemory(Strict):
    """The DeleteUserMemory request shape (``POST /v2/memory?Action=DeleteUserMemory``)."""

    appId: MemoryId  # the wire names
    userMemoryId: UserId
    memoryContentId: list[str] | None = Field(
        None,
        description="when present (even as null): exactly one non-blank message or record id",
        json_schema_extra=_ONE_ID,
    )
    team_id: TeamId | None = Field(None, description="with agent_id: which pair, when several spell appId")
    agent_id: TeamId | None = Field(None, description="with team_id: which pair, when several spell appId")

    _exactly_one = field_validator("memoryContentId")(_one_id)

    _spells = across("appId", "team_id", "agent_id", rule=lambda *named: _in_wire_names(spelling_problem(*named)))

    @property
    def named(self) -> Named:
        return Named(self.appId, self.team_id, self.agent_id)

    @property
    def content_id(self) -> str | None:
        return self.memoryContentId[0] if self.memoryContentId else None
