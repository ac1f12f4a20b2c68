"""The search index: one posting per (item, distinct term), in the partition of the item itself.

A posting's sort key starts with its item (``p␟<id>␟<term>``), so an item's postings are one
prefix to read or erase; its ``by-term`` index key starts with the term, so a search reads exactly
the postings of its terms (strongly consistent: a local index). Terms appear only as digests.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from . import layout
from .concurrency import for_each, in_batches
from .models import Posting

WRITE_CHUNK = 100  # postings per batch_write context (PynamoDB sends them 25 at a time)
READ_WIDTH = 16  # terms looked up at once


@dataclass(frozen=True)
class Filters:
    """What a search is narrowed to, as the postings store it."""

    session_id: str | None = None
    task_id: str | None = None
    type: str | None = None
    start_ms: int | None = None
    end_ms: int | None = None


def build(
    pk: str,
    item_id: str,
    counts: Mapping[str, int],
    length: int,
    *,
    timestamp: int | None = None,
    session_id: str | None = None,
    type_: str | None = None,
    task_id: str | None = None,
) -> list[Posting]:
    session = layout.digest(session_id) if session_id is not None else None
    task = layout.digest(task_id) if task_id is not None else None
    rows = []
    for term, frequency in counts.items():
        digest = layout.term_digest(term)
        rows.append(
            Posting(
                pk,
                layout.posting_sk(item_id, digest),
                lsi3=layout.posting_term_key(digest, item_id),
                tf=frequency,
                dl=length,
                ts=timestamp,
                sd=session,
                ty=type_,
                tk=task,
            )
        )
    return rows


def put(rows: list[Posting]) -> None:
    def one(chunk: list[Posting]) -> None:
        with Posting.batch_write() as batch:  # retries unprocessed items itself
            for row in chunk:
                batch.save(row)

    for_each(one, in_batches(rows, WRITE_CHUNK))


def of_item(pk: str, item_id: str) -> list[Posting]:
    return list(
        Posting.query(
            pk, Posting.sk.startswith(layout.postings_of(item_id)), consistent_read=True, attributes_to_get=["pk", "sk"]
        )
    )


def delete(rows: list[Any]) -> int:
    def one(chunk: list[Any]) -> None:
        with Posting.batch_write() as batch:
            for row in chunk:
                batch.delete(Posting(row.pk, row.sk))

    for_each(one, in_batches(rows, WRITE_CHUNK))
    return len(rows)


def erase_items(pk: str, item_ids: list[str]) -> int:
    """Remove every posting of these items of one partition (whatever terms they held)."""
    return erase_of([(pk, item_id) for item_id in item_ids])


def erase_of(items: Iterable[tuple[str, str]]) -> int:
    """Remove every posting of these (partition, item id) pairs, read in parallel."""
    found = [row for rows in for_each(lambda k: of_item(*k), list(items), width=READ_WIDTH) for row in rows]
    return delete(found)


def digest_of(row: Posting) -> str:
    """The term digest of a posting."""
    return row.sk.rsplit(layout.SEP, 1)[1]


def item_of(row: Posting) -> str:
    return row.lsi3.split(layout.SEP, 1)[1]


def _condition(filters: Filters) -> Any:
    parts = []
    if filters.session_id is not None:
        parts.append(Posting.sd == layout.digest(filters.session_id))
    if filters.task_id is not None:
        parts.append(Posting.tk == layout.digest(filters.task_id))
    if filters.type is not None:
        parts.append(Posting.ty == filters.type)
    if filters.start_ms is not None:
        parts.append(Posting.ts >= filters.start_ms)
    if filters.end_ms is not None:
        parts.append(Posting.ts <= filters.end_ms)
    condition = None
    for part in parts:
        condition = part if condition is None else condition & part
    return condition


def lookup(pk: str, terms: list[str], filters: Filters) -> dict[str, list[Posting]]:
    """The postings of each term (filtered), read side by side."""
    condition = _condition(filters)

    def one(term: str) -> list[Posting]:
        digest = layout.term_digest(term)
        return list(
            Posting.by_term.query(
                pk,
                Posting.lsi3.startswith(layout.term_prefix(digest)),
                filter_condition=condition,
                consistent_read=True,
            )
        )

    return dict(zip(terms, for_each(one, terms, width=READ_WIDTH), strict=True))
