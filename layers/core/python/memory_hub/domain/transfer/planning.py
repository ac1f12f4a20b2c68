"""Which lines of an imported tree become which items, under which ids. An id is kept when this
service could have issued it; a foreign one (TencentDB's) becomes a stable id derived from it. A
line whose item is there already (same id, same content) is skipped. When its id is taken by an
item with other content, the line gets an id derived from both — stable too, so importing the same
tree again finds it and changes nothing."""

from __future__ import annotations

import hashlib
from collections import defaultdict

from ...clock import issued_here, ordered_id
from ...storage import messages, records
from ...storage.counters import Where
from ..search import term_counts
from . import tree

Group = tuple[tuple[str, str, str | None], list[messages.NewMessage]]


def derived_id(prefix: str, ms: int, source: str) -> str:
    """A stable id for a foreign item (time-ordered like ours): importing it again finds it again."""
    return f"{prefix}{max(ms, 0) % (1 << 48):012x}{hashlib.sha256(source.encode()).hexdigest()[:14]}"


def _id_for(prefix: str, source: str | None, ms: int, fallback: str) -> str:
    if source and issued_here(prefix, source):
        return source
    return derived_id(prefix, ms, source or fallback)


def messages_to_add(where: Where, parsed: tree.Tree, skipped: dict[str, int]) -> list[Group]:
    """The messages to add, grouped by (user, session, task), with their ids."""
    groups: dict[tuple[str, str, str | None], list[tree.Message]] = defaultdict(list)
    for message in parsed.messages:
        groups[(message.user_id, message.session_id, message.task_id)].append(message)
    planned: list[Group] = []
    for (user, session, task), group in groups.items():
        wanted: dict[str, tree.Message] = {}
        for m in group:
            message_id = _id_for("msg-", m.source_id, m.timestamp, f"{m.timestamp}:{m.role}:{m.content}")
            if message_id in wanted and wanted[message_id].content != m.content:
                # two lines of the tree share an id: the later one gets an id of its own
                message_id = derived_id("msg-", m.timestamp, f"{m.source_id}:{m.role}:{m.content}")
            if message_id in wanted:
                skipped["l0"] += 1  # the same message twice in the tree
                continue
            wanted[message_id] = m
        found = messages.get_many(where, user, list(wanted)) if wanted else {}
        taken = {  # ids held by other content: the lines' own alternatives, looked up too
            i: derived_id("msg-", m.timestamp, f"{i}:{m.role}:{m.content}")
            for i, m in wanted.items()
            if i in found and found[i].content != m.content
        }
        found.update(messages.get_many(where, user, list(taken.values())) if taken else {})
        new = []
        for message_id, message in wanted.items():
            message_id = taken.get(message_id, message_id)
            there = found.get(message_id)
            if there is not None and there.content == message.content:
                skipped["l0"] += 1
                continue
            if there is not None:
                message_id = ordered_id("msg-")  # the alternative is taken as well: a new id
            at, counts = message.timestamp, term_counts(message.content)
            new.append(messages.NewMessage(message_id, message.role, message.content, at, counts, message.recorded_at))
        if new:
            planned.append(((user, session, task), new))
    return planned


def records_to_add(where: Where, parsed: tree.Tree, skipped: dict[str, int]) -> list[tuple[tree.Record, str]]:
    """The records to add, each with its id."""
    planned = []
    for item in parsed.records:
        atom_id = _id_for("atom-", item.source_id, item.created_at, f"{item.created_at}:{item.content}")
        there = records.get(where, item.user_id, atom_id)
        if there is not None and there.content != item.content:  # taken by other content
            atom_id = derived_id("atom-", item.created_at, f"{atom_id}:{item.content}")
            there = records.get(where, item.user_id, atom_id)
        if there is not None and there.content == item.content:
            skipped["l1"] += 1
            continue
        if there is not None:
            atom_id = ordered_id("atom-")  # the alternative is taken as well: a new id
        planned.append((item, atom_id))
    return planned
