"""Search by words over the index: the best ``limit`` items by BM25, reading postings best impact
first and stopping as soon as nothing unread can enter the answer (a threshold algorithm with
random access, as in Fagin's TA / max-score), then fetching those items and checking them.

Cost: each query term's postings are read a page at a time, highest impact first; an item seen in
one term's list is read itself (``Counts``: its text gives its other terms' frequencies, as they were
indexed), so its exact score is known — and the items read are the ones the answer is made of;
reading stops when the ``limit``-th exact score reaches the most any unseen item could still score
(the sum over terms of their idf times the bound of their next unread posting). So a search reads
an amount bounded by ``limit`` and the number of query terms, not by the memory's size nor by how
common a term is — a word in every item costs a page, not the partition. ``MAX_ROUNDS`` caps the
pages per term (a pathological query answers with the best found so far).

This module also fuses the word ranking with the meaning ranking (``combine``): a calibrated
combination of the two scores, answered on the reciprocal-rank-fusion scale TencentDB's hybrid
recall answers with (``fuse``, plain RRF, is kept for comparison in the tests). A conversation's
hybrid search also reads its candidates in their session's context (``in_context``): a turn said
next to a candidate that both halves find relevant gains part of that agreed relevance.
"""

from __future__ import annotations

import heapq
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ..analysis import query_terms, term_counts
from ..storage import postings
from ..storage.concurrency import for_each, parallel
from .errors import Invalid
from .search import Stats, idf, saturation, words_first

T = TypeVar("T")
FETCH = 100  # BatchGetItem's limit
MAX_ROUNDS = 8  # pages read per term at most

Counts = Callable[[list[str]], "dict[str, Mapping[str, int]]"]
"""The term frequencies of items by id, from their text (an item that is gone is absent)."""


POSTINGS_PER_RESULT = 8  # of the 10 DynamoDB items a search may read per result it answers
FIRST_PAGE = 3  # postings of each query word read at least (its first page)


def read_budget(limit: int, depth: int, terms: int, per_result: int = POSTINGS_PER_RESULT) -> int:
    """How many postings a search reads at most (past it, the answer is the best found by then):
    what its depth and its words call for, but never more than ``POSTINGS_PER_RESULT`` per result
    asked for — with the answer's own items and the asset, key and statistics reads, a search reads
    at most about 10 DynamoDB items per result, whatever the memory holds — and never less than a
    first page of every word."""
    wanted = 5 * depth + 6 * terms
    return min(wanted, max(per_result * limit, FIRST_PAGE * terms))


RRF_K = 60  # reciprocal-rank fusion's constant (the usual one)


@dataclass
class _Term:
    term: str
    digest: str
    weight: float = 0.0  # idf
    next: dict[str, Any] | None = None
    exhausted: bool = False
    last_impact: float = postings.MAX_IMPACT
    read: int = 0
    rounds: int = 0
    page: int = 0  # postings per page


Place = tuple[str, int]
"""Where an item was said: its session's digest and its time (epoch ms)."""


@dataclass
class _Candidate:
    found: dict[str, tuple[int, int]] = field(default_factory=dict)  # term → (frequency, length)
    resolved: set[str] = field(default_factory=set)  # terms known present or absent
    place: Place | None = None


@dataclass(frozen=True)
class Ranked:
    """The word ranking of one search: item ids best first with their BM25 scores, how many
    postings it read, and where each candidate was said (messages of a session)."""

    order: list[tuple[str, float]]
    postings_read: int
    places: dict[str, Place] = field(default_factory=dict)


@dataclass(frozen=True)
class Meant:
    """The meaning half of a search: item ids best first with their cosine similarity, and where
    each was said (messages of a session)."""

    order: list[tuple[str, float]]
    places: dict[str, Place] = field(default_factory=dict)


def ranked(
    pk: str,
    terms: list[str],
    limit: int,
    filters: postings.Filters,
    stats: Callable[[], tuple[int, int]],
    counts: Counts,
    depth: int | None = None,
    budget: int | None = None,
) -> Ranked:
    """The ``depth`` (default ``limit``) best items holding any of ``terms`` that pass
    ``filters``, by exact BM25 over this partition (its terms' document frequencies as
    ``postings.document_frequencies`` gives them) — or, when reading would pass ``budget``
    postings, the best found by then."""
    want = max(depth or limit, 1)
    if not terms:
        return Ranked([], 0)
    first_page = _first_page(want, len(terms), budget)
    lists = [_Term(t, postings.digest(t), page=first_page) for t in terms]
    (items, tokens), first, known = parallel(
        stats,
        lambda: for_each(lambda t: postings.term_page(pk, t.digest, first_page), lists, width=postings.READ_WIDTH),
        lambda: postings.frequencies(pk, [t.digest for t in lists]),
    )
    collection = Stats(items, tokens)
    average = collection.average_length
    candidates: dict[str, _Candidate] = {}
    excluded: set[str] = set()

    def take(term: _Term, result: postings.Page, asked: int) -> None:
        _take(
            term,
            result,
            asked,
            lambda row: _note(candidates, excluded, filters, postings.item_of(row), row, term.term),
        )

    held = postings.document_frequencies(pk, [t.digest for t in lists], first, known, first_page)
    for term, result in zip(lists, first, strict=True):
        term.weight = idf(max(collection.items, held[term.digest]), held[term.digest])
        take(term, result, first_page)
    lists = [t for t in lists if t.read]
    read = sum(t.read for t in lists)

    def score(candidate: _Candidate) -> float:
        return sum(
            term.weight * saturation(*candidate.found[term.term], average)
            for term in lists
            if term.term in candidate.found
        )

    def unseen(term: _Term) -> float:
        """The most an unread posting of ``term`` can add."""
        return 0.0 if term.exhausted else term.weight * postings.bound(term.last_impact, average)

    def ceiling(candidate: _Candidate) -> float:
        return score(candidate) + sum(unseen(t) for t in lists if t.term not in candidate.resolved)

    def left() -> int | None:
        return None if budget is None else budget - read

    while True:
        read += _resolve(counts, lists, candidates, score, ceiling, want, left())
        scores = sorted((score(c) for c in candidates.values()), reverse=True)
        floor = scores[want - 1] if len(scores) >= want else 0.0
        threshold = sum(unseen(t) for t in lists)
        open_terms = [t for t in lists if not t.exhausted and t.rounds < MAX_ROUNDS]
        if (len(scores) >= want and floor >= threshold) or not open_terms:
            break
        room = left()
        if room is not None and room <= 0:
            break  # the best found so far: a search's cost stays bounded by limit and its words
        for term, size, result in _read_pages(pk, _to_read(open_terms, unseen, threshold - floor), room):
            take(term, result, size)
            read += len(result.rows)
    best = heapq.nlargest(
        len(candidates), ((score(c), item) for item, c in candidates.items()), key=lambda pair: (pair[0], pair[1])
    )
    places = {item: c.place for item, c in candidates.items() if c.place is not None}
    return Ranked([(item, round(value, 6)) for value, item in best if value > 0], read, places)


def _take(term: _Term, result: postings.Page, asked: int, note: Callable[[Any], None]) -> None:
    """Take one page of ``term``'s postings: each row noted, the term's read and bounds moved on."""
    term.rounds += 1
    term.read += len(result.rows)
    for row in result.rows:
        term.last_impact = postings.impact(int(row.term_frequency or 0), int(row.item_length or 0))
        note(row)
    term.next = result.next
    term.exhausted = result.next is None or len(result.rows) < asked


def _to_read(open_terms: list[_Term], unseen: Callable[[_Term], float], gap: float) -> list[_Term]:
    """The terms to read a page of next: where an unseen item could still gain most, as many as it
    takes for their unread bounds together to cover ``gap`` (the threshold above the floor)."""
    open_terms.sort(key=unseen, reverse=True)
    chosen, covered = [], 0.0
    for term in open_terms:
        chosen.append(term)
        covered += unseen(term)
        if covered >= gap:
            break
    return chosen


def _first_page(want: int, terms: int, budget: int | None) -> int:
    """Postings per word on the first page: small enough that all words together read about twice
    what is wanted and no more than the budget, but at least ``FIRST_PAGE`` each."""
    return max(FIRST_PAGE, min(-(-2 * want // terms), (budget or 2 * want) // terms))


def _read_pages(pk: str, chosen: list[_Term], room: int | None) -> list[tuple[_Term, int, postings.Page]]:
    """The next page of each chosen term, within ``room``: (term, postings asked, page)."""
    sizes = _page_sizes(chosen, room)
    pages = for_each(
        lambda pair: postings.term_page(pk, pair[0].digest, pair[1], pair[0].next),
        list(zip(chosen, sizes, strict=False)),
        width=postings.READ_WIDTH,
    )
    return list(zip(chosen, sizes, pages, strict=False))


def _page_sizes(chosen: list[_Term], room: int | None) -> list[int]:
    """How many postings to ask of each chosen term: its page, shared out so that together they
    stay within ``room`` (the budget left; None: no budget). Terms past the room get no page."""
    if room is None:
        return [t.page for t in chosen]
    share = max(1, room // max(1, len(chosen)))
    return [min(t.page, share) for t in chosen[: max(1, room)]]


def _resolve(
    counts: Counts,
    lists: list[_Term],
    candidates: dict[str, _Candidate],
    score: Callable[[_Candidate], float],
    ceiling: Callable[[_Candidate], float],
    want: int,
    room: int | None = None,
) -> int:
    """Learn the missing terms of the candidates that could still reach the answer (exhausted terms
    are known absent) from the candidates themselves, the most promising first and at most ``room``
    (term, item) pairs (the budget left; None: no budget). Returns the pairs found present — the
    postings a look-up by key would have read."""
    for candidate in candidates.values():
        candidate.resolved |= {t.term for t in lists if t.exhausted}
    pending = [(item, c) for item, c in candidates.items() if len(c.resolved) < len(lists)]
    if not pending:
        return 0
    known = sorted((score(c) for c in candidates.values()), reverse=True)
    floor = known[want - 1] if len(known) >= want else 0.0
    asked: list[tuple[str, str]] = []
    pending.sort(key=lambda pair: ceiling(pair[1]), reverse=True)
    for item, candidate in pending:
        if ceiling(candidate) < floor or (room is not None and len(asked) >= room):
            continue  # cannot reach the answer, or no room left to look
        asked += [(item, term.term) for term in lists if term.term not in candidate.resolved]
    if room is not None:
        asked = asked[: max(room, 0)]
    if not asked:
        return 0
    held = counts(list(dict.fromkeys(item for item, _ in asked)))
    found = 0
    for item, term in asked:
        candidate = candidates[item]
        candidate.resolved.add(term)
        terms = held.get(item)
        if terms is not None and terms.get(term, 0) > 0:
            candidate.found[term] = (int(terms[term]), sum(terms.values()))
            found += 1
    return found


def _note(
    candidates: dict[str, _Candidate],
    excluded: set[str],
    filters: postings.Filters,
    item: str,
    row: Any,
    term: str,
) -> None:
    """Record what one posting of a term's page says of its item: the item is out for good when it
    fails the filters (every posting of an item carries its filters), else the term's frequency and
    length."""
    if item in excluded:
        return
    if not filters.admit(row):
        excluded.add(item)
        candidates.pop(item, None)
        return
    candidate = candidates.setdefault(item, _Candidate())
    candidate.found[term] = (int(row.term_frequency), int(row.item_length))
    candidate.resolved.add(term)
    if candidate.place is None and row.session_digest is not None and row.timestamp is not None:
        candidate.place = (str(row.session_digest), int(row.timestamp))


def best(
    order: list[tuple[str, float]],
    limit: int,
    fetch: Callable[[list[str]], dict[str, T]],
    text: Callable[[T], str],
    terms: list[str],
    keep: Callable[[T], bool] = lambda item: True,
    needs_term: Callable[[str], bool] = lambda item_id: True,
) -> list[tuple[T, float]]:
    """The first ``limit`` items of ``order`` that exist, pass ``keep`` and — when found by words
    only (``needs_term``) — still hold a query term (an item edited since it was indexed)."""
    chosen: list[tuple[T, float]] = []
    position = 0
    wanted = set(terms)
    while len(chosen) < limit and position < len(order):
        batch = order[position : position + max(FETCH if chosen else limit, 1)][:FETCH]
        position += len(batch)
        items = fetch([item_id for item_id, _ in batch])
        for item_id, score in batch:
            item = items.get(item_id)
            if item is None or not keep(item):
                continue
            if wanted and needs_term(item_id) and not wanted.intersection(term_counts(text(item))):
                continue
            chosen.append((item, score))
            if len(chosen) == limit:
                break
    return chosen


MEANING_WEIGHT = 0.5
CONTEXT_WEIGHT = MEANING_WEIGHT  # a neighbour's agreed relevance weighs as meaning does
_BEST = 1.0 + MEANING_WEIGHT  # an item with the best word score and a cosine of 1


def in_context(scores: dict[str, float], support: dict[str, float], places: dict[str, Place]) -> dict[str, float]:
    """Each candidate read in its session's context: it gains ``CONTEXT_WEIGHT`` times the better
    ``support`` of the candidates said just before and just after it in the same session
    (candidates in time order; items without a session gain nothing). An answer is often the turn
    after the one that holds the question ("when did you go to the workshop?" — "last Friday"),
    which shares no word with the question and little meaning."""
    sessions: dict[str, list[tuple[int, str]]] = {}
    for item in scores:
        place = places.get(item)
        if place is not None:
            sessions.setdefault(place[0], []).append((place[1], item))
    read = dict(scores)
    for said in sessions.values():
        said.sort()
        for position, (_, item) in enumerate(said):
            around = [support.get(said[n][1], 0.0) for n in (position - 1, position + 1) if 0 <= n < len(said)]
            if around:
                read[item] += CONTEXT_WEIGHT * max(around)
    return read


LEAD_WEIGHT = 1.0  # what the records citing a turn lend it, at most (as meaning does)


SESSION_WEIGHT = 0.3  # what a session's best turns lend each of its turns
SESSION_TURNS = 3  # a session scores the sum of its best this many candidates


def in_session(scores: dict[str, float], places: dict[str, Place]) -> dict[str, float]:
    """Sessions first: each candidate gains ``SESSION_WEIGHT`` times its session's score — the sum
    of the ``SESSION_TURNS`` best candidates said in it — so a turn of the session the question is
    about outranks a turn that only shares its words (candidates without a session gain nothing)."""
    by_session: dict[str, list[float]] = {}
    for item, score in scores.items():
        place = places.get(item)
        if place is not None:
            by_session.setdefault(place[0], []).append(score)
    session_score = {s: sum(sorted(v, reverse=True)[:SESSION_TURNS]) for s, v in by_session.items()}
    return {
        item: score + SESSION_WEIGHT * session_score[places[item][0]] if item in places else score
        for item, score in scores.items()
    }


TIME_WEIGHT = 0.5  # a turn said in the span of time the query names scores this much more (× 1.5)


def in_time(scores: dict[str, float], places: dict[str, Place], span: tuple[int, int]) -> dict[str, float]:
    """Time words first: a candidate said within ``span`` (``timewords.window`` of the query) scores
    ``1 + TIME_WEIGHT`` times as much; the others keep their score — a span lifts, never drops."""
    start, end = span
    return {
        item: score * (1 + TIME_WEIGHT) if item in places and start <= places[item][1] < end else score
        for item, score in scores.items()
    }


def combine(
    by_words: list[tuple[str, float]],
    by_meaning: list[tuple[str, float]],
    limit: int,
    places: dict[str, Place] | None = None,
    leads: list[tuple[str, float]] | None = None,
    span: tuple[int, int] | None = None,
) -> list[tuple[str, float]]:
    """Hybrid ranking: each item scores its BM25 score relative to the query's best (0..1) plus
    half its cosine similarity to the query, plus ``LEAD_WEIGHT`` times its best lead relative to
    the best lead (``leads``: the records citing a turn, as their own search scored them — a turn
    is also found by what was learnt from it); best first (ties: the word ranking's order, then the
    meaning ranking's, then the leads'). Against plain reciprocal-rank fusion on LoCoMo and
    LongMemEval, with the local model: RRF lost hit@1 to words alone (LoCoMo 0.26 vs 0.37); this
    is at least as good as words alone at hit@1, 5 and 10 on both, and finds what shares no word.

    With ``places``, the candidates are then read in their sessions' context (``in_context``)
    before the best ``limit`` are taken: a neighbour lends what both halves agree on — the lesser
    of its relative BM25 and its cosine — so a turn that only shares a common word with the query
    (or is only vaguely near it) lifts nothing around it. The answered score is put on
    reciprocal-rank fusion's scale (at most 2/61, what an item first in both of two rankings
    scores), as TencentDB's hybrid recall answers. With ``span`` too (the time the query names),
    the turns said within it are lifted (``in_time``)."""
    words: dict[str, float] = {}
    top = max((score for _, score in by_words), default=0.0)
    for item, score in by_words:
        words[item] = score / top if top > 0 else 0.0
    meaning = {item: max(similarity, 0.0) for item, similarity in by_meaning}
    top_lead = max((score for _, score in leads or []), default=0.0)
    led = {item: score / top_lead for item, score in leads or [] if top_lead > 0}
    scores = {
        item: words.get(item, 0.0) + MEANING_WEIGHT * meaning.get(item, 0.0) + LEAD_WEIGHT * led.get(item, 0.0)
        for item in words | meaning | led
    }
    best_possible = _BEST + (LEAD_WEIGHT if leads is not None else 0.0)
    if places is not None:
        agreed = {item: min(words.get(item, 0.0), meaning.get(item, 0.0)) for item in scores}
        scores = in_session(in_context(scores, agreed, places), places)
        best_possible = (best_possible + CONTEXT_WEIGHT) * (1 + SESSION_WEIGHT * SESSION_TURNS)
        if span is not None:
            scores = in_time(scores, places, span)
            best_possible *= 1 + TIME_WEIGHT
    order: dict[str, int] = {}
    for item in [i for i, _ in by_words] + [i for i, _ in by_meaning] + [i for i, _ in leads or []]:
        order.setdefault(item, len(order))
    # an item nothing speaks for (no word, a cosine of 0 or less, no lead) is no answer
    ranked = sorted((i for i in scores if scores[i] > 0), key=lambda item: (-scores[item], order[item]))[:limit]
    scale = (2 / (RRF_K + 1)) / best_possible
    return [(item, round(scores[item] * scale, 6)) for item in ranked]


def fuse(rankings: list[list[str]], limit: int) -> list[tuple[str, float]]:
    """Reciprocal-rank fusion of several rankings (ids best first): each id scores the sum of
    1 / (60 + rank) over the rankings that hold it (rank from 1); best first, ties to the id that
    ranked higher in an earlier ranking."""
    scores: dict[str, float] = {}
    first_seen: dict[str, tuple[int, int]] = {}
    for which, ranking in enumerate(rankings):
        for rank, item in enumerate(ranking, start=1):
            scores[item] = scores.get(item, 0.0) + 1.0 / (RRF_K + rank)
            first_seen.setdefault(item, (rank, which))
    ordered = sorted(scores, key=lambda item: (-scores[item], first_seen[item]))
    return [(item, round(scores[item], 6)) for item in ordered[:limit]]


MODES = ("hybrid", "keyword", "semantic")


def resolve_mode(requested: str | None, meaning_available: bool) -> str:
    """The mode a search runs in: as asked, else hybrid where meaning is available and keyword
    where it is not; asking for meaning where the deployment has none is an error."""
    if requested is None:
        return "hybrid" if meaning_available else "keyword"
    if requested not in MODES:
        raise Invalid(f"mode: must be one of {', '.join(MODES)}")
    if requested == "semantic" and not meaning_available:
        raise Invalid("mode: semantic search needs embeddings, which this deployment has turned off")
    return requested


Leads = Callable[[], "list[tuple[str, float]] | None"]
"""The records' half of a conversation search: turn ids with the best score of a record citing
each (None: nothing to lend)."""

Semantic = Callable[[int], "Meant | None"]
"""The meaning half of a search: given how many to return, item ids best first with their
similarity (and their places when asked for context), or None when the query could not be
embedded."""

Both = Callable[[int, Callable[[], Ranked], Counts], "tuple[Ranked, Meant | None]"]


@dataclass(frozen=True)
class Found:
    """What a search answers: items best first with their scores, and the mode that ran."""

    items: list[tuple[Any, float]]
    mode_used: str


def search(
    *,
    pk: str,
    text: str,
    limit: int,
    mode: str,
    filters: postings.Filters,
    stats: Callable[[], tuple[int, int]],
    fetch: Callable[[list[str]], dict[str, Any]],
    text_of: Callable[[Any], str],
    keep: Callable[[Any], bool],
    semantic: Semantic | None,
    context: bool = False,
    leads: Leads | None = None,
    per_result: int = POSTINGS_PER_RESULT,
    span: tuple[int, int] | None = None,
    both: Both | None = None,
) -> Found:
    """One search in ``mode`` (``keyword``, ``hybrid`` or ``semantic``; the caller has checked that
    meaning is available for the latter two). Words and meaning run side by side; when the query
    cannot be embedded the answer is by words (``mode_used`` says so). A query without a word that
    counts (only stop words, punctuation) finds nothing in ``keyword``, in ``hybrid`` its meaning's.
    With ``context`` (a conversation's turns), hybrid reads its candidates in their sessions'
    context (``in_context``); ``keyword`` stays exact BM25 and ``semantic`` pure similarity.
    ``leads`` (a conversation's turns): the records citing each turn, found by the same query in
    the same mode, lend it their score (``combine``); a turn found only that way need not hold a
    query word itself — its record does. ``span`` (a conversation's turns, hybrid): the time the
    query names lifts the turns said in it (``in_time``). ``both``: both halves from one call, given
    the depth, the word half by postings and ``counts`` (words in vectors: ``vector_words``)."""
    terms = query_terms(text)
    if mode == "keyword" and not terms:
        return Found([], mode)
    # By words alone the exact top ``limit`` is the answer; fusion looks deeper into both halves.
    depth = limit if mode == "keyword" or semantic is None else min(max(2 * limit, 20), 100)
    budget = read_budget(limit, depth, len(terms), per_result)
    fetch = _remembering(fetch)  # the items the word half reads are the answer's, mostly

    def counts(ids: list[str]) -> dict[str, Mapping[str, int]]:
        return {item_id: term_counts(text_of(item)) for item_id, item in fetch(ids).items()}

    by_postings: Callable[[], Ranked] = lambda: ranked(pk, terms, limit, filters, stats, counts, depth, budget)  # noqa: E731
    words_half, lead_half = by_postings, leads or (lambda: None)
    if both is not None:
        pair = _once(lambda: both(depth, by_postings, counts))
        words_half = lambda: pair()[0]  # noqa: E731
        semantic = (lambda _: pair()[1]) if semantic is not None else None

    def chosen(order: list[tuple[str, float]], led: list[tuple[str, float]] | None, meant: set[str]) -> list[Any]:
        """The first ``limit`` items that exist and pass; one found by words alone still holds a word."""
        via = {i for i, _ in led or []} | meant
        return best(order, limit, fetch, text_of, terms, keep, needs_term=lambda i: i not in via)

    # Every mode answers its scores on the hybrid scale (see ``combine``): one scale for all modes.
    def by_words_alone(order: list[tuple[str, float]], led: list[tuple[str, float]] | None) -> Found:
        fused = combine(order, [], len(order) + len(led or []), leads=led)
        return Found(chosen(words_first(fused, {i for i, _ in order}), led, set()), "keyword")

    if mode == "keyword" or semantic is None:
        order, led = parallel(lambda: words_half().order if terms else [], lead_half)
        return by_words_alone(order, led)
    search_meaning = semantic

    def meaning_half() -> Meant | None:
        return search_meaning(depth)

    if mode == "semantic":
        by_meaning, led = parallel(meaning_half, lead_half)
        if by_meaning is None:
            return by_words_alone(words_half().order if terms else [], led)
        scored = combine([], by_meaning.order, len(by_meaning.order) + len(led or []), leads=led)
        return Found(best(scored, limit, fetch, text_of, [], keep), "semantic")
    by_words, by_meaning, led = parallel(words_half, meaning_half, lead_half)
    if by_meaning is None:
        return by_words_alone(by_words.order, led)
    places = {**by_meaning.places, **by_words.places} if context else None
    fused = combine(by_words.order, by_meaning.order, depth, places, led, span if context else None)
    return Found(chosen(fused, led, {i for i, _ in by_meaning.order}), "hybrid")


def _once(compute: Callable[[], T]) -> Callable[[], T]:
    """``compute`` run once, by whichever of the calls asking for it side by side comes first."""
    lock, done = threading.Lock(), list[T]()

    def once() -> T:
        with lock:
            if not done:
                done.append(compute())
            return done[0]

    return once


def _remembering(fetch: Callable[[list[str]], dict[str, T]]) -> Callable[[list[str]], dict[str, T]]:
    """``fetch`` reading each id once per search (what was absent stays absent)."""
    seen: dict[str, T | None] = {}
    lock = threading.Lock()

    def remembered(ids: list[str]) -> dict[str, T]:
        with lock:
            missing = [i for i in dict.fromkeys(ids) if i not in seen]
        if missing:
            found = fetch(missing)
            with lock:
                seen.update({i: found.get(i) for i in missing})
        with lock:
            return {i: item for i in ids if (item := seen.get(i)) is not None}

    return remembered
