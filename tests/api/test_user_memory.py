"""User-memory delete: one end user's L0/L1 in a memory, or exactly one item of theirs, by id;
scope and validation; audit without the user id; the DeleteUserMemory alias and its answer shape."""

from __future__ import annotations

import hashlib
import json
import re

import pytest
from helpers import TABLES, Scope, make_scope, own_stack, traces_of

ROUTE = "/v3/user-memory/delete"
ALIAS = "/v2/memory"
ALIAS_QUERY = {"Action": ["DeleteUserMemory"]}
REQUEST_ID = re.compile(r"^req-[0-9a-f]{16}$")
ANSWER_FIELDS = {"memory_id", "user_id", "l0_deleted", "l1_deleted", "audit_ids"}
ONE_ITEM_FIELDS = {"deleted_count", "deleted_ids", "not_found_ids", "audit_ids"}

# Erasure is checked by reading storage whole (helpers.traces_of): a stack of this module's own
# keeps it small.
stack, api, hooks = own_stack()


def ok(answer):
    assert answer.status == 200, answer.body
    assert answer.body["code"] == 0, answer.body
    return answer.data


def new_key(api, role, team_ids):
    return api.with_key(ok(api.post("/v3/admin/keys/create", {"role": role, "team_ids": team_ids}))["api_key"])


def add_messages(api, scope, contents, session="s1", **fields):
    body = scope.body(session_id=session, messages=[{"role": "user", "content": c} for c in contents], **fields)
    return ok(api.post("/v3/conversation/add", body))["accepted_ids"]


def add_record(api, scope, content, **fields):
    return ok(api.post("/v3/atomic/add", scope.body(content=content, **fields)))


def messages_of(api, scope, **fields):
    return ok(api.post("/v3/conversation/query", scope.body(limit=100, **fields)))


def records_of(api, scope):
    return ok(api.post("/v3/atomic/query", scope.body(limit=100)))


def count_l0(api, scope):
    return ok(api.post("/v3/conversation/count", scope.body()))["total"]


def count_l1(api, scope):
    return ok(api.post("/v3/atomic/count", scope.body()))["total"]


def counts(api, memory_id):
    return ok(api.post("/v3/memory/get", {"memory_id": memory_id}))["counts"]


def erase(api, memory_id, user_id, **fields):
    return api.post(ROUTE, {"memory_id": memory_id, "user_id": user_id, **fields})


def user_target(user_id):
    return hashlib.sha256(user_id.encode("utf-8")).hexdigest()[:16]


def audit_events(api, memory_id, action="user_memory_delete"):
    return ok(api.post("/v3/audit/query", {"memory_id": memory_id, "action": action, "limit": 100}))["events"]


@pytest.fixture
def two_users(api, scope):
    """One memory with users A (scope) and B, both with L0 and L1, and the agent's L2 and L3."""
    b = Scope(scope.team_id, scope.agent_id, scope.user_id + "-b")
    seeded = {
        "a_msgs": add_messages(api, scope, ["a one", "a two", "a three"])
        + add_messages(api, scope, ["a in a task"], session="s2", task_id="t1"),
        "a_atoms": [
            add_record(api, scope, "a likes tea")["id"],
            add_record(api, scope, "a in task", task_id="t1")["id"],
        ],
        "b_msgs": add_messages(api, b, ["b one", "b two"]),
        "b_atoms": [add_record(api, b, "b likes coffee")["id"]],
    }
    ok(api.post("/v3/scenario/write", scope.body(path="shared.md", content="agent scene")))
    ok(api.post("/v3/core/write", scope.body(content="agent persona")))
    assert counts(api, scope.memory_id) == {"l0": 6, "l1": 3, "l2": 1, "l3": 1}
    return scope, b, seeded


# ---- a whole user ---------------------------------------------------------------------------------


def test_erasing_one_user_leaves_the_other_and_the_agent_intact(api, two_users):
    a, b, seeded = two_users
    b_before = (messages_of(api, b), records_of(api, b))
    data = ok(erase(api, a.memory_id, a.user_id))
    assert set(data) >= ANSWER_FIELDS
    assert data["memory_id"] == a.memory_id and data["user_id"] == a.user_id
    assert data["l0_deleted"] == 4 and data["l1_deleted"] == 2
    assert isinstance(data["audit_ids"], list) and data["audit_ids"]

    assert messages_of(api, a) == {"messages": [], "total": 0}
    assert messages_of(api, a, task_id="t1") == {"messages": [], "total": 0}
    assert records_of(api, a) == {"items": [], "total": 0}
    assert count_l0(api, a) == 0 and count_l1(api, a) == 0
    assert ok(api.post("/v3/conversation/search", a.body(query="tea one")))["messages"] == []
    assert (messages_of(api, b), records_of(api, b)) == b_before
    assert ok(api.post("/v3/scenario/read", a.body(path="shared.md")))["content"].endswith("agent scene")
    assert ok(api.post("/v3/core/read", b.body()))["content"] == "agent persona"
    assert counts(api, a.memory_id) == {"l0": 2, "l1": 1, "l2": 1, "l3": 1}

    # erased from storage, guards included: the same record is new again
    assert traces_of(seeded["a_msgs"] + seeded["a_atoms"], terms=False) == []
    kept = seeded["b_msgs"] + seeded["b_atoms"]
    assert traces_of(kept, ["tables"], terms=False, tables=[TABLES["items"]]) == sorted(kept)
    assert add_record(api, a, "a likes tea")["created"] is True

    # again: nothing left, zero counts
    again = ok(erase(api, a.memory_id, a.user_id))
    assert again["l0_deleted"] == 0 and again["l1_deleted"] == 1  # the record just re-added
    assert ok(erase(api, a.memory_id, "never-wrote-anything"))["l0_deleted"] == 0


# ---- exactly one item -----------------------------------------------------------------------------


def test_one_message_or_record_by_id(api, two_users):
    a, b, seeded = two_users
    msg, atom = seeded["a_msgs"][1], seeded["a_atoms"][0]
    data = ok(erase(api, a.memory_id, a.user_id, content_ids=[f" {msg} "]))
    assert set(data) >= ONE_ITEM_FIELDS
    assert data["deleted_count"] == 1 and data["deleted_ids"] == [msg] and data["not_found_ids"] == []
    assert data["audit_ids"]
    assert [m["id"] for m in messages_of(api, a)["messages"]] == [i for i in reversed(seeded["a_msgs"]) if i != msg]
    assert count_l0(api, a) == 3 and count_l1(api, a) == 2

    data = ok(erase(api, a.memory_id, a.user_id, content_ids=[atom]))
    assert data["deleted_count"] == 1 and data["deleted_ids"] == [atom] and data["not_found_ids"] == []
    assert [r["id"] for r in records_of(api, a)["items"]] == [seeded["a_atoms"][1]]
    assert count_l1(api, a) == 1
    assert add_record(api, a, "a likes tea")["created"] is True  # its natural-key guard went too

    # the same id again, another user's id, an unknown id: not found, nothing removed
    for other in (msg, seeded["b_msgs"][0], seeded["b_atoms"][0], "msg-0000", "atom-0000", "something"):
        data = ok(erase(api, a.memory_id, a.user_id, content_ids=[other]))
        assert data["deleted_count"] == 0 and data["deleted_ids"] == [] and data["not_found_ids"] == [other]
        assert data["audit_ids"] == []
    assert count_l0(api, b) == 2 and count_l1(api, b) == 1
    assert ok(api.post("/v3/scenario/count", a.body()))["total"] == 1
    assert ok(api.post("/v3/core/count", a.body()))["total"] == 1
    assert traces_of([msg, atom], terms=False) == []


def test_an_id_naming_a_guard_or_counter_removes_nothing(api, scope):
    """The partitions also hold natural-key guards and counters: a crafted id must not reach them."""
    from memory_hub.domain.atomic import natural_key

    record = add_record(api, scope, "hello")
    add_messages(api, scope, ["hi"])
    guard = "nk\x1f" + natural_key(None, "episodic", "", "hello")
    for crafted in (guard, f"L0\x1f{scope.user_id}", f"L1\x1f{scope.user_id}"):
        answer = erase(api, scope.memory_id, scope.user_id, content_ids=[crafted])
        if answer.status == 400:
            continue
        data = ok(answer)
        assert data["deleted_count"] == 0 and data["deleted_ids"] == [] and data["not_found_ids"] == [crafted]
    again = add_record(api, scope, "hello")
    assert again["created"] is False and again["id"] == record["id"] and again["reinforced_count"] == 2
    assert count_l1(api, scope) == 1 and count_l0(api, scope) == 1


# ---- validation and scope -------------------------------------------------------------------------


@pytest.mark.parametrize("content_ids", [None, [], ["msg-1", "msg-2"], [" "], [""], "msg-1", [1]])
def test_content_ids_must_hold_exactly_one_id(api, scope, content_ids):
    ids = add_messages(api, scope, ["survives"])
    answer = erase(api, scope.memory_id, scope.user_id, content_ids=content_ids)
    assert answer.status == 400 and answer.body["code"] == 400, answer.body
    assert "content_ids" in answer.body["message"], answer.body
    assert [m["id"] for m in messages_of(api, scope)["messages"]] == ids


@pytest.mark.parametrize("content_ids", [None, [], ["msg-1", "msg-2"], [" "]])
def test_a_bad_content_ids_is_named_as_the_field(api, scope, content_ids):
    answer = erase(api, scope.memory_id, scope.user_id, content_ids=content_ids)
    assert answer.status == 400, answer.body
    assert answer.body["message"].startswith("content_ids: "), answer.body


@pytest.mark.parametrize(
    "case",
    [
        "nothing",
        "no user_id",
        "no memory_id",
        "user_id null",
        "control character",
        "257 chars",
        "empty user_id",
        "blank user_id",
        "user_id not a string",
    ],
)
def test_memory_id_and_user_id_are_required_and_checked(api, scope, case):
    add_messages(api, scope, ["survives"])
    body = {"memory_id": scope.memory_id, "user_id": scope.user_id}
    if case == "nothing":
        body = {}
    elif case == "no user_id":
        del body["user_id"]
    elif case == "no memory_id":
        del body["memory_id"]
    elif case == "user_id null":
        body["user_id"] = None
    elif case == "control character":
        body["user_id"] = scope.user_id + "\x01"
    elif case == "257 chars":
        body["user_id"] = "u" * 257
    elif case == "empty user_id":
        body["user_id"] = ""
    elif case == "blank user_id":  # no user is blank (the data routes refuse one): not a no-op with audit events
        body["user_id"] = " \u3000"
    else:
        body["user_id"] = 7
    answer = api.post(ROUTE, body)
    assert answer.status == 400 and answer.body["code"] == 400, answer.body
    assert count_l0(api, scope) == 1


def test_unknown_memory_and_foreign_memory(api, scope):
    add_messages(api, scope, ["survives"])
    unknown = f"chat_memory-{scope.team_id}-nosuchagent"
    answer = erase(api, unknown, scope.user_id)
    assert answer.status == 404 and answer.body["code"] == 404, answer.body
    team_admin = new_key(api, "admin", [scope.team_id])
    assert erase(team_admin, unknown, scope.user_id).status == 403
    stranger = new_key(api, "admin", [make_scope().team_id])
    answer = erase(stranger, scope.memory_id, scope.user_id)
    assert answer.status == 403, answer.body
    assert erase(stranger, scope.memory_id, scope.user_id, content_ids=["msg-1"]).status == 403
    for role in ("writer", "reader"):
        assert erase(new_key(api, role, ["*"]), scope.memory_id, scope.user_id).status == 403
    assert count_l0(api, scope) == 1
    # the team's own admin may
    assert ok(erase(team_admin, scope.memory_id, scope.user_id))["l0_deleted"] == 1


# ---- audit ----------------------------------------------------------------------------------------


def test_audit_names_a_hash_of_the_user_never_the_user(api, scope):
    user = Scope(scope.team_id, scope.agent_id, "Jane Doe <jane@example.com> " + scope.user_id)
    msg = add_messages(api, user, ["hello"])[0]
    add_record(api, user, "jane likes tea")
    one = ok(erase(api, scope.memory_id, user.user_id, content_ids=[msg]))
    whole = ok(erase(api, scope.memory_id, user.user_id))
    assert whole["l0_deleted"] == 0 and whole["l1_deleted"] == 1
    events = {e["event_id"]: e for e in audit_events(api, scope.memory_id)}
    assert set(one["audit_ids"]) | set(whole["audit_ids"]) <= set(events)
    for event in events.values():
        assert event["action"] == "user_memory_delete" and event["actor"] == "bootstrap"
        assert event["target"] == user_target(user.user_id)
        assert event["memory_id"] == scope.memory_id
    by_layer = {}
    for event_id in whole["audit_ids"]:
        by_layer[events[event_id]["layer"]] = events[event_id]["count"]
    assert by_layer.get("L1") == 1 and by_layer.get("L0", 0) == 0
    assert [events[i]["layer"] for i in one["audit_ids"]] == ["L0"]
    assert [events[i]["count"] for i in one["audit_ids"]] == [1]
    everything = json.dumps(audit_events(api, scope.memory_id, None), ensure_ascii=False)
    assert user.user_id not in everything and "jane@example.com" not in everything
    assert traces_of(["jane@example.com"], ["tables"], terms=False, tables=[TABLES["audit"]]) == []


# ---- the DeleteUserMemory alias -------------------------------------------------------------------


def alias(api, body, query=ALIAS_QUERY):
    return api.post(ALIAS, body, query=query)


def test_alias_erases_a_user_or_one_item(api, two_users):
    a, b, seeded = two_users
    first = seeded["a_msgs"][0]
    answer = alias(api, {"appId": a.memory_id, "userMemoryId": a.user_id, "memoryContentId": [first]})
    assert answer.status == 200, answer.body
    assert set(answer.body) == {"requestId", "result"} and answer.body["result"] is True
    assert REQUEST_ID.match(answer.body["requestId"])
    assert answer.headers.get("x-request-id") == answer.body["requestId"]
    content_type = answer.headers.get("Content-Type", answer.headers.get("content-type", ""))
    assert content_type.startswith("application/json")
    assert count_l0(api, a) == 3 and count_l1(api, a) == 2

    answer = alias(api, {"appId": a.memory_id, "userMemoryId": a.user_id})
    assert answer.status == 200 and answer.body["result"] is True, answer.body
    assert count_l0(api, a) == 0 and count_l1(api, a) == 0
    assert count_l0(api, b) == 2 and count_l1(api, b) == 1
    assert counts(api, a.memory_id) == {"l0": 2, "l1": 1, "l2": 1, "l3": 1}
    assert {e["target"] for e in audit_events(api, a.memory_id)} == {user_target(a.user_id)}


@pytest.mark.parametrize(
    "case, status",
    [
        ("bad key", 401),
        ("unknown memory", 404),
        ("content id null", 400),
        ("two content ids", 400),
        ("empty content ids", 400),
        ("missing user", 400),
        ("blank user", 400),
        ("writer key", 403),
    ],
)
def test_alias_errors(api, scope, case, status):
    ids = add_messages(api, scope, ["survives"])
    body = {"appId": scope.memory_id, "userMemoryId": scope.user_id}
    who = api
    if case == "bad key":
        who = api.with_key("mhk_000000000000_not-a-real-key-000000000000000000")
    elif case == "unknown memory":
        body["appId"] = f"chat_memory-{scope.team_id}-nosuchagent"
    elif case == "content id null":
        body["memoryContentId"] = None
    elif case == "two content ids":
        body["memoryContentId"] = ids + ids
    elif case == "empty content ids":
        body["memoryContentId"] = []
    elif case == "missing user":
        del body["userMemoryId"]
    elif case == "blank user":
        body["userMemoryId"] = "  "
    elif case == "writer key":
        who = new_key(api, "writer", ["*"])
    answer = alias(who, body)
    assert answer.status == status, answer.body
    assert set(answer.body) == {"requestId", "code", "message"}, answer.body
    assert answer.body["code"] == status and isinstance(answer.body["code"], int)
    named = {part.partition(":")[0].partition(".")[0] for part in answer.body["message"].split("; ")}
    assert not named & {"memory_id", "user_id", "content_ids"}, answer.body  # the alias's own names
    assert REQUEST_ID.match(answer.body["requestId"]) and answer.body["message"]
    assert count_l0(api, scope) == 1


def test_alias_errors_name_the_alias_fields(api):
    """A 403 for a memory outside the key's teams and a 404 for an unknown one name ``appId``."""
    team_key = new_key(api, "admin", ["alias-team"])
    answer = alias(team_key, {"appId": "chat_memory-other-agent", "userMemoryId": "u"})
    assert answer.status == 403 and answer.body["message"].startswith("appId: "), answer.body
    answer = alias(api, {"appId": "chat_memory-nosuchteam-nosuchagent", "userMemoryId": "u"})
    assert answer.status == 404 and answer.body["message"].startswith("appId: "), answer.body
