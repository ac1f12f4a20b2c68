"""Search over the index (§7, §8): read the postings of the query's terms, rank with BM25, then
fetch the best items — verified against the items themselves, so nothing deleted, edited away or
filtered out is ever returned."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from ..storage import postings
from ..storage.concurrency import parallel
from .search import Hit, Stats, rank_hits, term_counts

T = TypeVar("T")
FETCH = 100  # BatchGetItem's limit


def ranked(
    pk: str, terms: list[str], filters: postings.Filters, stats: Callable[[], tuple[int, int]]
) -> list[tuple[str, float]]:
    """Item ids holding any of ``terms``, best first (with scores). Reads only their postings."""
    (items, tokens), found = parallel(stats, lambda: postings.lookup(pk, terms, filters))
    hits: dict[str, list[Hit]] = {}
    for term, rows in found.items():
        for row in rows:
            hits.setdefault(postings.item_of(row), []).append(Hit(term, int(row.tf), int(row.dl)))
    return rank_hits(terms, hits, Stats(items, tokens), {item_id: item_id for item_id in hits})


def best(
    order: list[tuple[str, float]],
    limit: int,
    fetch: Callable[[list[str]], dict[str, T]],
    text: Callable[[T], str],
    terms: list[str],
    keep: Callable[[T], bool] = lambda item: True,
) -> list[tuple[T, float]]:
    """The first ``limit`` items of ``order`` that exist, still hold a query term, and pass ``keep``."""
    chosen: list[tuple[T, float]] = []
    position = 0
    while len(chosen) < limit and position < len(order):
        batch = order[position : position + max(FETCH if chosen else limit, 1)][:FETCH]
        position += len(batch)
        items = fetch([item_id for item_id, _ in batch])
        for item_id, score in batch:
            item = items.get(item_id)
            if item is None or not keep(item):
                continue
            counts = term_counts(text(item))
            if not any(t in counts for t in terms):
                continue
            chosen.append((item, score))
            if len(chosen) == limit:
                break
    return chosen
