"""L1 atomic records: natural-key dedup, validation, query/search/count, surgical update and
delete by id (the "Echo" lesson: the confirmed row and the deleted row are the same row)."""

from __future__ import annotations

import json
import re
import unicodedata
from concurrent.futures import ThreadPoolExecutor

import pytest
from helpers import Scope, make_scope
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

ATOM_ID = re.compile(r"^atom-[0-9a-z]+$")
TIME = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")
ITEM_FIELDS = {
    "id",
    "type",
    "content",
    "background",
    "tags",
    "metadata",
    "version",
    "reinforced_count",
    "team_id",
    "agent_id",
    "user_id",
    "task_id",
    "session_id",
    "source_message_ids",
    "formed",
    "created_at",
    "updated_at",
}


def add(api, scope, content, **fields):
    answer = api.post("/v3/atomic/add", scope.body(content=content, **fields))
    assert answer.status == 200, answer.body
    return answer.data


def items(api, scope, **fields):
    answer = api.post("/v3/atomic/query", scope.body(**fields))
    assert answer.status == 200, answer.body
    return answer.data


def by_id(api, scope, **fields):
    return {item["id"]: item for item in items(api, scope, limit=100, **fields)["items"]}


def ids_of(data):
    return [item["id"] for item in data["items"]]


def count(api, scope, **fields):
    answer = api.post("/v3/atomic/count", scope.body(**fields))
    assert answer.status == 200, answer.body
    return answer.data["total"]


def search(api, scope, text, **fields):
    """Search by words unless a test asks for another mode (meaning has tests of its own)."""
    fields.setdefault("mode", "keyword")
    answer = api.post("/v3/atomic/search", scope.body(query=text, **fields))
    assert answer.status == 200, answer.body
    assert answer.data["mode_used"] == fields["mode"] or fields["mode"] is None
    return answer.data["items"]


def update(api, scope, atom_id, **fields):
    return api.post("/v3/atomic/update", scope.body(id=atom_id, **fields))


def delete(api, scope, ids, **fields):
    return api.post("/v3/atomic/delete", scope.body(ids=ids, **fields))


def sibling(scope, **change):
    return Scope(**{"team_id": scope.team_id, "agent_id": scope.agent_id, "user_id": scope.user_id, **change})


# ---- add and the natural key ----------------------------------------------------------------------


def test_add_creates_a_record_with_every_field(api, scope):
    answer = api.post("/v3/atomic/add", scope.body(content="likes green tea", session_id="s1"))
    assert answer.status == 200 and answer.body["code"] == 0
    data = answer.data
    assert ATOM_ID.match(data["id"])
    assert {k: data[k] for k in ("version", "created", "reinforced_count")} == {
        "version": 1,
        "created": True,
        "reinforced_count": 1,
    }
    assert data["version"] is not True and data["created"] is True
    item = by_id(api, scope)[data["id"]]
    assert set(item) == ITEM_FIELDS
    assert item == {
        "id": data["id"],
        "type": "episodic",
        "content": "likes green tea",
        "background": "",
        "tags": [],
        "metadata": {},
        "version": 1,
        "reinforced_count": 1,
        "team_id": scope.team_id,
        "agent_id": scope.agent_id,
        "user_id": scope.user_id,
        "task_id": None,
        "session_id": "s1",
        "source_message_ids": [],
        "formed": False,
        "created_at": item["created_at"],
        "updated_at": item["updated_at"],
    }
    assert TIME.match(item["created_at"]) and item["created_at"] == item["updated_at"]
    full = add(
        api,
        scope,
        "prefers tea",
        type="preference",
        background="at work",
        tags=["drink", "tea"],
        metadata={"source": "chat", "n": [1, {"x": "y"}]},
        task_id="t1",
    )
    got = by_id(api, scope, task_id="t1")[full["id"]]
    assert (got["type"], got["background"], got["tags"], got["metadata"], got["task_id"], got["session_id"]) == (
        "preference",
        "at work",
        ["drink", "tea"],
        {"source": "chat", "n": [1, {"x": "y"}]},
        "t1",
        None,
    )
    later = add(api, scope, "another")
    assert later["id"] > full["id"] > data["id"]  # time-ordered ids


def test_null_fields_count_as_absent(api, scope):
    data = add(api, scope, "nulls", type=None, background=None, tags=None, metadata=None, session_id=None)
    item = by_id(api, scope)[data["id"]]
    assert (item["type"], item["background"], item["tags"], item["metadata"], item["session_id"]) == (
        "episodic",
        "",
        [],
        {},
        None,
    )
    again = add(api, scope, "nulls", type="episodic", background="")
    assert again["id"] == data["id"] and again["created"] is False


def test_natural_key_reinforces_and_ignores_new_extras(api, scope):
    first = add(
        api, scope, "drinks coffee", type="habit", background="mornings", tags=["a"], metadata={"v": 1}, session_id="s1"
    )
    other = add(api, scope, "reads news")
    before = by_id(api, scope)[first["id"]]
    again = add(
        api,
        scope,
        "drinks coffee",
        type="habit",
        background="mornings",
        tags=["b", "c"],
        metadata={"v": 2},
        session_id="s2",
    )
    assert again == {"id": first["id"], "version": 1, "created": False, "reinforced_count": 2}
    third = add(api, scope, "drinks coffee", type="habit", background="mornings")
    assert third["reinforced_count"] == 3 and third["id"] == first["id"]
    after = by_id(api, scope)[first["id"]]
    assert after["reinforced_count"] == 3 and after["version"] == 1
    assert (after["tags"], after["metadata"], after["session_id"]) == (["a"], {"v": 1}, "s1")
    assert after["created_at"] == before["created_at"]
    assert after["updated_at"] > before["updated_at"]
    # the reinforced record moved ahead of the newer one (newest updated_at first)
    assert ids_of(items(api, scope)) == [first["id"], other["id"]]
    assert count(api, scope) == 2
    # type or background alone make another record
    assert add(api, scope, "drinks coffee", type="fact", background="mornings")["created"] is True
    assert add(api, scope, "drinks coffee", type="habit", background="evenings")["created"] is True
    assert add(api, scope, "drinks coffee", type="habit")["created"] is True
    assert count(api, scope) == 5


def test_natural_key_is_per_task_and_per_user(api, scope):
    plain = add(api, scope, "same words")
    t1 = add(api, scope, "same words", task_id="t1")
    t2 = add(api, scope, "same words", task_id="t2")
    t1_again = add(api, scope, "same words", task_id="t1")
    neighbour = add(api, sibling(scope, user_id=scope.user_id + "-n"), "same words")
    assert [plain["created"], t1["created"], t2["created"], neighbour["created"]] == [True] * 4
    assert len({plain["id"], t1["id"], t2["id"], neighbour["id"]}) == 4
    assert t1_again == {"id": t1["id"], "version": 1, "created": False, "reinforced_count": 2}
    assert add(api, scope, "same words")["id"] == plain["id"]
    assert set(by_id(api, scope)) == {plain["id"], t1["id"], t2["id"]}
    assert set(by_id(api, scope, task_id="t1")) == {t1["id"]}
    assert count(api, scope) == 3 and count(api, scope, task_id="t2") == 1


_ALPHABET = list("abcé eñ\u00c5\u03a9中文x.")
_VARIANTS = {
    "same": lambda s: s,
    "trailing space": lambda s: s + " ",
    "leading space": lambda s: " " + s,
    "NFC": lambda s: unicodedata.normalize("NFC", s),
    "NFD": lambda s: unicodedata.normalize("NFD", s),
    "double spaces": lambda s: s.replace(" ", "  "),
    "tab for space": lambda s: s.replace(" ", "\t"),
    "newline": lambda s: s + "\n",
    "upper": lambda s: s.upper(),
}


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    base=st.text(alphabet=_ALPHABET, min_size=1, max_size=24),
    variant=st.sampled_from(sorted(_VARIANTS)),
    on=st.sampled_from(["content", "background"]),
)
def test_byte_different_text_is_another_record(api, base, variant, on):
    scope = make_scope()
    changed = _VARIANTS[variant](base)
    fields = {"content": "fixed content", "background": "fixed background"}
    first = add(api, scope, **{**fields, on: base})
    second = add(api, scope, **{**fields, on: changed})
    if changed == base:
        assert second["id"] == first["id"] and second["created"] is False and second["reinforced_count"] == 2
    else:
        assert second["id"] != first["id"] and second["created"] is True and second["reinforced_count"] == 1
        got = by_id(api, scope)
        assert got[first["id"]][on] == base and got[second["id"]][on] == changed


def test_racing_adds_of_one_record_make_one_record(api, scope):
    add(api, scope, "warm-up")  # the asset exists; the race is on the natural key only

    def one(_):
        return add(api, scope, "raced content", type="race", background="bg")

    with ThreadPoolExecutor(max_workers=10) as pool:
        answers = list(pool.map(one, range(10)))
    assert len({a["id"] for a in answers}) == 1
    assert sum(a["created"] for a in answers) == 1
    assert sorted(a["reinforced_count"] for a in answers) == list(range(1, 11))
    assert all(a["version"] == 1 for a in answers)
    item = by_id(api, scope)[answers[0]["id"]]
    assert item["reinforced_count"] == 10
    assert count(api, scope) == 2 and count(api, scope, type="race") == 1


def test_racing_first_adds_create_the_asset_once(api, scope):
    def one(i):
        return add(api, scope, "first ever", tags=[f"t{i}"])

    with ThreadPoolExecutor(max_workers=6) as pool:
        answers = list(pool.map(one, range(6)))
    assert len({a["id"] for a in answers}) == 1 and sum(a["created"] for a in answers) == 1
    assert count(api, scope) == 1 and by_id(api, scope)[answers[0]["id"]]["reinforced_count"] == 6


# ---- validation -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "fields, field",
    [
        ({"content": ""}, "content"),
        ({"content": "x" * 8193}, "content"),
        ({"content": 42}, "content"),
        ({"content": None}, "content"),
        ({"type": "Fact"}, "type"),
        ({"type": "a-b"}, "type"),
        ({"type": "fact1"}, "type"),
        ({"type": ""}, "type"),
        ({"type": "a" * 65}, "type"),
        ({"type": "fact\n"}, "type"),
        ({"type": 1}, "type"),
        ({"background": "b" * 2049}, "background"),
        ({"background": 7}, "background"),
        ({"tags": [f"t{i}" for i in range(21)]}, "tags"),
        ({"tags": "one"}, "tags"),
        ({"tags": ["ok", ""]}, "tags.1"),
        ({"tags": ["ok", "ok", "t" * 65]}, "tags.2"),
        ({"tags": [1]}, "tags.0"),
        ({"metadata": [1, 2]}, "metadata"),
        ({"metadata": "{}"}, "metadata"),
        ({"metadata": {"k": "x" * 4089}}, "metadata"),
        ({"metadata": {"k": "é" * 2045}}, "metadata"),
    ],
)
def test_add_validation_names_the_field(api, scope, fields, field):
    answer = api.post("/v3/atomic/add", scope.body(**{"content": "valid", **fields}))
    assert answer.status == 400 and answer.body["code"] == 400, answer.body
    assert answer.message.startswith(f"{field}: "), answer.message


def test_add_limits_are_inclusive(api, scope):
    accepted = [
        {"content": "中" * 8192},
        {"content": "x", "type": "a" * 64},
        {"content": "x", "type": "some_type"},
        {"content": "x", "background": "背" * 2048},
        {"content": "tags", "tags": ["t" * 64] + [f"t{i}" for i in range(19)]},
        {"content": "ascii", "metadata": {"k": "x" * 4088}},  # {"k":"…"} is exactly 4096 bytes
        {"content": "utf8", "metadata": {"k": "é" * 2044}},  # 2 bytes each: 4096 bytes, 2052 chars
    ]
    assert len(json.dumps({"k": "é" * 2044}, separators=(",", ":"), ensure_ascii=False).encode()) == 4096
    ids = [add(api, scope, **fields)["id"] for fields in accepted]
    assert len(set(ids)) == len(accepted)
    assert count(api, scope) == len(accepted)
    got = by_id(api, scope)
    assert got[ids[0]]["content"] == "中" * 8192 and got[ids[6]]["metadata"] == {"k": "é" * 2044}


def test_validation_failure_writes_nothing_and_creates_no_asset(api, scope):
    answer = api.post("/v3/atomic/add", scope.body(content="x", type="BAD", tags=["a"] * 21))
    assert answer.status == 400
    assert {p.split(": ")[0] for p in answer.message.split("; ")} == {"type", "tags"}
    assert api.post("/v3/memory/get", {"memory_id": scope.memory_id}).status == 404
    assert count(api, scope) == 0


# ---- query, count, search -------------------------------------------------------------------------


def test_query_orders_by_updated_at_and_filters(api, scope):
    a = add(api, scope, "apple fact", type="fact")
    b = add(api, scope, "banana habit", type="habit")
    c = add(api, scope, "cherry fact", type="fact")
    first = items(api, scope)
    assert ids_of(first) == [c["id"], b["id"], a["id"]] and first["total"] == 3
    stamps = {i["id"]: i["updated_at"] for i in first["items"]}
    add(api, scope, "apple fact", type="fact")  # reinforce: a moves to the front
    moved = items(api, scope)
    assert ids_of(moved) == [a["id"], c["id"], b["id"]]
    new_a = moved["items"][0]["updated_at"]
    assert new_a > stamps[c["id"]]
    facts = items(api, scope, type="fact")
    assert ids_of(facts) == [a["id"], c["id"]] and facts["total"] == 2
    assert items(api, scope, type="none_such") == {"items": [], "total": 0}
    # time filters apply to updated_at, inclusively: a was created first but updated last
    since = items(api, scope, time_start=new_a)
    assert ids_of(since) == [a["id"]] and since["total"] == 1
    upto = items(api, scope, time_end=stamps[c["id"]])
    assert set(ids_of(upto)) == {b["id"], c["id"]} and upto["total"] == 2
    window = items(api, scope, time_start=stamps[b["id"]], time_end=stamps[b["id"]], type="habit")
    assert ids_of(window) == [b["id"]]
    page = items(api, scope, limit=1, offset=1)
    assert ids_of(page) == [c["id"]] and page["total"] == 3
    assert items(api, scope, offset=10_000) == {"items": [], "total": 3}
    assert count(api, scope) == 3
    assert count(api, scope, type="fact") == 2
    assert count(api, scope, time_start=new_a) == 1
    assert count(api, scope, type="fact", time_end=stamps[c["id"]]) == 1
    # session_id is accepted and ignored by L1 reads
    assert items(api, scope, session_id="other")["total"] == 3
    assert count(api, scope, session_id="other") == 3
    for route in ("query", "count"):
        bad = api.post(f"/v3/atomic/{route}", scope.body(time_start=new_a, time_end=stamps[b["id"]]))
        assert bad.status == 400 and bad.message.startswith("(root): "), bad.body
        for fields in ({"type": "Bad"}, {"time_start": "2024-01-01"}, {"time_end": "2024-01-01T00:00:00+00"}):
            answer = api.post(f"/v3/atomic/{route}", scope.body(**fields))
            assert answer.status == 400 and answer.message.startswith(next(iter(fields))), answer.body
    for fields in ({"limit": 0}, {"limit": 101}, {"limit": "5"}, {"offset": -1}, {"offset": 10_001}):
        answer = api.post("/v3/atomic/query", scope.body(**fields))
        assert answer.status == 400 and answer.message.startswith(next(iter(fields))), answer.body


def test_search_scores_best_first(api, scope):
    full = add(api, scope, "Alice loves hiking in the Alps", type="preference")
    part = add(api, scope, "alice works remotely")
    via_background = add(api, scope, "plans a trip", background="HIKING club")
    none = add(api, scope, "bob likes chess")
    cjk = add(api, scope, "用户喜欢爬山")
    found = search(api, scope, "alice HIKING")
    assert next(i["id"] for i in found) == full["id"]
    assert {i["id"] for i in found} == {full["id"], part["id"], via_background["id"]}
    assert none["id"] not in {i["id"] for i in found}
    scores = [i["score"] for i in found]
    assert scores == sorted(scores, reverse=True) and scores[0] > scores[-1]
    assert all(set(i) == ITEM_FIELDS | {"score"} for i in found)
    assert [i["id"] for i in search(api, scope, "alice", type="preference")] == [full["id"]]
    assert len(search(api, scope, "alice hiking", limit=1)) == 1
    assert [i["id"] for i in search(api, scope, "喜欢")] == [cjk["id"]]
    assert search(api, scope, "zebra") == []
    for fields in (
        {"query": ""},
        {"query": "q" * 2049},
        {"limit": 0},
        {"limit": 101},
        {"type": "X"},
        {"mode": "fuzzy"},
        {"mode": 1},
    ):
        answer = api.post("/v3/atomic/search", scope.body(**{"query": "alice", **fields}))
        assert answer.status == 400 and answer.message.startswith(next(iter(fields))), answer.body


def test_search_by_stems_and_an_updated_record_by_its_new_words_only(api, scope):
    made = add(api, scope, "Allergic to peanuts", background="food allergies")
    assert [i["id"] for i in search(api, scope, "allergy")] == [made["id"]]
    assert [i["id"] for i in search(api, scope, "peanut")] == [made["id"]]
    assert search(api, scope, "what is it") == []
    answer = update(api, scope, made["id"], content="Loves running marathons", background="sport")
    assert answer.status == 200, answer.body
    assert search(api, scope, "peanut") == []
    assert [i["id"] for i in search(api, scope, "marathon runs")] == [made["id"]]


# ---- update ---------------------------------------------------------------------------------------


def test_update_changes_only_the_given_fields(api, scope):
    made = add(api, scope, "old content", type="fact", background="bg", tags=["t"], metadata={"m": 1}, session_id="s1")
    before = by_id(api, scope)[made["id"]]
    answer = update(api, scope, made["id"], content="new content")
    assert answer.status == 200, answer.body
    assert answer.data["id"] == made["id"] and answer.data["version"] == "v2"
    assert TIME.match(answer.data["updated_at"])
    after = by_id(api, scope)[made["id"]]
    assert after == dict(before, content="new content", version=2, updated_at=answer.data["updated_at"])
    assert after["updated_at"] > before["updated_at"]
    third = update(api, scope, made["id"], tags=["x", "y"], metadata={"z": True}, background="", session_id="s9")
    assert third.status == 200 and third.data["version"] == "v3"
    final = by_id(api, scope)[made["id"]]
    assert final == dict(
        after, tags=["x", "y"], metadata={"z": True}, background="", version=3, updated_at=third.data["updated_at"]
    )
    assert (final["type"], final["created_at"], final["session_id"], final["reinforced_count"]) == (
        "fact",
        before["created_at"],
        "s1",
        1,
    )
    # the new natural key: adding the new text reinforces, adding the old text creates
    same = add(api, scope, "new content", type="fact", background="")
    assert same["id"] == made["id"] and same["created"] is False and same["version"] == 3
    assert add(api, scope, "old content", type="fact", background="bg")["created"] is True
    assert [i["id"] for i in search(api, scope, "new")] == [made["id"]]


def test_update_expected_version_and_errors(api, scope):
    made = add(api, scope, "versioned")
    stale = update(api, scope, made["id"], content="v2 text", expected_version=2)
    assert stale.status == 409 and stale.body["retryable"] is False, stale.body
    assert by_id(api, scope)[made["id"]]["content"] == "versioned"
    ok = update(api, scope, made["id"], content="v2 text", expected_version=1)
    assert ok.status == 200 and ok.data["version"] == "v2"
    again = update(api, scope, made["id"], content="v3 text", expected_version=1)
    assert again.status == 409
    assert by_id(api, scope)[made["id"]]["version"] == 2
    for fields in ({}, {"content": None, "tags": None}, {"session_id": "s"}):
        nothing = update(api, scope, made["id"], **fields)
        assert nothing.status == 400, (fields, nothing.body)
    for fields, field in (
        ({"content": ""}, "content"),
        ({"content": "x" * 8193}, "content"),
        ({"tags": [""]}, "tags.0"),
        ({"background": "b" * 2049}, "background"),
        ({"metadata": [1]}, "metadata"),
        ({"expected_version": "1", "content": "x"}, "expected_version"),
        ({"expected_version": 2**53 + 1, "content": "x"}, "expected_version"),  # as atomic/delete
    ):
        bad = update(api, scope, made["id"], **fields)
        assert bad.status == 400 and bad.message.startswith(f"{field}: "), bad.body
    unknown = update(api, scope, "atom-00000000000000000000000000", content="x")
    assert unknown.status == 404 and unknown.body["code"] == 404
    assert update(api, scope, "nonsense", content="x").status == 404
    assert by_id(api, scope)[made["id"]]["content"] == "v2 text"


def test_update_of_another_scope_is_404(api, scope):
    made = add(api, scope, "private fact")
    for other in (
        sibling(scope, user_id=scope.user_id + "-o"),
        sibling(scope, agent_id=scope.agent_id + "o"),
        sibling(scope, team_id=scope.team_id + "o"),
    ):
        add(api, other, "their own")
        answer = update(api, other, made["id"], content="hijacked")
        assert answer.status == 404, answer.body
    fresh = make_scope()  # a pair without any asset at all
    assert update(api, fresh, made["id"], content="hijacked").status == 404
    assert update(api, scope, made["id"], content="hijacked", task_id="other-task").status == 404
    item = by_id(api, scope)[made["id"]]
    assert item["content"] == "private fact" and item["version"] == 1


def test_concurrent_updates_all_succeed_with_distinct_versions(api, scope):
    made = add(api, scope, "contended")

    def one(i):
        return update(api, scope, made["id"], tags=[f"tag{i}"])

    with ThreadPoolExecutor(max_workers=6) as pool:
        answers = list(pool.map(one, range(6)))
    assert all(a.status == 200 for a in answers), [a.body for a in answers]
    assert sorted(int(a.data["version"][1:]) for a in answers) == list(range(2, 8))
    final = by_id(api, scope)[made["id"]]
    assert final["version"] == 7 and final["content"] == "contended"
    winner = next(i for i, a in enumerate(answers) if a.data["version"] == "v7")
    assert final["tags"] == [f"tag{winner}"]


def test_update_to_another_records_natural_key_is_409(api, scope):
    one = add(api, scope, "first text", type="fact")
    two = add(api, scope, "second text", type="fact")
    clash = update(api, scope, two["id"], content="first text")
    assert clash.status == 409 and clash.body["retryable"] is False, clash.body
    got = by_id(api, scope)
    assert got[two["id"]]["content"] == "second text" and got[two["id"]]["version"] == 1
    assert got[one["id"]]["content"] == "first text"
    # a record's own key is no clash; a different background makes it a different key
    assert update(api, scope, one["id"], content="first text").status == 200
    assert update(api, scope, two["id"], content="first text", background="other").status == 200
    assert add(api, scope, "second text", type="fact")["created"] is True
    assert count(api, scope) == 3


# ---- delete ---------------------------------------------------------------------------------------


def test_delete_ids_trimmed_and_deduplicated(api, scope):
    a, b, c = (add(api, scope, t)["id"] for t in ("a", "b", "c"))
    unknown = "atom-00000000000000000000000000"
    answer = delete(api, scope, [f" {c} ", "", a, c, "  ", unknown, f"{a}\n", "junk"])
    assert answer.status == 200, answer.body
    data = answer.data
    assert data["deleted_ids"] == [c, a] and data["deleted_count"] == 2
    assert data["not_found_ids"] == [unknown, "junk"]
    assert data["audit_ids"] and all(isinstance(i, str) for i in data["audit_ids"])
    assert ids_of(items(api, scope)) == [b]
    repeat = delete(api, scope, [c])
    assert repeat.data == {
        "deleted_count": 0,
        "deleted_ids": [],
        "not_found_ids": [c],
        "files_deleted": 0,
        "audit_ids": [],
    }
    for ids in ([], ["", "  "], "a", [1]):
        answer = delete(api, scope, ids)
        assert answer.status == 400 and answer.message.startswith("ids"), (ids, answer.body)
    assert delete(api, scope, [b] * 5001).status == 400
    assert delete(api, scope, [b] * 5000).data["deleted_ids"] == [b]
    assert count(api, scope) == 0


def test_delete_expected_versions(api, scope):
    a = add(api, scope, "alpha")["id"]
    b = add(api, scope, "beta")["id"]
    c = add(api, scope, "gamma")["id"]
    assert update(api, scope, b, content="beta v2").status == 200
    stray = delete(api, scope, [a], expected_versions={b: 2})
    assert stray.status == 400 and stray.message.startswith("expected_versions"), stray.body
    for bad in ({a: "1"}, {a: 1.5}, [1], {a: -1}, {a: True}, {a: 2**53 + 1}):  # whole numbers 0..2^53 only
        answer = delete(api, scope, [a], expected_versions=bad)
        assert answer.status == 400 and answer.message.startswith("expected_versions"), answer.body
    mismatch = delete(api, scope, [a, b, c], expected_versions={a: 1, b: 1})
    assert mismatch.status == 409 and mismatch.body["retryable"] is False, mismatch.body
    assert mismatch.data == {"conflicts": [{"id": b, "expected": 1, "actual": 2}]}
    assert set(by_id(api, scope)) == {a, b, c} and count(api, scope) == 3  # nothing deleted
    done = delete(api, scope, [f" {b} ", a, c], expected_versions={b: 2})
    assert done.status == 200 and done.data["deleted_ids"] == [b, a, c] and done.data["deleted_count"] == 3
    retry = delete(api, scope, [b, a, c], expected_versions={b: 2})
    assert retry.status == 200, retry.body
    assert retry.data == {
        "deleted_count": 0,
        "deleted_ids": [],
        "not_found_ids": [b, a, c],
        "files_deleted": 0,
        "audit_ids": [],
    }
    assert count(api, scope) == 0


def test_delete_outside_scope_is_not_found_and_kept(api, scope):
    others = [
        sibling(scope, user_id=scope.user_id + "-o"),
        sibling(scope, agent_id=scope.agent_id + "o"),
        sibling(scope, team_id=scope.team_id + "o"),
    ]
    theirs = [add(api, other, "theirs")["id"] for other in others]
    mine = add(api, scope, "mine")["id"]
    answer = delete(api, scope, [*theirs, mine], session_id="whatever")
    assert answer.status == 200
    assert answer.data["deleted_ids"] == [mine] and answer.data["not_found_ids"] == theirs
    assert answer.data["deleted_count"] == 1
    for other, atom_id in zip(others, theirs, strict=True):
        assert ids_of(items(api, other)) == [atom_id] and count(api, other) == 1
    task = add(api, scope, "task bound", task_id="t1")["id"]
    wrong_task = delete(api, scope, [task], task_id="t2")
    assert wrong_task.data["not_found_ids"] == [task]
    assert ids_of(items(api, scope, task_id="t1")) == [task]


def test_deleted_records_never_appear_again(api, scope):
    keep = add(api, scope, "keep this memory", type="fact")["id"]
    gone = add(api, scope, "drop this memory", type="fact")["id"]
    assert {i["id"] for i in search(api, scope, "memory")} == {keep, gone}
    assert delete(api, scope, [gone]).data["deleted_ids"] == [gone]
    assert ids_of(items(api, scope)) == [keep]
    assert items(api, scope, type="fact")["total"] == 1
    assert [i["id"] for i in search(api, scope, "drop memory")] == [keep]
    assert search(api, scope, "drop") == []
    assert count(api, scope) == 1 and count(api, scope, type="fact") == 1
    assert count(api, scope, time_start="2000-01-01T00:00:00Z") == 1
    assert update(api, scope, gone, content="revived").status == 404
    again = add(api, scope, "drop this memory", type="fact")  # the natural key is free again
    assert again["created"] is True and again["id"] != gone and again["reinforced_count"] == 1


def test_echo_case_deletes_exactly_the_confirmed_row(api, scope):
    hello = add(api, scope, "Hello")
    spaced = add(api, scope, "Hello ")
    context = add(api, scope, "Hello", background="other context")
    found = search(api, scope, "hello", limit=10)
    assert len(found) == 3 and len({i["id"] for i in found}) == 3
    assert {i["id"] for i in found} == {hello["id"], spaced["id"], context["id"]}
    shown = next(i for i in found if i["content"] == "Hello " and i["background"] == "")
    answer = delete(api, scope, [shown["id"]], expected_versions={shown["id"]: shown["version"]})
    assert answer.status == 200 and answer.data["deleted_ids"] == [spaced["id"]]
    assert answer.data["deleted_count"] == 1
    left = by_id(api, scope)
    assert set(left) == {hello["id"], context["id"]}
    assert (left[hello["id"]]["content"], left[hello["id"]]["background"]) == ("Hello", "")
    assert (left[context["id"]]["content"], left[context["id"]]["background"]) == ("Hello", "other context")
    assert {i["id"] for i in search(api, scope, "hello")} == {hello["id"], context["id"]}
    assert count(api, scope) == 2


# ---- exact counters -------------------------------------------------------------------------------


def test_counts_stay_exact_under_concurrent_deletes(api, scope):
    ids = [add(api, scope, f"record {i}", type="t")["id"] for i in range(8)]
    doomed = ids[:5]

    def remove(order):
        answer = delete(api, scope, order)
        assert answer.status == 200, answer.body
        return answer.data

    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(remove, [doomed, list(reversed(doomed))]))
    assert sum(r["deleted_count"] for r in results) == 5
    assert sorted(i for r in results for i in r["deleted_ids"]) == sorted(doomed)
    for r in results:
        assert sorted(r["deleted_ids"] + r["not_found_ids"]) == sorted(doomed)
    left = items(api, scope, limit=100)
    assert set(ids_of(left)) == set(ids[5:]) and left["total"] == 3
    assert count(api, scope) == 3 and count(api, scope, type="t") == 3
    got = api.post("/v3/memory/get", {"memory_id": scope.memory_id})
    assert got.status == 200 and got.data["counts"]["l1"] == 3
