"""The META block that heads every stored scenario file (a META block at the start of written
content is stripped first, so blocks never nest).

-----META-START-----
version: 3
created_at: 2026-11-29T10:00:00.000Z
updated_at: 2026-11-29T11:00:00.000Z
summary: ...
-----META-END-----

<content>
"""

from __future__ import annotations

START = "-----META-START-----\n"
END = "\n-----META-END-----\n"
OWN_KEYS = ("version", "created_at", "updated_at", "summary")


def _block(stored: str) -> tuple[str, str] | None:
    """(the META block's lines, what follows it) of a leading block; None when there is none."""
    if not stored.startswith(START):
        return None
    end = stored.find(END, len(START) - 1)
    return None if end < 0 else (stored[len(START) : end], stored[end + len(END) :])


def _key_value(line: str) -> tuple[str, str, str]:
    """A META line as ``split`` reads it: (key, separator, value), at ``": "`` else at ``":"`` (a
    line with neither is a key of its own, its separator empty)."""
    parts = line.partition(": ")
    return parts if parts[1] else line.partition(":")


def split(stored: str) -> tuple[dict[str, str], str]:
    """(META keys in file order, content after the block). No block → ({}, stored)."""
    found = _block(stored)
    if found is None:
        return {}, stored
    block, rest = found
    if rest.startswith("\n"):
        rest = rest[1:]
    keys: dict[str, str] = {}
    for line in block.split("\n"):
        key, _, value = _key_value(line)
        if key and key not in keys:
            keys[key] = value
    return keys, rest


def malformed(stored: str) -> tuple[int, str] | None:
    """The first line of a leading META block that ``split`` would have to guess at — one that is
    not ``key: value`` (a blank line aside), or a key given twice — as (its line in the file, the
    problem); None when the block (or its absence) is clean. An import refuses such a file rather
    than rewrite it."""
    found = _block(stored)
    seen: set[str] = set()
    for number, line in enumerate(found[0].split("\n") if found else [], start=2):
        if not line.strip():
            continue
        key, sep, _ = _key_value(line)
        if not sep or not key:
            return number, "META line is not `key: value`"
        if key in seen:
            return number, f"META key {key} given twice"
        seen.add(key)
    return None


def strip(content: str) -> str:
    """Written content loses a leading META block, so a read-modify-write never nests blocks."""
    return split(content)[1]


def render(
    *, version: int, created_at: str, updated_at: str, summary: str | None, previous: dict[str, str], content: str
) -> str:
    lines = [f"version: {version}", f"created_at: {created_at}", f"updated_at: {updated_at}"]
    if summary:
        lines.append(f"summary: {summary}")
    lines += [f"{key}: {value}" for key, value in previous.items() if key not in OWN_KEYS]
    return START + "\n".join(lines) + END + "\n" + content
