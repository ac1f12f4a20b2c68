"""memory_hub/analysis.py (the analyzer: NFKC, folding, stop words, English stems, CJK pairs) and
domain/search.py (BM25)."""

from __future__ import annotations

import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from memory_hub.analysis import MAX_QUERY_TERMS, STOP_WORDS, query_terms, term_counts, tokenize, words
from memory_hub.domain.search import Stats, idf, rank, saturation
from memory_hub.storage import postings

# ---------------------------------------------------------------- analysis


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        ("Hello, World 42!", ["hello", "world", "42"]),
        ("MiXeD CaSe", ["mix", "case"]),
        ("snake_case-and.dots", ["snake", "case", "dot"]),
        ("Ünïcode ÉCOLE", ["ünïcode", "école"]),
        ("v2 2024-01-01", ["v2", "2024", "01", "01"]),
        ("中文检索", ["中文", "文检", "检索"]),
        ("中", ["中"]),
        ("中 文", ["中", "文"]),
        ("我爱Python3", ["我爱", "python3"]),
        ("한국어", ["한국", "국어"]),
        ("ひらがなカタカナ", ["ひら", "らが", "がな", "なカ", "カタ", "タカ", "カナ"]),
        ("\U00020000\U00020001", ["\U00020000\U00020001"]),
        ("😀 🚀 ... ---", []),
        ("", []),
    ],
)
def test_tokenize(text, tokens):
    assert tokenize(text) == tokens


@pytest.mark.parametrize(
    ("one", "other"),
    [
        ("seats", "seat"),
        ("running", "run"),
        ("Runs", "run"),
        ("preferences", "preference"),
        ("allergies", "allergy"),
        ("travelled", "travel"),
        ("connection", "connected"),
    ],
)
def test_inflections_share_a_term(one, other):
    assert tokenize(one) == tokenize(other)
    assert tokenize(one)  # not a stop word


def test_stop_words_weigh_nothing():
    assert tokenize("When did Caroline go to the support group?") == ["carolin", "go", "support", "group"]
    assert query_terms("the of and to did what is it") == []
    assert query_terms("I'm sure it's Caroline's") == ["sure", "carolin"]  # contraction remnants dropped
    for word in STOP_WORDS:
        assert tokenize(word) == [], word


def test_other_scripts_and_digits_are_not_stemmed():
    assert tokenize("бегущие бегущие") == ["бегущие", "бегущие"]  # Cyrillic: kept as it is
    assert tokenize("1999 10000") == ["1999", "10000"]


def test_term_counts_and_query_terms():
    assert term_counts("apples apple 中文文") == {"appl": 2, "中文": 1, "文文": 1}
    assert query_terms("B a b A c") == ["b", "c"]  # "a" is a stop word; distinct, first-seen order
    many = " ".join(f"w{i}" for i in range(100))
    assert len(query_terms(many)) == MAX_QUERY_TERMS
    assert query_terms(many)[:2] == ["w0", "w1"]


@settings(max_examples=200)
@given(st.text(max_size=60))
def test_terms_are_folded_and_never_empty(text):
    for token in tokenize(text):
        assert token
        assert token == token.casefold()
        assert "_" not in token
        assert not any(ch.isspace() for ch in token)
        assert token not in STOP_WORDS


@settings(max_examples=200)
@given(st.text(max_size=40))
def test_query_and_index_analysis_agree(text):
    """The same analysis at write and at query time: a text's query terms are its indexed terms."""
    assert set(query_terms(text)) <= set(term_counts(text))
    assert len(set(term_counts(text))) <= MAX_QUERY_TERMS or len(query_terms(text)) == MAX_QUERY_TERMS


@pytest.mark.parametrize(("one", "other"), [("ｆｕｌｌｗｉｄｔｈ", "fullwidth"), ("e\u0301cole", "école")])
def test_normalised_forms_tokenize_alike(one, other):
    assert tokenize(one) == tokenize(other)


@pytest.mark.parametrize("word", ["naïve", "café", "हिन्दी", "ไทย"])
def test_combining_marks_stay_in_their_word(word):
    folded = unicodedata.normalize("NFKC", word).casefold()
    assert words(word) == [folded]


# ---------------------------------------------------------------- BM25


def test_bm25_parts():
    assert saturation(2, 10, 10) > saturation(1, 10, 10)  # more occurrences, more weight
    assert saturation(1, 5, 10) > saturation(1, 20, 10)  # shorter items weigh a match more
    assert idf(100, 1) > idf(100, 50) > 0  # rarer terms weigh more, never negative
    assert idf(10, 10) > 0
    assert Stats(0, 0).average_length == 1.0


def test_rank_matches_only_and_best_first():
    docs = [
        ("none", "nothing to see here"),
        ("some", "apple " * 5),
        ("both", "apple banana"),
    ]
    ranked = rank("apples and bananas", docs, 10)
    assert [key for key, _ in ranked] == ["both", "some"]
    scores = [s for _, s in ranked]
    assert scores == sorted(scores, reverse=True) and scores[-1] > 0


def test_no_match_no_result():
    assert rank("zebra", [("a", "apple"), ("b", "banana")], 10) == []
    assert rank("", [("a", "apple")], 10) == []
    assert rank("the of and", [("a", "the apple of and")], 10) == []  # only stop words: nothing
    assert rank("apple", [], 10) == []


def test_cjk_queries_match_by_bigram():
    docs = [("exact", "我们使用中文检索"), ("partial", "中文很好"), ("other", "日本語")]
    assert [k for k, _ in rank("中文检索", docs, 10)] == ["exact", "partial"]


def test_rank_ties_keep_document_order():
    docs = [(i, "apple pie") for i in range(5)]
    assert [k for k, _ in rank("apple", docs, 3)] == [0, 1, 2]


# What the analyzer answered when the index format was last raised, for texts that touch each of its
# rules (contractions and stop words, stems, NFKC and folding, marks, CJK pairs, another script).
PINNED = {
    "Caroline's running to the Seats! café NAÏVE 2023": {
        "2023": 1, "café": 1, "carolin": 1, "naïv": 1, "run": 1, "seat": 1,
    },
    "東京タワーに行った": {"った": 1, "に行": 1, "タワ": 1, "ワー": 1, "ーに": 1, "京タ": 1, "東京": 1, "行っ": 1},
    "Ｆｕｌｌ-width ＡＢＣ and naïve résumés": {"abc": 1, "full": 1, "naïv": 1, "résumé": 1, "width": 1},
    "He didn't go; they were going, went.": {"go": 2, "went": 1},
    "Привет мир и дети": {"дети": 1, "и": 1, "мир": 1, "привет": 1},
}  # fmt: skip


@pytest.mark.parametrize("text", PINNED)
def test_what_the_analyzer_answers_is_pinned_with_the_index_format(text):
    """A message's postings are computed again from its text when it is erased
    (``storage.postings.held_by``): if the analyzer answered otherwise for a stored text, the
    erasure would miss its postings. A change here must raise ``postings.MESSAGE_KEYS`` (the key
    format: the re-index rewrites every message indexed below it, with the analyzer that will erase
    them; ``MESSAGE_FORMAT`` with it) and then update these answers."""
    assert (postings.MESSAGE_KEYS, postings.MESSAGE_FORMAT) == (3, 4), "raised: pin what the analyzer answers now"
    assert dict(term_counts(text)) == PINNED[text]
