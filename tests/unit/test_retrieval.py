"""domain/retrieval.py over storage/postings.py (moto in process): the threshold algorithm answers
exactly what a full BM25 over the partition answers, reads a bounded amount however common a term
is, honours filters, and keeps document frequencies with the postings."""

from __future__ import annotations

import random
import uuid
from collections import Counter

import pytest
from memory_hub.analysis import query_terms, term_counts
from memory_hub.domain import retrieval
from memory_hub.domain.search import Stats, idf, saturation
from memory_hub.storage import layout, postings
from memory_hub.storage.models import Posting

VOCABULARY = [f"word{i}" for i in range(60)]


def _corpus(rng: random.Random, size: int) -> dict[str, str]:
    """Texts with a skewed vocabulary: a few words in most texts, most words rare."""
    weights = [1 / (rank + 1) for rank in range(len(VOCABULARY))]
    return {f"msg-{i:06d}": " ".join(rng.choices(VOCABULARY, weights, k=rng.randint(1, 25))) for i in range(size)}


def _index(
    corpus: dict[str, str],
    sessions: dict[str, str] | None = None,
    times: dict[str, int] | None = None,
    layer: str = "L0",
    sampled: bool = True,
) -> tuple[str, Stats]:
    """Postings of ``corpus`` in a new partition: a user's messages (keyed by term) by default
    (``sampled=False``: counted one a posting, as format 3 counted them)."""
    pk = f"{layer}#unit:{uuid.uuid4().hex}#1#{layout.digest('u')}"
    rows = []
    tokens = 0
    for item_id, text in corpus.items():
        counts = term_counts(text)
        length = sum(counts.values())
        tokens += length
        session = (sessions or {}).get(item_id, "s")
        at = (times or {}).get(item_id, 1)
        rows += postings.build(pk, item_id, counts, length, timestamp=at, session_id=session, sampled=sampled)
    postings.put(rows)
    return pk, Stats(len(corpus), tokens)


def _counts(corpus: dict[str, str]) -> retrieval.Counts:
    """What a search learns of candidates from the items themselves: their text's terms."""
    return lambda ids: {i: term_counts(corpus[i]) for i in ids if i in corpus}


def _brute_force(corpus: dict[str, str], query: str, stats: Stats, pk: str | None = None) -> dict[str, float]:
    """Full BM25 over ``corpus``. With ``pk`` (a message partition), a term whose sampled count or
    true count reaches ``postings.EXACT_BELOW`` weighs by its sampled count (at least that), as a
    search weighs it."""
    terms = query_terms(query)
    counted = {item: term_counts(text) for item, text in corpus.items()}
    frequency = Counter(t for counts in counted.values() for t in terms if t in counts)
    for term, n in frequency.items():
        sampled = _frequency(pk, term) if pk is not None and postings.keyed_by_term(pk) else 0
        if max(n, sampled) >= postings.EXACT_BELOW:
            frequency[term] = max(sampled, postings.EXACT_BELOW)
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
def test_threshold_algorithm_answers_exactly_full_bm25(aws, monkeypatch, seed):
    """Exact whatever the words' weights — as long as it may read on: ``MAX_ROUNDS`` (a query's
    safety cap, met here by a five-word query with ``limit`` 1, pages of 3) is lifted."""
    monkeypatch.setattr(retrieval, "MAX_ROUNDS", 1000)
    rng = random.Random(seed)
    corpus = _corpus(rng, 300)
    pk, stats = _index(corpus)
    for _ in range(12):
        query = " ".join(rng.sample(VOCABULARY[:40], rng.randint(1, 6)))
        k = rng.choice([1, 5, 10, 20])
        result = retrieval.ranked(
            pk, query_terms(query), k, postings.Filters(), lambda: (stats.items, stats.tokens), _counts(corpus)
        )
        _assert_exact_top(result.order[:k], _brute_force(corpus, query, stats, pk), k)


def test_a_common_word_costs_a_page_not_the_partition(aws):
    """'word0' is in nearly every text: a search reads a bounded prefix of its postings."""
    rng = random.Random(7)
    corpus = _corpus(rng, 1500)
    pk, stats = _index(corpus)
    assert sum("word0" in text.split() for text in corpus.values()) > 700
    result = retrieval.ranked(
        pk, ["word0", "word1"], 10, postings.Filters(), lambda: (stats.items, stats.tokens), _counts(corpus)
    )
    _assert_exact_top(result.order[:10], _brute_force(corpus, "word0 word1", stats, pk), 10)
    total = sum(("word0" in t.split()) + ("word1" in t.split()) for t in corpus.values())
    assert total > 1200
    assert result.postings_read <= 300  # both words common, a pathological case: pages, not the partition
    budget = retrieval.read_budget(10, 10, 2)
    capped = retrieval.ranked(
        pk, ["word0", "word1"], 10, postings.Filters(), lambda: (stats.items, stats.tokens), _counts(corpus), 10, budget
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
        result = retrieval.ranked(
            pk, terms, 10, postings.Filters(), lambda: (stats.items, stats.tokens), _counts(corpus), 20, budget
        )
        assert 0 < result.postings_read <= max(budget, retrieval.FIRST_PAGE * len(terms))
        assert result.order  # the best found by then


def test_filters_narrow_what_is_found(aws):
    corpus = {f"msg-{i:06d}": "apple pie" if i % 2 else "apple tart" for i in range(40)}
    sessions = {item: ("even" if int(item[-2:]) % 2 == 0 else "odd") for item in corpus}
    pk, stats = _index(corpus, sessions)
    result = retrieval.ranked(
        pk, ["appl"], 5, postings.Filters(session_id="even"), lambda: (stats.items, stats.tokens), _counts(corpus)
    )
    assert result.order and all(sessions[item] == "even" for item, _ in result.order)


def _frequency(pk: str, term: str) -> int:
    digest = layout.term_digest(term)
    return postings.frequencies(pk, [digest])[digest]


@pytest.mark.parametrize(("layer", "kind"), [("L0", "t"), ("L1", "p")])
def test_document_frequency_follows_the_postings(aws, layer, kind):
    """A term counts what its postings carry (``postings.share``), a message's or a record's."""
    corpus = {"msg-000001": "apple pie", "msg-000002": "apple tart", "msg-000003": "cherry"}
    pk, _ = _index(corpus, layer=layer)

    def expected(term: str, items: list[str]) -> int:
        held = [i for i in items if term in term_counts(corpus[i])]
        return sum(postings.share(i, layout.term_digest(term)) for i in held)

    everything = list(corpus)
    assert [_frequency(pk, t) for t in ("appl", "cherri", "absent")] == [
        expected("appl", everything),
        expected("cherri", everything),
        0,
    ]
    if layer == "L1":
        postings.erase_items(pk, ["msg-000001"])
    else:  # a message's postings are what its text gives
        with pytest.raises(ValueError, match="found from its text"):
            postings.erase_items(pk, ["msg-000001"])
        postings.delete(postings.build(pk, "msg-000001", term_counts("apple pie"), 2, timestamp=1, session_id="s"))
    left = ["msg-000002", "msg-000003"]
    assert _frequency(pk, "appl") == expected("appl", left)
    assert _frequency(pk, "pie") == 0
    counters = {r.sk for r in Posting.query(pk, Posting.sk.startswith("df"), consistent_read=True)}
    counted = [t for t in ("appl", "tart", "cherri") if expected(t, left)]
    assert counters == {postings.frequency_sk(layout.term_digest(t)) for t in counted}
    remaining = list(Posting.query(pk, Posting.sk.startswith(kind), consistent_read=True))
    assert {postings.item_in_key(r) for r in remaining} == {"msg-000002", "msg-000003"}


def test_a_search_counts_a_message_terms_postings_below_exact_below_and_samples_above(aws, monkeypatch):
    """A message term's count is sampled: a search weighs a term by its exact count where that is
    below ``EXACT_BELOW`` (read, whatever its counter says), by its counter above it."""
    rng = random.Random(11)
    corpus = _corpus(rng, 400)
    pk, stats = _index(corpus)
    held = Counter(t for text in corpus.values() for t in term_counts(text))
    middling = next(t for t, n in held.items() if 30 < n < postings.EXACT_BELOW)
    common = max(held, key=held.__getitem__)  # in most texts: its sampled count is near its count
    assert held[common] >= 4 * postings.EXACT_BELOW
    Posting(pk, postings.frequency_sk(postings.digest(middling))).update(
        actions=[Posting.document_frequency.set(1)]  # a counter far off: the search counts instead
    )
    weights = {}
    real_idf = retrieval.idf
    monkeypatch.setattr(retrieval, "idf", lambda n, df: weights.setdefault(df, real_idf(n, df)))
    retrieval.ranked(
        pk, [middling, common], 5, postings.Filters(), lambda: (stats.items, stats.tokens), _counts(corpus)
    )
    assert held[middling] in weights  # exact
    sampled = _frequency(pk, common)
    assert sampled % postings.SAMPLE == 0 and max(sampled, postings.EXACT_BELOW) in weights
    assert abs(sampled - held[common]) < 0.25 * held[common]  # within a few standard deviations
    assert postings.count_up_to(pk, postings.digest(common), 50) == 50  # counting stops at its cap


def test_a_messages_postings_are_keyed_by_term_with_no_index_entry_and_a_records_by_item(aws):
    """One write per posting of a message (the table's item alone); a record's posting is written
    with its ``by-term`` entry (its updates find its postings under its prefix)."""
    messages, _ = _index({"msg-000001": "apple pie"})
    records, _ = _index({"atom-000001": "apple pie"}, layer="L1")
    digest = layout.term_digest("appl")
    [row] = [r for r in Posting.query(messages, Posting.sk.startswith("t"), consistent_read=True) if digest in r.sk]
    assert row.sk.startswith(f"t{layout.SEP}{digest}{layout.SEP}{postings.MESSAGE_KEYS}") and row.lsi3 is None
    assert list(Posting.by_term.query(messages, Posting.lsi3.startswith(digest), consistent_read=True)) == []
    [entry] = list(Posting.by_term.query(records, Posting.lsi3.startswith(digest), consistent_read=True))
    assert entry.sk == layout.posting_sk("atom-000001", digest)
    for pk, item in ((messages, "msg-000001"), (records, "atom-000001")):
        page = postings.term_page(pk, digest, 10)
        assert [postings.item_of(r) for r in page.rows] == [item] and page.next is None


def test_document_frequencies_stay_out_of_the_term_index_and_rows_of_before_leave_it(aws):
    """A frequency row has no index entry (an update writes one row, not two); one written before,
    at ``<t>␟2!`` in the by-term index, is never read as a posting and leaves the index at its
    term's next change (postings counted one each here, as before sampling)."""
    pk, _ = _index({"msg-000001": "apple pie", "msg-000002": "apple tart"}, layer="L1", sampled=False)
    digest = layout.term_digest("appl")

    def indexed() -> list[str]:
        return [r.sk for r in Posting.by_term.query(pk, Posting.lsi3.startswith(digest), consistent_read=True)]

    assert sorted(indexed()) == sorted(layout.posting_sk(i, digest) for i in ("msg-000001", "msg-000002"))
    before = Posting(pk, postings.frequency_sk(digest), lsi3=f"{digest}{layout.SEP}{postings.FORMAT}!")
    before.document_frequency = 2
    before.save()
    assert len(indexed()) == 3
    page = postings.term_page(pk, digest, 10)
    assert sorted(postings.item_of(r) for r in page.rows) == ["msg-000001", "msg-000002"] and page.next is None
    postings.put(postings.build(pk, "msg-000003", {"appl": 1}, 1, sampled=False))
    assert postings.frequencies(pk, [digest, "absent"]) == {digest: 3, "absent": 0}
    assert postings.frequency_sk(digest) not in indexed()


def test_unknown_terms_and_empty_partitions_find_nothing(aws):
    pk, _stats = _index({"msg-000001": "apple"})
    held = _counts({"msg-000001": "apple"})
    assert retrieval.ranked(pk, ["zebra"], 5, postings.Filters(), lambda: (1, 1), held).order == []
    assert retrieval.ranked(pk, [], 5, postings.Filters(), lambda: (1, 1), held).order == []
    empty = f"L0#unit:{uuid.uuid4().hex}#1#x"
    assert retrieval.ranked(empty, ["appl"], 5, postings.Filters(), lambda: (0, 0), held).order == []


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


def test_an_item_nothing_speaks_for_is_no_answer():
    # by meaning alone: a cosine of 0 or less says nothing (it was answered with score 0.0 before)
    assert retrieval.combine([], [("near", 0.4), ("orthogonal", 0.0), ("opposite", -0.3)], 5) == [
        ("near", pytest.approx(0.4 * 0.5 * (2 / 61) / 1.5, abs=1e-6))
    ]
    # beside words and leads, the same; a word or a lead is enough to be answered
    mixed = retrieval.combine([("worded", 2.0)], [("opposite", -0.1)], 5, leads=[("led", 1.0)])
    assert [item for item, _ in mixed] == ["worded", "led"] and all(score > 0 for _, score in mixed)


def test_a_candidate_gains_part_of_what_its_neighbours_in_its_session_lend():
    scores = {"q": 1.0, "a": 0.2, "far": 0.1, "other": 0.3, "loose": 0.25}
    lend = {"q": 0.8, "a": 0.1, "far": 0.0, "other": 0.9, "loose": 0.9}
    places = {"q": ("s1", 10), "a": ("s1", 20), "far": ("s1", 90), "other": ("s2", 15)}
    read = retrieval.in_context(scores, lend, places)
    assert read["a"] == pytest.approx(0.2 + retrieval.CONTEXT_WEIGHT * 0.8)  # the better of q and far
    assert read["q"] == pytest.approx(1.0 + retrieval.CONTEXT_WEIGHT * 0.1)  # its one neighbour, a
    assert read["far"] == pytest.approx(0.1 + retrieval.CONTEXT_WEIGHT * 0.1)  # a is next to it among candidates
    assert read["other"] == 0.3 and read["loose"] == 0.25  # alone in its session; no session at all
    assert retrieval.in_context({"x": 0.5}, {"x": 1.0}, {}) == {"x": 0.5}


def test_a_neighbour_lends_only_what_words_and_meaning_agree_on(monkeypatch):
    monkeypatch.setattr(retrieval, "SESSION_WEIGHT", 0.0)  # the session's lift is tested on its own
    places = {"hit": ("s", 1), "next": ("s", 2)}
    # "hit" matches the query's only word but means nothing like it: its neighbour gains nothing
    spurious = dict(retrieval.combine([("hit", 5.0)], [("next", 0.3), ("hit", 0.0)], 5, places))
    plain = dict(retrieval.combine([("hit", 5.0)], [("next", 0.3), ("hit", 0.0)], 5))
    assert spurious["next"] / spurious["hit"] == pytest.approx(plain["next"] / plain["hit"], rel=1e-3)
    # a turn strong in both lends the lesser of its two parts
    agreed = dict(retrieval.combine([("hit", 5.0)], [("next", 0.3), ("hit", 0.6)], 5, places))
    alone = dict(retrieval.combine([("hit", 5.0)], [("next", 0.3), ("hit", 0.6)], 5, {}))
    assert agreed["next"] / alone["next"] == pytest.approx(
        (0.5 * 0.3 + retrieval.CONTEXT_WEIGHT * 0.6) / (0.5 * 0.3), rel=1e-3
    )


def test_context_keeps_hybrid_scores_on_the_fusion_scale():
    words = [("q", 9.0), ("n", 3.0)]
    meaning = [("q", 1.0), ("n", 1.0)]
    places = {"q": ("s", 1), "n": ("s", 2)}
    scores = [score for _, score in retrieval.combine(words, meaning, 5, places)]
    assert scores == sorted(scores, reverse=True) and scores[0] <= 2 / 61
    alone = retrieval.combine(words, meaning, 5, {})  # nothing said in a session: the order of plain fusion
    assert [item for item, _ in alone] == [item for item, _ in retrieval.combine(words, meaning, 5)]


def test_a_turn_gains_part_of_its_sessions_best_turns():
    scores = {"a": 1.0, "b": 0.5, "c": 0.2, "d": 0.1, "lone": 0.7, "nowhere": 0.4}
    places = {"a": ("s1", 1), "b": ("s1", 2), "c": ("s1", 3), "d": ("s1", 4), "lone": ("s2", 1)}
    read = retrieval.in_session(scores, places)
    session = 1.0 + 0.5 + 0.2  # the best SESSION_TURNS of s1; d is not among them
    assert retrieval.SESSION_TURNS == 3
    assert read["d"] == pytest.approx(0.1 + retrieval.SESSION_WEIGHT * session)
    assert read["a"] == pytest.approx(1.0 + retrieval.SESSION_WEIGHT * session)
    assert read["lone"] == pytest.approx(0.7 * (1 + retrieval.SESSION_WEIGHT))
    assert read["nowhere"] == 0.4  # no session known: nothing gained
    # a weaker turn of the session the question is about passes a stronger one said alone
    assert scores["b"] < scores["lone"] and read["b"] > read["lone"]


def test_the_span_a_query_names_lifts_the_turns_said_in_it_and_drops_none():
    scores = {"in": 0.5, "edge": 0.5, "out": 0.6, "unplaced": 0.7}
    places = {"in": ("s", 150), "edge": ("s", 200), "out": ("s", 50)}
    read = retrieval.in_time(scores, places, (100, 200))
    assert read["in"] == pytest.approx(0.5 * (1 + retrieval.TIME_WEIGHT))
    assert read["edge"] == 0.5 and read["out"] == 0.6 and read["unplaced"] == 0.7  # [start, end)
    words, meaning = [("out", 4.0), ("in", 3.0)], [("out", 0.5), ("in", 0.5)]
    plain = retrieval.combine(words, meaning, 5, places)
    timed = retrieval.combine(words, meaning, 5, places, span=(100, 200))
    assert [i for i, _ in plain] == ["out", "in"] and [i for i, _ in timed] == ["in", "out"]
    assert max(score for _, score in timed) <= 2 / 61  # still on the fusion scale


def _conversation() -> tuple[dict[str, str], dict[str, str], dict[str, int]]:
    corpus = {
        "msg-q": "When did you go to the pottery class?",  # the turn with the question's words
        "msg-a": "Last Friday, with my sister.",  # the answer: no word in common, said next
        "msg-x": "I love pottery, honestly.",  # a weaker match by words, in another session
        "msg-z": "We bought the car last week.",  # closer by meaning, alone in its session
    }
    sessions = {"msg-q": "s1", "msg-a": "s1", "msg-x": "s2", "msg-z": "s3"}
    times = {"msg-q": 1_000, "msg-a": 31_000, "msg-x": 5_000, "msg-z": 20_000}
    return corpus, sessions, times


@pytest.mark.parametrize("context", [True, False])
def test_a_conversations_hybrid_search_reads_turns_in_their_sessions_context(aws, context):
    corpus, sessions, times = _conversation()
    pk, stats = _index(corpus, sessions, times)
    places = {item: (layout.digest(sessions[item]), times[item]) for item in corpus}

    def by_meaning(depth: int) -> retrieval.Meant:  # the answer: by meaning only, below a decoy
        order = [("msg-q", 0.74), ("msg-z", 0.5), ("msg-a", 0.45), ("msg-x", 0.3)]
        return retrieval.Meant(order, {item: places[item] for item, _ in order})

    found = retrieval.search(
        pk=pk,
        text="When did Melanie go to pottery class?",
        limit=4,
        mode="hybrid",
        filters=postings.Filters(),
        stats=lambda: (stats.items, stats.tokens),
        fetch=lambda ids: {i: corpus[i] for i in ids if i in corpus},
        text_of=lambda text: text,
        keep=lambda text: True,
        semantic=by_meaning,
        context=context,
    )
    order = [corpus_id for text, _ in found.items for corpus_id, t in corpus.items() if t == text]
    assert order[0] == "msg-q"
    # in context the answer, said right after the question's turn, ranks above the decoy; without, below
    assert (order.index("msg-a") < order.index("msg-z")) is context


def test_modes():
    assert retrieval.resolve_mode(None, True) == "hybrid"
    assert retrieval.resolve_mode(None, False) == "keyword"
    assert retrieval.resolve_mode("keyword", True) == "keyword"
    from memory_hub.domain.errors import Invalid

    with pytest.raises(Invalid, match="mode: "):
        retrieval.resolve_mode("semantic", False)


@pytest.mark.parametrize("layer", ["L0", "L1"])
def test_replacing_an_items_postings_moves_only_the_counts_of_terms_that_changed(aws, monkeypatch, layer):
    """A re-index or a record's update erases postings and writes new ones: a term both hold keeps
    its count untouched (no update for it), one dropped goes down, one added goes up (messages
    counted one a posting here: ``postings.share`` has its own tests)."""
    pk, _ = _index({"msg-000001": "apple pie crust", "msg-000002": "apple tart"}, layer=layer, sampled=False)
    old = postings.build(
        pk, "msg-000001", term_counts("apple pie crust"), 3, timestamp=1, session_id="s", sampled=False
    )
    new = postings.build(
        pk, "msg-000001", term_counts("apple apple pie cream"), 4, timestamp=1, session_id="s", sampled=False
    )
    moved: list[str] = []
    update = Posting.update

    def counted(self, *args, **kwargs):
        moved.append(self.sk)
        return update(self, *args, **kwargs)

    monkeypatch.setattr(Posting, "update", counted)
    postings.replace(old, new)
    assert sorted(moved) == sorted(postings.frequency_sk(layout.term_digest(t)) for t in ("crust", "cream"))
    assert {t: _frequency(pk, t) for t in ("appl", "pie", "crust", "cream", "tart")} == {
        "appl": 2, "pie": 1, "crust": 0, "cream": 1, "tart": 1,
    }  # fmt: skip
    page = postings.term_page(pk, layout.term_digest("appl"), 10)
    assert sorted(postings.item_of(r) for r in page.rows) == ["msg-000001", "msg-000002"]  # impact moved, one each


def test_a_records_update_keeps_a_kept_terms_count_and_one_of_before_is_uncounted_by_one(aws):
    """A record's postings carry their share too: an update (erase what changed, write what is new)
    leaves a kept term's count as it is, and a record indexed before sampling (format 2: nothing
    carried, one a posting) is uncounted by one."""
    pk, _ = _index({"atom-000001": "apple pie crust", "atom-000002": "apple tart"}, layer="L1")
    digest = layout.term_digest("appl")
    shares = {i: postings.share(i, digest) for i in ("atom-000001", "atom-000002")}
    assert _frequency(pk, "appl") == sum(shares.values())
    stale = postings.of_item(pk, "atom-000001")
    assert all(row.document_frequency == postings.share("atom-000001", postings.digest_of(row)) for row in stale)
    fresh = postings.build(pk, "atom-000001", term_counts("apple cream"), 2, type_="episodic")
    wanted, present = {f.sk: f for f in fresh}, {r.sk: r for r in stale}  # as records.sync_postings
    postings.replace(
        [r for sk, r in present.items() if sk not in wanted or r.lsi3 != wanted[sk].lsi3],
        [f for sk, f in wanted.items() if sk not in present or present[sk].lsi3 != f.lsi3],
    )
    assert _frequency(pk, "appl") == sum(shares.values())  # its share moved out and back, or not at all
    assert _frequency(pk, "crust") == 0 and _frequency(pk, "cream") == postings.share(
        "atom-000001", layout.term_digest("cream")
    )
    old = postings.build(pk, "atom-000003", term_counts("apple"), 1, type_="episodic", sampled=False)
    postings.put(old)  # as format 2 wrote it: one
    assert _frequency(pk, "appl") == sum(shares.values()) + 1
    postings.erase_items(pk, ["atom-000003"])
    assert _frequency(pk, "appl") == sum(shares.values())
