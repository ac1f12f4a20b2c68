"""QueryVectors' full-text and hybrid search: BM25 over an index's searchable metadata keys (its
``textSearchConfigurations``), each key's text broken into terms by the analyzer of its language,
and Reciprocal Rank Fusion of several rankings.

What AWS documents, and this does: a searchable key's text is indexed as it is written; a
full-text query ranks the vectors whose text holds any of its terms by BM25, rarer terms weighing
more; a hybrid query (``queryVector`` and ``queryTexts``) runs the vector search and one full-text
search a key, and fuses their rankings by RRF into one list of ``topK``; both need an index in
ENHANCED mode, where the metadata filter applies before the searches (every index here: the
service model lets an index be CLASSIC only in a bucket made before 30 September 2026).

What AWS does not publish, and this models — so that the local stack answers in kind, not to the
decimal: the analyzers are modelled on Lucene's (``en``: its English analyzer — words, the
possessive "'s" dropped, lower case, its 33 stop words, the Porter stemmer but for words of one or
two letters; ``fr es pt it de nl``: words, lower case, the language's Snowball stemmer, without
the stop words Lucene's analyzers of those languages drop; ``zh ja ko``: overlapping pairs of CJK
characters, as Lucene's CJK analyzer; no language: the standard analyzer — words in lower case,
each Han ideograph and Hiragana letter a word, a run of Katakana or Hangul one); BM25 is Lucene's
since 8.0 (k1 1.2, b 0.75, no (k1 + 1) factor, idf ln(1 + (N - df + 0.5) / (df + 0.5)) with N and
the average length over the vectors holding a term of the key, a query's repeated term counted
each time); each ranking fused is ``topK`` deep, RRF's constant is 60; several keys of a
full-text-only query rank by the sum of their scores; a key's value is searchable when it is a
string (another value is left out).
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import snowballstemmer

from .filters import matches

K1, B = 1.2, 0.75
RRF_K = 60
ENHANCED = "ENHANCED"  # the index mode that serves full-text and hybrid queries (filters before the search)
# Lucene's English stop words (EnglishAnalyzer.ENGLISH_STOP_WORDS_SET)
# fmt: off
ENGLISH_STOP_WORDS = frozenset((
    "a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into", "is", "it", "no", "not",
    "of", "on", "or", "such", "that", "the", "their", "then", "there", "these", "they", "this", "to", "was",
    "will", "with",
))
# fmt: on
_SNOWBALL = {"fr": "french", "es": "spanish", "pt": "portuguese", "it": "italian", "de": "german", "nl": "dutch"}
_CJK = r"\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af"
_WORD = re.compile(rf"[{_CJK}]+|[^\W_{_CJK}]+(?:['\u2019][^\W_{_CJK}]+)*", re.UNICODE)
_IS_CJK = re.compile(rf"[{_CJK}]")
# Unicode's word breaks (the standard tokenizer's) keep a run of Katakana or of Hangul one word, and
# make each Han ideograph and Hiragana letter a word of its own
_KEPT_WHOLE = re.compile(r"[\u30a0-\u30ff]+|[\uac00-\ud7af]+|.", re.UNICODE)


@lru_cache(maxsize=16)
def _stemmer(name: str) -> Any:
    return snowballstemmer.stemmer(name)


def _words(text: str, pairs: bool) -> list[str]:
    """The text's words in lower case; a CJK run as the standard tokenizer splits it (``_whole``),
    or (``pairs``) as its overlapping pairs (a lone character stays one)."""
    out: list[str] = []
    for word in _WORD.findall(unicodedata.normalize("NFKC", text)):
        if _IS_CJK.match(word):
            out.extend([word[i : i + 2] for i in range(len(word) - 1)] if pairs and len(word) > 1 else _whole(word))
        else:
            out.append(word.lower())
    return out


def _whole(run: str) -> list[str]:
    """A CJK run as the standard tokenizer splits it (``_KEPT_WHOLE``)."""
    return _KEPT_WHOLE.findall(run)


def analyze(text: str, language: str | None) -> list[str]:
    """The terms the analyzer of ``language`` (None: the standard analyzer) makes of ``text``, in order."""
    words = _words(text, pairs=language in ("zh", "ja", "ko"))
    if language == "en":
        kept = [re.sub(r"['\u2019]s$", "", w) for w in words]
        kept = [w for w in kept if w and w not in ENGLISH_STOP_WORDS]
        # as Lucene's Porter stemmer, a word of one or two letters is left as it is ("s", "is")
        return [w if _IS_CJK.match(w) or len(w) <= 2 else _stemmer("porter").stemWord(w) for w in kept]
    if language in _SNOWBALL:
        stemmer = _stemmer(_SNOWBALL[language])
        return [stemmer.stemWord(w) for w in words]
    return words


@dataclass(frozen=True)
class _Field:
    """One searchable key's terms over an index: per term, the vectors holding it with its count."""

    postings: dict[str, list[tuple[int, int]]]
    lengths: dict[int, int]
    average: float

    def scores(self, terms: Sequence[str]) -> dict[int, float]:
        held = len(self.lengths)
        found: dict[int, float] = {}
        for term in terms:
            rows = self.postings.get(term, [])
            if not rows:
                continue
            idf = math.log(1 + (held - len(rows) + 0.5) / (len(rows) + 0.5))
            for row, count in rows:
                norm = K1 * (1 - B + B * self.lengths[row] / self.average)
                found[row] = found.get(row, 0.0) + idf * count / (count + norm)
        return found


def searchable(index: Any) -> dict[str, str | None]:
    """The index's full-text searchable keys, each with its language (None: the standard analyzer)."""
    config = getattr(index, "metadata_configuration", None) or {}
    return {c["metadataKey"]: c.get("language") for c in config.get("textSearchConfigurations") or []}


def _fields(index: Any, rows: list[Any]) -> dict[str, _Field]:
    """Each searchable key's terms over ``rows``, kept until the index changes."""
    version = getattr(index, "_memory_hub_version", 0)
    cached = getattr(index, "_memory_hub_text", None)
    if cached is not None and cached[0] == version:
        kept: dict[str, _Field] = cached[1]
        return kept
    built: dict[str, _Field] = {}
    for key, language in searchable(index).items():
        postings: dict[str, list[tuple[int, int]]] = {}
        lengths: dict[int, int] = {}
        for at, row in enumerate(rows):
            value = (row.metadata or {}).get(key)
            if not isinstance(value, str):
                continue
            terms = analyze(value, language)
            if not terms:  # as Lucene counts a field's documents: those holding a term of it
                continue
            lengths[at] = len(terms)
            for term, count in Counter(terms).items():
                postings.setdefault(term, []).append((at, count))
        average = sum(lengths.values()) / len(lengths) if lengths else 1.0
        built[key] = _Field(postings, lengths, max(average, 1e-9))
    index._memory_hub_text = (version, built)
    return built


def forget(index: Any) -> None:
    """The index's searchable keys changed: its terms are read again on the next query."""
    index._memory_hub_text = None


@dataclass
class Found:
    """One vector of an answer: where it ranks by each search that found it."""

    row: Any
    distance: float | None = None
    bm25: dict[str, float] = field(default_factory=dict)  # by searchable key, those it matched
    fused: float | None = None


def _ranked(scores: dict[int, float], allowed: Callable[[int], bool], depth: int) -> list[tuple[int, float]]:
    kept = [(row, score) for row, score in scores.items() if score > 0 and allowed(row)]
    kept.sort(key=lambda pair: (-pair[1], pair[0]))
    return kept[:depth]


def search(
    index: Any,
    rows: list[Any],
    texts: Sequence[dict[str, str]],
    nearest: Sequence[tuple[Any, float]] | None,
    top_k: int,
    where: dict[str, Any] | None,
) -> list[Found]:
    """A full-text (``nearest`` None) or hybrid query's answer, best first. ``rows`` are the index's
    vectors in a fixed order; ``nearest`` the vector search's ``topK`` (filtered) with distances."""
    fields = _fields(index, rows)
    languages = searchable(index)

    def allowed(at: int) -> bool:
        return where is None or matches(where, rows[at].metadata or {})

    rankings = {
        q["metadataKey"]: _ranked(
            fields[q["metadataKey"]].scores(analyze(q["text"], languages[q["metadataKey"]])), allowed, top_k
        )
        for q in texts
    }
    found: dict[int, Found] = {}
    for key, ranking in rankings.items():
        for at, score in ranking:
            found.setdefault(at, Found(rows[at])).bm25[key] = score
    if nearest is None:
        ordered = sorted(found.items(), key=lambda item: (-sum(item[1].bm25.values()), item[0]))
        return [entry for _, entry in ordered[:top_k]]
    position = {id(row): at for at, row in enumerate(rows)}
    lists: list[list[int]] = [[at for at, _ in ranking] for ranking in rankings.values()]
    lists.append([position[id(vector)] for vector, _ in nearest])
    for vector, distance in nearest:
        found.setdefault(position[id(vector)], Found(vector)).distance = distance
    for order in lists:
        for rank, at in enumerate(order, start=1):
            entry = found[at]
            entry.fused = (entry.fused or 0.0) + 1.0 / (RRF_K + rank)
    ordered = sorted(found.items(), key=lambda item: (-(item[1].fused or 0.0), item[0]))
    return [entry for _, entry in ordered[:top_k]]
