"""The field rules the console shows, served as the ES module ``/console/rules.js`` — rendered from
the one set of field rules (``domain/fields.py``, ``domain/rules.py``) and the domain's spelling of
a memory_id, so the console repeats no limit, pattern or formula of its own.

Each field's entry holds the constraints of its type as JSON Schema words (``minLength``,
``maxLength``, ``pattern``; ``maxBytes`` for paths) and ``hint``, the sentence the console shows
beside the control. The hints only inform: the API decides (the console's forms do not refuse)."""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

from pydantic import TypeAdapter

from ..domain import fields
from ..domain.rules import MAX_PATH_BYTES
from ..domain.scope import Scope

_KEPT = ("minLength", "maxLength", "pattern")
# The console's controls (data-rule="<name>") and the field type each one holds.
_TYPES: dict[str, Any] = {
    "team_id": fields.TeamId,
    "agent_id": fields.TeamId,
    "user_id": fields.FreeId,
    "session_id": fields.FreeId,
    "type": fields.AtomType,
    "summary": fields.Summary,
    "text": fields.Text,
}


def hint(rule: dict[str, Any]) -> str:
    """A field's constraints in words: ``1–256 characters, no control characters``."""
    said = []
    low, high = rule.get("minLength"), rule.get("maxLength")
    if high is not None:
        said.append(f"{low}–{high:,} characters" if low else f"up to {high:,} characters")
    if "maxBytes" in rule:
        said.append(f"up to {rule['maxBytes']:,} UTF-8 bytes")
    pattern = rule.get("pattern")
    if pattern == fields.NO_CONTROL_PATTERN:
        said.append("no control characters")
    elif pattern:
        said.append(f"matching {pattern}")
    return ", ".join(said)


def _rule(kind: Any) -> dict[str, Any]:
    schema = TypeAdapter(kind).json_schema()
    return {name: schema[name] for name in _KEPT if name in schema}


@lru_cache(maxsize=1)
def console_rules() -> dict[str, Any]:
    """{"fields": {name: {constraints…, "hint": …}}, "memory_id": "<prefix>{team_id}-{agent_id}"}."""
    rules = {name: _rule(kind) for name, kind in _TYPES.items()}
    rules["path"] = {"maxBytes": MAX_PATH_BYTES}
    return {
        "fields": {name: {**rule, "hint": hint(rule)} for name, rule in rules.items()},
        "memory_id": Scope("{team_id}", "{agent_id}", "").memory_id,
    }


@lru_cache(maxsize=1)
def module_text() -> str:
    """``console_rules()`` as an ES module whose default export is that object."""
    body = json.dumps(console_rules(), ensure_ascii=True, indent=1, sort_keys=True)
    return (
        "// The console's field rules, rendered by the API from its one set of field rules; not a file.\n"
        f"export default {body};\n"
    )
