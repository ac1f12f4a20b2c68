"""The recall section's in-process reference: textbook Okapi BM25 (k1 = 1.2, b = 0.75,
idf = ln(1 + (N - df + 0.5) / (df + 0.5))) and the two ways it reads text: English Snowball stems
without English stop words, or plain lower-cased words."""

from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence

import snowballstemmer

# English function words: they carry no topic, so the stemmed reference gives them no weight.
_STOP_WORDS = """
    a about above after again against all also am an and any are as at be because been before being
    below between both but by can cannot could d did do does doing done down during each either else
    ever every few for from further had has have having he her here hers herself him himself his how
    however i if in into is it its itself just ll m me might more most much must my myself neither no
    nor not now of off on once only or other otherwise our ours ourselves out over own per quite re
    rather s same shall she should since so some such t than that the their theirs them themselves
    then there therefore these they this those though through thus to too under until up upon us ve
    very was we were what whatever when whenever where whether which while who whom whose why will
    with within without would yet you your yours yourself yourselves
"""
STOP_WORDS = frozenset(_STOP_WORDS.split())
WORD = re.compile(r"[^\W_]+")
_STEMMER = snowballstemmer.stemmer("english")


def words(text: str) -> list[str]:
    """Lower-cased NFKC words (letters and digits; punctuation and ``_`` split them)."""
    return WORD.findall(unicodedata.normalize("NFKC", text).lower())


def stemmed(text: str) -> list[str]:
    """Words without English stop words, each reduced to its English Snowball stem."""
    kept = [w for w in words(text) if w not in STOP_WORDS]
    return list(_STEMMER.stemWords(kept)) if kept else []


Analyzer = Callable[[str], list[str]]


class BM25:
    """Textbook Okapi BM25 over a fixed list of documents."""

    def __init__(self, documents: Sequence[str], analyze: Analyzer, k1: float = 1.2, b: float = 0.75) -> None:
        self.analyze, self.k1, self.b = analyze, k1, b
        self.postings: dict[str, list[tuple[int, int]]] = defaultdict(list)
        self.lengths: list[int] = []
        for index, document in enumerate(documents):
            terms = analyze(document)
            self.lengths.append(len(terms))
            for term, count in Counter(terms).items():
                self.postings[term].append((index, count))
        self.count = len(self.lengths)
        self.average = (sum(self.lengths) / self.count) if self.count else 0.0

    def idf(self, term: str) -> float:
        df = len(self.postings.get(term, ()))
        return math.log(1.0 + (self.count - df + 0.5) / (df + 0.5))

    def scores(self, query: str) -> dict[int, float]:
        scores: dict[int, float] = defaultdict(float)
        for term in dict.fromkeys(self.analyze(query)):  # each distinct query term once
            idf = self.idf(term)
            for index, tf in self.postings.get(term, ()):
                norm = self.k1 * (1.0 - self.b + self.b * self.lengths[index] / self.average)
                scores[index] += idf * tf * (self.k1 + 1.0) / (tf + norm)
        return scores

    def rank(self, query: str, limit: int) -> list[int]:
        """The best ``limit`` documents sharing a term with the query, best first (ties: earlier)."""
        scored = self.scores(query)
        return sorted(scored, key=lambda index: (-scored[index], index))[:limit]
