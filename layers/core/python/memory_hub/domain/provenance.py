"""Provenance: ``source_message_ids``, the L0 messages an L1 record was drawn from.

Each cited id must name a message of the same team + agent + user (and task, when the request
names one) that exists when the record is written. A record never outlives its sources: its
citation entries are written before it, and its sources are checked again after it is written (an
erasure that raced the write either finds the entries, or is found by the check); see
``storage.citations`` and ``erasure.cascade``."""

from __future__ import annotations

from ..clock import issued_here
from ..storage import citations, messages, records
from ..storage.counters import Where
from .errors import Invalid

FIELD = "source_message_ids"
UNKNOWN = "unknown message"


def cleaned(ids: list[str] | None) -> list[str]:
    """Duplicates removed, order kept (ids are not trimmed: an id names exactly one message)."""
    return list(dict.fromkeys(ids or []))


def missing(where: Where, user_id: str, task_id: str | None, ids: list[str]) -> set[str]:
    """The ids among ``ids`` that name no message of this user (and task, when given)."""
    lookable = [i for i in ids if issued_here("msg-", i)]
    found = messages.get_many(where, user_id, lookable) if lookable else {}
    alive = {i for i, m in found.items() if task_id is None or m.task_id == task_id}
    return {i for i in ids if i not in alive}


def unknown(raw: list[str], absent: set[str]) -> Invalid:
    """``source_message_ids.<i>: unknown message`` for each absent id, at its first index."""
    seen: set[str] = set()
    problems = []
    for index, value in enumerate(raw):
        if value in absent and value not in seen:
            seen.add(value)
            problems.append(f"{FIELD}.{index}: {UNKNOWN}")
    return Invalid("; ".join(problems))


def check(where: Where, user_id: str, task_id: str | None, raw: list[str]) -> list[str]:
    """The cited ids, cleaned, once each names a message that exists (else Invalid naming them)."""
    ids = cleaned(raw)
    absent = missing(where, user_id, task_id, ids) if ids else set()
    if absent:
        raise unknown(raw, absent)
    return ids


def cite(where: Where, user_id: str, atom_id: str, ids: list[str]) -> None:
    """Before the record is written: its citation entries."""
    if ids:
        citations.put(where, user_id, atom_id, ids)


def uncite(where: Where, user_id: str, atom_id: str, ids: list[str]) -> None:
    """The entries of a record that was not written after all (its write lost a race)."""
    if ids:
        citations.forget(where, user_id, ((m, atom_id) for m in ids))


def expired(where: Where, user_id: str, message_ids: list[str]) -> int:
    """Messages the retention cleanup removed: their ids leave the records citing them (expiry is
    not an erasure request; those records stay until they expire themselves). The records changed."""
    cited = citations.citing(where, user_id, message_ids)
    by_record: dict[str, set[str]] = {}
    for message_id, atom_ids in cited.items():
        for atom_id in atom_ids:
            by_record.setdefault(atom_id, set()).add(message_id)
    changed = sum(records.drop_sources(where, user_id, a, ids) for a, ids in by_record.items())
    citations.forget(where, user_id, ((m, a) for m, found in cited.items() for a in found))
    return changed
