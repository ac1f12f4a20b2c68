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


def split(stored: str) -> tuple[dict[str, str], str]:
    """(META keys in file order, content after the block). No block → ({}, stored)."""
    if not stored.startswith(START):
        return {}, stored
    end = stored.find(END, len(START) - 1)
    if end < 0:
        return {}, stored
    block = stored[len(START) : end]
    rest = stored[end + len(END) :]
    if rest.startswith("\n"):
        rest = rest[1:]
    keys: dict[str, str] = {}
    for line in block.split("\n"):
        key, sep, value = line.partition(": ")
        if not sep:
            key, sep, value = line.partition(":")
        if key and key not in keys:
            keys[key] = value
    return keys, rest


def malformed(stored: str) -> tuple[int, str] | None:
    """The first line of a leading META block that ``split`` would have to guess at — one that is
    not ``key: value`` (a blank line aside), or a key given twice — as (its line in the file, the
    problem); None when the block (or its absence) is clean. An import refuses such a file rather
    than rewrite it."""
    if not stored.startswith(START) or stored.find(END, len(START) - 1) < 0:
        return None
    seen: set[str] = set()
    for number, line in enumerate(stored[len(START) : stored.find(END, len(START) - 1)].split("\n"), start=2):
        if not line.strip():
            continue
        key, colon, _ = line.partition(": ")  # as ``split`` reads it
        if not colon:
            key, colon, _ = line.partition(":")
        if not colon or not key:
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
