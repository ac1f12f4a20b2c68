"""domain/retrieval.py over storage/postings.py (moto in process): the threshold algorithm answers
exactly what a full BM25 over the partition answers, reads a bounded amount however common a term
is, honours filters, and keeps document frequencies with the postings."""

from __future__ import annotations

import random
import uuid
from collections import Counter

import pytest
from memory_hub.domain import retrieval
from memory_hub.domain.search import Stats, idf, query_terms, saturation, term_counts
from memory_hub.storage import layout, postings
from memory_hub.storage.models import Posting

VOCABULARY = [f"word{i}" for i in range(60)]


def _corpus(rng: random.Random, size: int) -> dict[str, str]:
    """Texts with a skewed vocabulary: a few words in most texts, most words rare."""
    weights = [1 / (rank + 1) for rank in range(len(VOCABULARY))]
    return {f"msg-{i:06d}": " ".join(rng.choices(VOCABULARY, weights, k=rng.randint(1, 25))) for i in range(size)}


def _index(corpus: dict[str, str], sessions: dict[str, str] | None = None) -> tuple[str, Stats]:
    pk = f"L0#unit:{uuid.uuid4().hex}#1#{layout.digest('u')}"
    rows = []
    tokens = 0
    for item_id, text in corpus.items():
        counts = term_counts(text)
        length = sum(counts.values())
        tokens += length
        session = (sessions or {}).get(item_id, "s")
        rows += postings.build(pk, item_id, counts, length, timestamp=1, session_id=session)
    postings.put(rows)
    return pk, Stats(len(corpus), tokens)


def _brute_force(corpus: dict[str, str], query: str, stats: Stats) -> dict[str, float]:
    terms = query_terms(query)
    counted = {item: term_counts(text) for item, text in corpus.items()}
    frequency = Counter(t for counts in counted.values() for t in terms if t in counts)
    scores = {}
    for item, counts in counted.items():
        if any(t in counts for t in terms):
            length = sum(counts.values())
            scores[item] = sum(
                idf(stats.items, frequency[t]) * saturation(counts[t], length, stats.average_length)
                for t in terms
                if t in counts
            )
    return scores


def _assert_exact_top(found: list[tuple[str, float]], expected: dict[str, float], k: int) -> None:
    best = sorted(expected.values(), reverse=True)[:k]
    assert len(found) == len(best)
    for (item, score), want in zip(found, best, strict=True):
        assert score == pytest.approx(want, abs=1e-5)  # the k-th best scores, in order
        assert expected[item] == pytest.approx(score, abs=1e-5)  # and each item's own score


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_threshold_algorithm_answers_exactly_full_bm25(aws, seed):
    rng = random.Random(seed)
    corpus = _corpus(rng, 300)
    pk, stats = _index(corpus)
    for _ in range(12):
        query = " ".join(rng.sample(VOCABULARY[:40], rng.randint(1, 6)))
        k = rng.choice([1, 5, 10, 20])
        result = retrieval.ranked(pk, query_terms(query), k, postings.Filters(), lambda: (stats.items, stats.tokens))
        _assert_exact_top(result.order[:k], _brute_force(corpus, query, stats), k)


def test_a_common_word_costs_a_page_not_the_partition(aws):
    """'word0' is in nearly every text: a search reads a bounded prefix of its postings."""
    rng = random.Random(7)
    corpus = _corpus(rng, 1500)
    pk, stats = _index(corpus)
    assert sum("word0" in text.split() for text in corpus.values()) > 700
    result = retrieval.ranked(pk, ["word0", "word1"], 10, postings.Filters(), lambda: (stats.items, stats.tokens))
    _assert_exact_top(result.order[:10], _brute_force(corpus, "word0 word1", stats), 10)
    total = sum(("word0" in t.split()) + ("word1" in t.split()) for t in corpus.values())
    assert total > 1200
    assert result.postings_read <= 300  # both words common, a pathological case: pages, not the partition
    budget = retrieval.read_budget(10, 10, 2)
    capped = retrieval.ranked(
        pk, ["word0", "word1"], 10, postings.Filters(), lambda: (stats.items, stats.tokens), 10, budget
    )
    assert capped.postings_read < result.postings_read and capped.postings_read <= budget
    assert len(capped.order) >= 10  # the best found by then


def test_the_read_budget_is_what_depth_and_words_call_for_within_eight_postings_per_result():
    assert retrieval.read_budget(10, 10, 2) == 5 * 10 + 6 * 2  # what a short query calls for
    assert retrieval.read_budget(10, 20, 6) == 80  # a deeper look (fusion) stays within 8 per result
    assert retrieval.read_budget(1, 20, 5) == 15  # but every word gets its first page
    assert retrieval.read_budget(100, 100, 3) == 5 * 100 + 6 * 3


@pytest.mark.parametrize("budget", [6, 17, 40, 80])
def test_a_search_never_reads_more_postings_than_its_budget(aws, budget):
    """The budget is a hard cap: pages and look-ups by key are cut to what is left of it (beyond a
    first page of each word), whatever the memory holds and however common its words are."""
    rng = random.Random(budget)
    corpus = _corpus(rng, 600)
    pk, stats = _index(corpus)
    for query in ("word0 word1", "word0 word2 word3 word5", " ".join(VOCABULARY[:6])):
        terms = query_terms(query)
        result = retrieval.ranked(pk, terms, 10, postings.Filters(), lambda: (stats.items, stats.tokens), 20, budget)
        assert 0 < result.postings_read <= max(budget, retrieval.FIRST_PAGE * len(terms))
        assert result.order  # the best found by then


def test_filters_narrow_what_is_found(aws):
    corpus = {f"msg-{i:06d}": "apple pie" if i % 2 else "apple tart" for i in range(40)}
    sessions = {item: ("even" if int(item[-2:]) % 2 == 0 else "odd") for item in corpus}
    pk, stats = _index(corpus, sessions)
    result = retrieval.ranked(pk, ["appl"], 5, postings.Filters(session_id="even"), lambda: (stats.items, stats.tokens))
    assert result.order and all(sessions[item] == "even" for item, _ in result.order)


def _frequency(pk: str, term: str) -> int:
    digest = layout.term_digest(term)
    return postings.term_page(pk, digest, 1).frequency or 0


def test_document_frequency_follows_the_postings(aws):
    corpus = {"msg-000001": "apple pie", "msg-000002": "apple tart", "msg-000003": "cherry"}
    pk, _ = _index(corpus)
    assert _frequency(pk, "appl") == 2
    assert _frequency(pk, "cherri") == 1
    assert _frequency(pk, "absent") == 0
    postings.erase_items(pk, ["msg-000001"])
    assert _frequency(pk, "appl") == 1
    assert _frequency(pk, "pie") == 0
    remaining = list(Posting.query(pk, Posting.sk.startswith("p"), consistent_read=True))
    assert {postings.item_of(r) for r in remaining} == {"msg-000002", "msg-000003"}


def test_unknown_terms_and_empty_partitions_find_nothing(aws):
    pk, _stats = _index({"msg-000001": "apple"})
    assert retrieval.ranked(pk, ["zebra"], 5, postings.Filters(), lambda: (1, 1)).order == []
    assert retrieval.ranked(pk, [], 5, postings.Filters(), lambda: (1, 1)).order == []
    empty = f"L0#unit:{uuid.uuid4().hex}#1#x"
    assert retrieval.ranked(empty, ["appl"], 5, postings.Filters(), lambda: (0, 0)).order == []


def test_fusion_is_reciprocal_rank():
    fused = retrieval.fuse([["a", "b", "c"], ["c", "d"]], 10)
    scores = dict(fused)
    assert scores["c"] == pytest.approx(1 / 63 + 1 / 61, abs=1e-6)
    assert scores["a"] == pytest.approx(1 / 61, abs=1e-6)
    assert next(item for item, _ in fused) == "c"
    assert retrieval.fuse([[], []], 5) == []


def test_hybrid_combines_relative_bm25_with_half_the_cosine():
    words = [("a", 8.0), ("b", 4.0)]
    meaning = [("c", 0.9), ("b", 0.8), ("a", 0.1)]
    combined = retrieval.combine(words, meaning, 10)
    assert [item for item, _ in combined] == ["a", "b", "c"]  # 1.05, 0.9, 0.45
    scores = [score for _, score in combined]
    assert scores == sorted(scores, reverse=True)
    assert scores[0] <= 2 / 61 and scores[-1] > 0  # on reciprocal-rank fusion's scale
    assert retrieval.combine([], [("x", 0.5)], 5) == [("x", pytest.approx(0.5 * 0.5 * (2 / 61) / 1.5, abs=1e-6))]
    assert retrieval.combine([("a", 1.0)], [], 5)[0][0] == "a"
    assert len(retrieval.combine(words, meaning, 2)) == 2


def test_modes():
    assert retrieval.resolve_mode(None, True) == "hybrid"
    assert retrieval.resolve_mode(None, False) == "keyword"
    assert retrieval.resolve_mode("keyword", True) == "keyword"
    from memory_hub.domain.errors import Invalid

    with pytest.raises(Invalid, match="mode: "):
        retrieval.resolve_mode("semantic", False)
