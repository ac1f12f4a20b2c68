"""The L2 and L3 part of a tree as an import reads it: the profile folder it is in, scene files'
META blocks turned into Memory Hub's, and the persona's version and times."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import unquote

from ...clock import format_ms, now_ms, parse_ms
from .. import fields, meta
from ..fields import check
from .lines import loads
from .pairs import DEFAULT, PROFILE
from .shapes import Selection

BACKUP_NAME = re.compile(r"persona_\d{8}_\d{6}_\d{1,9}\.md", re.ASCII)
META_VERSION = re.compile(r"[0-9]{1,16}", re.ASCII)
OURS = frozenset(meta.OWN_KEYS) - {"summary"}  # the keys only a Memory Hub META block has


def _stamp(value: str | None, name: str) -> str | None:
    """A META time as Memory Hub writes it (any RFC 3339 form accepted); ValueError names it."""
    if not value:
        return None  # TencentDB writes an empty `created:` for a scene it had no META for
    try:
        return format_ms(parse_ms(value))
    except ValueError:
        raise ValueError(f"META {name} must be an RFC 3339 time") from None


def _check_meta(keys: dict[str, str]) -> None:
    """A META block's keys by the rules a write would apply: the version a whole number 1-2^53 in
    ASCII digits, the summary as a request's (at most 1,024 characters, no control characters), every
    other key and value without control characters and at most 1,024 characters (they are written
    back on export). ValueError names the first problem."""
    version = keys.get("version")
    if version is not None and not (META_VERSION.fullmatch(version) and 1 <= int(version) <= fields.MAX_VERSION):
        raise ValueError("META version must be a whole number from 1 to 2^53")
    for key, value in keys.items():
        found = fields.problems_of(fields.MetaKey, key)
        if found:
            raise ValueError(f"META key {found[0]}")
        found = fields.problems_of(fields.Summary, value)
        if found:
            raise ValueError(f"META {key} {found[0]}")


def stored_scene(text: str) -> str:
    """A scene file as Memory Hub stores it: our META block kept as it is (times in another RFC
    3339 form written in ours; a block with our times but no version line is at version 1);
    TencentDB's (created, updated, summary, heat) turned into ours, its other keys kept. ValueError
    (what is wrong) when a version or time cannot be read."""
    keys, content = meta.split(text)
    if not keys:
        stamp = format_ms(now_ms())
        return meta.render(version=1, created_at=stamp, updated_at=stamp, summary=None, previous={}, content=text)
    _check_meta(keys)
    if OURS.intersection(keys):
        given_update = _stamp(keys.get("updated_at"), "updated_at")
        created = _stamp(keys.get("created_at"), "created_at") or given_update or format_ms(now_ms())
        updated = given_update or created
        if "version" in keys and (created, updated) == (keys.get("created_at"), keys.get("updated_at")):
            return text  # exactly as exported
        previous = {k: v for k, v in keys.items() if k not in meta.OWN_KEYS}
        return meta.render(
            version=int(keys.get("version", 1)),
            created_at=created,
            updated_at=updated,
            summary=keys.get("summary") or None,
            previous=previous,
            content=content,
        )
    created = _stamp(keys.get("created"), "created") or format_ms(now_ms())
    previous = {k: v for k, v in keys.items() if k not in ("created", "updated", "summary")}
    return meta.render(
        version=1,
        created_at=created,
        updated_at=_stamp(keys.get("updated"), "updated") or created,
        summary=keys.get("summary") or None,
        previous=previous,
        content=content,
    )


def profile_files(files: dict[str, bytes], selection: Selection) -> tuple[str, dict[str, bytes]]:
    """L2/L3 of the tree — at its root, or (as TencentDB's gateway writes them) under the profile
    folder of the chosen (team, agent) — and the folder they are in ("" at the root)."""
    scoped: dict[tuple[str, str], tuple[str, dict[str, bytes]]] = {}
    for name, data in files.items():
        match = PROFILE.fullmatch(name)
        if match:
            team, _, agent = unquote(match.group(1)).partition("|")
            pair = (team.removeprefix("team:"), agent.removeprefix("agent:"))
            scoped.setdefault(pair, (f"profiles/{match.group(1)}/", {}))[1][match.group(2)] = data
    if not scoped:
        return "", files
    if selection.from_team is not None:
        return scoped.get((selection.from_team, selection.from_agent or DEFAULT), ("", {}))
    return next(iter(scoped.values())) if len(scoped) == 1 else ("", {})


def persona_meta(data: bytes, problems: list[str]) -> dict[str, Any]:
    """The persona's version and times from ``.metadata/memory-hub.json``, checked as a write's
    would be (times normalised to the response format, since they are stored as S3 metadata)."""
    where = ".metadata/memory-hub.json"
    try:
        summary = loads(data.decode("utf-8"))
    except (ValueError, UnicodeDecodeError):
        problems.append(f"{where}: not a JSON object")
        return {}
    persona = summary.get("persona") if isinstance(summary, dict) else None
    if not isinstance(summary, dict):
        problems.append(f"{where}: not a JSON object")
    if persona is None:
        return {}
    if not isinstance(persona, dict):
        problems.append(f"{where}: persona must be an object")
        return {}
    checked: dict[str, Any] = {}
    if persona.get("version") is not None and check(
        fields.Version, persona["version"], where, "persona.version", problems
    ):
        checked["version"] = persona["version"]
    for name in ("created_at", "updated_at"):
        value = persona.get(name)
        if value is not None and check(fields.Time, value, where, f"persona.{name}", problems):
            checked[name] = format_ms(parse_ms(value))
    return checked
