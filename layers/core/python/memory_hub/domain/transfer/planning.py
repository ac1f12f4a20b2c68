"""Which lines of an imported tree become which items, under which ids. An id is kept when this
service could have issued it; a foreign one (TencentDB's) becomes a stable id derived from it. A
line whose item is there already (same id, same content) is skipped. When its id is taken by an
item with other content, or is a new message's id that carries another time than the line's (a
message is kept under the time its id carries), the line gets an id derived from both — stable
too, so importing the same tree again finds it and changes nothing."""

from __future__ import annotations

import hashlib
from collections import defaultdict

from ...analysis import term_counts
from ...clock import id_time, issued_here, ordered_id
from ...clock import message_id as new_message_id
from ...storage import messages, records
from ...storage.counters import Where
from . import tree

Group = tuple[tuple[str, str, str | None], list[messages.NewMessage]]
# (user, the id a message line gives) → (its task, the id the message has in the target)
Cited = dict[tuple[str, str], tuple[str | None, str]]


def derived_id(prefix: str, ms: int, source: str) -> str:
    """A stable id for a foreign item (time-ordered like ours): importing it again finds it again."""
    return f"{prefix}{max(ms, 0) % (1 << 48):012x}{hashlib.sha256(source.encode()).hexdigest()[:14]}"


def _id_for(prefix: str, source: str | None, ms: int, fallback: str) -> str:
    if source and issued_here(prefix, source):
        return source
    return derived_id(prefix, ms, source or fallback)


def messages_to_add(where: Where, parsed: tree.Tree, skipped: dict[str, int], cited: Cited) -> list[Group]:
    """The messages to add, grouped by (user, session, task), with their ids; into ``cited``, the
    id each message line's own id names in the target (the first line of an id wins), so the
    records' sources can be mapped — those skipped as there already included."""
    groups: dict[tuple[str, str, str | None], list[tree.Message]] = defaultdict(list)
    for message in parsed.messages:
        groups[(message.user_id, message.session_id, message.task_id)].append(message)
    planned: list[Group] = []
    for (user, session, task), group in groups.items():
        wanted: dict[str, tree.Message] = {}
        named: list[tuple[str, str]] = []  # (the line's own id, the id planned for it)
        for m in group:
            message_id = _id_for("msg-", m.source_id, m.timestamp, f"{m.timestamp}:{m.role}:{m.content}")
            if message_id in wanted and wanted[message_id].content != m.content:
                # two lines of the tree share an id: the later one gets an id of its own
                message_id = derived_id("msg-", m.timestamp, f"{m.source_id}:{m.role}:{m.content}")
            if m.source_id:
                named.append((m.source_id, message_id))
            if message_id in wanted:
                skipped["l0"] += 1  # the same message twice in the tree
                continue
            wanted[message_id] = m
        found = messages.get_many(where, user, list(wanted)) if wanted else {}
        taken = {  # ids held by other content, or new ones that carry another time: alternatives, looked up too
            i: derived_id("msg-", m.timestamp, f"{i}:{m.role}:{m.content}")
            for i, m in wanted.items()
            if (found[i].content != m.content if i in found else id_time(i) not in (None, m.timestamp))
        }
        found.update(messages.get_many(where, user, list(taken.values())) if taken else {})
        new, final = [], {}
        for planned_id, message in wanted.items():
            message_id = taken.get(planned_id, planned_id)
            there = found.get(message_id)
            final[planned_id] = message_id
            if there is not None and there.content == message.content:
                skipped["l0"] += 1
                continue
            if there is not None:
                message_id = final[planned_id] = new_message_id(message.timestamp)  # the alternative is taken too
            at, counts = message.timestamp, term_counts(message.content)
            new.append(messages.NewMessage(message_id, message.role, message.content, at, counts, message.recorded_at))
        for source, planned_id in named:
            cited.setdefault((user, source), (task, final[planned_id]))
        if new:
            planned.append(((user, session, task), new))
    return planned


def sources_of(item: tree.Record, cited: Cited) -> list[str]:
    """A record line's sources as ids of the target: each id it gives mapped to the id the tree's
    message of that id has there. An id the tree does not hold, or holds for another user — or,
    for a record of a task, another task (the rule of atomic/add) — is dropped; duplicates go,
    the newest MAX_SOURCES stay."""
    mapped = []
    for source in item.sources:
        found = cited.get((item.user_id, source))
        if found is not None and (item.task_id is None or found[0] == item.task_id):
            mapped.append(found[1])
    return records.shown_sources(None, mapped)


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
