"""Memory assets (create, get, list, update — not delete), automatic creation, two pairs that
spell one memory_id, and exact per-layer counters."""

from __future__ import annotations

import re
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest
from helpers import Scope, make_scope

TIME = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")
ASSET_FIELDS = {
    "memory_id",
    "team_id",
    "agent_id",
    "owner",
    "name",
    "visibility",
    "acl",
    "bindings",
    "status",
    "retention_days",
    "formation",
    "created_at",
    "updated_at",
    "last_cleared_at",
}


def new_key(api, role, team_ids):
    answer = api.post("/v3/admin/keys/create", {"role": role, "team_ids": team_ids})
    assert answer.status == 200, answer.body
    return answer.data["key_id"], api.with_key(answer.data["api_key"])


@pytest.fixture(scope="module")
def writer(api):
    """A writer key for every team: (key_id, api)."""
    return new_key(api, "writer", ["*"])


def ok(answer):
    assert answer.status == 200, answer.body
    return answer.data


def get(api, memory_id):
    return api.post("/v3/memory/get", {"memory_id": memory_id})


def create(api, scope, **fields):
    return api.post("/v3/memory/create", {"team_id": scope.team_id, "agent_id": scope.agent_id, **fields})


def sibling(scope, **change):
    return Scope(**{"team_id": scope.team_id, "agent_id": scope.agent_id, "user_id": scope.user_id, **change})


# ---- create ---------------------------------------------------------------------------------------


def test_create_is_admin_only_and_idempotent(api, scope, writer):
    _, reader = new_key(api, "reader", [scope.team_id])
    for who in (writer[1], reader):
        denied = create(who, scope)
        assert denied.status == 403 and denied.body["code"] == 403, denied.body
    assert get(api, scope.memory_id).status == 404
    acl = [{"principal": "team:ops", "permissions": ["read", "write"]}]
    bindings = [{"agent_id": "helper", "injection_mode": "prepend", "priority": 2}, {"agent_id": "other"}]
    made = ok(create(api, scope, name="Support memory", visibility="team", acl=acl, bindings=bindings))
    assert set(made) == ASSET_FIELDS
    assert made["memory_id"] == f"chat_memory-{scope.team_id}-{scope.agent_id}" == scope.memory_id
    assert (made["team_id"], made["agent_id"], made["owner"]) == (scope.team_id, scope.agent_id, "bootstrap")
    assert (made["name"], made["visibility"], made["acl"]) == ("Support memory", "team", acl)
    assert made["bindings"][0] == bindings[0] and made["bindings"][1]["agent_id"] == "other"
    assert made["retention_days"] is None and made["last_cleared_at"] is None
    assert made["formation"] == "records"  # the default: L1 only
    assert TIME.match(made["created_at"]) and TIME.match(made["updated_at"])
    again = ok(create(api, scope, name="Another name", visibility="public"))
    assert again == made  # an existing asset is returned unchanged
    got = ok(get(api, scope.memory_id))
    assert {k: got[k] for k in ASSET_FIELDS} == made
    assert got["counts"] == {"l0": 0, "l1": 0, "l2": 0, "l3": 0}


def test_create_validation_and_team_scope(api, scope):
    for fields, field in (
        ({"visibility": "secret"}, "visibility"),
        ({"acl": [{"principal": "p", "permissions": ["delete"]}]}, "acl"),
        ({"acl": [{"principal": "p"}]}, "acl"),
        ({"acl": {"principal": "p"}}, "acl"),
        ({"bindings": [{"agent_id": "客服"}]}, "bindings"),
        ({"bindings": [{"agent_id": "a", "priority": "1"}]}, "bindings"),
        ({"name": 5}, "name"),
        ({"agent_id": "客服"}, "agent_id"),
        ({"team_id": "a b"}, "team_id"),
    ):
        answer = create(api, scope, **fields)
        assert answer.status == 400 and answer.message.startswith(field), (fields, answer.body)
    assert get(api, scope.memory_id).status == 404
    _, team_admin = new_key(api, "admin", [scope.team_id])
    other = make_scope()
    assert create(team_admin, other).status == 403
    assert get(api, other.memory_id).status == 404
    made = ok(create(team_admin, scope, name=None))
    assert made["name"] is None and made["owner"] != "bootstrap"


# ---- automatic creation ---------------------------------------------------------------------------

WRITES = {
    "conversation/add": {"session_id": "s", "messages": [{"role": "user", "content": "hi"}]},
    "atomic/add": {"content": "a fact"},
    "scenario/write": {"path": "notes/a.md", "content": "scene"},
    "core/write": {"content": "persona"},
}


@pytest.mark.parametrize("route", sorted(WRITES))
def test_first_write_creates_the_asset_owned_by_the_writer(api, scope, writer, route):
    key_id, as_writer = writer
    ok(as_writer.post(f"/v3/{route}", scope.body(**WRITES[route])))
    asset = ok(get(api, scope.memory_id))
    assert (asset["owner"], asset["team_id"], asset["agent_id"]) == (key_id, scope.team_id, scope.agent_id)
    assert asset["status"] == "active" and asset["retention_days"] is None
    expected = {"l0": 0, "l1": 0, "l2": 0, "l3": 0}
    expected[{"conversation/add": "l0", "atomic/add": "l1", "scenario/write": "l2", "core/write": "l3"}[route]] = 1
    assert asset["counts"] == expected
    # a second writer does not take the asset over
    ok(api.post(f"/v3/{route}", sibling(scope, user_id=scope.user_id + "-2").body(**WRITES[route])))
    assert ok(get(api, scope.memory_id))["owner"] == key_id


READS = {
    "conversation/query": {},
    "conversation/search": {"query": "hi"},
    "conversation/count": {},
    "conversation/delete": {"message_ids": ["msg-x"], "session_ids": ["s"]},
    "atomic/query": {},
    "atomic/search": {"query": "hi"},
    "atomic/count": {},
    "atomic/delete": {"ids": ["atom-x"]},
    "scenario/ls": {},
    "scenario/read": {"path": "a.md"},
    "scenario/count": {},
    "scenario/rm": {"path": "a.md"},
    "core/read": {},
    "core/count": {},
}


def test_reads_counts_and_deletes_never_create_an_asset(api, scope, writer):
    answers = {route: ok(writer[1].post(f"/v3/{route}", scope.body(**body))) for route, body in READS.items()}
    assert get(api, scope.memory_id).status == 404
    assert ok(api.post("/v3/memory/list", {"team_id": scope.team_id})) == {"items": []}
    # and they answer as empty
    assert answers["conversation/query"] == {"messages": [], "total": 0}
    assert answers["conversation/search"] == {"messages": [], "mode_used": "keyword"}  # meaning is off here
    assert answers["conversation/count"] == {"total": 0}
    assert answers["atomic/query"] == {"items": [], "total": 0}
    assert answers["atomic/search"] == {"items": [], "mode_used": "keyword"}
    assert answers["atomic/count"] == {"total": 0}
    assert answers["conversation/delete"]["deleted_count"] == 0
    assert answers["conversation/delete"]["not_found_ids"] == ["msg-x", "s"]
    assert answers["atomic/delete"]["not_found_ids"] == ["atom-x"]
    assert answers["core/read"]["content"] is None and answers["core/count"]["total"] == 0
    assert answers["scenario/read"]["content"] is None and answers["scenario/count"]["total"] == 0


# ---- get ------------------------------------------------------------------------------------------


def test_get_counts_follow_writes_and_deletes(api, scope):
    second = sibling(scope, user_id=scope.user_id + "-2")
    mine = ok(
        api.post(
            "/v3/conversation/add",
            scope.body(session_id="s1", messages=[{"role": "user", "content": f"m{i}"} for i in range(3)]),
        )
    )["accepted_ids"]
    ok(
        api.post(
            "/v3/conversation/add",
            second.body(session_id="s2", messages=[{"role": "user", "content": f"n{i}"} for i in range(2)]),
        )
    )
    atoms = [ok(api.post("/v3/atomic/add", scope.body(content=f"fact {i}")))["id"] for i in range(3)]
    ok(api.post("/v3/atomic/add", scope.body(content="fact 0")))  # reinforces: still 3 records
    ok(api.post("/v3/atomic/add", second.body(content="fact 0")))
    for path in ("a.md", "b/c.md"):
        ok(api.post("/v3/scenario/write", scope.body(path=path, content="scene")))
    ok(api.post("/v3/core/write", scope.body(content="")))
    asset = ok(get(api, scope.memory_id))
    assert asset["counts"] == {"l0": 5, "l1": 4, "l2": 2, "l3": 1}
    assert set(asset) == ASSET_FIELDS | {"counts"}
    ok(api.post("/v3/conversation/delete", scope.body(message_ids=[mine[0], "msg-unknown"])))
    ok(api.post("/v3/conversation/delete", second.body(session_ids=["s2"])))
    ok(api.post("/v3/atomic/delete", scope.body(ids=[atoms[1], atoms[1]])))
    ok(api.post("/v3/scenario/rm", scope.body(path="a.md")))
    counts = ok(get(api, scope.memory_id))["counts"]
    assert counts == {"l0": 2, "l1": 3, "l2": 1, "l3": 1}
    queryable_l0 = sum(ok(api.post("/v3/conversation/query", s.body(limit=100)))["total"] for s in (scope, second))
    queryable_l1 = sum(len(ok(api.post("/v3/atomic/query", s.body(limit=100)))["items"]) for s in (scope, second))
    assert (counts["l0"], counts["l1"]) == (queryable_l0, queryable_l1)


def test_counts_exact_after_concurrent_mixed_deletes(api, scope):
    second = sibling(scope, user_id=scope.user_id + "-2")
    ids = ok(
        api.post(
            "/v3/conversation/add",
            scope.body(session_id="s1", messages=[{"role": "user", "content": f"m{i}"} for i in range(6)]),
        )
    )["accepted_ids"]
    ok(api.post("/v3/conversation/add", second.body(session_id="s1", messages=[{"role": "user", "content": "x"}])))
    atoms = [ok(api.post("/v3/atomic/add", scope.body(content=f"fact {i}")))["id"] for i in range(4)]

    def remove(order):
        l0 = ok(api.post("/v3/conversation/delete", scope.body(message_ids=order, session_ids=["s1"])))
        l1 = ok(api.post("/v3/atomic/delete", scope.body(ids=atoms[:3] if order[0] == ids[0] else atoms[2::-1])))
        return l0["deleted_count"], l1["deleted_count"]

    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(remove, [ids[:3], ids[2::-1]]))
    assert sum(r[0] for r in results) == 6 and sum(r[1] for r in results) == 3
    counts = ok(get(api, scope.memory_id))["counts"]
    assert counts["l0"] == 1 == ok(api.post("/v3/conversation/count", second.body()))["total"]
    assert ok(api.post("/v3/conversation/count", scope.body()))["total"] == 0
    assert counts["l1"] == 1 == ok(api.post("/v3/atomic/count", scope.body()))["total"]
    assert [i["id"] for i in ok(api.post("/v3/atomic/query", scope.body()))["items"]] == atoms[3:]


def test_unknown_or_foreign_memory_is_404_for_star_and_403_for_team_keys(api, scope):
    ok(create(api, scope))
    other = make_scope()
    ok(create(api, other))
    _, team_admin = new_key(api, "admin", [scope.team_id])
    unknown = f"chat_memory-{scope.team_id}-nobody{uuid.uuid4().hex[:6]}"
    assert get(api, unknown).status == 404
    assert get(team_admin, unknown).status == 403
    assert get(team_admin, "no-such-memory").status == 403
    assert ok(get(team_admin, scope.memory_id))["memory_id"] == scope.memory_id
    for path, body in (
        ("/v3/memory/get", {"memory_id": other.memory_id}),
        ("/v3/memory/update", {"memory_id": other.memory_id, "name": "mine now"}),
        ("/v3/memory/list", {"team_id": other.team_id}),
    ):
        answer = team_admin.post(path, body)
        assert answer.status == 403 and answer.body["code"] == 403, (path, answer.body)
    assert ok(get(api, other.memory_id))["name"] is None
    assert api.post("/v3/memory/update", {"memory_id": unknown, "name": "x"}).status == 404
    assert team_admin.post("/v3/memory/update", {"memory_id": unknown, "name": "x"}).status == 403
    assert api.post("/v3/memory/get", {}).status == 400
    assert api.post("/v3/memory/get", {"memory_id": 5}).status == 400


# ---- list -----------------------------------------------------------------------------------------


def test_list_by_memory_id_with_paging_and_team_filter(api):
    team = "tl" + uuid.uuid4().hex[:10]
    agents = ["zeta", "alpha", "mid", "beta"]
    for agent in agents:
        ok(create(api, Scope(team, agent, "u")))
    ok(create(api, Scope(team + "x", "alpha", "u")))  # another team: never in this team's list
    expected = sorted(f"chat_memory-{team}-{a}" for a in agents)
    first = ok(api.post("/v3/memory/list", {"team_id": team, "limit": 3}))
    assert [i["memory_id"] for i in first["items"]] == expected[:3]
    assert all(set(i) == ASSET_FIELDS for i in first["items"])
    rest = ok(api.post("/v3/memory/list", {"team_id": team, "limit": 3, "next_token": first["next_token"]}))
    assert [i["memory_id"] for i in rest["items"]] == expected[3:] and "next_token" not in rest
    small = ok(api.post("/v3/memory/list", {"team_id": team, "limit": 1, "next_token": first["next_token"]}))
    assert [i["memory_id"] for i in small["items"]] == expected[3:]
    everything = ok(api.post("/v3/memory/list", {"team_id": team}))
    assert [i["memory_id"] for i in everything["items"]] == expected and "next_token" not in everything
    exact = ok(api.post("/v3/memory/list", {"team_id": team, "limit": 4}))
    assert len(exact["items"]) == 4 and "next_token" not in exact
    _, team_admin = new_key(api, "admin", [team])
    own = ok(team_admin.post("/v3/memory/list", {}))
    assert [i["memory_id"] for i in own["items"]] == expected
    walked, token = [], None
    while True:
        page = ok(team_admin.post("/v3/memory/list", {"limit": 2, **({"next_token": token} if token else {})}))
        walked += [i["memory_id"] for i in page["items"]]
        token = page.get("next_token")
        if token is None:
            break
    assert walked == expected
    token = first["next_token"]
    middle = len(token) // 2  # a middle character carries 6 bits of payload or signature
    bad_token = token[:middle] + ("B" if token[middle] == "A" else "A") + token[middle + 1 :]
    for body in (
        {"team_id": team, "next_token": bad_token},
        {"team_id": team, "next_token": "garbage"},
        {"team_id": team + "x", "next_token": first["next_token"]},
        {"next_token": first["next_token"]},
    ):
        answer = api.post("/v3/memory/list", body)
        assert answer.status == 400 and answer.message == "next_token: invalid", (body, answer.body)
    for body in ({"limit": 0}, {"limit": 101}, {"limit": "2"}, {"team_id": "bad team"}):
        answer = api.post("/v3/memory/list", body)
        assert answer.status == 400 and answer.message.startswith(next(iter(body))), (body, answer.body)
    # a 400 names each bad field: a forged token beside the others (a genuine one cannot be judged
    # against filters that are themselves bad, so it is not named)
    for token in (bad_token, "garbage", first["next_token"]):
        answer = api.post("/v3/memory/list", {"team_id": team, "limit": 0, "next_token": token})
        assert answer.status == 400 and answer.message.startswith("limit: "), answer.body
        assert ("next_token: invalid" in answer.message) == (token != first["next_token"]), answer.body
    answer = api.post("/v3/memory/list", {"team_id": team, "limit": 0, "next_token": 5})
    assert answer.status == 400 and answer.message.count("next_token") == 1, answer.body  # named once


def test_list_all_teams_is_sorted_and_paged(api):
    team = "ta" + uuid.uuid4().hex[:10]
    for i in range(6):  # at least 6 assets exist whatever ran before
        ok(create(api, Scope(team, f"agent{i}", "u")))
    first = ok(api.post("/v3/memory/list", {"limit": 5}))
    names = [i["memory_id"] for i in first["items"]]
    assert names == sorted(names) and len(names) == 5 and "next_token" in first
    second = ok(api.post("/v3/memory/list", {"limit": 5, "next_token": first["next_token"]}))
    more = [i["memory_id"] for i in second["items"]]
    assert more and more == sorted(more) and more[0] > names[-1]


# ---- update ---------------------------------------------------------------------------------------


def test_update_fields_reset_and_audit(api, scope):
    made = ok(create(api, scope, name="first", visibility="private"))
    acl = [{"principal": "user:ann", "permissions": ["admin"]}]
    bindings = [{"agent_id": "b1", "injection_mode": "system", "priority": 1}]
    changed = ok(
        api.post(
            "/v3/memory/update",
            {
                "memory_id": scope.memory_id,
                "name": "second",
                "visibility": "public",
                "acl": acl,
                "bindings": bindings,
                "retention_days": 30,
            },
        )
    )
    assert (changed["name"], changed["visibility"], changed["acl"], changed["retention_days"]) == (
        "second",
        "public",
        acl,
        30,
    )
    assert changed["bindings"][0] == bindings[0]
    assert (changed["created_at"], changed["owner"], changed["memory_id"]) == (
        made["created_at"],
        made["owner"],
        made["memory_id"],
    )
    assert changed["updated_at"] >= made["updated_at"]
    got = ok(get(api, scope.memory_id))
    assert {k: got[k] for k in ASSET_FIELDS} == changed
    # absent leaves a field; null = absent, except retention_days where null resets it
    partial = ok(
        api.post("/v3/memory/update", {"memory_id": scope.memory_id, "visibility": "team", "name": None, "acl": None})
    )
    assert (partial["name"], partial["visibility"], partial["acl"], partial["retention_days"]) == (
        "second",
        "team",
        acl,
        30,
    )
    reset = ok(api.post("/v3/memory/update", {"memory_id": scope.memory_id, "retention_days": None}))
    assert reset["retention_days"] is None and reset["name"] == "second"
    assert ok(get(api, scope.memory_id))["retention_days"] is None
    bounds = ok(api.post("/v3/memory/update", {"memory_id": scope.memory_id, "retention_days": 36_500}))
    assert bounds["retention_days"] == 36_500
    zero = ok(api.post("/v3/memory/update", {"memory_id": scope.memory_id, "retention_days": 0, "acl": []}))
    assert zero["retention_days"] == 0 and zero["acl"] == []
    for layers in ("all", "off", "records"):
        assert (
            ok(api.post("/v3/memory/update", {"memory_id": scope.memory_id, "formation": layers}))["formation"]
            == layers
        )
    for bad in ("none", "ALL", 1, True):
        refused = api.post("/v3/memory/update", {"memory_id": scope.memory_id, "formation": bad})
        assert refused.status == 400 and refused.message.startswith("formation"), refused.body
    kept = ok(api.post("/v3/memory/update", {"memory_id": scope.memory_id, "formation": None}))
    assert kept["formation"] == "records"  # null counts as absent
    events = ok(api.post("/v3/audit/query", {"memory_id": scope.memory_id, "action": "memory_update"}))["events"]
    assert len(events) == 9
    assert all(
        e["action"] == "memory_update"
        and e["layer"] == "asset"
        and e["actor"] == "bootstrap"
        and e["memory_id"] == scope.memory_id
        for e in events
    )
    assert "second" not in str(events) and "user:ann" not in str(events)


def _longest(char: str) -> dict[str, list[dict[str, object]]]:
    """An ACL and bindings at every limit at once, in ``char`` (an emoji is 4 UTF-8 bytes)."""
    return {
        "acl": [{"principal": f"{i:03}" + char * 253, "permissions": ["read", "write", "admin"]} for i in range(100)],
        "bindings": [
            {"agent_id": f"{i:03}" + "b" * 61, "injection_mode": char * 64, "priority": -1_000_000} for i in range(100)
        ],
    }


def test_the_longest_acl_and_bindings_are_stored_and_replaced(api, scope):
    """Every limit at once, in characters of 3 and 4 UTF-8 bytes: each write is stored (never a 500
    for an item over DynamoDB's 400 KB) and read back exactly, replacing the last."""
    pair = {"team_id": scope.team_id, "agent_id": scope.agent_id}
    created = ok(api.post("/v3/memory/create", {**pair, "name": "😀" * 256, **_longest("😀")}))
    assert created["acl"] == _longest("😀")["acl"] and created["bindings"] == _longest("😀")["bindings"]
    for char in ("字", "😀", "é"):
        updated = api.post("/v3/memory/update", {"memory_id": scope.memory_id, **_longest(char)})
        assert updated.status == 200, updated.body
        got = ok(api.post("/v3/memory/get", {"memory_id": scope.memory_id}))
        assert (got["acl"], got["bindings"]) == (_longest(char)["acl"], _longest(char)["bindings"])


def test_update_validation(api, scope):
    ok(create(api, scope, name="kept"))
    for fields, field in (
        ({"visibility": "secret"}, "visibility"),
        ({"retention_days": -1}, "retention_days"),
        ({"retention_days": 36_501}, "retention_days"),
        ({"retention_days": "30"}, "retention_days"),
        ({"retention_days": 1.5}, "retention_days"),
        ({"acl": [{"principal": "p", "permissions": ["owner"]}]}, "acl"),
        ({"acl": [{"principal": "", "permissions": ["read"]}]}, "acl"),
        ({"bindings": [{"injection_mode": "x"}]}, "bindings"),
        ({"bindings": "b"}, "bindings"),
    ):
        answer = api.post("/v3/memory/update", {"memory_id": scope.memory_id, **fields})
        assert answer.status == 400 and answer.message.startswith(field), (fields, answer.body)
    got = ok(get(api, scope.memory_id))
    assert (got["name"], got["visibility"], got["retention_days"]) == ("kept", "private", None)
    assert api.post("/v3/memory/update", {"name": "x"}).status == 400
    _, writer = new_key(api, "writer", [scope.team_id])
    assert writer.post("/v3/memory/update", {"memory_id": scope.memory_id, "name": "x"}).status == 403
    assert writer.post("/v3/memory/get", {"memory_id": scope.memory_id}).status == 403
    assert writer.post("/v3/memory/list", {"team_id": scope.team_id}).status == 403


# ---- two pairs that spell one memory_id ---------------------------------------------------------


def spelling_pairs():
    prefix = "col" + uuid.uuid4().hex[:8]
    first = Scope(f"{prefix}-b", "c", "u1")
    later = Scope(prefix, "b-c", "u1")
    assert first.memory_id == later.memory_id
    return first, later


def get_pair(api, pair):
    return api.post("/v3/memory/get", {"memory_id": pair.memory_id, "team_id": pair.team_id, "agent_id": pair.agent_id})


def test_two_pairs_that_spell_one_memory_id_are_two_memories(api, writer):
    first, later = spelling_pairs()
    msg = ok(
        api.post(
            "/v3/conversation/add", first.body(session_id="s", messages=[{"role": "user", "content": "shared words"}])
        )
    )["accepted_ids"]
    atom = ok(api.post("/v3/atomic/add", first.body(content="shared words")))["id"]
    # the other pair's reads, counts and deletes answer from its own (empty) scope
    assert ok(api.post("/v3/conversation/query", later.body())) == {"messages": [], "total": 0}
    assert ok(api.post("/v3/atomic/count", later.body()))["total"] == 0
    assert ok(api.post("/v3/atomic/search", later.body(query="shared")))["items"] == []
    gone = ok(api.post("/v3/conversation/delete", later.body(message_ids=msg, session_ids=["s"])))
    assert gone["deleted_count"] == 0 and gone["not_found_ids"] == [*msg, "s"]
    assert ok(api.post("/v3/atomic/delete", later.body(ids=[atom])))["not_found_ids"] == [atom]
    missing = writer[1].post("/v3/atomic/update", later.body(id=atom, content="taken over"))
    assert missing.status == 404, missing.body
    # and its writes create and use its own asset: nothing blocks them
    for who in (api, writer[1]):
        ok(who.post("/v3/conversation/add", later.body(session_id="s", messages=[{"role": "user", "content": "w"}])))
        ok(who.post("/v3/atomic/add", later.body(content=f"own words {who.key[-4:]}")))
        ok(who.post("/v3/scenario/write", later.body(path="a.md", content="x")))
        ok(who.post("/v3/core/write", later.body(content="x")))
    assert ok(create(api, later))["team_id"] == later.team_id
    mine = ok(get_pair(api, later))
    assert (mine["team_id"], mine["agent_id"], mine["memory_id"]) == (later.team_id, later.agent_id, later.memory_id)
    assert mine["counts"] == {"l0": 2, "l1": 2, "l2": 1, "l3": 1}
    # the first pair is untouched
    asset = ok(get_pair(api, first))
    assert (asset["team_id"], asset["agent_id"]) == (first.team_id, first.agent_id)
    assert asset["counts"] == {"l0": 1, "l1": 1, "l2": 0, "l3": 0}
    item = ok(api.post("/v3/atomic/query", first.body()))["items"][0]
    assert (item["id"], item["content"], item["version"]) == (atom, "shared words", 1)
    assert ok(api.post("/v3/conversation/query", first.body()))["total"] == 1
    # naming only the memory_id is now ambiguous
    both = get(api, first.memory_id)
    assert both.status == 409 and both.message == "memory_id ambiguous" and both.body["retryable"] is False
    assert both.data["candidates"] == sorted(
        [{"team_id": p.team_id, "agent_id": p.agent_id} for p in (first, later)], key=lambda c: c["team_id"]
    )


def test_memory_create_by_one_pair_never_blocks_the_other(api):
    first, later = spelling_pairs()
    ok(create(api, later, name="later made it first"))
    for path, body in (
        ("/v3/conversation/add", {"session_id": "s", "messages": [{"role": "user", "content": "x"}]}),
        ("/v3/atomic/add", {"content": "x"}),
    ):
        ok(api.post(path, first.body(**body)))
    assert ok(create(api, first))["name"] is None
    ok(api.post("/v3/atomic/add", later.body(content="owner writes")))
    asset = ok(get_pair(api, later))
    assert (asset["team_id"], asset["name"], asset["counts"]["l1"], asset["counts"]["l0"]) == (
        later.team_id,
        "later made it first",
        1,
        0,
    )
    assert ok(get_pair(api, first))["counts"] == {"l0": 1, "l1": 1, "l2": 0, "l3": 0}


def test_a_race_of_two_pairs_that_spell_one_memory_id_makes_two_assets(api):
    first, later = spelling_pairs()

    def write(pair):
        return api.post("/v3/atomic/add", pair.body(content="race"))

    pairs = [first, later, first, later]
    with ThreadPoolExecutor(max_workers=4) as pool:
        answers = list(pool.map(write, pairs))
    assert all(a.status == 200 for a in answers), [a.body for a in answers]
    for pair in (first, later):
        asset = ok(get_pair(api, pair))
        assert (asset["team_id"], asset["counts"]["l1"]) == (pair.team_id, 1)


def test_update_stores_bindings_as_given_and_null_retention_resets(api, scope):
    ok(create(api, scope))
    bindings = [{"agent_id": "b"}, {"agent_id": "c", "injection_mode": "prepend", "priority": 1}]
    updated = ok(
        api.post("/v3/memory/update", {"memory_id": scope.memory_id, "bindings": bindings, "retention_days": 7})
    )
    assert updated["bindings"] == bindings  # stored as given: no null keys added for what was not given
    assert ok(get(api, scope.memory_id))["bindings"] == bindings
    reset = ok(api.post("/v3/memory/update", {"memory_id": scope.memory_id, "retention_days": None}))
    assert reset["retention_days"] is None and reset["bindings"] == bindings
