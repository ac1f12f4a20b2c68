"""The ``memory-tdai`` tree: how a memory is written out as TencentDB Agent Memory's on-disk
layout, and how such a tree — ours or one TencentDB wrote — is read back and checked.

    conversations/YYYY-MM-DD.jsonl   L0, one message per line, in time order (day of recordedAt, UTC)
    records/YYYY-MM-DD.jsonl         L1, one record per line (day of createdAt, UTC)
    scene_blocks/<path>              L2 files exactly as stored (META block included)
    persona.md                       L3 exactly as stored
    .metadata/scene_index.json       [{filename, summary, heat, created, updated}]
    .metadata/memory-hub.json        our own summary (never TencentDB's manifest.json)
    .backup/persona/…                persona backups

Reading is strict: every problem is reported as ``<file>:<line>: <problem>`` and a tree with any
problem is refused as a whole.

This module reads a whole tree (``read``, one step per part of it) and is the face of the package's
tree modules: ``shapes`` (the parsed form), ``archive`` (the .tar.gz, within limits), ``writing``
(the files an export writes), ``lines`` (L0 and L1 lines as read), ``pairs`` (whose lines they are)
and ``profile`` (L2 and L3 as read)."""

from __future__ import annotations

from .. import fields, meta
from ..fields import check
from ..rules import path_problem
from . import lines, pairs, profile
from .archive import MAX_TREE_BYTES, measure, member_name, tarball, untar
from .shapes import Malformed, Message, Record, Selection, Tree
from .writing import by_day, heat_of, l0_line, l1_line, scene_index

__all__ = [
    "MAX_TREE_BYTES",
    "Malformed",
    "Message",
    "Record",
    "Selection",
    "Tree",
    "by_day",
    "heat_of",
    "l0_line",
    "l1_line",
    "measure",
    "member_name",
    "read",
    "scene_index",
    "tarball",
    "untar",
]


def read(files: dict[str, bytes], selection: Selection) -> Tree:
    """Parse and check a whole tree; Malformed (every problem) if anything is wrong."""
    problems: list[str] = []
    _check_pairs(files, selection)
    tree = Tree()
    tree.messages = _messages(files, selection, problems)
    tree.records = _records(files, selection, problems)
    if len(tree.messages) + len(tree.records) > lines.MAX_LINES:
        raise Malformed([f"(tree): more than {lines.MAX_LINES:,} messages and records"])
    _profile(files, selection, tree, problems)
    summary = files.get(".metadata/memory-hub.json")
    if summary is not None:
        tree.persona_meta = profile.persona_meta(summary, problems)
    if problems:
        raise Malformed(problems)
    return tree


def _check_pairs(files: dict[str, bytes], selection: Selection) -> None:
    """Refuse a tree holding several (team, agent) pairs when none is chosen, or not the chosen one."""
    found = pairs.pairs_of(files)
    named = ", ".join(sorted(f"{t}/{a}" for t, a in found))
    if len(found) > 1 and selection.from_team is None:
        raise Malformed(
            [f"(tree): it holds several teams or agents ({named}): choose one with --from-team and --from-agent"]
        )
    if selection.from_team is not None and found and (selection.from_team, selection.from_agent) not in found:
        raise Malformed(
            [f"(tree): nothing of team {selection.from_team} agent {selection.from_agent} in it (it holds {named})"]
        )


def _messages(files: dict[str, bytes], selection: Selection, problems: list[str]) -> list[Message]:
    """L0: the selected lines of every ``conversations/*.jsonl``, file by file in name order."""
    messages: list[Message] = []
    for name in sorted(files):
        if name.startswith("conversations/") and name.endswith(".jsonl"):
            for where, line in lines.lines_of(name, files[name], problems):
                if pairs.selected(line, selection):
                    message = lines.message(where, line, selection, problems)
                    if message is not None:
                        messages.append(message)
    return messages


def _records(files: dict[str, bytes], selection: Selection, problems: list[str]) -> list[Record]:
    """L1: the selected lines of every ``records/*.jsonl``; of lines with the same id the last one
    read (the files are append-only), then the lines without an id."""
    latest: dict[str, Record] = {}
    unnamed: list[Record] = []
    for name in sorted(files):
        if name.startswith("records/") and name.endswith(".jsonl"):
            for where, line in lines.lines_of(name, files[name], problems):
                if pairs.selected(line, selection):
                    record = lines.record(where, line, selection, problems)
                    if record is not None:
                        if record.source_id:  # append-only files: the last line of an id wins
                            latest[record.source_id] = record
                        else:
                            unnamed.append(record)
    return list(latest.values()) + unnamed


def _profile(files: dict[str, bytes], selection: Selection, tree: Tree, problems: list[str]) -> None:
    """L2 and L3 into ``tree``: scene files, the persona and Memory Hub's persona backups, from the
    tree's root or the chosen pair's profile folder."""
    folder, own = profile.profile_files(files, selection)
    for name, data in sorted(own.items()):
        shown = folder + name  # problems name the file as the tree holds it
        if not name.startswith(("scene_blocks/", ".backup/persona/")) and name != "persona.md":
            continue  # at the root the tree's JSONL files are here too: read (and reported) above
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            problems.append(f"{shown}:1: not UTF-8")
            continue
        if name.startswith("scene_blocks/"):
            _scene(name[len("scene_blocks/") :], shown, text, tree, problems)
        elif name == "persona.md":
            if check(fields.Text, text, f"{shown}:1", "content", problems):
                tree.persona = text
        elif name.startswith(".backup/persona/") and "/" not in name[len(".backup/persona/") :]:
            backup = name[len(".backup/persona/") :]
            # Memory Hub's own backups; TencentDB's are not read
            if profile.BACKUP_NAME.fullmatch(backup) and check(fields.Text, text, f"{shown}:1", "content", problems):
                tree.backups[backup] = text


def _scene(path: str, shown: str, text: str, tree: Tree, problems: list[str]) -> None:
    """One scene file: its path checked, its META block made Memory Hub's, its content checked."""
    problem = path_problem(path, kind="file")
    if problem:
        problems.append(f"{shown}:1: path {problem}")
        return
    bad = meta.malformed(text)
    if bad is not None:
        problems.append(f"{shown}:{bad[0]}: {bad[1]}")
        return
    try:
        tree.files[path] = profile.stored_scene(text)
    except ValueError as exc:
        problems.append(f"{shown}:1: {exc}")
        return
    check(fields.Text, meta.split(tree.files[path])[1], f"{shown}:1", "content", problems)
