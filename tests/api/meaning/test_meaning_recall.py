"""Recall by meaning through the local stack: a question that shares no word with what answers it
(after the analysis: stems, no stop words) finds it among the first three, with unrelated memories
present, in hybrid and in semantic mode; words alone find nothing there."""

from __future__ import annotations

import pytest
from memory_hub.analysis import query_terms, term_counts

PAIRS = [
    ("Works as a nurse at St. Mary's hospital", "what is my job"),
    ("I fly to Paris on Monday", "France trip"),
    ("Adopted a golden retriever puppy last spring", "new pet dog"),
    ("My daughter plays the violin in the school orchestra", "child's musical instrument"),
    ("Allergic to peanuts", "which nuts make me sick"),
    ("Prefers aisle seats on long flights", "where do I like to sit on an airplane"),
]
DISTRACTORS = [
    "The quarterly budget review is on Thursday",
    "Bought new running shoes at the mall",
    "Drinks green tea every morning",
    "Lives in a small apartment downtown",
    "Is learning to play chess online",
    "The car needs an oil change soon",
    "Watched a documentary about volcanoes",
    "Keeps the thermostat at 21 degrees",
]


def test_the_pairs_share_no_word():
    for stored, question in PAIRS:
        assert not set(query_terms(question)) & set(term_counts(stored)), (stored, question)
        assert query_terms(question), question  # a question with words that count


@pytest.fixture
def memory(api, scope):
    texts = [stored for stored, _ in PAIRS] + DISTRACTORS
    answer = api.post(
        "/v3/conversation/add",
        scope.body(session_id="s1", messages=[{"role": "user", "content": t} for t in texts]),
    )
    assert answer.status == 200, answer.body
    ids = dict(zip(texts, answer.data["accepted_ids"], strict=True))
    for text in texts:
        made = api.post("/v3/atomic/add", scope.body(content=text, type="fact"))
        assert made.status == 200, made.body
        ids[f"L1:{text}"] = made.data["id"]
    return ids


@pytest.mark.parametrize(("stored", "question"), PAIRS)
def test_a_paraphrase_sharing_no_word_is_found_in_the_top_three(api, scope, memory, stored, question):
    for mode in (None, "hybrid", "semantic"):
        body = scope.body(query=question, limit=3, **({"mode": mode} if mode else {}))
        found = api.post("/v3/conversation/search", body)
        assert found.status == 200, found.body
        assert found.data["mode_used"] == (mode or "hybrid")
        assert memory[stored] in [m["id"] for m in found.data["messages"]], (mode, found.data)
        records = api.post("/v3/atomic/search", body)
        assert records.status == 200, records.body
        assert memory[f"L1:{stored}"] in [r["id"] for r in records.data["items"]], (mode, records.data)
    by_words = api.post("/v3/conversation/search", scope.body(query=question, mode="keyword"))
    assert by_words.status == 200, by_words.body
    assert memory[stored] not in [m["id"] for m in by_words.data["messages"]]  # no word to find it by


@pytest.mark.parametrize("route", ["/v3/conversation/search", "/v3/atomic/search"])
def test_a_question_of_only_stop_words_is_answered_by_meaning_in_hybrid_and_by_nothing_in_keyword(
    api, scope, memory, route
):
    """ "Who is she?" has no word that counts: words alone find nothing (keyword: []), and hybrid —
    where an item whose meaning matches is found even when they share no word — answers by
    meaning, as semantic does."""
    question = "what is it that I do?"
    assert query_terms(question) == []
    hits = "messages" if route.endswith("conversation/search") else "items"
    stored = "Works as a nurse at St. Mary's hospital"
    target = memory[stored] if hits == "messages" else memory[f"L1:{stored}"]
    for mode in (None, "hybrid", "semantic"):
        found = api.post(route, scope.body(query=question, limit=5, **({"mode": mode} if mode else {})))
        assert found.status == 200 and found.data["mode_used"] == (mode or "hybrid"), found.body
        assert found.data[hits], (mode, found.data)
        assert target in [m["id"] for m in found.data[hits]], (mode, found.data)
    by_words = api.post(route, scope.body(query=question, mode="keyword"))
    assert by_words.status == 200 and by_words.data[hits] == [] and by_words.data["mode_used"] == "keyword"


def test_words_still_lead_where_they_match(api, scope, memory):
    """An exact word match stays first in hybrid: meaning adds recall, it does not reshuffle it."""
    found = api.post("/v3/conversation/search", scope.body(query="volcanoes documentary", limit=3))
    assert found.status == 200, found.body
    assert found.data["messages"][0]["id"] == memory["Watched a documentary about volcanoes"]
    scores = [m["score"] for m in found.data["messages"]]
    assert scores == sorted(scores, reverse=True) and scores[0] <= 2 / 61


def test_the_turn_after_the_one_with_the_questions_words_is_found_in_its_sessions_context(api, scope):
    """An answer often shares nothing with the question but follows the turn that does: hybrid
    conversation search reads each turn next to its session's other found turns, so it comes up
    above a turn nearer in meaning said elsewhere; words alone never find it."""
    question = "When did you go to the pottery workshop?"
    answer_turn = "Last Friday, with my kids."
    elsewhere = "We shaped clay bowls at the ceramics studio."  # nearer the question in meaning
    assert not set(query_terms(question)) & (set(term_counts(answer_turn)) | set(term_counts(elsewhere)))
    added = api.post(
        "/v3/conversation/add",
        scope.body(
            session_id="talk",
            messages=[
                {"role": "user", "content": question, "timestamp": "2026-03-01T10:00:00Z"},
                {"role": "assistant", "content": answer_turn, "timestamp": "2026-03-01T10:00:30Z"},
            ],
        ),
    )
    assert added.status == 200, added.body
    asked_id, answer_id = added.data["accepted_ids"]
    other = api.post(
        "/v3/conversation/add",
        scope.body(
            session_id="other",
            messages=[{"role": "user", "content": elsewhere, "timestamp": "2026-03-01T10:00:15Z"}]
            + [{"role": "user", "content": text} for text in DISTRACTORS],
        ),
    )
    assert other.status == 200, other.body
    found = api.post(
        "/v3/conversation/search", scope.body(query="When did Melanie go to the pottery workshop?", limit=2)
    )
    assert found.status == 200, found.body
    assert [m["id"] for m in found.data["messages"]] == [asked_id, answer_id], found.data
    by_words = api.post("/v3/conversation/search", scope.body(query="Melanie pottery workshop", mode="keyword"))
    assert answer_id not in [m["id"] for m in by_words.data["messages"]]
