"""S3 Vectors' text search as the local stack models it (the analyzers of s3vectors/text.py) and the
bench section that measures it (memory_hub_bench.text_search): its flag, its table, and a run over
two small users in a fresh interpreter (it starts moto of its own, which must not reset the unit
tier's)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap

import pytest
from hypothesis import given
from hypothesis import strategies as st
from memory_hub.domain.search import rank
from memory_hub_bench import text_search
from memory_hub_bench.__main__ import parse
from memory_hub_bench.datasets import Question
from memory_hub_local.aws.s3vectors.limits import LANGUAGES
from memory_hub_local.aws.s3vectors.text import ENGLISH_STOP_WORDS, analyze


def test_english_drops_possessives_and_lucene_stop_words_and_stems_by_porter():
    assert analyze("Caroline's DOGS were running to the park", "en") == ["carolin", "dog", "were", "run", "park"]
    assert analyze("The and of", "en") == []
    assert analyze("generalization", "en") == ["gener"]  # Porter, not Snowball's English ("general")
    assert analyze("s us", "en") == ["s", "us"]  # as Lucene: no word of one or two letters is stemmed (Porter: "")


def test_the_other_analyzers():
    assert analyze("Les Chats mangeaient", None) == ["les", "chats", "mangeaient"]  # standard: words in lower case
    assert analyze("les chats mangeaient", "fr") == ["le", "chat", "mang"]  # French Snowball, no stop words
    assert analyze("東京タワー", "ja") == ["東京", "京タ", "タワ", "ワー"]  # overlapping pairs
    assert analyze("東京タワー", None) == ["東", "京", "タワー"]  # standard: a Han ideograph a word, Katakana whole
    assert analyze("안녕하세요 世界", None) == ["안녕하세요", "世", "界"]  # a run of Hangul one word
    assert analyze("don't stop", None) == ["don't", "stop"]  # an apostrophe inside a word keeps it whole


@given(st.text(max_size=200), st.sampled_from([None, *LANGUAGES]))
def test_terms_are_lower_case_words_and_english_keeps_no_stop_word(text, language):
    terms = analyze(text, language)
    assert all(term and term == term.lower() for term in terms)
    if language == "en":
        assert not ENGLISH_STOP_WORDS.intersection(terms)


def test_the_service_s_terms_are_made_searchable_as_digests_a_query_finds_again():
    made = text_search.terms_text("Seats, seat and the SEATS of 東京").split()
    assert len(made) == 4 and len(set(made)) == 2  # seat ×3 (stemmed, folded), the pair 東京; stop words out
    assert all(re.fullmatch(r"[0-9a-f]{20}", token) for token in made)
    assert set(text_search.query_terms_text("the seat in 東京").split()) == set(made)
    assert analyze(text_search.terms_text("Seats seat"), None) == text_search.terms_text("Seats seat").split()


def test_the_flag_runs_the_section_alone():
    skipped = parse(["--text-search-only"]).skip
    assert "text-search" not in skipped
    assert {"recall", "cost", "routes"} <= set(skipped)


def test_the_table_prints_each_row_s_rates():
    row = {"dataset": "LoCoMo", "level": "L0 messages", "system": "S3 Vectors: words", "mode": "–",
           "questions": 4, "hits": {"1": 1, "5": 2, "10": 3}, "hit@10_by_kind": {"category 1": 0.75},
           "kinds": {"category 1": [4, 3]}}  # fmt: skip
    printed: list[str] = []
    text_search.render({"rows": [row], "datasets": {"LoCoMo": {"turns": 9}}}, printed.append)
    assert "| LoCoMo | S3 Vectors: words | 4 | 25.0% | 50.0% | 75.0% |" in printed
    assert any("category 1" in line and "75.0%" in line for line in printed)


RUN = textwrap.dedent("""
    import json
    from memory_hub_bench import text_search
    from memory_hub_bench.datasets import Corpus, Dataset, Question, Turn
    def turn(key, content):
        return Turn(key, "s1", "user", content, "2023-05-08T13:56:00Z")
    ours = Corpus("u1", [turn("D1:1", "I adopted a greyhound called Biscuit"), turn("D1:2", "We went hiking")],
                  [Question("q1", "What is the name of the greyhound?", frozenset({"D1:1"}), "k"),
                   Question("q2", "Where did they go hiking?", frozenset({"D1:2"}), "k")])
    theirs = Corpus("u2", [turn("D1:1", "My greyhound greyhound greyhound is named Pepper")],
                    [Question("q3", "Who is Pepper?", frozenset({"D1:1"}), "k")])
    with text_search.emulated_vectors() as client:
        tallies = text_search.measure(client, Dataset("Small", [ours, theirs]), lambda _: None)
        user = text_search._User("small", "u2", [("1/0", theirs.turns[0].content)], {"1/0": ("s1", 0)})
        [vector] = text_search._embed([theirs.questions[0].text])
        answers = {s[0]: text_search.answer(client, user, theirs.questions[0], vector, s) for s in text_search.SYSTEMS}
    print(json.dumps({"tallies": {t.system: [t.questions, t.hits[1], t.hits[10]] for t in tallies},
                      "answers": answers}))
""")


def test_each_question_is_asked_of_its_own_user_s_turns_by_each_system():
    result = subprocess.run([sys.executable, "-c", RUN], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    printed = json.loads(result.stdout.strip().splitlines()[-1])
    found = printed["tallies"]
    assert set(found) == {system[0] for system in text_search.SYSTEMS}
    # the other user's turn about a greyhound is never an answer to this user: the filter holds
    assert {key for keys in printed["answers"].values() for key in keys} == {"1/0"}
    # every question finds its user's turn first by words: the other user's greyhound is filtered out
    assert found["S3 Vectors' English analyzer: words"] == [3, 3, 3]
    assert found["S3 Vectors, the service's terms: words"] == [3, 3, 3]
    assert all(questions == 3 and at_10 == 3 for questions, _, at_10 in found.values())  # two or one turn a user


WORDS = st.sampled_from(["dog", "dogs", "park", "running", "runs", "sunset", "painted", "the", "lake", "Caroline"])


@given(
    st.lists(st.lists(WORDS, min_size=1, max_size=8).map(" ".join), min_size=1, max_size=6), st.lists(WORDS, min_size=1)
)
def test_a_turn_s_words_scored_from_its_vector_s_terms_are_the_service_s_bm25(docs, query_words):
    query = " ".join(query_words)
    user = text_search._User("i", "u", [(f"k{i}", text) for i, text in enumerate(docs)], {})
    asked = text_search.query_terms_text(query).split()
    expected = dict(rank(query, [(f"k{i}", text) for i, text in enumerate(docs)], len(docs)))
    for i, text in enumerate(docs):
        score = user.bm25(asked, text_search.terms_text(text), user.frequencies)
        assert score == pytest.approx(expected.get(f"k{i}", 0.0), abs=1e-6)  # rank answers 6 decimals


def test_a_term_s_count_is_its_candidates_until_its_counter_holds_more_than_one_sample():
    user = text_search._User("i", "u", [("k0", "dog park"), ("k1", "dog lake")], {})
    dog, park = text_search.query_terms_text("dog park").split()
    user.sampled[dog], user.sampled[park] = 8 * 3, 8  # as the counters could have sampled them
    found = [text_search.terms_text("dog park")]
    assert user.estimated([dog, park], found) == {dog: 24, park: 1}  # park: one sample is noise
    user.sampled[dog] = 0
    assert user.estimated([dog], [*found, text_search.terms_text("dog")]) == {dog: 2}


class Recording:
    """An S3 Vectors client that answers every query with the same two vectors and keeps what it was asked."""

    def __init__(self) -> None:
        self.asked: list[set[str]] = []

    def query_vectors(self, **asked):
        self.asked.append({k for k in asked if k in ("queryTexts", "queryVector", "returnScores", "returnMetadata")})
        terms = text_search.terms_text("a dog in the park")
        scores = {"bm25Scores": [{"metadataKey": "terms", "score": 1.0}], "vectorDistance": 0.5, "fused": 0.03}
        return {"vectors": [{"key": k, "distance": 0.5, "scores": scores, "metadata": {"terms": terms}} for k in "ab"]}


def test_each_system_asks_s3_vectors_its_own_way():
    user = text_search._User("i", "u", [("a", "a dog in the park"), ("b", "a cat")], {})
    question = Question("q", "Where is the dog?", frozenset({"x"}), "k")
    hybrid = {"queryTexts", "queryVector", "returnScores", "returnMetadata"}
    expected = {
        "words": [{"queryTexts"}],
        "meaning": [{"queryVector"}],
        "hybrid": [{"queryTexts", "queryVector"}],
        "ours": [{"queryVector"}],
        "two": [{"queryTexts", "returnScores"}, {"queryVector"}],
        "fused": [hybrid],
        "rescored": [hybrid],
        "sampled": [hybrid],
    }
    for system in text_search.SYSTEMS:
        client = Recording()
        assert text_search.answer(client, user, question, [1.0], system)
        assert client.asked == expected[system[1]], system[0]
    nothing = Question("q", "What did they do?", frozenset({"x"}), "k")  # only stop words
    for system in text_search.SYSTEMS:
        if system[1] in text_search.SERVICE_WAYS:
            client = Recording()
            assert text_search.answer(client, user, nothing, [1.0], system) == []
            assert client.asked == []  # as the service's hybrid search: no term, nothing asked, nothing found
    with pytest.raises(ValueError):
        text_search.answer(Recording(), user, question, [1.0], ("?", "other", text_search.TERMS, 10))


def test_one_hybrid_query_s_candidates_become_the_service_s_two_halves():
    user = text_search._User("i", "u", [("a", "dog park"), ("b", "cat"), ("c", "dog dog lake")], {})
    asked = text_search.query_terms_text("dog").split()

    def candidate(key: str, text: str, bm25: float | None, distance: float | None) -> dict:
        scores: dict = {"bm25Scores": [{"metadataKey": "terms", "score": bm25}] if bm25 else [], "fused": 0.01}
        if distance is not None:
            scores["vectorDistance"] = distance
        return {"key": key, "scores": scores, "metadata": {"terms": text_search.terms_text(text)}}

    found = [candidate("a", "dog park", 0.4, None), candidate("c", "dog dog lake", 0.9, 0.3),
             candidate("b", "cat", None, 0.1)]  # fmt: skip
    by_words, by_meaning = text_search._halves(user, asked, found, "fused")
    assert by_words == [("c", 0.9), ("a", 0.4)]  # S3 Vectors' scores, best first; b holds no query term
    assert by_meaning == [("b", pytest.approx(0.9)), ("c", pytest.approx(0.7))]  # found by the vector search only
    exact, _ = text_search._halves(user, asked, found, "rescored")
    expected = dict(rank("dog", [("a", "dog park"), ("b", "cat"), ("c", "dog dog lake")], 3))
    assert exact == [(k, pytest.approx(expected[k], abs=1e-6)) for k in ("c", "a")]  # the user's own BM25
    user.sampled[asked[0]] = 0  # no sample yet: the count is the two candidates holding the term
    sampled, _ = text_search._halves(user, asked, found, "sampled")
    assert sampled == exact  # 2 holding "dog" is its true count here
