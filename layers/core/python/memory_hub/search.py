"""Word-based relevance for L0/L1 search (§7): BM25 over the caller's own scope.

Tokens: Latin words and digits, lower-cased; CJK runs as overlapping character pairs (a lone
CJK character is its own token). An item matching no query token is never returned.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from typing import Sequence, TypeVar

T = TypeVar("T")

_CJK = (r"\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af"
        r"\U00020000-\U0002a6df")
_TOKEN = re.compile(rf"[{_CJK}]+|[^\W_{_CJK}]+", re.UNICODE)
_IS_CJK = re.compile(rf"[{_CJK}]")
K1, B = 1.2, 0.75


def tokenize(text: str) -> list[str]:
    tokens: list[str] = []
    for run in _TOKEN.findall(text.lower()):
        if _IS_CJK.match(run):
            tokens.extend([run] if len(run) == 1 else [run[i : i + 2] for i in range(len(run) - 1)])
        else:
            tokens.append(run)
    return tokens


def rank(query: str, docs: Sequence[tuple[T, str]], limit: int) -> list[tuple[T, float]]:
    """The ``limit`` best (doc, score) pairs, best first; ties keep the input order."""
    terms = list(dict.fromkeys(tokenize(query)))
    if not terms or not docs:
        return []
    counted = [Counter(tokenize(text)) for _, text in docs]
    lengths = [sum(c.values()) for c in counted]
    average = (sum(lengths) / len(lengths)) or 1.0
    n = len(docs)
    idf = {}
    for term in terms:
        df = sum(1 for c in counted if term in c)
        idf[term] = math.log(1 + (n - df + 0.5) / (df + 0.5))
    scored = []
    for index, (counts, length) in enumerate(zip(counted, lengths)):
        matched = [t for t in terms if t in counts]
        if not matched:
            continue
        score = 0.0
        for term in matched:
            tf = counts[term]
            score += idf[term] * tf * (K1 + 1) / (tf + K1 * (1 - B + B * length / average))
        # items holding more of the query's distinct terms always rank above those holding fewer
        coverage = len(matched) / len(terms)
        scored.append((coverage, score, -index))
    scored.sort(reverse=True)
    return [(docs[-i][0], round(cov * 10 + score, 6)) for cov, score, i in scored[:limit]]
