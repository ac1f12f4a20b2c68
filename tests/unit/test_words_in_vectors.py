"""Words indexed with the vectors (``WordIndex: Vectors``): a message's terms as its vector's
metadata, the search's scoring of them with the user's own statistics, and — in this process over
moto with the local stack's S3 Vectors patch — what an add, a search and an erasure write and leave."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from in_process import fresh_scope, meaning_on, writer
from memory_hub.analysis import query_terms, term_counts
from memory_hub.domain import assets, atomic, conversation, meaning, vector_words
from memory_hub.domain.errors import Unavailable
from memory_hub.domain.search import rank
from memory_hub.settings import SettingsError, from_environment, get_settings
from memory_hub.storage import counters, embeddings, layout, postings, records, vectors
from memory_hub.storage.counters import Where
from memory_hub.storage.models import Posting

WORDS = st.sampled_from(["apple", "boat", "cider", "dune", "ember", "fjord", "garnet", "harbor", "iris"])


# ---------------------------------------------------------------- a message's terms in its metadata


def test_terms_are_digests_each_as_often_as_held_distinct_ones_first_and_capped():
    text = vectors.terms_text({"boat": 2, "apple": 1})
    boat, apple = layout.term_digest("boat"), layout.term_digest("apple")
    assert text.split() == [boat, apple, boat], "every distinct term once before any repeat"
    many = {f"w{i}": 3 for i in range(vectors.MAX_TERMS)}
    cut = vectors.terms_text(many).split()
    assert len(cut) == vectors.MAX_TERMS and set(cut) == {layout.term_digest(t) for t in many}
    meta = vectors.metadata(
        layer="L0", user_id="u", session_id=None, task_id=None, type_=None, at_ms=1, model="m/3", terms={"boat": 2}
    )
    assert vectors.held_terms(meta) == (Counter({boat: 2}), 2)
    assert vectors.held_terms({"layer": "L0"}) is None, "a vector of before holds none"


@given(st.lists(WORDS, min_size=1, max_size=40))
def test_a_messages_terms_come_back_from_its_metadata_as_counted(words):
    counts = Counter(words)
    meta = vectors.metadata(
        layer="L0", user_id="u", session_id="s", task_id=None, type_=None, at_ms=1, model="m/3", terms=counts
    )
    held, length = vectors.held_terms(meta) or (Counter(), -1)
    assert held == Counter({layout.term_digest(t): n for t, n in counts.items()}) and length == len(words)


def test_a_query_asks_its_terms_in_parts_of_as_many_whole_digests_as_one_text_holds():
    digests = [layout.term_digest(f"t{i}") for i in range(100)]
    parts = vectors.text_chunks(digests + digests[:3])
    assert [d for part in parts for d in part] == digests, "each distinct term once, in order"
    assert [len(part) for part in parts] == [48, 48, 4] and vectors.TEXT_FIT == 48
    for part in parts:
        [asked] = vectors.query_texts(part)
        assert asked["metadataKey"] == vectors.TERMS and len(asked["text"]) <= vectors.MAX_QUERY_TEXT
        assert asked["text"].split() == part
    with pytest.raises(ValueError, match="parts"):
        vectors.query_texts(digests[:49])


def test_the_filter_spans_times_and_a_waiting_vector_is_judged_alike():
    where = vectors.search_filter(layer="L0", user_id="u", model="m/3", start_ms=10, end_ms=20)
    meta = vectors.metadata(layer="L0", user_id="u", session_id=None, task_id=None, type_=None, at_ms=15, model="m/3")
    assert vectors.passes(meta, where)
    assert not vectors.passes({**meta, "at": 21}, where) and not vectors.passes({**meta, "at": 9}, where)
    assert vectors.passes({**meta, "at": 10}, where) and vectors.passes({**meta, "at": 20}, where), "inclusive"


# ---------------------------------------------------------------- the words scored by the user's statistics


def test_a_terms_count_is_its_counter_past_one_sample_else_the_candidates_holding_it():
    d = ["a", "b", "c"]
    held = [Counter({"a": 1, "b": 1}), Counter({"a": 2}), Counter({"c": 1})]
    known = {"a": postings.SAMPLE, "b": 3 * postings.SAMPLE, "c": 0}
    assert vector_words.document_frequencies(d, known, held) == {"a": 2, "b": 3 * postings.SAMPLE, "c": 1}
    assert vector_words.document_frequencies(["a"], {"a": postings.SAMPLE + 1}, held * 10) == {"a": 20}


@given(
    st.lists(st.lists(WORDS, min_size=1, max_size=12), min_size=1, max_size=12), st.lists(WORDS, min_size=1, max_size=3)
)
@settings(max_examples=200, deadline=None)
def test_with_every_item_a_candidate_the_scores_are_the_services_bm25(docs, query):
    """Counts below a sample are the candidates holding a term: with every item among them, exact —
    and the scores are those of the word index's own BM25 (``search.rank``)."""
    texts = [" ".join(words) for words in docs]
    expected = dict(rank(" ".join(query), list(enumerate(texts)), len(texts)))
    candidates = {
        str(i): vector_words._Candidate(
            Counter({layout.term_digest(t): n for t, n in term_counts(text).items()}),
            sum(term_counts(text).values()),
            None,
            {},
        )
        for i, text in enumerate(texts)
    }
    held = counters.Held(len(texts), sum(c.length for c in candidates.values()), 0)
    digests = [postings.digest(t) for t in query_terms(" ".join(query))]
    scored = dict(vector_words._scored(candidates, digests, held, {}))
    assert scored.keys() == {str(i) for i, s in expected.items() if s > 0}
    for i, score in expected.items():
        if score > 0:
            assert scored[str(i)] == pytest.approx(score, abs=1e-5)


# ---------------------------------------------------------------- the settings and a new memory


def test_the_template_parameter_names_the_index_and_nothing_else_is_taken():
    base = {
        "AWS_REGION": "us-east-1",
        "MEMORY_HUB_BUCKET": "b",
        "ASSETS_TABLE": "a",
        "ITEMS_TABLE": "i",
        "SCENES_TABLE": "s",
        "KEYS_TABLE": "k",
        "AUDIT_TABLE": "au",
        "IDEMPOTENCY_TABLE": "id",
        "MEMORY_HUB_TOKEN_SECRET_ARN": "t",
    }
    assert from_environment(base).word_index == "postings"
    assert from_environment({**base, "WORD_INDEX": "Vectors"}).word_index == "vectors"
    with pytest.raises(SettingsError, match="WORD_INDEX"):
        from_environment({**base, "WORD_INDEX": "Both"})


def _embedded(model_id, dimensions, texts, deadline_s):
    """A model of three dimensions: apple, boat, anything."""
    return [[1.0 if "apple" in t else 0.0, 1.0 if "boat" in t else 0.0, 0.1] for t in texts]


@pytest.fixture
def in_vectors(aws, monkeypatch):
    """Meaning on (3 dimensions), one vector bucket, immediate writes, words in vectors."""
    env = {
        "EMBEDDINGS": "Enabled",
        "EMBEDDING_DIMENSIONS": "3",
        "VECTOR_BUCKETS": "memory-hub-vectorbucket0",
        "WORD_INDEX": "Vectors",
    }
    with meaning_on(monkeypatch, env, _embedded) as patched:
        yield patched


def _partition(where: Where, kind: str) -> list[Posting]:
    pk = where.item_pk("L0", "u")
    return list(Posting.query(pk, Posting.sk.startswith(f"{kind}{layout.SEP}"), consistent_read=True))


def _search(scope, query: str, mode: str = "keyword") -> list[str]:
    return [m.id for m in conversation.search(scope, query, 10, None, None, writer(scope), mode).messages]


def test_a_memory_keeps_its_words_where_it_was_created_and_needs_meaning(in_vectors):
    scope = fresh_scope()
    conversation.add(scope, [{"role": "user", "content": "an apple"}], writer(scope))
    assert Where.of(assets.of_scope(scope)).words
    in_vectors.setenv("EMBEDDINGS", "Disabled")
    get_settings.cache_clear()
    other = fresh_scope()
    conversation.add(other, [{"role": "user", "content": "an apple"}], writer(other))
    assert not Where.of(assets.of_scope(other)).words, "no vectors: postings"


def test_an_add_writes_no_posting_counts_its_terms_and_an_erasure_takes_them_off(in_vectors):
    scope = fresh_scope()
    texts = [f"apple boat cider dune ember fjord garnet harbor iris {i}" for i in range(8)]
    ids = conversation.add(scope, [{"role": "user", "content": t} for t in texts], writer(scope)).accepted_ids
    where = Where.of(assets.of_scope(scope))
    assert _partition(where, "t") == [], "no posting"
    assert _partition(where, "df"), "their terms' counts (sampled) kept all the same"
    assert counters.held(where, "L0", "u").posted == 0
    assert _search(scope, "fjord")[:3] and set(_search(scope, "fjord")) == set(ids)
    assert _search(scope, "harbor 3")[0] == ids[3], "the rarer term first"
    conversation.delete(scope, ids, None, writer(scope), "req-unit-words-in-vectors-01")
    assert _partition(where, "df") == [], "nothing of their words outlives them"
    assert _search(scope, "fjord") == []


@pytest.mark.parametrize("position", [49, 64])
def test_every_one_of_a_querys_64_terms_counts_past_what_one_query_text_holds(in_vectors, position):
    """A query names its terms in texts of 48 digests at most, one text a metadata key: the
    terms past the 48th go in a second ``QueryVectors`` — a word that only the 49th or the 64th
    term names still finds its message, the 65th does not count."""
    scope = fresh_scope()
    [target] = conversation.add(scope, [{"role": "user", "content": "the pangolin sleeps"}], writer(scope)).accepted_ids
    conversation.add(scope, [{"role": "user", "content": "zqaa is here"}], writer(scope))
    fillers = [f"zq{a}{b}" for a in "bcdfghjk" for b in "bcdfghjk"][: position - 1]
    assert _search(scope, " ".join([*fillers, "pangolin"])) == [target]
    assert _search(scope, " ".join([*fillers, "pangolin"]), mode="hybrid")[0] == target
    if position == 64:
        assert _search(scope, " ".join([*fillers, "zqzz", "pangolin"])) == [], "the 65th term does not count"


def test_a_message_not_embedded_has_postings_and_is_found_with_the_others(in_vectors):
    scope = fresh_scope()
    [kept] = conversation.add(scope, [{"role": "user", "content": "the apple orchard"}], writer(scope)).accepted_ids
    in_vectors.setattr(embeddings, "embed_many", lambda m, d, texts, s: [embeddings.FINAL for _ in texts])
    [refused] = conversation.add(scope, [{"role": "user", "content": "the apple cider"}], writer(scope)).accepted_ids
    where = Where.of(assets.of_scope(scope))
    assert {postings.item_in_key(p) for p in _partition(where, "t")} == {refused}
    assert counters.held(where, "L0", "u").posted == 1
    assert set(_search(scope, "apple")) == {kept, refused}
    conversation.delete(scope, [refused], None, writer(scope), "req-unit-words-in-vectors-02")
    assert _partition(where, "t") == [] and counters.held(where, "L0", "u").posted == 0


# ---------------------------------------------------------------- records


def _records(where: Where, kind: str = "p") -> list[Posting]:
    pk = where.item_pk("L1", "u")
    return list(Posting.query(pk, Posting.sk.startswith(f"{kind}{layout.SEP}"), consistent_read=True))


def _find(scope, query: str, mode: str = "keyword") -> list[str]:
    return [r.id for r in atomic.search(scope, query, None, 10, None, None, writer(scope), mode).items]


def test_a_records_words_go_with_its_vector_through_its_updates_and_its_erasure(in_vectors):
    scope = fresh_scope()
    record = atomic.add(scope, "plays the cello every friday", "episodic", "music", [], {}, writer(scope)).id
    where = Where.of(assets.of_scope(scope))
    assert _records(where) == [] and counters.held(where, "L1", "u").posted == 0, "no posting"
    assert _find(scope, "cello") == [record] and _find(scope, "music") == [record], "content and background"
    atomic.update(scope, record, {"content": "plays the violin every friday"}, None, writer(scope), "req-unit-wv-03")
    assert _find(scope, "violin") == [record] and _find(scope, "cello") == [], "the new text only"
    assert _records(where) == []
    in_vectors.setattr(embeddings, "embed_many", lambda m, d, texts, s: [embeddings.FINAL for _ in texts])
    atomic.update(scope, record, {"content": "plays the viola"}, None, writer(scope), "req-unit-wv-04")
    assert {postings.item_in_key(p) for p in _records(where)} == {record}, "not embedded: postings again"
    assert counters.held(where, "L1", "u").posted == 1 and _find(scope, "viola") == [record]
    in_vectors.setattr(embeddings, "embed_many", _embedded)
    many = " ".join(f"word{i}" for i in range(40))
    other = atomic.add(scope, many, "episodic", "", [], {}, writer(scope)).id
    assert _records(where, "df") and {postings.item_in_key(p) for p in _records(where)} == {record}
    atomic.delete(scope, [record, other], None, writer(scope), "req-unit-wv-05")
    assert _records(where) == [] and _records(where, "df") == [] and counters.held(where, "L1", "u").posted == 0


LONG = " ".join(f"w{i:04d}q" for i in range(vectors.MAX_TERMS + 76))  # 1,100 distinct terms, 7,699 chars


def test_an_item_with_more_terms_than_a_vector_holds_keeps_postings_and_each_of_its_words_finds_it(in_vectors):
    """A vector's ``terms`` hold 1,024 (a 2,000-character CJK text has about 2,000 character
    pairs): an item with more keeps postings beside its vector — the 1,100th word finds it."""
    scope = fresh_scope()
    [long_message] = conversation.add(scope, [{"role": "user", "content": LONG}], writer(scope)).accepted_ids
    [short] = conversation.add(scope, [{"role": "user", "content": "w1099q apple"}], writer(scope)).accepted_ids
    where = Where.of(assets.of_scope(scope))
    assert {postings.item_in_key(p) for p in _partition(where, "t")} == {long_message}
    assert counters.held(where, "L0", "u").posted == 1
    assert set(_search(scope, "w1099q")) == {long_message, short} and _search(scope, "w0003q") == [long_message]
    record = atomic.add(scope, "plays the cello", "episodic", "", [], {}, writer(scope)).id
    atomic.update(scope, record, {"content": LONG}, None, writer(scope), "req-unit-wv-long-1")
    assert _find(scope, "w1099q") == [record] and counters.held(where, "L1", "u").posted == 1
    atomic.update(scope, record, {"content": "plays the cello"}, None, writer(scope), "req-unit-wv-long-2")
    assert _records(where) == [] and counters.held(where, "L1", "u").posted == 0, "short again: in its vector"
    # found by its vector too (its first terms hold w0003q), it is scored from all its terms — not
    # from its vector's first 1,024 — and so ranks above a shorter turn holding w0003q alone
    [w0003q_alone] = conversation.add(
        scope, [{"role": "user", "content": " ".join(["w0003q", *(f"v{i:03d}r" for i in range(600))])}], writer(scope)
    ).accepted_ids
    ranked = _search(scope, "w0003q w1099q")
    assert ranked.index(long_message) < ranked.index(w0003q_alone), ranked
    long_record = atomic.add(scope, LONG + " zz", "episodic", "", [], {}, writer(scope)).id
    assert _find(scope, "w1098q") == [long_record]
    conversation.delete(scope, [long_message, short, w0003q_alone], None, writer(scope), "req-unit-wv-long-3")
    atomic.delete(scope, [record, long_record], None, writer(scope), "req-unit-wv-long-4")
    assert _partition(where, "t") == [] and _records(where) == [] and _partition(where, "df") == []
    assert counters.held(where, "L0", "u").posted == 0 and counters.held(where, "L1", "u").posted == 0


def test_a_vector_query_that_fails_fails_the_search_rather_than_answer_what_waits(in_vectors):
    scope = fresh_scope()
    conversation.add(scope, [{"role": "user", "content": "the apple orchard"}], writer(scope))

    def down(*args, **kwargs):
        raise RuntimeError("S3 Vectors is down")

    in_vectors.setattr(vectors, "query", down)
    for mode in ("keyword", "hybrid", "semantic"):
        with pytest.raises(Unavailable, match="retry"):
            _search(scope, "apple", mode)


def test_a_delete_of_a_record_read_before_its_words_moved_takes_them_from_where_they_went(in_vectors):
    """An erasure reads a record whose words are in its vector; an update then gives it postings
    (its new text not embedded): the erasure's view is stale — its delete, whose guard moved with
    the new text, re-reads the record and erases the postings, and ``posted`` comes back to nothing."""
    scope = fresh_scope()
    record = atomic.add(scope, "plays the cello every friday", "episodic", "", [], {}, writer(scope)).id
    where = Where.of(assets.of_scope(scope))
    stale = records.get(where, "u", record)
    in_vectors.setattr(embeddings, "embed_many", lambda m, d, texts, s: [embeddings.FINAL for _ in texts])
    atomic.update(scope, record, {"content": "plays the viola"}, None, writer(scope), "req-unit-wv-06")
    assert _records(where) and counters.held(where, "L1", "u").posted == 1
    records.delete(where, [stale], lambda part: [])
    assert _records(where) == [] and counters.held(where, "L1", "u").posted == 0


def test_a_new_model_leaves_every_item_found_by_its_words_while_it_is_re_embedded(in_vectors):
    scope = fresh_scope()
    [old] = conversation.add(scope, [{"role": "user", "content": "the apple orchard"}], writer(scope)).accepted_ids
    in_vectors.setenv("EMBEDDING_MODEL", "another-model")
    get_settings.cache_clear()
    meaning._QUERIES.clear()
    assert _search(scope, "orchard") == [old], "its vector is of the model of before: its terms still count"
    assert _search(scope, "orchard", "hybrid") == [old]
    assert _search(scope, "apple", "semantic") == [], "its similarity does not: another model's"
    in_vectors.delenv("EMBEDDING_MODEL")


def test_with_every_item_posted_a_failed_vector_query_answers_by_the_postings(in_vectors):
    """The model failed for every item (each has postings) and S3 Vectors fails too: the words
    answer whatever the mode, as in a memory of postings (``mode_used``: keyword)."""
    scope = fresh_scope()
    in_vectors.setattr(embeddings, "embed_many", lambda m, d, texts, s: [embeddings.FINAL for _ in texts])
    [item] = conversation.add(scope, [{"role": "user", "content": "the apple orchard"}], writer(scope)).accepted_ids
    in_vectors.setattr(embeddings, "embed_many", _embedded)

    def down(*args, **kwargs):
        raise RuntimeError("S3 Vectors is down")

    in_vectors.setattr(vectors, "query", down)
    for mode in ("keyword", "hybrid", "semantic"):
        found = conversation.search(scope, "apple", 10, None, None, writer(scope), mode)
        assert [m.id for m in found.messages] == [item] and found.mode_used == "keyword", mode


def test_an_immediate_write_whose_put_failed_waits_and_is_found_by_its_words_at_once(in_vectors):
    """Its terms are in its vector only: a failed ``PutVectors`` keeps the vector waiting beside
    the item (as a batched write does), where a search reads it, and queues it for the consumer."""
    scope = fresh_scope()

    def refused(*args, **kwargs):
        raise RuntimeError("S3 Vectors refused the put")

    in_vectors.setattr(vectors, "put", refused)
    [item] = conversation.add(scope, [{"role": "user", "content": "the apple orchard"}], writer(scope)).accepted_ids
    where = Where.of(assets.of_scope(scope))
    assert [postings.item_in_key(p) for p in _partition(where, "t")] == [], "no posting"
    assert [str(w.sk).split(layout.SEP, 1)[1] for w in _partition(where, "wv")] == [item]
    assert _search(scope, "orchard") == [item], "found by its words from the next request"
