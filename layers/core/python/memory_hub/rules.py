"""Input rules of the contract that are not plain types: ids (§3) and scenario paths (§5)."""

from __future__ import annotations

import re
import unicodedata

TEAM_AGENT_PATTERN = re.compile(r"^[A-Za-z0-9_@-][A-Za-z0-9._@-]{0,127}$")
MAX_PATH_BYTES = 512


def has_control(text: str) -> bool:
    """Unicode category Cc: U+0000–U+001F and U+007F–U+009F."""
    return any(unicodedata.category(ch) == "Cc" for ch in text)


def team_or_agent_problem(value: str) -> str | None:
    # fullmatch: with match(), "$" would also accept a trailing newline
    if not TEAM_AGENT_PATTERN.fullmatch(value):
        return "must match ^[A-Za-z0-9_@-][A-Za-z0-9._@-]{0,127}$"
    return None


def free_id_problem(value: str) -> str | None:
    """user_id, session_id, task_id and similar: 1–256 chars, no control characters."""
    if not 1 <= len(value) <= 256:
        return "must be 1-256 characters"
    if has_control(value):
        return "must not contain control characters"
    return None


def path_problem(path: str, *, kind: str) -> str | None:
    """Why ``path`` breaks §5's rules, or None.

    kind: ``file`` (must end in .md), ``prefix`` (may be empty, one trailing ``/``),
    ``rm`` (a file, or a folder ending in ``/``).
    """
    if len(path.encode("utf-8")) > MAX_PATH_BYTES:
        return f"must be at most {MAX_PATH_BYTES} bytes"
    if kind == "prefix" and path == "":
        return None
    if path == "":
        return "must not be empty"
    if has_control(path):
        return "must not contain control characters"
    if "\\" in path:
        return "must not contain a backslash"
    if path.startswith("/"):
        return "must be relative (no leading /)"
    folder = kind in ("prefix", "rm") and path.endswith("/")
    body = path[:-1] if folder else path
    for segment in body.split("/"):
        if segment == "":
            return "must not contain an empty segment"
        if segment in (".", ".."):
            return "must not contain . or .. segments"
        if segment.startswith("."):
            return "segments must not start with ."
    if kind == "file" and not path.endswith(".md"):
        return "must end in .md"
    if kind == "rm" and not folder and not path.endswith(".md"):
        return "must be a .md file or a folder ending in /"
    return None
