"""Shared pieces of the request models: strictness, rule-backed string types, time ranges."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from pydantic_core import ErrorDetails, InitErrorDetails, PydanticCustomError

from ...clock import TimeFormatError, parse_ns
from ...domain.fields import (
    MAX_OFFSET,
    NO_CONTROL_PATTERN,
    PAGE_LIMIT,
    QUERY_CHARS,
    TIME_PATTERN,
    FreeId,
    NoControl,
    NoControlDoc,
    TeamId,
    Time,
    rule,
)
from ...domain.rules import TEAM_PATTERN, path_problem


class Strict(BaseModel):
    model_config = ConfigDict(strict=True, extra="ignore", defer_build=True)


# The field rules themselves (ids, times, no control characters) live in domain.fields, shared
# with the import validator. JSON Schema patterns for the OpenAPI description only (the rules
# decide): each says exactly what its rule accepts, except lengths counted in UTF-8 bytes,
# documented as maxLength in chars.
_CC = r"\u0000-\u001f\u007f-\u009f"  # Unicode category Cc
_SEGMENT = rf"[^/\\.{_CC}][^/\\{_CC}]*"  # not empty, not starting with ".", no backslash
_FILE = rf"[^/\\.{_CC}][^/\\{_CC}]*\.md"
FILE_PATTERN = f"^({_SEGMENT}/)*{_FILE}$"
PREFIX_PATTERN = f"^(({_SEGMENT}/)*{_SEGMENT}/?)?$"
RM_PATTERN = f"^({_SEGMENT}/)*({_SEGMENT}/|{_FILE})$"
FilePath = Annotated[
    str,
    rule(lambda v: path_problem(v, kind="file")),
    Field(
        description="relative .md path, ≤ 512 UTF-8 bytes; no empty segment, none starting with '.'",
        json_schema_extra={"pattern": FILE_PATTERN, "maxLength": 512},
    ),
]
PathPrefix = Annotated[
    str,
    rule(lambda v: path_problem(v, kind="prefix")),
    Field(
        description="plain string prefix of the relative path; may be empty",
        json_schema_extra={"pattern": PREFIX_PATTERN, "maxLength": 512},
    ),
]
RmPath = Annotated[
    str,
    rule(lambda v: path_problem(v, kind="rm")),
    Field(
        description="a .md file, or a folder ending in / (everything under it)",
        json_schema_extra={"pattern": RM_PATTERN, "maxLength": 512},
    ),
]
__all__ = [
    "NO_CONTROL_PATTERN",
    "TEAM_PATTERN",
    "TIME_PATTERN",
    "FreeId",
    "NoControl",
    "NoControlDoc",
    "TeamId",
    "Time",
    "rule",
]

Limit = Annotated[int, Field(ge=1, le=PAGE_LIMIT)]
Offset = Annotated[int, Field(ge=0, le=MAX_OFFSET)]
Query = Annotated[str, Field(min_length=1, max_length=QUERY_CHARS)]


class Isolated(Strict):
    """team_id, agent_id, user_id are required, from the body or x-tdai-* headers; a blank
    session_id or task_id means none."""

    team_id: TeamId | None = Field(None, description="or header x-tdai-team-id")
    agent_id: TeamId | None = Field(None, description="or header x-tdai-agent-id")
    user_id: FreeId | None = Field(None, description="or header x-tdai-user-id")
    session_id: FreeId | None = Field(None, description="or header x-tdai-session-id")
    task_id: FreeId | None = Field(None, description="or header x-tdai-task-id")


_ORDER_ERROR: Any = {
    "type": PydanticCustomError("time_order", "time_start must not be after time_end"),
    "loc": (),
    "input": None,
}


def _reversed(data: Any) -> bool:
    if not isinstance(data, dict):
        return False
    start, end = data.get("time_start"), data.get("time_end")
    try:
        return isinstance(start, str) and isinstance(end, str) and parse_ns(start) > parse_ns(end)
    except TimeFormatError:  # a malformed time is its own field error
        return False


def _init_error(e: ErrorDetails) -> InitErrorDetails:
    """A reported error as it can be raised again (its message is rebuilt from type and ctx)."""
    detail: InitErrorDetails = {"type": e["type"], "loc": e["loc"], "input": e["input"]}
    if "ctx" in e:
        detail["ctx"] = e["ctx"]
    return detail


def across(*fields: str, rule: Callable[..., str | None]) -> Any:
    """A rule across ``fields``, as a model validator: its problem is named ``(root)`` beside the
    fields' own problems, not only once they are right (a 400 names each). ``rule`` takes the
    fields' values as sent (absent: None; a nested model as its object) and answers the problem or
    None; it is asked only when none of its fields has a problem of its own (it may then rely on
    their types). The request models are strict and never reshape a value, so what was sent is
    what validation accepted."""

    def check(cls: type[BaseModel], data: Any, handler: Any) -> Any:
        if not isinstance(data, dict):  # not a body (a model already made): its own validation only
            return handler(data)
        try:
            model = handler(data)
        except ValidationError as exc:
            errors = exc.errors()
            touched = {e["loc"][0] for e in errors if e["loc"]} & set(fields)
            problem = None if touched else rule(*(data.get(f) for f in fields))
            if problem is None:
                raise
            raise ValidationError.from_exception_data(
                cls.__name__, [*(_init_error(e) for e in errors), _root(problem)]
            ) from None
        problem = rule(*(data.get(f) for f in fields))
        if problem is not None:
            raise ValidationError.from_exception_data(cls.__name__, [_root(problem)])
        return model

    return model_validator(mode="wrap")(classmethod(check))  # type: ignore[arg-type]  # pydantic's overloads


def _root(problem: str) -> InitErrorDetails:
    return {"type": "value_error", "loc": (), "input": None, "ctx": {"error": ValueError(problem)}}


class TimeRange(Strict):
    """Inclusive bounds at exactly the precision written (missing fraction digits are zeros)."""

    time_start: Time | None = None
    time_end: Time | None = None

    @model_validator(mode="wrap")
    @classmethod
    def _ordered(cls, data: Any, handler: Any) -> Any:
        """time_start ≤ time_end — reported next to any field errors, not instead of them."""
        reversed_range = _reversed(data)
        try:
            model = handler(data)
        except ValidationError as exc:
            if not reversed_range:
                raise
            errors = [_init_error(e) for e in exc.errors()]
            raise ValidationError.from_exception_data(cls.__name__, [*errors, _ORDER_ERROR]) from None
        if reversed_range:
            raise ValidationError.from_exception_data(cls.__name__, [_ORDER_ERROR])
        return model
