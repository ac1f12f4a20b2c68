"""Word-based relevance for L0/L1 search (§7): tokens and BM25.

Tokens: words and numbers (with their combining marks), NFKC-normalised and lower-cased; CJK runs
as overlapping character pairs (a lone CJK character is its own token). An item matching no query
token is never returned, and an item holding more of the query's distinct tokens always ranks above
one holding fewer (then BM25, then newer).

The index (``storage.postings``) keeps, per item, each of its distinct tokens with its frequency
and the item's length; a search reads only the postings of the query's tokens, so its cost follows
the matches, not the size of the memory. Collection statistics (number of items and their total
length) are exact counters kept with the items.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import TypeVar

T = TypeVar("T")
K = TypeVar("K", bound=Hashable)

_CJK = (
    r"\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af"
    r"\U00020000-\U0002a6df"
)
# Combining marks belong to their word (Python's \w leaves them out): diacritics left after
# normalisation, and the vowel signs of Indic scripts.
_MARKS = (
    r"\u0300-\u036f\u0483-\u0489\u0591-\u05c7\u0610-\u061a\u064b-\u065f\u0900-\u0963\u0966-\u0dff"
    r"\u0e31-\u0e3a\u0e47-\u0e4e\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f"
)
_TOKEN = re.compile(rf"[{_CJK}]+|(?:[^\W_{_CJK}]|[{_MARKS}])+", re.UNICODE)
_IS_CJK = re.compile(rf"[{_CJK}]")
K1, B = 1.2, 0.75


def tokenize(text: str) -> list[str]:
    """Tokens of ``text`` after NFKC normalisation (composed accents, full-width forms folded)."""
    tokens: list[str] = []
    for run in _TOKEN.findall(unicodedata.normalize("NFKC", text).lower()):
        if _IS_CJK.match(run):
            tokens.extend([run] if len(run) == 1 else [run[i : i + 2] for i in range(len(run) - 1)])
        else:
            tokens.append(run)
    return tokens


def term_counts(text: str) -> Counter[str]:
    """Each distinct token of ``text`` with its frequency."""
    return Counter(tokenize(text))


def query_terms(query: str) -> list[str]:
    return list(dict.fromkeys(tokenize(query)))


@dataclass(frozen=True)
class Stats:
    """The searched collection: how many items, and how many tokens they hold together."""

    items: int
    tokens: int

    @property
    def average_length(self) -> float:
        return (self.tokens / self.items) if self.items else 1.0


@dataclass(frozen=True)
class Hit:
    """One term of one item, as the index stores it."""

    term: str
    frequency: int
    length: int


def rank_hits(terms: list[str], hits: dict[K, list[Hit]], stats: Stats, order: dict[K, str]) -> list[tuple[K, float]]:
    """Candidates (item → its hits among ``terms``), best first: more distinct query terms first,
    then BM25, then the later ``order`` key (newer ids sort higher)."""
    if not terms or not hits:
        return []
    document_frequency: Counter[str] = Counter(hit.term for found in hits.values() for hit in found)
    n = max(stats.items, max((document_frequency[t] for t in terms), default=0), 1)
    average = stats.average_length or 1.0
    idf = {t: math.log(1 + (n - document_frequency[t] + 0.5) / (document_frequency[t] + 0.5)) for t in terms}
    scored = []
    for key, found in hits.items():
        matched = {hit.term: hit for hit in found}
        if not matched:
            continue
        score = 0.0
        for term, hit in matched.items():
            tf = hit.frequency
            score += idf[term] * tf * (K1 + 1) / (tf + K1 * (1 - B + B * hit.length / average))
        scored.append((len(matched), score, order.get(key, ""), key))
    scored.sort(key=lambda row: (row[0], row[1], row[2]), reverse=True)
    # The answered score keeps the order: the number of matched terms, plus BM25 squashed into
    # [0, 1) — so one more matched term always outweighs any BM25 difference.
    return [(key, round(matched + score / (score + 1), 6)) for matched, score, _, key in scored]


def rank(query: str, docs: Sequence[tuple[T, str]], limit: int) -> list[tuple[T, float]]:
    """Rank in-memory documents (the same ranking as the index, for a handful of texts)."""
    terms = query_terms(query)
    hits: dict[int, list[Hit]] = {}
    lengths = []
    for index, (_, text) in enumerate(docs):
        counts = term_counts(text)
        length = sum(counts.values())
        lengths.append(length)
        found = [Hit(t, counts[t], length) for t in terms if t in counts]
        if found:
            hits[index] = found
    stats = Stats(len(docs), sum(lengths))
    order = {index: f"{len(docs) - index:012d}" for index in hits}  # earlier docs first on ties
    return [(docs[index][0], score) for index, score in rank_hits(terms, hits, stats, order)[:limit]]
