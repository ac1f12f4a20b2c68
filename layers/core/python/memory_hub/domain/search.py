"""BM25 for L0/L1 search, over the analyzer of ``memory_hub.analysis``.

Ranking is Okapi BM25 (k1 = 1.2, b = 0.75) over exact statistics: the number of items and their
total length are counters kept with the items, and a term's document frequency is a counter kept
with its postings (``storage.postings``).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar

from ..analysis import query_terms, term_counts

T = TypeVar("T")

K1, B = 1.2, 0.75


@dataclass(frozen=True)
class Stats:
    """The searched collection: how many items, and how many terms they hold together."""

    items: int
    tokens: int

    @property
    def average_length(self) -> float:
        return (self.tokens / self.items) if self.items and self.tokens else 1.0


def idf(items: int, document_frequency: int) -> float:
    """BM25's inverse document frequency (never negative)."""
    n = max(items, document_frequency, 1)
    return math.log(1 + (n - document_frequency + 0.5) / (document_frequency + 0.5))


def saturation(frequency: int, length: int, average_length: float) -> float:
    """BM25's term-frequency part: grows with ``frequency``, shrinks with the item's length."""
    return frequency * (K1 + 1) / (frequency + K1 * (1 - B + B * length / max(average_length, 1e-9)))


def rank(query: str, docs: Sequence[tuple[T, str]], limit: int) -> list[tuple[T, float]]:
    """Rank a handful of in-memory documents with the same analysis and BM25 as the index
    (best first; ties keep the documents' order)."""
    terms = query_terms(query)
    counted = [term_counts(text) for _, text in docs]
    stats = Stats(len(docs), sum(sum(c.values()) for c in counted))
    frequency = Counter(t for c in counted for t in terms if t in c)
    weights = {t: idf(stats.items, frequency[t]) for t in terms}
    scored = []
    for index, counts in enumerate(counted):
        length = sum(counts.values())
        score = sum(weights[t] * saturation(counts[t], length, stats.average_length) for t in terms if t in counts)
        if any(t in counts for t in terms):
            scored.append((score, -index))
    scored.sort(reverse=True)
    return [(docs[-index][0], round(score, 6)) for score, index in scored[:limit]]


def words_first(ranked: list[tuple[T, float]], by_words: set[T]) -> list[tuple[T, float]]:
    """A keyword ranking with every item its own words found before every item found only
    through a record citing it (which holds no query word itself: an item holding every query word
    ranks above one holding none), each kept in its order; a led item's score is kept below the
    last word match's, so the scores stay best first."""
    own = [(item, score) for item, score in ranked if item in by_words]
    floor = min((score for _, score in own), default=None)
    led = [(item, score if floor is None else min(score, floor)) for item, score in ranked if item not in by_words]
    return own + led
