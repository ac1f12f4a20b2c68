"""One set of field rules for every value Memory Hub stores, whether it arrives in a request or in
an imported tree: the request models and the import validator both use these types, so a value
that a route would refuse is refused by an import too, with the same rule.

Lengths in *chars* count Unicode code points (Python's ``len``); a *control character* is Unicode
category Cc (U+0000–U+001F, U+007F–U+009F); an unpaired surrogate (U+D800–U+DFFF on its own) can
be written as a JSON escape but not stored as UTF-8, so no stored string may hold one. Times are
RFC 3339 with an upper-case ``T`` and ``Z`` or a ±HH:MM offset, 1–9 fraction digits, years
0001–9999. Versions and counts are whole numbers 1–2^53 (a JSON number every client reads exactly,
and far inside DynamoDB's 38 digits)."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from typing import Annotated, Any

from pydantic import AfterValidator, Field, TypeAdapter, ValidationError
from pydantic_core import ErrorDetails

from ..clock import TimeFormatError, parse_ns
from .rules import MAX_ID_CHARS, TEAM_PATTERN, free_id_problem, has_control, path_problem, team_or_agent_problem

MAX_VERSION = 2**53
MESSAGE_CHARS = 8192  # an L0 message's or an L1 record's content
BACKGROUND_CHARS = 2048
TAG_CHARS = 64
MAX_TAGS = 20
METADATA_BYTES = 4096  # an L1 record's metadata as compact JSON
SUMMARY_CHARS = 1024  # an L2 file's summary
TEXT_CHARS = 1_000_000  # an L2 file's content, or the persona
QUERY_CHARS = 2048  # a search's query
PAGE_LIMIT = 100  # what one page or one search answers at most (a request's `limit`)
FILES_LIMIT = 1000  # what one scenario/ls page answers at most
MAX_OFFSET = 10_000  # the largest `offset` of conversation/query and atomic/query
TYPE_PATTERN = r"^[a-z_]+$"
TYPE_CHARS = 64  # an L1 record's type


def rule(check: Callable[[Any], str | None]) -> AfterValidator:
    """A validator from a function that says what is wrong (or None)."""

    def validate(value: Any) -> Any:
        problem = check(value)
        if problem:
            raise ValueError(problem)
        return value

    return AfterValidator(validate)


def has_surrogate(text: str) -> bool:
    """An unpaired surrogate: a code point U+D800–U+DFFF on its own (no UTF-8 store can hold it)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _surrogates_in(value: Any) -> bool:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if has_surrogate(item):
                return True
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


Storable = rule(lambda v: "must not contain unpaired surrogates" if has_surrogate(v) else None)
NoControl = rule(lambda v: "must not contain control characters" if has_control(v) else None)

# JSON Schema patterns for the OpenAPI description only (the rules above decide).
_CC = r"\u0000-\u001f\u007f-\u009f"  # Unicode category Cc
NO_CONTROL_PATTERN = f"^[^{_CC}]*$"
NoControlDoc = Field(json_schema_extra={"pattern": NO_CONTROL_PATTERN})


def _time(value: str) -> str:
    try:
        parse_ns(value)
    except TimeFormatError as exc:
        raise ValueError(str(exc)) from None
    return value


_HM = "([01][0-9]|2[0-3]):[0-5][0-9]"
TIME_PATTERN = rf"^[0-9]{{4}}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])T{_HM}:[0-5][0-9](\.[0-9]{{1,9}})?(Z|[+-]{_HM})$"

# ---- ids
TeamId = Annotated[str, rule(team_or_agent_problem), Field(json_schema_extra={"pattern": TEAM_PATTERN})]
FreeId = Annotated[str, Field(min_length=1, max_length=MAX_ID_CHARS), NoControl, NoControlDoc, Storable]
# ---- times
Time = Annotated[
    str,
    AfterValidator(_time),
    Field(
        description="RFC 3339: YYYY-MM-DDTHH:MM:SS[.f]Z or ±HH:MM offset, 1-9 fraction digits (impossible date → 400)",
        examples=["2026-01-01T08:00:00+08:00"],
        json_schema_extra={"pattern": TIME_PATTERN},
    ),
]
# ---- numbers
Version = Annotated[int, Field(strict=True, ge=1, le=MAX_VERSION)]
ExpectedVersion = Annotated[int, Field(strict=True, ge=0, le=MAX_VERSION)]  # 0: the item must not exist
Count = Annotated[int, Field(strict=True, ge=1, le=MAX_VERSION)]
# ---- L0 / L1
Content = Annotated[str, Field(min_length=1, max_length=MESSAGE_CHARS), Storable]
AtomType = Annotated[str, Field(min_length=1, max_length=TYPE_CHARS, pattern=TYPE_PATTERN)]
Tag = Annotated[str, Field(min_length=1, max_length=TAG_CHARS), Storable]
Tags = Annotated[list[Tag], Field(max_length=MAX_TAGS)]
Background = Annotated[str, Field(max_length=BACKGROUND_CHARS), Storable]


def _non_finite_number(value: Any) -> bool:
    """True when a number in ``value`` is not finite (``NaN``/``Infinity`` are not JSON; a parsed
    import line may still hold them). Metadata is stored as one JSON string, so any finite double or
    integer fits: DynamoDB's 38-digit number rule never applies to it."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, float) and not math.isfinite(item):
            return True
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def metadata_bytes(value: dict[str, Any]) -> int:
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8", "surrogatepass"))


def metadata_problem(value: dict[str, Any] | None, limit: int = METADATA_BYTES) -> str | None:
    if value is None:
        return None
    if metadata_bytes(value) > limit:
        return f"must be at most {limit} bytes as compact JSON"
    if _surrogates_in(value):
        return "must not contain unpaired surrogates"
    if _non_finite_number(value):
        return "holds a number that is not finite (NaN or Infinity is not JSON)"
    return None


Metadata = Annotated[dict[str, Any], rule(metadata_problem)]
# ---- L2 / L3
Summary = Annotated[str, Field(max_length=SUMMARY_CHARS), NoControl, NoControlDoc, Storable]
Text = Annotated[str, Field(max_length=TEXT_CHARS), Storable]
FilePath = Annotated[str, rule(lambda v: path_problem(v, kind="file")), Storable]
MetaKey = Annotated[str, Field(min_length=1, max_length=256), NoControl, Storable]


# ---- checking values outside a request (import)

_ADAPTERS: dict[Any, TypeAdapter[Any]] = {}


def adapter(kind: Any) -> TypeAdapter[Any]:
    """One TypeAdapter per value kind, built once (strict: never coerced, as requests are)."""
    found = _ADAPTERS.get(kind)
    if found is None:
        found = _ADAPTERS[kind] = TypeAdapter(kind, config={"strict": True})
    return found


# pydantic's error types whose rule needs nothing of the error but its type.
_PLAIN_RULES = {
    "missing": "is required",
    "extra_forbidden": "is not allowed",
    "int_type": "must be a whole number",
    "int_from_float": "must be a whole number",
    "int_parsing": "must be a whole number",
    "string_unicode": "must not contain unpaired surrogates",
    "string_type": "must be a string",
    "dict_type": "must be an object",
    "list_type": "must be a list",
}


def said(error: ErrorDetails | dict[str, Any]) -> str:
    """A pydantic error as a plain rule (``must be at most 8,192 characters``): the one wording of
    every rule, for the API's 400s and an import's problems alike."""
    ctx = error.get("ctx") or {}
    kind = error["type"]
    if kind == "value_error":  # a validator's own words
        return str(ctx.get("error", error.get("msg", "is invalid"))).removeprefix("Value error, ")
    return _limit_said(kind, ctx) or _PLAIN_RULES.get(kind) or str(error.get("msg", "is invalid"))


def _limit_said(kind: str, ctx: dict[str, Any]) -> str | None:
    """The rule of a bound or pattern, with its figure (None: the error is of another kind)."""
    if kind == "string_too_long":
        return f"must be at most {int(ctx['max_length']):,} characters"
    if kind == "string_too_short":
        return "must not be empty" if ctx.get("min_length") == 1 else f"must be at least {ctx['min_length']} characters"
    if kind == "too_long":
        return f"must have at most {ctx['max_length']} items"
    if kind == "greater_than_equal":
        return f"must be at least {ctx['ge']}"
    if kind == "less_than_equal":
        return "must be at most 2^53" if ctx.get("le") == MAX_VERSION else f"must be at most {ctx['le']}"
    if kind == "string_pattern_mismatch":
        return f"must match {ctx['pattern']}"
    return None


def problems_of(kind: Any, value: Any) -> list[str]:
    """What is wrong with ``value`` as a ``kind`` (empty when nothing): each as ``<rule>`` or, inside
    a list, ``<index>: <rule>``."""
    try:
        adapter(kind).validate_python(value)
    except ValidationError as exc:
        found = []
        for error in exc.errors(include_url=False):
            where = ".".join(str(p) for p in error["loc"])
            found.append(f"{where}: {said(error)}" if where else said(error))
        return list(dict.fromkeys(found))
    return []


def check(kind: Any, value: Any, where: str, name: str, problems: list[str]) -> bool:
    """Validate one value; each problem appended as ``<where>: <name> <rule>``. True when valid."""
    found = problems_of(kind, value)
    for problem in found:
        item, sep, said = problem.partition(": ")
        problems.append(
            f"{where}: {name}.{item} {said}" if sep and re.fullmatch(r"\d+", item) else f"{where}: {name} {problem}"
        )
    return not found


__all__ = [
    "AtomType",
    "Background",
    "Content",
    "Count",
    "FilePath",
    "FreeId",
    "MetaKey",
    "Metadata",
    "NoControl",
    "NoControlDoc",
    "Storable",
    "Summary",
    "Tag",
    "Tags",
    "TeamId",
    "Text",
    "Time",
    "Version",
    "check",
    "free_id_problem",
    "has_surrogate",
    "problems_of",
    "rule",
]
