"""Input rules that are not plain types: ids, blanks, paths (docs/RULES.md; paths: docs/API.md, "Paths")."""

from __future__ import annotations

import re
import unicodedata

TEAM_AGENT_CHARS = 64
# A team or agent id, written once: the check, its message and the OpenAPI pattern all come from it.
TEAM_PATTERN = rf"^[A-Za-z0-9_@-][A-Za-z0-9._@-]{{0,{TEAM_AGENT_CHARS - 1}}}$"
TEAM_AGENT_PATTERN = re.compile(TEAM_PATTERN[1:-1], re.ASCII)
TEAM_AGENT_RULE = f"must match {TEAM_PATTERN}"
MAX_ID_CHARS = 256
MAX_PATH_BYTES = 512
# What a request is told that needs a session (conversation/add) and has none in the body or header
SESSION_REQUIRED = "session_id: is required (body or x-tdai-session-id header)"

# Unicode's White_Space property (what "blank" means): not Python's str.isspace, which also counts the
# control characters U+001C-U+001F (those are control characters here, never blanks).
WHITE_SPACE = frozenset(
    "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007"
    "\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)
_WHITE = "".join(sorted(WHITE_SPACE))


def is_blank(text: str) -> bool:
    return all(ch in WHITE_SPACE for ch in text)


def trim(text: str) -> str:
    """Strip leading and trailing White_Space (and nothing else)."""
    return text.strip(_WHITE)


def clean_ids(raw: list[str] | None) -> list[str]:
    """Trimmed, blanks dropped, duplicates removed in first-seen order (every list of ids to delete
    or clear)."""
    if raw is None:
        return []
    return list(dict.fromkeys(value for value in (trim(v) for v in raw) if value))


def has_control(text: str) -> bool:
    """Unicode category Cc: U+0000–U+001F and U+007F–U+009F."""
    return any(unicodedata.category(ch) == "Cc" for ch in text)


def team_or_agent_problem(value: str) -> str | None:
    return None if TEAM_AGENT_PATTERN.fullmatch(value) else TEAM_AGENT_RULE


def free_id_problem(value: str) -> str | None:
    """user_id, session_id, task_id: 1–256 chars, no control characters."""
    if not 1 <= len(value) <= MAX_ID_CHARS:
        return f"must be 1-{MAX_ID_CHARS} characters"
    if has_control(value):
        return "must not contain control characters"
    return None


def path_problem(path: str, *, kind: str) -> str | None:
    """Why ``path`` breaks the path rules, or None: relative, ``/``-separated, ≤ 512 UTF-8 bytes, no
    control character, backslash, leading ``/``, empty segment or segment starting with ``.``.

    kind: ``file`` (must end in .md), ``prefix`` (may be empty, one trailing ``/``),
    ``rm`` (a file, or a folder ending in ``/``)."""
    if len(path.encode("utf-8", "surrogatepass")) > MAX_PATH_BYTES:
        return f"must be at most {MAX_PATH_BYTES} bytes"
    if kind == "prefix" and path == "":
        return None
    if path == "":
        return "must not be empty"
    folder = kind in ("prefix", "rm") and path.endswith("/")
    return (
        _character_problem(path)
        or _segment_problem(path[:-1] if folder else path)
        or _ending_problem(path, kind=kind, folder=folder)
    )


def _character_problem(path: str) -> str | None:
    if has_control(path):
        return "must not contain control characters"
    if "\\" in path:
        return "must not contain a backslash"
    if path.startswith("/"):
        return "must be relative (no leading /)"
    return None


def _segment_problem(body: str) -> str | None:
    """Why a segment of ``body`` (the path without a folder's trailing ``/``) is refused: empty, ``.``,
    ``..`` or hidden (starting with ``.``)."""
    for segment in body.split("/"):
        if segment == "":
            return "must not contain an empty segment"
        if segment in (".", ".."):
            return "must not contain . or .. segments"
        if segment.startswith("."):
            return "segments must not start with ."
    return None


def _ending_problem(path: str, *, kind: str, folder: bool) -> str | None:
    """Files are Markdown: a file path ends in ``.md``, and an ``rm`` path names a file or a folder."""
    if kind == "file" and not path.endswith(".md"):
        return "must end in .md"
    if kind == "rm" and not folder and not path.endswith(".md"):
        return "must be a .md file or a folder ending in /"
    return None
