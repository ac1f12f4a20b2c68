"""S3 Vectors' full-text and hybrid search in the local stack (s3vectors/text.py): moto alone has no
searchable keys and no QueryVectors; patched, an index keeps its ``textSearchConfigurations``,
QueryVectors ranks by BM25 over them (``queryTexts`` alone) or fuses BM25 and the vector search
by RRF (both), a filter applying first, and refuses what S3 Vectors refuses. Each scenario runs
in a fresh interpreter, so unpatched and patched moto never share a process."""

from __future__ import annotations

import json
import math
import textwrap

import pytest
from moto_scenarios import run as scenario

SETUP = """
    AT = {"vectorBucketName": "memory-vectors", "indexName": "m1.e1"}
    def index(name, texts):
        return vectors.create_index(vectorBucketName="memory-vectors", indexName=name, dataType="float32",
            dimension=3, distanceMetric="cosine",
            metadataConfiguration={"nonFilterableMetadataKeys": ["text"], "textSearchConfigurations": texts})
    index("m1.e1", [{"metadataKey": "text", "language": "en"}, {"metadataKey": "title"}])
"""
SCENARIO = textwrap.dedent("""
    found = {"config": vectors.get_index(**AT)["index"].get("metadataConfiguration"),
             "mode": vectors.get_index(**AT)["index"].get("indexMode")}
    rows = [("a", [1, 0, 0], {"user": "u1", "text": "Caroline's dogs were running in the park", "title": "Park"}),
            ("b", [0, 1, 0], {"user": "u1", "text": "Melanie painted a sunset by the lake"}),
            ("c", [0.9, 0.1, 0], {"user": "u2", "text": "The dog runs"}),
            ("d", [0, 0, 1], {"user": "u1", "text": "a dog, another dog and a cat", "title": 7})]
    vectors.put_vectors(**AT, vectors=[{"key": k, "data": {"float32": v}, "metadata": m} for k, v, m in rows])
    def ask(**kwargs):
        answer = vectors.query_vectors(**AT, topK=kwargs.pop("topK", 10), returnScores=True, **kwargs)
        return [[v["key"], v.get("scores"), v.get("distance")] for v in answer["vectors"]]
    try:
        found["text"] = ask(queryTexts=[{"text": "dogs RUN", "metadataKey": "text"}])
    except Exception as exc:
        found["text"] = type(exc).__name__
        print(json.dumps(found)); raise SystemExit(0)
    found["stop_words_only"] = ask(queryTexts=[{"text": "the and of", "metadataKey": "text"}])
    found["standard"] = ask(queryTexts=[{"text": "PARK", "metadataKey": "title"}])
    found["filtered"] = ask(queryTexts=[{"text": "dog", "metadataKey": "text"}], filter={"user": "u1"})
    found["hybrid"] = ask(queryTexts=[{"text": "dog", "metadataKey": "text"}], queryVector={"float32": [0, 1, 0]},
                          filter={"user": "u1"}, returnDistance=True)
    found["top_1"] = ask(queryTexts=[{"text": "dog", "metadataKey": "text"}], topK=1)
    found["filtered_top_2"] = ask(queryTexts=[{"text": "dog", "metadataKey": "text"}], filter={"user": "u1"}, topK=2)
    found["enhanced"] = outcome(lambda: ask(queryTexts=[{"text": "dog", "metadataKey": "text"}], queryMode="ENHANCED"))
    vectors.delete_vectors(**AT, keys=["c"])
    found["after_delete"] = [k for k, _, _ in ask(queryTexts=[{"text": "dog", "metadataKey": "text"}])]
    found["refused"] = {
        "neither": outcome(lambda: vectors.query_vectors(**AT, topK=1)),
        "classic": outcome(lambda: ask(queryTexts=[{"text": "dog", "metadataKey": "text"}], queryMode="CLASSIC")),
        "not_searchable": outcome(lambda: ask(queryTexts=[{"text": "u1", "metadataKey": "user"}])),
        "same_key_twice": outcome(lambda: ask(queryTexts=[{"text": "a", "metadataKey": "text"},
                                                            {"text": "b", "metadataKey": "text"}])),
        "text_1025": outcome(lambda: ask(queryTexts=[{"text": "x" * 1025, "metadataKey": "text"}])),
        "eleven_texts": outcome(lambda: ask(queryTexts=[{"text": "x", "metadataKey": f"k{i}"} for i in range(11)])),
        "language": outcome(lambda: index("bad.language", [{"metadataKey": "text", "language": "xx"}])),
        "key_twice": outcome(lambda: index("bad.twice", [{"metadataKey": "t"}, {"metadataKey": "t"}])),
        "eleven_keys": outcome(lambda: index("bad.many", [{"metadataKey": f"k{i}"} for i in range(11)])),
    }
    index("m2.e1", [])
    M2 = {"vectorBucketName": "memory-vectors", "indexName": "m2.e1"}
    vectors.put_vectors(**M2, vectors=[{"key": "x", "data": {"float32": [1, 0, 0]}, "metadata": {"text": "Dogs run"}}])
    def update(**change):
        return outcome(lambda: vectors.update_metadata_configuration(**M2, **change))
    def searchable():
        config = vectors.get_index(**M2)["index"]["metadataConfiguration"]
        return [c["metadataKey"] for c in config.get("textSearchConfigurations", [])]
    found["update"] = {
        "add": update(add={"textSearchConfigurations": [{"metadataKey": "text", "language": "en"}]}),
        "after_add": searchable(),
        "backfilled": [v["key"] for v in vectors.query_vectors(**M2, topK=1,
                       queryTexts=[{"text": "dog", "metadataKey": "text"}])["vectors"]],
        "add_again": update(add={"textSearchConfigurations": [{"metadataKey": "text"}]}),
        "both": update(add={"textSearchConfigurations": [{"metadataKey": "a"}]},
                       delete={"textSearchConfigurations": [{"metadataKey": "text"}]}),
        "both_one_empty": update(add={}, delete={"textSearchConfigurations": [{"metadataKey": "text"}]}),
        "delete_absent": update(delete={"textSearchConfigurations": [{"metadataKey": "nope"}]}),
        "delete": update(delete={"textSearchConfigurations": [{"metadataKey": "text"}]}),
        "after_delete": searchable(),
        "query_after_delete": outcome(lambda: vectors.query_vectors(**M2, topK=1,
                                      queryTexts=[{"text": "dog", "metadataKey": "text"}])),
    }
    # added again without a language: the standard analyzer, so "dog" no longer finds "Dogs"
    update(add={"textSearchConfigurations": [{"metadataKey": "text"}]})
    found["update"]["standard"] = {word: [v["key"] for v in vectors.query_vectors(**M2, topK=1,
        queryTexts=[{"text": word, "metadataKey": "text"}])["vectors"]] for word in ("dog", "dogs")}
    print(json.dumps(found))
""")


def run(patched: bool) -> dict:
    found: dict = scenario(patched, SETUP, SCENARIO)
    return found


@pytest.fixture(scope="module")
def patched() -> dict:
    return run(True)


def test_moto_alone_keeps_no_searchable_keys_and_cannot_query():
    found = run(False)
    assert "textSearchConfigurations" not in (found["config"] or {})
    assert found["mode"] is None
    assert found["text"] == "EndpointConnectionError"  # moto has no QueryVectors route, nor UpdateMetadataConfiguration


def test_an_index_keeps_its_searchable_keys_active_in_enhanced_mode(patched):
    assert patched["config"]["textSearchConfigurations"] == [
        {"metadataKey": "text", "language": "en", "status": "ACTIVE"},
        {"metadataKey": "title", "status": "ACTIVE"},
    ]
    assert patched["mode"] == "ENHANCED"


def bm25(frequency: int, length: int, average: float, held: int, df: int) -> float:
    """Lucene's BM25 since 8.0: no (k1 + 1) factor."""
    idf = math.log(1 + (held - df + 0.5) / (df + 0.5))
    return idf * frequency / (frequency + 1.2 * (0.25 + 0.75 * length / average))


def test_full_text_ranks_by_bm25_over_stems_without_stop_words(patched):
    # terms (English: possessive dropped, Lucene's stop words out — "were" is not one —, Porter stems):
    # a = carolin dog were run park (5), b = melani paint sunset lake (4), c = dog run (2),
    # d = dog anoth dog cat (4); average 3.75
    ranked = [[key, [s["score"] for s in scores["bm25Scores"]]] for key, scores, _ in patched["text"]]
    expected = {
        "a": bm25(1, 5, 3.75, 4, 3) + bm25(1, 5, 3.75, 4, 2),
        "c": bm25(1, 2, 3.75, 4, 3) + bm25(1, 2, 3.75, 4, 2),
        "d": bm25(2, 4, 3.75, 4, 3),
    }
    assert [key for key, _ in ranked] == sorted(expected, key=lambda k: -expected[k])
    for key, (score,) in ranked:
        assert score == pytest.approx(expected[key])
    assert patched["stop_words_only"] == []
    assert [key for key, _, _ in patched["standard"]] == ["a"]  # no language: words in lower case; 7 is no text


def test_a_filter_applies_before_the_search(patched):
    assert [key for key, _, _ in patched["filtered"]] == ["d", "a"]
    assert [key for key, _, _ in patched["top_1"]] == ["d"]
    # the best two of u1's, not u1's among the best two of all (d, c): ENHANCED, as a query may say
    assert [key for key, _, _ in patched["filtered_top_2"]] == ["d", "a"]
    assert patched["enhanced"] == "accepted"
    assert patched["after_delete"] == ["d", "a"]


def test_a_hybrid_query_fuses_both_rankings_by_rrf(patched):
    # text ranking (user u1): d, a; vector ranking from [0, 1, 0]: b (0), then a and d (distance 1) in key order
    fused = {"d": 1 / 61 + 1 / 63, "a": 1 / 62 + 1 / 62, "b": 1 / 61}
    keys = [key for key, _, _ in patched["hybrid"]]
    assert keys == sorted(fused, key=lambda k: -fused[k])
    for key, scores, distance in patched["hybrid"]:
        assert scores["fused"] == pytest.approx(fused[key])
        assert scores["vectorDistance"] == pytest.approx(distance)
    assert patched["hybrid"][-1][1]["bm25Scores"] == []  # found by the vector search alone


def test_what_s3_vectors_refuses_is_a_validation_error(patched):
    assert patched["refused"] == {
        "neither": "ValidationException",
        "classic": "ValidationException",
        "not_searchable": "ValidationException",
        "same_key_twice": "ValidationException",
        "text_1025": "ValidationException",
        "eleven_texts": "ValidationException",
        "language": "ValidationException",
        "key_twice": "ValidationException",
        "eleven_keys": "ValidationException",
    }


def test_searchable_keys_are_added_to_an_index_and_deleted(patched):
    assert patched["update"] == {
        "add": "accepted",
        "after_add": ["text"],
        "backfilled": ["x"],  # the vectors written before the key became searchable are found
        "add_again": "ValidationException",
        "both": "ValidationException",
        "both_one_empty": "ValidationException",
        "delete_absent": "ValidationException",
        "delete": "accepted",
        "after_delete": [],
        "query_after_delete": "ValidationException",
        "standard": {"dog": [], "dogs": ["x"]},  # the key's terms made again with its new analyzer
    }


UPDATE_ALONE = textwrap.dedent("""
    try:
        vectors.update_metadata_configuration(**AT, delete={"textSearchConfigurations": [{"metadataKey": "text"}]})
        print(json.dumps("accepted"))
    except Exception as exc:
        print(json.dumps(type(exc).__name__))
""")


def test_moto_alone_has_no_update_metadata_configuration():
    assert scenario(False, SETUP, UPDATE_ALONE) == "EndpointConnectionError"


MODES = textwrap.dedent("""
    modes = [outcome(lambda m=m: vectors.update_index_mode(**AT, indexMode=m)) for m in ("ENHANCED", "CLASSIC")]
    none = {"vectorBucketName": "memory-vectors", "indexName": "none"}
    print(json.dumps(modes + [outcome(lambda: vectors.update_index_mode(**none, indexMode="ENHANCED"))]))
""")


def test_moto_alone_has_no_update_index_mode():
    assert scenario(False, SETUP, MODES)[0] != "accepted"


def test_an_index_is_made_enhanced_and_never_classic_in_a_bucket_of_now(patched):
    """AWS makes an index CLASSIC in a vector bucket made before 30 September 2026 (no text query
    there): a memory whose words are in its vectors makes its new indexes ENHANCED."""
    assert scenario(True, SETUP, MODES) == ["accepted", "ValidationException", "NotFoundException"]


def test_a_text_query_needs_get_vectors_as_a_filter_does():
    from memory_hub_local.aws.vector_calls import vectors_call

    def actions(body: dict) -> list[str]:
        call = vectors_call("POST", "/QueryVectors", None, json.dumps(body).encode(), "us-east-1")
        return [action for action, _ in call.actions]

    plain = {"vectorBucketName": "b", "indexName": "i", "topK": 1, "queryVector": {"float32": [1.0]}}
    assert actions(plain) == ["s3vectors:QueryVectors"]
    texts = {"vectorBucketName": "b", "indexName": "i", "topK": 1, "queryTexts": [{"text": "x", "metadataKey": "t"}]}
    assert actions(texts) == ["s3vectors:QueryVectors", "s3vectors:GetVectors"]
