"""A memory whose messages' words are indexed with their vectors (the template's ``WordIndex:
Vectors``): a message has no postings — its vector carries its terms as digests, searchable by full
text in S3 Vectors — and is found by words from the next request all the same (while its vector
waits for the batch, from what waits); one whose embedding failed gets postings, and is found by
them; an erasure leaves nothing of its words (no posting, no count, no vector)."""

from __future__ import annotations

from typing import Any

from helpers import TABLES, aws_client, make_scope, ok, own_stack, scan, term_digests
from memory_hub.storage import layout
from test_vectors import BEDROCK_OF_MEMORY, add_messages, vectors_of, wait_for_vectors

WINDOW_S = 2
stack, api, hooks = own_stack("Enabled", vectors_batched_s=WINDOW_S, word_index="Vectors")
SEP = "\x1f"


def _partition(scope: Any, kind: str) -> list[dict[str, Any]]:
    """The rows of one kind in the user's L0 partition (``t``: postings keyed by term, ``df``: the
    terms' counts, ``wv``: waiting vectors)."""
    mine = f"#{layout.digest(scope.user_id)}"
    rows = scan(TABLES["items"], "begins_with(sk, :k)", {":k": {"S": f"{kind}{SEP}"}})
    return [r for r in rows if r["pk"]["S"].startswith("L0#") and r["pk"]["S"].endswith(mine)]


def _posted(scope: Any) -> int:
    """The user's L0 counter's ``posted``: their messages indexed by postings."""
    sk = f"L0{SEP}{layout.digest(scope.user_id)}"
    [counter] = scan(TABLES["items"], "sk = :sk", {":sk": {"S": sk}})
    return int(counter.get("np", {}).get("N", "0"))


def _search(api: Any, scope: Any, query: str, mode: str = "keyword", **fields: Any) -> list[str]:
    found = ok(api.post("/v3/conversation/search", scope.body(query=query, mode=mode, **fields)))
    return [m["id"] for m in found["messages"]]


def test_a_message_is_found_by_words_without_postings_before_and_after_its_put(api):
    scope = make_scope()
    [rex, walk] = add_messages(api, scope, "I adopted a small beagle named Rex", "We walk along the river daily")
    assert _partition(scope, "t") == [], "no posting: its terms go with its vector"
    assert _posted(scope) == 0
    assert _search(api, scope, "beagle Rex") == [rex], "found by words from the next request (it waits)"
    assert _search(api, scope, "river walk", mode="hybrid")[:1] == [walk]
    wait_for_vectors([rex, walk], timeout=WINDOW_S + 60)
    [(bucket, index, meta)] = vectors_of([rex])[rex]
    assert set(term_digests(["beagle", "Rex"])) <= set(meta["terms"].split())
    assert "beagle" not in meta["terms"] and meta["length"] == 5, "digests only (a, I: stop words)"
    config = aws_client("s3vectors").get_index(vectorBucketName=bucket, indexName=index)["index"]
    assert config["metadataConfiguration"]["textSearchConfigurations"] == [{"metadataKey": "terms", "status": "ACTIVE"}]
    assert _search(api, scope, "beagle Rex") == [rex], "and from S3 Vectors once put"
    assert _search(api, scope, "beagle", mode="hybrid")[:1] == [rex]
    assert _search(api, scope, "a puppy", mode="semantic")[:1] == [rex], "meaning alone still answers"


def test_words_are_weighed_by_the_users_own_statistics_and_filters_hold(api):
    scope, other = make_scope(), make_scope()
    # "garden" is common for this user; "orchid" rare: the message holding both ranks first
    ids = add_messages(api, scope, "the garden is green", "my garden has roses", "an orchid in the garden")
    late = add_messages(api, scope, "the garden at night", session="s2")
    add_messages(api, other, "an orchid garden orchid garden")  # another user, same group's index maybe
    wait_for_vectors(ids + late, timeout=WINDOW_S + 60)
    found = _search(api, scope, "orchid garden")
    assert found[0] == ids[2] and set(found) == set(ids + late), "only the user's own, the rare word first"
    assert set(_search(api, scope, "garden", session_id="s2")) == set(late), "the session filters"
    stamps = ok(api.post("/v3/conversation/query", scope.body(limit=10)))["messages"]
    newest = max(m["timestamp"] for m in stamps)
    assert _search(api, scope, "garden", time_start=newest) == late, "the time span filters"


def test_a_message_whose_embedding_failed_has_postings_and_an_erasure_takes_every_trace(api, hooks):
    scope = make_scope()
    [kept] = add_messages(api, scope, "the violin lesson is on tuesday")
    with hooks.failing(BEDROCK_OF_MEMORY, code="ValidationException", status=400):  # refused for good
        [refused] = add_messages(api, scope, "the cello lesson is on friday")
    assert {layout_item(r) for r in _partition(scope, "t")} == {refused}, "postings for it alone"
    assert _posted(scope) == 1
    assert _search(api, scope, "cello") == [refused], "found by its postings"
    assert set(_search(api, scope, "lesson")) == {kept, refused}, "both ways merged"
    wait_for_vectors([kept], timeout=WINDOW_S + 60)
    ok(api.post("/v3/conversation/delete", scope.body(message_ids=[kept, refused])))
    assert _partition(scope, "t") == [] and _posted(scope) == 0
    assert _partition(scope, "df") == [], "no term's count outlives the messages"
    assert _partition(scope, "wv") == [] and vectors_of([kept, refused]) == {}
    assert _search(api, scope, "lesson") == []


def layout_item(row: dict[str, Any]) -> str:
    """The message a posting keyed by term belongs to (the last part of its key)."""
    return str(row["sk"]["S"].rsplit(SEP, 1)[1])


def test_a_records_words_go_with_its_vector_and_lead_to_the_turns_it_cites(api):
    scope = make_scope()
    [turn] = add_messages(api, scope, "we talked about music lessons")
    added = scope.body(content="plays the cello every friday", background="hobby", source_message_ids=[turn])
    record = str(ok(api.post("/v3/atomic/add", added))["id"])
    mine = f"#{layout.digest(scope.user_id)}"
    postings = scan(TABLES["items"], "begins_with(sk, :p)", {":p": {"S": f"p{SEP}"}})
    assert [r for r in postings if r["pk"]["S"].startswith("L1#") and r["pk"]["S"].endswith(mine)] == []

    def found(query: str) -> list[str]:
        hits = ok(api.post("/v3/atomic/search", scope.body(query=query, mode="keyword")))
        return [item["id"] for item in hits["items"]]

    assert found("cello") == [record] and found("hobby") == [record], "from what waits, at once"
    assert _search(api, scope, "cello") == [turn], "the record leads to the turn it cites"
    ok(api.post("/v3/atomic/update", scope.body(id=record, content="plays the violin every friday")))
    assert found("violin") == [record] and found("cello") == [], "the new text only"
    wait_for_vectors([record], timeout=WINDOW_S + 60)
    [(_, _, meta)] = vectors_of([record])[record]
    assert set(term_digests(["violin"])) <= set(meta["terms"].split())
    assert found("violin") == [record]
    ok(api.post("/v3/atomic/delete", scope.body(ids=[record])))
    assert found("violin") == [] and vectors_of([record]) == {}


def test_a_users_erasure_leaves_no_count_of_their_terms_even_one_drift_left(api):
    scope = make_scope()
    add_messages(api, scope, *[f"garnet harbor iris ember fjord dune cider boat apple {i}" for i in range(12)])
    [row] = _partition(scope, "df")[:1] or [None]
    assert row is not None, "their terms are counted (one in 8 of them)"
    stray = {**row, "sk": {"S": f"df{SEP}{'0' * 20}"}}  # a count a request that died left behind
    aws_client("dynamodb").put_item(TableName=TABLES["items"], Item=stray)
    ok(api.post("/v3/user-memory/delete", {"memory_id": scope.memory_id, "user_id": scope.user_id}))
    assert _partition(scope, "df") == [] and _partition(scope, "t") == []
