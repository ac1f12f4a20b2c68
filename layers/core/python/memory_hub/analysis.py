"""The word analyzer of search, one for what is indexed and what is asked — and for what an
erasure recomputes: an item's postings are keyed by its terms (``storage.postings``), found again
from its text when it goes, so storage and the domain share this module.

- NFKC normalisation and case folding (full-width forms and composed accents fold together);
- words and numbers are tokens (a word keeps its combining marks); CJK runs become overlapping
  character pairs (a lone CJK character is its own token);
- English stop words ("the", "did", "to", contraction remnants such as the "s" of "Caroline's")
  are dropped: they weigh nothing, and a query made only of them has no terms, so it finds nothing;
- Latin-script words are reduced to their English Snowball stem (``seats`` and ``seat`` are one
  term, so are ``running`` and ``run``); words of other scripts, digits and CJK pairs are kept as
  they are. English is the only stemming language; the README lists it.

Its output is part of the index format: a change to what it answers for a text (a stop word, a
token rule, another stemmer version: ``snowballstemmer`` is pinned) must raise
``storage.postings.FORMAT``, so the re-index rewrites every item's postings
(tests/unit/test_search.py pins its answers on a fixed text). Only the first ``MAX_QUERY_TERMS``
distinct terms of a query count.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from functools import lru_cache
from typing import Any

import snowballstemmer

MAX_QUERY_TERMS = 64

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
# Latin letters (basic, supplement, extended A/B, IPA, extended additional) with their marks: a word
# made only of these (and digits) is stemmed as English.
_LATIN_WORD = re.compile(r"[a-z0-9\u00c0-\u024f\u1e00-\u1eff\u0300-\u036f]+")

# English function words: articles, pronouns, auxiliaries, prepositions, conjunctions, and what
# the tokenizer leaves of contractions ("don't" → "don", "t"). Content words (nouns, names, most
# verbs and adjectives) are never here. Compared before stemming, on the folded word.
STOP_WORDS = frozenset(
    """
    a about above after again against all am an and any are aren as at be because been before being
    below between both but by can cannot could couldn d did didn do does doesn doing don down during
    each few for from further had hadn has hasn have haven having he her here hers herself him
    himself his how i if in into is isn it its itself just ll m me more most my myself no nor not
    now o of off on once only or other ought our ours ourselves out over own re s same shan she
    should shouldn so some such t than that the their theirs them themselves then there these they
    this those through to too under until up ve very was wasn we were weren what when where which
    while who whom why will with won would wouldn y you your yours yourself yourselves
    """.split()  # noqa: SIM905 - a word list reads better as text
)


@lru_cache(maxsize=1)
def _english() -> Any:
    return snowballstemmer.stemmer("english")


@lru_cache(maxsize=65536)
def _term(word: str) -> str | None:
    """The index term of one folded word: None for a stop word, its English stem for a Latin word."""
    if word in STOP_WORDS:
        return None
    if word.isdigit() or not _LATIN_WORD.fullmatch(word):
        return word
    stem: str = _english().stemWord(word)
    return stem or word


def words(text: str) -> list[str]:
    """The raw tokens of ``text`` (normalised and folded, stop words included, nothing stemmed)."""
    tokens: list[str] = []
    for run in _TOKEN.findall(unicodedata.normalize("NFKC", text).casefold()):
        if _IS_CJK.match(run):
            tokens.extend([run] if len(run) == 1 else [run[i : i + 2] for i in range(len(run) - 1)])
        else:
            tokens.append(run)
    return tokens


def tokenize(text: str) -> list[str]:
    """The index terms of ``text``, in order, repeats kept: what is indexed and what is asked."""
    return [term for term in map(_term, words(text)) if term is not None]


def term_counts(text: str) -> Counter[str]:
    """Each distinct term of ``text`` with its frequency."""
    return Counter(tokenize(text))


def query_terms(query: str) -> list[str]:
    """The distinct terms of a query, first-seen order, at most ``MAX_QUERY_TERMS``."""
    return list(dict.fromkeys(tokenize(query)))[:MAX_QUERY_TERMS]


def searchable(content: str, background: str) -> str:
    """What of a record is indexed: its content and its background."""
    return f"{content}\n{background}"
