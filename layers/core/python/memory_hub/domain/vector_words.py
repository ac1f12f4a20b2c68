"""Search by words in a memory whose words are indexed with its vectors (``Where.words``).

There a message or a record has no postings: its vector carries its terms (``vectors.TERMS``: the
word index's digests, as often as it holds each) and S3 Vectors searches them by full text. A
search asks one ``QueryVectors`` of its user's index — the query's vector and its terms' digests
together, ``topK`` as deep as the meaning half reads, with the metadata — and gets the candidates
of both halves: the nearest vectors with their distances, the vectors holding a query term, and
the terms each holds.

S3 Vectors ranks words by BM25 over the whole index, where a group's users are together: a user's
own names and places, common in their messages, are rare among the group's and would weigh too
much. So its ranking only picks candidates; their words are scored here by BM25 over the user's own
statistics (``counters``: items and their length; the terms' counts, sampled as for postings: one
in ``postings.SAMPLE``), each from the terms its vector carries. A term's count is its counter once
that holds more than one sample, else the candidates holding it (one sample is noise; all the
items of a rare term are among the candidates, which rank them first) — measured on LoCoMo before
it was built: the same hit@10 as exact counts (``docs/performance.md``).

What is not in S3 Vectors yet is found all the same, from the next request:

- an item whose vector waits for its put (``VectorWrites: Batched``): its waiting row (read by
  the meaning half already) gives its vector, its text (read as a candidate is) its terms;
- an item that has postings — its embedding failed when it was written, an import wrote it —
  is found by them: the user's counter counts such items (``counters.Held.posted``), and only
  while there are any does a search read postings (the word half of ``retrieval``); what they find
  joins the candidates, scored alike.

Its modes: ``hybrid`` asks both (one call), ``keyword`` the words alone, ``semantic`` the vector
alone (the words only if the query cannot be embedded). With meaning turned off since the memory was
created, its words are still asked (a query of words needs no model). A ``QueryVectors`` that fails
fails the search (503, retryable): neither half could answer — not an answer of what waits alone —
unless every item of the user has postings (none was embedded: the model or S3 Vectors failing
from the start), which answer by words.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..observability import count_event, logger
from ..settings import get_settings
from ..storage import counters, postings, vectors, waiting_vectors
from ..storage.concurrency import parallel
from ..storage.counters import Where
from . import meaning
from .errors import Unavailable
from .retrieval import Meant, Place, Ranked
from .search import Stats, idf, saturation

UNANSWERED = "search: the vector index did not answer; nothing was changed, retry"

Terms = Callable[[list[str]], "dict[str, Mapping[str, int]]"]
"""The term frequencies of items by id, from their text (an item that is gone is absent)."""


@dataclass(frozen=True)
class Asked:
    """One search as this module asks it: its user's layer, its terms, its mode and its filters."""

    where: Where
    layer: str
    user_id: str
    text: str
    terms: list[str]
    mode: str
    session_id: str | None = None
    task_id: str | None = None
    start_ms: int | None = None
    end_ms: int | None = None
    type_: str | None = None
    known: counters.Held | None = None  # the user's counter, when the caller read it already


@dataclass
class _Candidate:
    terms: Counter[str] | None  # digest → frequency (None: not known yet — a waiting one)
    length: int
    similarity: float | None  # None: found by its words only
    metadata: dict[str, Any]


def halves(
    asked: Asked, depth: int, postings_half: Callable[[], Ranked], terms_of: Terms
) -> tuple[Ranked, Meant | None]:
    """One search's two halves from one ``QueryVectors`` (with the waiting vectors, the counter, the
    terms' counts and — while the user has items with postings — ``postings_half`` after it)."""
    where = asked.where
    digests = [postings.digest(t) for t in asked.terms]
    vector = _query_vector(asked)
    ask_words = bool(digests) and (asked.mode != "semantic" or vector is None)
    top_k = min(vectors.MAX_TOP_K, max(20, 4 * depth))
    where_filter = vectors.search_filter(
        layer=asked.layer,
        user_id=asked.user_id,
        model=None if ask_words else meaning.model(),  # words: any model's vector carries its item's terms
        session_id=asked.session_id,
        task_id=asked.task_id,
        type_=asked.type_,
        start_ms=asked.start_ms,
        end_ms=asked.end_ms,
    )
    index = meaning.index_for(where, asked.user_id)
    pk = where.item_pk(asked.layer, asked.user_id)

    def stored() -> list[vectors.Match] | None:
        if vector is None and not ask_words:
            return []
        try:
            if not ask_words:
                return vectors.query(index, vector, top_k, where_filter, with_metadata=True)
            return _asked_in_parts(index, vector, top_k, where_filter, digests)
        except Exception:
            logger.exception("vector query failed")
            count_event("VectorQueryFailures", 1)
            return None

    waits = meaning.enabled()  # batched writes wait; so does an immediate one whose put failed
    found, held, known, waiting = parallel(
        stored,
        lambda: asked.known or counters.held(where, asked.layer, asked.user_id),
        lambda: postings.frequencies(pk, digests) if ask_words else {},
        lambda: meaning.waiting_of(where, asked.layer, asked.user_id) if waits else [],
    )
    if found is None:
        if held.posted < held.items:  # some of the user's items have their words in their vectors only
            raise Unavailable(UNANSWERED)
        vector = None  # every item has postings: they answer, by words
        if digests and not ask_words:  # a semantic search: by words, as when the query is not embedded
            ask_words, known = True, postings.frequencies(pk, digests)
    by_postings = postings_half() if ask_words and held.posted > 0 else Ranked([], 0)
    passing = [w for w in waiting if vectors.passes(w.metadata, where_filter)]
    candidates = _candidates(found or [], passing, vector, meaning.model())
    for key, _ in by_postings.order:  # found by postings: scored alike, from their text
        found_too = candidates.setdefault(key, _Candidate(None, 0, None, {}))
        if found_too.terms is not None and sum(found_too.terms.values()) < found_too.length:
            found_too.terms = None  # its vector holds only its first terms (a long item): read them all
    if ask_words:
        _learn_unknown(candidates, terms_of)
    where_said = {**places(candidates), **by_postings.places}
    words = Ranked(_scored(candidates, digests, held, known), by_postings.postings_read, where_said)
    meant = None if vector is None else _meant(candidates, top_k, where_said)
    return words, meant


def _asked_in_parts(
    index: vectors.Index, vector: list[float] | None, top_k: int, where: dict[str, Any], digests: list[str]
) -> list[vectors.Match]:
    """The stored vectors holding the query's terms (and, with ``vector``, the nearest): one
    ``QueryVectors`` a part of the terms one query text holds — the first with the vector, the rest
    (a query of more than 48 terms) by their words alone, at once — each candidate once, with
    its distance when a part has it."""
    parts = vectors.text_chunks(digests)
    asks = [
        lambda part=part, first=i == 0: vectors.query(
            index, vector if first else None, top_k, where, with_metadata=True, texts=part
        )
        for i, part in enumerate(parts)
    ]
    found: dict[str, vectors.Match] = {}
    for match in (m for answer in parallel(*asks) for m in answer):
        if match.key not in found or found[match.key].distance is None:
            found[match.key] = match
    return vectors.nearest_first(found.values())


def _query_vector(asked: Asked) -> list[float] | None:
    """The query's embedding when the search asks for meaning (None: not asked, or it failed)."""
    if asked.mode == "keyword" or not meaning.enabled():
        return None
    settings = get_settings()
    vector = meaning.query_vector(settings.embedding_model, settings.embedding_dimensions, asked.text)
    if not isinstance(vector, list):
        count_event("QueryEmbeddingFailures", 1)
        return None
    return vector


def _candidates(
    found: list[vectors.Match], waiting: list[waiting_vectors.Waiting], vector: list[float] | None, model: str
) -> dict[str, _Candidate]:
    """Every candidate by id: the stored vectors found (with the terms their metadata holds), and
    the waiting ones in place of a stored one of the same item (they are newer); a similarity only
    for a vector of the current ``model`` (another's is re-embedded by the cleanup)."""
    candidates: dict[str, _Candidate] = {}
    for match in found:
        held = vectors.held_terms(match.metadata)
        terms, length = held if held is not None else (None, 0)
        current = match.distance is not None and match.metadata.get("model") == model
        similarity = 1.0 - match.distance if current and match.distance is not None else None
        candidates[match.key] = _Candidate(terms, length, similarity, match.metadata)
    for row in waiting:
        current = vector is not None and row.metadata.get("model") == model
        similarity = waiting_vectors.cosine(row.vector, vector) if current and vector is not None else None
        candidates[row.key] = _Candidate(None, 0, similarity, row.metadata)
    return candidates


def _learn_unknown(candidates: dict[str, _Candidate], terms_of: Terms) -> None:
    """The terms of the candidates whose vectors do not carry them (waiting ones, those found by
    postings), from their text."""
    unknown = [key for key, c in candidates.items() if c.terms is None]
    if not unknown:
        return
    for key, counts in terms_of(unknown).items():
        candidate = candidates[key]
        candidate.terms = Counter({postings.digest(t): n for t, n in counts.items()})
        candidate.length = sum(counts.values())


def document_frequencies(
    digests: list[str], known: Mapping[str, int], candidates: list[Counter[str]]
) -> dict[str, int]:
    """Each query term's count as a search knows it without postings: its sampled counter once
    that holds more than one sample (never below the candidates holding it), else the candidates
    holding it."""
    holding = Counter(d for terms in candidates for d in set(terms) if d in set(digests))
    return {d: max(known.get(d, 0), holding[d]) if known.get(d, 0) > postings.SAMPLE else holding[d] for d in digests}


def _scored(
    candidates: dict[str, _Candidate], digests: list[str], held: counters.Held, known: Mapping[str, int]
) -> list[tuple[str, float]]:
    """The candidates holding a query term by BM25 over the user's statistics, best first."""
    holders = {key: c.terms for key, c in candidates.items() if c.terms and any(d in c.terms for d in digests)}
    if not holders:
        return []
    frequency = document_frequencies(digests, known, list(holders.values()))
    stats = Stats(max(held.items, max(frequency.values())), held.tokens)
    average = stats.average_length if held.items else sum(c.length for c in candidates.values()) / len(candidates)
    scores = {
        key: sum(
            idf(stats.items, frequency[d]) * saturation(terms[d], candidates[key].length, average)
            for d in dict.fromkeys(digests)
            if terms[d] > 0
        )
        for key, terms in holders.items()
    }
    return sorted(((k, round(s, 6)) for k, s in scores.items() if s > 0), key=lambda pair: (-pair[1], pair[0]))


def _meant(candidates: dict[str, _Candidate], top_k: int, where_said: dict[str, Place]) -> Meant:
    near = sorted(
        ((key, c.similarity) for key, c in candidates.items() if c.similarity is not None), key=lambda pair: -pair[1]
    )
    return Meant(near[:top_k], where_said)


def places(candidates: dict[str, _Candidate]) -> dict[str, Place]:
    """Where each candidate was said, from its vector's metadata."""
    return meaning.places_of([(key, (0.0, c.metadata)) for key, c in candidates.items()])
