"""L0 conversation: add, query, search, count, delete by id, isolation, Idempotency-Key."""

from __future__ import annotations

import re
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime

import pytest
from helpers import Scope, make_scope

MSG_ID = re.compile(r"^msg-[0-9a-z]+$")
TIME = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")
FULL_FIELDS = {"id", "session_id", "team_id", "agent_id", "user_id", "task_id", "role", "content", "timestamp"}
SEARCH_FIELDS = {"id", "session_id", "role", "content", "timestamp", "score"}


def msgs(*contents, **fields):
    return [{"role": "user" if i % 2 == 0 else "assistant", "content": c, **fields} for i, c in enumerate(contents)]


def add(api, scope, messages, session="s1", headers=None, **fields):
    body = scope.body(messages=messages, **fields)
    if session is not None:
        body["session_id"] = session
    answer = api.post("/v3/conversation/add", body, headers=headers)
    assert answer.status == 200, answer.body
    return answer.data["accepted_ids"]


def query(api, scope, **fields):
    answer = api.post("/v3/conversation/query", scope.body(**fields))
    assert answer.status == 200, answer.body
    return answer.data


def ids_of(data, key="messages"):
    return [m["id"] for m in data[key]]


def count(api, scope, **fields):
    answer = api.post("/v3/conversation/count", scope.body(**fields))
    assert answer.status == 200, answer.body
    return answer.data["total"]


def search(api, scope, text, **fields):
    """Search by words unless a test asks for another mode (meaning has tests of its own)."""
    fields.setdefault("mode", "keyword")
    answer = api.post("/v3/conversation/search", scope.body(query=text, **fields))
    assert answer.status == 200, answer.body
    assert answer.data["mode_used"] == fields["mode"] or fields["mode"] is None
    return answer.data["messages"]


def delete(api, scope, **fields):
    answer = api.post("/v3/conversation/delete", scope.body(**fields))
    assert answer.status == 200, answer.body
    return answer.data


def ms(stamp):
    dt = datetime.strptime(stamp[:-5], "%Y-%m-%dT%H:%M:%S").replace(tzinfo=UTC)
    return int(dt.timestamp()) * 1000 + int(stamp[-4:-1])


def sibling(scope, **change):
    """Another scope sharing some of ``scope``'s ids."""
    return Scope(**{"team_id": scope.team_id, "agent_id": scope.agent_id, "user_id": scope.user_id, **change})


# ---- add ------------------------------------------------------------------------------------------


def test_add_answers_ids_versions_and_total(api, scope):
    answer = api.post("/v3/conversation/add", scope.body(session_id="s1", messages=msgs("a", "b", "c")))
    assert answer.status == 200 and answer.body["code"] == 0 and answer.body["message"] == "ok"
    data = answer.data
    assert set(data) >= {"accepted_ids", "accepted_versions", "total_count"}
    assert len(data["accepted_ids"]) == 3 and len(set(data["accepted_ids"])) == 3
    assert all(MSG_ID.match(i) for i in data["accepted_ids"])
    assert data["accepted_ids"] == sorted(data["accepted_ids"])  # time-ordered, in batch order
    assert data["accepted_versions"] == ["v1", "v1", "v1"]
    assert data["total_count"] == 3
    later = add(api, scope, msgs("d"))
    assert later[0] > data["accepted_ids"][-1]
    got = query(api, scope)
    assert got["total"] == 4
    assert {m["id"]: m["content"] for m in got["messages"]} == dict(
        zip(data["accepted_ids"] + later, ["a", "b", "c", "d"], strict=True)
    )
    for message in got["messages"]:
        assert set(message) == FULL_FIELDS
        assert (message["team_id"], message["agent_id"], message["user_id"]) == (
            scope.team_id,
            scope.agent_id,
            scope.user_id,
        )
        assert message["session_id"] == "s1" and message["task_id"] is None
        assert TIME.match(message["timestamp"])
    assert {m["role"] for m in got["messages"]} == {"user", "assistant"}


def test_add_batch_bounds(api, scope):
    hundred = add(api, scope, msgs(*[f"m{i}" for i in range(100)]))
    assert len(hundred) == 100 and len(set(hundred)) == 100
    assert count(api, scope) == 100
    for messages in ([], msgs(*[f"x{i}" for i in range(101)])):
        answer = api.post("/v3/conversation/add", scope.body(session_id="s1", messages=messages))
        assert answer.status == 400 and answer.body["code"] == 400
        assert answer.message.startswith("messages: "), answer.message
    missing = api.post("/v3/conversation/add", scope.body(session_id="s1"))
    assert missing.status == 400 and missing.message.startswith("messages: ")
    assert count(api, scope) == 100


def test_session_id_from_body_or_header(api, scope):
    body_wins = add(api, scope, msgs("body"), session="from-body", headers={"x-tdai-session-id": "from-header"})
    header_only = add(api, scope, msgs("header"), session=None, headers={"x-tdai-session-id": "from-header"})
    got = {m["id"]: m["session_id"] for m in query(api, scope)["messages"]}
    assert got == {body_wins[0]: "from-body", header_only[0]: "from-header"}
    for body in (scope.body(messages=msgs("x")), scope.body(messages=msgs("x"), session_id=None)):
        answer = api.post("/v3/conversation/add", body)
        assert answer.status == 400 and answer.message.startswith("session_id: "), answer.body
    answer = api.post("/v3/conversation/add", scope.body(messages=msgs("x"), session_id="a\x00b"))
    assert answer.status == 400 and answer.message.startswith("session_id: ")
    assert count(api, scope) == 2


@pytest.mark.parametrize("session", [None, " "], ids=["missing", "blank"])
def test_a_missing_session_is_named_beside_the_other_bad_fields(api, scope, session):
    body = scope.body(messages=[{"role": "user", "content": ""}], session_id=session)
    answer = api.post("/v3/conversation/add", body)
    assert answer.status == 400
    assert answer.message == (
        "session_id: is required (body or x-tdai-session-id header); messages.0.content: must not be empty"
    ), answer.body
    with_header = api.post("/v3/conversation/add", body, headers={"x-tdai-session-id": "s1"})
    assert with_header.status == 400
    if session is None:  # the header gives the session; a blank one in the body never falls back to it
        assert with_header.message == "messages.0.content: must not be empty"
    else:
        assert with_header.message == answer.message


@pytest.mark.parametrize(
    "message, field",
    [
        ({"role": "system", "content": "x"}, "role"),
        ({"role": "User", "content": "x"}, "role"),
        ({"content": "x"}, "role"),
        ({"role": None, "content": "x"}, "role"),
        ({"role": "user", "content": ""}, "content"),
        ({"role": "user", "content": "x" * 8193}, "content"),
        ({"role": "user"}, "content"),
        ({"role": "user", "content": 5}, "content"),
        ({"role": "user", "content": ["x"]}, "content"),
        ({"role": "user", "content": "x", "timestamp": "2024-01-01T00:00:00+24:00"}, "timestamp"),
        ({"role": "user", "content": "x", "timestamp": "2024-01-01T08:00:00+0800"}, "timestamp"),
        ({"role": "user", "content": "x", "timestamp": "２０２４-01-01T00:00:00Z"}, "timestamp"),
        ({"role": "user", "content": "x", "timestamp": "2024-01-01T00:00:00.0000000001Z"}, "timestamp"),
        ({"role": "user", "content": "x", "timestamp": "2024-01-01"}, "timestamp"),
        ({"role": "user", "content": "x", "timestamp": "2024-01-01 00:00:00Z"}, "timestamp"),
        ({"role": "user", "content": "x", "timestamp": "2024-01-01T00:00:00"}, "timestamp"),
        ({"role": "user", "content": "x", "timestamp": "2024-01-01t00:00:00z"}, "timestamp"),
        ({"role": "user", "content": "x", "timestamp": "2024-01-01T00:00Z"}, "timestamp"),
        ({"role": "user", "content": "x", "timestamp": 1704067200000}, "timestamp"),
        ({"role": "user", "content": "x", "timestamp": "2024-13-01T00:00:00Z"}, "timestamp"),
    ],
)
def test_message_validation_names_the_field(api, scope, message, field):
    good = {"role": "user", "content": "fine"}
    answer = api.post("/v3/conversation/add", scope.body(session_id="s1", messages=[good, good, message]))
    assert answer.status == 400 and answer.body["code"] == 400, answer.body
    assert answer.message.startswith(f"messages.2.{field}: "), answer.message
    assert "messages.0" not in answer.message and "messages.1" not in answer.message


def test_message_validation_reports_every_bad_field_and_writes_nothing(api, scope):
    add(api, scope, msgs("seed"))
    answer = api.post(
        "/v3/conversation/add",
        scope.body(
            session_id="s1",
            messages=[
                {"role": "robot", "content": "x"},
                {"role": "user", "content": "ok"},
                {"role": "user", "content": "", "timestamp": "yesterday"},
            ],
        ),
    )
    assert answer.status == 400
    problems = dict(p.split(": ", 1) for p in answer.message.split("; "))
    assert set(problems) == {"messages.0.role", "messages.2.content", "messages.2.timestamp"}
    not_objects = api.post(
        "/v3/conversation/add", scope.body(session_id="s1", messages=[{"role": "user", "content": "ok"}, "just text"])
    )
    assert not_objects.status == 400 and not_objects.message.startswith("messages.1"), not_objects.body
    assert count(api, scope) == 1


def test_content_limits_count_code_points_and_timestamps_accept_fractions(api, scope):
    ids = add(
        api,
        scope,
        [
            {"role": "user", "content": "中" * 8192, "timestamp": "2024-03-01T10:00:00Z"},
            {"role": "assistant", "content": "😀" * 8192, "timestamp": "2024-03-01T10:00:00.5Z"},
            {"role": "user", "content": "y", "timestamp": "2024-03-01T10:00:00.123456789Z"},
        ],
    )
    got = {m["id"]: m for m in query(api, scope)["messages"]}
    assert got[ids[0]]["content"] == "中" * 8192
    assert got[ids[1]]["content"] == "😀" * 8192
    assert [got[i]["timestamp"] for i in ids] == [
        "2024-03-01T10:00:00.000Z",
        "2024-03-01T10:00:00.500Z",
        "2024-03-01T10:00:00.123Z",
    ]


def test_early_years_keep_the_response_time_format(api, scope):
    ids = add(
        api,
        scope,
        [
            {"role": "user", "content": "old", "timestamp": "0999-12-31T23:59:59.5Z"},
            {"role": "user", "content": "new", "timestamp": "1000-01-01T00:00:00Z"},
        ],
    )
    got = query(api, scope)
    assert ids_of(got) == list(reversed(ids))
    assert [m["timestamp"] for m in got["messages"]] == ["1000-01-01T00:00:00.000Z", "0999-12-31T23:59:59.500Z"]


# ---- query ----------------------------------------------------------------------------------------


def test_query_newest_first_with_ties_to_the_larger_id(api, scope):
    first = add(
        api,
        scope,
        [
            {"role": "user", "content": "ten", "timestamp": "2024-05-01T10:00:00Z"},
            {"role": "user", "content": "nine", "timestamp": "2024-05-01T09:00:00Z"},
            {"role": "user", "content": "tie-a", "timestamp": "2024-05-01T09:30:00Z"},
            {"role": "user", "content": "tie-b", "timestamp": "2024-05-01T09:30:00Z"},
            {"role": "user", "content": "eleven", "timestamp": "2024-05-01T11:00:00Z"},
        ],
    )
    second = add(api, scope, [{"role": "user", "content": "tie-c", "timestamp": "2024-05-01T09:30:00Z"}])
    got = query(api, scope)
    assert [m["content"] for m in got["messages"]] == ["eleven", "ten", "tie-c", "tie-b", "tie-a", "nine"]
    assert ids_of(got) == [first[4], first[0], second[0], first[3], first[2], first[1]]
    assert got["total"] == 6


def test_default_timestamps_are_request_time_plus_index(api, scope):
    before = time.time_ns() // 1_000_000
    ids = add(api, scope, msgs("zero", "one", "two", "three"))
    after = time.time_ns() // 1_000_000
    older = add(api, scope, [{"role": "user", "content": "old", "timestamp": "2020-01-01T00:00:00Z"}])
    got = query(api, scope)
    assert [m["content"] for m in got["messages"]] == ["three", "two", "one", "zero", "old"]
    assert ids_of(got) == list(reversed(ids)) + older
    stamps = [ms(m["timestamp"]) for m in reversed(got["messages"][:4])]
    assert stamps == [stamps[0] + i for i in range(4)]
    assert before <= stamps[0] <= after


def test_query_filters_are_inclusive_and_total_counts_matches(api, scope):
    a = add(
        api,
        scope,
        [
            {"role": "user", "content": "a1", "timestamp": "2024-06-01T00:00:00Z"},
            {"role": "user", "content": "a2", "timestamp": "2024-06-02T00:00:00.250Z"},
            {"role": "user", "content": "a3", "timestamp": "2024-06-03T00:00:00Z"},
        ],
        session="alpha",
    )
    b = add(
        api,
        scope,
        [
            {"role": "user", "content": "b1", "timestamp": "2024-06-02T00:00:00.250Z"},
            {"role": "user", "content": "b2", "timestamp": "2024-06-04T00:00:00Z"},
        ],
        session="beta",
    )
    both = query(api, scope, time_start="2024-06-02T00:00:00.250Z", time_end="2024-06-03T00:00:00Z")
    assert ids_of(both) == [a[2], b[0], a[1]] and both["total"] == 3
    exact = query(api, scope, time_start="2024-06-02T00:00:00.25Z", time_end="2024-06-02T00:00:00.250Z")
    assert ids_of(exact) == [b[0], a[1]] and exact["total"] == 2
    assert ids_of(query(api, scope, time_start="2024-06-03T00:00:00Z")) == [b[1], a[2]]
    assert ids_of(query(api, scope, time_end="2024-06-01T00:00:00Z")) == [a[0]]
    alpha = query(api, scope, session_id="alpha", time_start="2024-06-02T00:00:00.250Z")
    assert ids_of(alpha) == [a[2], a[1]] and alpha["total"] == 2
    beta = query(api, scope, session_id="beta", limit=1)
    assert ids_of(beta) == [b[1]] and beta["total"] == 2
    headed = api.post("/v3/conversation/query", scope.body(), headers={"x-tdai-session-id": "beta"})
    assert ids_of(headed.data) == [b[1], b[0]]
    assert query(api, scope, session_id="gamma") == {"messages": [], "total": 0}
    assert query(api, scope, time_start="2025-01-01T00:00:00Z") == {"messages": [], "total": 0}
    assert count(api, scope) == 5
    assert count(api, scope, session_id="alpha") == 3
    assert count(api, scope, session_id="beta", time_end="2024-06-02T00:00:00.250Z") == 1
    assert count(api, scope, time_start="2024-06-02T00:00:00.250Z", time_end="2024-06-02T00:00:00.250Z") == 2
    assert count(api, scope, time_start="2024-06-05T00:00:00Z") == 0


@pytest.mark.parametrize("route", ["query", "count"])
def test_time_start_after_time_end_is_rejected(api, scope, route):
    answer = api.post(
        f"/v3/conversation/{route}", scope.body(time_start="2024-06-02T00:00:00.001Z", time_end="2024-06-02T00:00:00Z")
    )
    assert answer.status == 400 and answer.message.startswith("(root): "), answer.body
    for field, value in (("time_start", "2024-06-02"), ("time_end", "2024-06-02T00:00:00+1:00"), ("time_start", 5)):
        answer = api.post(f"/v3/conversation/{route}", scope.body(**{field: value}))
        assert answer.status == 400 and answer.message.startswith(f"{field}: "), answer.body


def test_limit_and_offset(api, scope):
    ids = add(api, scope, msgs(*[f"m{i}" for i in range(5)]))
    newest = list(reversed(ids))
    assert ids_of(query(api, scope, limit=2)) == newest[:2]
    page = query(api, scope, limit=2, offset=2)
    assert ids_of(page) == newest[2:4] and page["total"] == 5
    assert ids_of(query(api, scope, limit=100, offset=4)) == newest[4:]
    assert query(api, scope, offset=10_000) == {"messages": [], "total": 5}
    assert ids_of(query(api, scope)) == newest  # default limit 20
    bad = [
        {"limit": 0},
        {"limit": 101},
        {"limit": "10"},
        {"limit": 2.5},
        {"limit": True},
        {"offset": -1},
        {"offset": 10_001},
        {"offset": "0"},
    ]
    for fields in bad:
        answer = api.post("/v3/conversation/query", scope.body(**fields))
        assert answer.status == 400, (fields, answer.body)
        assert answer.message.startswith(f"{next(iter(fields))}: "), answer.message
    assert ids_of(query(api, scope, limit=None, offset=None)) == newest  # null = absent


# ---- search ---------------------------------------------------------------------------------------


def test_search_words_case_insensitive_and_coverage_ranks(api, scope):
    ids = add(
        api,
        scope,
        msgs("The QUICK brown fox jumps", "quick thinking helps", "a lazy dog sleeps", "brown bread and a fox"),
        session="s1",
    )
    full, quick_only, lazy, brown_fox = ids
    found = search(api, scope, "quick FOX")
    assert [m["id"] for m in found][:1] == [full]
    assert {m["id"] for m in found} == {full, quick_only, brown_fox}
    assert lazy not in {m["id"] for m in found}
    scores = [m["score"] for m in found]
    assert scores == sorted(scores, reverse=True) and all(isinstance(s, (int, float)) for s in scores)
    assert all(set(m) == SEARCH_FIELDS for m in found)
    top = found[0]
    assert (top["content"], top["session_id"], top["role"]) == ("The QUICK brown fox jumps", "s1", "user")
    assert TIME.match(top["timestamp"])
    assert search(api, scope, "zebra") == []
    assert [m["id"] for m in search(api, scope, "Lazy")] == [lazy]
    assert search(api, scope, "!!! ???") == []


def test_search_matches_stems_and_ignores_stop_words(api, scope):
    seats, running, paris = add(
        api, scope, msgs("Prefers aisle seats", "I was running late to the gym", "I fly to Paris on Monday")
    )
    assert [m["id"] for m in search(api, scope, "seat preference")] == [seats]
    assert [m["id"] for m in search(api, scope, "run")] == [running]
    assert [m["id"] for m in search(api, scope, "Flying to PARIS")] == [paris]
    # Stop words weigh nothing: a question finds what its content words find, and a query of only
    # stop words finds nothing rather than everything — in every mode.
    assert [m["id"] for m in search(api, scope, "When was I running?")] == [running]
    assert search(api, scope, "to the on I was") == []
    answer = api.post("/v3/conversation/search", scope.body(query="to the on I was"))
    assert answer.status == 200 and answer.data["messages"] == [], answer.body


def test_search_finds_a_deleted_message_never_again(api, scope):
    keep, gone = add(api, scope, msgs("green tea in the morning", "green tea at night"))
    assert {m["id"] for m in search(api, scope, "green tea")} == {keep, gone}
    delete(api, scope, message_ids=[gone])
    for mode in ("keyword", None):
        assert [m["id"] for m in search(api, scope, "green tea", mode=mode)] == [keep]


def test_search_chinese_by_character_pairs(api, scope):
    ids = add(api, scope, msgs("我喜欢吃苹果", "苹果手机很好用", "今天天气很好", "香蕉"))
    like_apple, phone, weather, banana = ids
    assert {m["id"] for m in search(api, scope, "苹果")} == {like_apple, phone}
    ranked = [m["id"] for m in search(api, scope, "喜欢苹果")]
    assert ranked == [like_apple, phone]
    assert [m["id"] for m in search(api, scope, "天气")] == [weather]
    assert {m["id"] for m in search(api, scope, "很好")} == {phone, weather}
    assert search(api, scope, "葡萄") == []
    assert [m["id"] for m in search(api, scope, "香蕉")] == [banana]


def test_search_limit_and_session(api, scope):
    a = add(api, scope, msgs(*[f"note number {i}" for i in range(4)]), session="a")
    b = add(api, scope, msgs(*[f"note item {i}" for i in range(3)]), session="b")
    assert len(search(api, scope, "note")) == 5  # default limit
    assert len(search(api, scope, "note", limit=2)) == 2
    assert {m["id"] for m in search(api, scope, "note", limit=100)} == set(a + b)
    assert {m["id"] for m in search(api, scope, "note", session_id="b")} == set(b)
    assert all(m["session_id"] == "a" for m in search(api, scope, "note", session_id="a", limit=100))
    for fields in ({"limit": 0}, {"limit": 101}, {"limit": "5"}, {"query": ""}, {"query": "x" * 2049}, {"query": None}):
        body = scope.body(**{"query": "note", **fields})
        answer = api.post("/v3/conversation/search", body)
        assert answer.status == 400, (fields, answer.body)
        assert answer.message.startswith(f"{next(iter(fields))}: ")


# ---- delete ---------------------------------------------------------------------------------------


def test_delete_ids_trimmed_deduplicated_in_request_order(api, scope):
    ids = add(api, scope, msgs("a", "b", "c", "d"))
    unknown = "msg-" + "0" * 26
    data = delete(
        api,
        scope,
        message_ids=[f"  {ids[2]} ", ids[0], "", "   ", ids[2], unknown, f"\t{ids[0]}", "not-a-message", unknown],
    )
    assert data["deleted_ids"] == [ids[2], ids[0]]
    assert data["deleted_count"] == 2
    assert data["not_found_ids"] == [unknown, "not-a-message"]
    assert data["deleted_session_ids"] == []
    assert len(data["audit_ids"]) >= 1 and all(isinstance(a, str) and a for a in data["audit_ids"])
    assert ids_of(query(api, scope)) == [ids[3], ids[1]]
    again = delete(api, scope, message_ids=[ids[2]])
    assert again == {
        "deleted_count": 0,
        "deleted_ids": [],
        "deleted_session_ids": [],
        "not_found_ids": [ids[2]],
        "records_deleted": 0,
        "files_deleted": 0,
        "audit_ids": [],
    }
    assert count(api, scope) == 2


def test_delete_by_session_counts_each_message_once(api, scope):
    s1 = add(api, scope, msgs("one", "two", "three"), session="s1")
    s2 = add(api, scope, msgs("four"), session="s2")
    keep = add(api, scope, msgs("five"), session="keep")
    data = delete(api, scope, message_ids=[s1[1], s2[0]], session_ids=[" s1 ", "ghost", "s1", "", "s2"])
    assert data["deleted_count"] == 4
    assert data["deleted_ids"] == [s1[1], s2[0]]
    assert data["deleted_session_ids"] == ["s1", "s2"]
    assert data["not_found_ids"] == ["ghost"]
    assert data["audit_ids"]
    assert ids_of(query(api, scope)) == keep
    assert count(api, scope) == 1 and count(api, scope, session_id="s1") == 0
    assert search(api, scope, "one two three four") == []


def test_delete_limits_count_raw_items(api, scope):
    ids = add(api, scope, msgs("a"))
    too_many = api.post("/v3/conversation/delete", scope.body(message_ids=[ids[0]] * 5001))
    assert too_many.status == 400 and too_many.message.startswith("message_ids: "), too_many.body
    sessions = api.post("/v3/conversation/delete", scope.body(session_ids=["s1"] * 101))
    assert sessions.status == 400 and sessions.message.startswith("session_ids: "), sessions.body
    assert count(api, scope) == 1
    for body in (
        {},
        {"message_ids": []},
        {"message_ids": ["", "  ", "\t"]},
        {"message_ids": [" "], "session_ids": [""]},
        {"message_ids": None, "session_ids": None},
    ):
        answer = api.post("/v3/conversation/delete", scope.body(**body))
        assert answer.status == 400, (body, answer.body)
    for body in ({"message_ids": ids[0]}, {"message_ids": [5]}, {"session_ids": "s1"}):
        answer = api.post("/v3/conversation/delete", scope.body(**body))
        assert answer.status == 400 and answer.message.startswith(next(iter(body))), (body, answer.body)
    assert count(api, scope) == 1
    data = delete(api, scope, message_ids=[ids[0]] * 5000, session_ids=["s1"] * 100)
    assert data["deleted_count"] == 1 and data["deleted_ids"] == ids and data["deleted_session_ids"] == ["s1"]
    assert count(api, scope) == 0


def test_delete_outside_scope_is_reported_like_unknown_and_kept(api, scope):
    other_user = sibling(scope, user_id=scope.user_id + "-2")
    other_agent = sibling(scope, agent_id=scope.agent_id + "x")
    other_team = sibling(scope, team_id=scope.team_id + "x")
    foreign = [
        add(api, s, msgs(f"secret of {s.user_id}"), session="s1")[0] for s in (other_user, other_agent, other_team)
    ]
    mine = add(api, scope, msgs("mine"), session="s1")
    unknown = "msg-0123456789abcdef0123456789"
    for victim in foreign:
        data = delete(api, scope, message_ids=[victim])
        reference = delete(api, scope, message_ids=[unknown])
        assert data == dict(reference, not_found_ids=[victim])
        assert data == {
            "deleted_count": 0,
            "deleted_ids": [],
            "deleted_session_ids": [],
            "not_found_ids": [victim],
            "records_deleted": 0,
            "files_deleted": 0,
            "audit_ids": [],
        }
    for owner, victim in zip((other_user, other_agent, other_team), foreign, strict=True):
        assert ids_of(query(api, owner)) == [victim]
        assert count(api, owner) == 1
    # the other scopes' sessions are untouched by this user's session delete
    data = delete(api, scope, session_ids=["s1"])
    assert data["deleted_count"] == 1 and data["deleted_session_ids"] == ["s1"]
    for owner, victim in zip((other_user, other_agent, other_team), foreign, strict=True):
        assert ids_of(query(api, owner)) == [victim]
    assert mine[0] not in ids_of(query(api, scope))


def test_delete_is_never_narrowed_by_session(api, scope):
    ids = add(api, scope, msgs("in s1"), session="s1")
    data = delete(api, scope, message_ids=ids, session_id="other")
    assert data["deleted_ids"] == ids and data["deleted_count"] == 1
    assert count(api, scope) == 0


def test_delete_with_task_only_touches_that_task(api, scope):
    t1 = add(api, scope, msgs("task one"), task_id="t1")
    t2 = add(api, scope, msgs("task two"), task_id="t2")
    data = delete(api, scope, message_ids=[t1[0], t2[0]], task_id="t2")
    assert data["deleted_ids"] == t2 and data["not_found_ids"] == t1
    assert ids_of(query(api, scope, task_id="t1")) == t1


def test_deleted_message_never_appears_again(api, scope):
    ids = add(api, scope, msgs("alpha beta", "alpha gamma", "delta"), session="s1")
    assert {m["id"] for m in search(api, scope, "alpha")} == set(ids[:2])
    delete(api, scope, message_ids=[ids[0]])
    assert ids[0] not in ids_of(query(api, scope))
    assert ids[0] not in ids_of(query(api, scope, session_id="s1"))
    assert [m["id"] for m in search(api, scope, "alpha beta")] == [ids[1]]
    assert count(api, scope) == 2 and count(api, scope, session_id="s1") == 2
    assert count(api, scope, time_start="2000-01-01T00:00:00Z") == 2
    assert query(api, scope)["total"] == 2


# ---- isolation ------------------------------------------------------------------------------------


def test_reads_are_scoped_by_team_agent_user_and_task(api, scope):
    other_user = sibling(scope, user_id=scope.user_id + "-2")
    other_agent = sibling(scope, agent_id=scope.agent_id + "x")
    plain = add(api, scope, msgs("shared word plain"))
    t1 = add(api, scope, msgs("shared word task"), task_id="t1")
    others = [add(api, s, msgs("shared word other"))[0] for s in (other_user, other_agent)]
    assert set(ids_of(query(api, scope))) == set(plain + t1)
    assert count(api, scope) == 2
    assert ids_of(query(api, scope, task_id="t1")) == t1
    assert query(api, scope, task_id="t1")["total"] == 1
    assert count(api, scope, task_id="t1") == 1 and count(api, scope, task_id="t2") == 0
    assert [m["id"] for m in search(api, scope, "shared", task_id="t1")] == t1
    assert query(api, scope, task_id="t2") == {"messages": [], "total": 0}
    task_header = api.post("/v3/conversation/query", scope.body(), headers={"x-tdai-task-id": "t1"})
    assert ids_of(task_header.data) == t1
    assert task_header.data["messages"][0]["task_id"] == "t1"
    assert {m["id"] for m in search(api, scope, "shared word", limit=100)} == set(plain + t1)
    for owner, own in zip((other_user, other_agent), others, strict=True):
        assert ids_of(query(api, owner)) == [own]
        assert [m["id"] for m in search(api, owner, "shared")] == [own]
    fresh = make_scope()
    assert query(api, fresh) == {"messages": [], "total": 0}
    assert count(api, fresh) == 0 and search(api, fresh, "shared") == []


def test_isolation_from_headers(api, scope):
    headers = {
        "x-tdai-team-id": scope.team_id,
        "x-tdai-agent-id": scope.agent_id,
        "x-tdai-user-id": scope.user_id,
        "x-tdai-session-id": "hs",
    }
    answer = api.post("/v3/conversation/add", {"messages": msgs("via headers")}, headers=headers)
    assert answer.status == 200, answer.body
    got = query(api, scope)
    assert ids_of(got) == answer.data["accepted_ids"] and got["messages"][0]["session_id"] == "hs"
    missing = api.post("/v3/conversation/add", {"messages": msgs("x"), "team_id": scope.team_id, "session_id": "s"})
    assert missing.status == 422 and missing.message == "missing isolation fields: agent_id, user_id"


# ---- Idempotency-Key ------------------------------------------------------------------------------


def key():
    return "idem-" + uuid.uuid4().hex


def test_idempotent_retry_returns_first_data_and_writes_nothing(api, scope):
    k = key()
    body = scope.body(session_id="s1", messages=msgs("once", "twice"))
    first = api.post("/v3/conversation/add", body, headers={"Idempotency-Key": k})
    assert first.status == 200, first.body
    retry = api.post("/v3/conversation/add", dict(reversed(list(body.items()))), headers={"Idempotency-Key": k})
    assert retry.status == 200, retry.body
    assert retry.data == first.data
    assert retry.body["request_id"] != first.body["request_id"]
    assert count(api, scope) == 2
    assert set(ids_of(query(api, scope))) == set(first.data["accepted_ids"])
    changed = api.post(
        "/v3/conversation/add", dict(body, messages=msgs("once", "other")), headers={"Idempotency-Key": k}
    )
    assert changed.status == 422 and changed.body["code"] == 422, changed.body
    assert count(api, scope) == 2
    # field validation (400) answers before idempotency (422)
    invalid = api.post("/v3/conversation/add", dict(body, messages=[]), headers={"Idempotency-Key": k})
    assert invalid.status == 400
    other = api.post("/v3/conversation/add", body, headers={"Idempotency-Key": key()})
    assert other.status == 200 and other.data["accepted_ids"] != first.data["accepted_ids"]
    assert count(api, scope) == 4


def test_idempotency_keys_are_scoped_per_user(api, scope):
    k = key()
    neighbour = sibling(scope, user_id=scope.user_id + "-n")
    first = api.post(
        "/v3/conversation/add", scope.body(session_id="s", messages=msgs("hi")), headers={"Idempotency-Key": k}
    )
    second = api.post(
        "/v3/conversation/add", neighbour.body(session_id="s", messages=msgs("hi")), headers={"Idempotency-Key": k}
    )
    assert first.status == second.status == 200, (first.body, second.body)
    assert first.data["accepted_ids"] != second.data["accepted_ids"]
    assert count(api, scope) == 1 and count(api, neighbour) == 1
    assert ids_of(query(api, neighbour)) == second.data["accepted_ids"]
    # and per API key: another caller's identical request with the same key is its own write
    created = api.post("/v3/admin/keys/create", {"role": "writer", "team_ids": [scope.team_id]})
    assert created.status == 200, created.body
    third = api.with_key(created.data["api_key"]).post(
        "/v3/conversation/add", scope.body(session_id="s", messages=msgs("hi")), headers={"Idempotency-Key": k}
    )
    assert third.status == 200 and third.data["accepted_ids"] != first.data["accepted_ids"]
    assert count(api, scope) == 2


@pytest.mark.parametrize("bad", ["k" * 256, "tab\there", "del\x7f", "ключ", ""])
def test_invalid_idempotency_key(api, scope, bad):
    answer = api.post(
        "/v3/conversation/add", scope.body(session_id="s", messages=msgs("x")), headers={"Idempotency-Key": bad}
    )
    assert answer.status == 400 and answer.message.startswith("Idempotency-Key: "), answer.body
    assert count(api, scope) == 0


def test_longest_printable_idempotency_key_is_accepted(api, scope):
    k = "~ !" + "k" * 252
    assert len(k) == 255
    body = scope.body(session_id="s", messages=msgs("x"))
    first = api.post("/v3/conversation/add", body, headers={"Idempotency-Key": k})
    again = api.post("/v3/conversation/add", body, headers={"Idempotency-Key": k})
    assert first.status == again.status == 200 and first.data == again.data
    assert count(api, scope) == 1


def test_concurrent_idempotent_retries_write_once(api, scope):
    k = key()
    body = scope.body(session_id="s1", messages=msgs("race a", "race b", "race c"))

    def send(_):
        return api.post("/v3/conversation/add", body, headers={"Idempotency-Key": k})

    with ThreadPoolExecutor(max_workers=6) as pool:
        answers = list(pool.map(send, range(6)))
    done = [a for a in answers if a.status == 200]
    busy = [a for a in answers if a.status != 200]
    assert done, [a.body for a in answers]
    assert all(a.data == done[0].data for a in done)
    assert all(a.status == 409 and a.body["retryable"] is True and a.body["code"] == 409 for a in busy), [
        a.body for a in busy
    ]
    final = send(None)
    assert final.status == 200 and final.data == done[0].data
    assert count(api, scope) == 3
    assert set(ids_of(query(api, scope))) == set(done[0].data["accepted_ids"])


# ---- exact counters -------------------------------------------------------------------------------


def test_counts_stay_exact_under_concurrent_deletes(api, scope):
    ids = add(api, scope, msgs(*[f"m{i}" for i in range(12)]), session="s1")
    ids += add(api, scope, msgs("x", "y"), session="s2")
    doomed = ids[:8]

    def remove(order):
        return delete(api, scope, message_ids=order, session_ids=["s2"])

    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(remove, [doomed, list(reversed(doomed))]))
    assert sum(r["deleted_count"] for r in results) == 10
    removed = [i for r in results for i in r["deleted_ids"]]
    assert sorted(removed) == sorted(doomed)
    for r in results:
        assert sorted(r["deleted_ids"] + [i for i in r["not_found_ids"] if i != "s2"]) == sorted(doomed)
    remaining = query(api, scope, limit=100)
    assert ids_of(remaining) == list(reversed(ids[8:12]))
    assert remaining["total"] == 4 == count(api, scope)
    assert count(api, scope, session_id="s1") == 4 and count(api, scope, session_id="s2") == 0
    got = api.post("/v3/memory/get", {"memory_id": scope.memory_id})
    assert got.status == 200 and got.data["counts"]["l0"] == 4


def test_a_reversed_range_is_named_next_to_field_errors(api, scope):
    answer = api.post(
        "/v3/conversation/query",
        scope.body(limit=0, time_start="2024-01-02T00:00:00Z", time_end="2024-01-01T00:00:00Z"),
    )
    assert answer.status == 400
    assert answer.message == "limit: must be at least 1; (root): time_start must not be after time_end"
    bad_date = api.post("/v3/conversation/count", scope.body(time_start="2024-13-01T00:00:00Z"))
    assert bad_date.status == 400 and bad_date.message == "time_start: is not a valid date and time"
