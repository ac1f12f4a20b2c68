"""Request models (pydantic, strict: types are checked, never coerced). They drive validation
and the OpenAPI document. Isolation fields are resolved by the edge (body, else headers) and
appear here for the documentation only."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from .auth import ALL_TEAMS, ROLES
from .rules import has_control, path_problem, team_or_agent_problem


class Strict(BaseModel):
    model_config = ConfigDict(strict=True, extra="ignore")


def _rule(check):  # type: ignore[no-untyped-def]
    def validate(value: str) -> str:
        problem = check(value)
        if problem:
            raise ValueError(problem)
        return value

    return AfterValidator(validate)


FilePath = Annotated[str, _rule(lambda v: path_problem(v, kind="file"))]
PathPrefix = Annotated[str, _rule(lambda v: path_problem(v, kind="prefix"))]
RmPath = Annotated[str, _rule(lambda v: path_problem(v, kind="rm"))]
NoControl = _rule(lambda v: "must not contain control characters" if has_control(v) else None)
TeamId = Annotated[str, _rule(team_or_agent_problem)]
Role = Literal["reader", "writer", "admin"]
assert ROLES == ("reader", "writer", "admin")


class Isolated(Strict):
    """team_id, agent_id, user_id are required, from the body or x-tdai-* headers (§3)."""

    team_id: str | None = Field(None, description="or header x-tdai-team-id")
    agent_id: str | None = Field(None, description="or header x-tdai-agent-id")
    user_id: str | None = Field(None, description="or header x-tdai-user-id")
    session_id: str | None = Field(None, description="or header x-tdai-session-id")
    task_id: str | None = Field(None, description="or header x-tdai-task-id")


class ScenarioLs(Isolated):
    path_prefix: PathPrefix = ""
    limit: int = Field(1000, ge=1, le=1000)
    next_token: str | None = None


class ScenarioCount(Isolated):
    path_prefix: PathPrefix = ""


class ScenarioRead(Isolated):
    path: FilePath


class ScenarioWrite(Isolated):
    path: FilePath
    content: str = Field(max_length=1_000_000)
    summary: Annotated[str, Field(max_length=1024), NoControl] | None = None
    expected_version: int | None = Field(None, ge=0)


class ScenarioRm(Isolated):
    path: RmPath


class CoreRead(Isolated):
    pass


class CoreWrite(Isolated):
    content: str = Field(max_length=1_000_000)


class KeyCreate(Strict):
    role: Role
    team_ids: list[Annotated[str, _rule(lambda v: None if v == ALL_TEAMS else team_or_agent_problem(v))]] = Field(
        default_factory=lambda: [ALL_TEAMS], min_length=1, max_length=100)
    name: Annotated[str, Field(min_length=1, max_length=128), NoControl] | None = None


class KeyList(Strict):
    pass


class KeyRevoke(Strict):
    key_id: str = Field(min_length=1, max_length=64)


AuditAction = Literal["clear", "delete", "user_memory_delete", "memory_delete", "memory_update",
                      "scenario_write", "scenario_rm", "core_write", "atomic_update", "retention_cleanup",
                      "key_create", "key_revoke"]


class AuditQuery(Strict):
    memory_id: str | None = Field(None, min_length=1, max_length=300)
    action: AuditAction | None = None
    limit: int = Field(20, ge=1, le=100)
    next_token: str | None = None
