"""Two (team, agent) pairs that spell the same memory_id are two memories. Team ``acme`` +
agent ``x-support`` and team ``acme-x`` + agent ``support`` both spell
``chat_memory-acme-x-support``: neither blocks the other's writes, creates or imports, and a route
that names the memory_id acts on the one pair the key may mean — or, when several are possible,
answers 409 ``memory_id ambiguous`` with the candidates and does nothing, unless the body names
``team_id`` and ``agent_id``. Also: assets stored by the earlier key design (one item per memory_id)
keep working and are moved to their pair's key on first use or by the scheduled cleanup."""

from __future__ import annotations

import uuid

import pytest
from helpers import TABLES, Scope, aws_client, ok, own_stack, scan

AMBIGUOUS = "memory_id ambiguous"
ZERO = {"l0": 0, "l1": 0, "l2": 0, "l3": 0}
# The cleanup walks every asset of the account and the checks read AssetsTable whole: a stack of
# this module's own.
stack, api, hooks = own_stack()


def squatted() -> tuple[Scope, Scope]:
    """(acme, x-support) and (acme-x, support), with a fresh prefix."""
    base = "acme" + uuid.uuid4().hex[:8]
    first, second = Scope(base, "x-support", "u1"), Scope(f"{base}-x", "support", "u1")
    assert first.memory_id == second.memory_id
    return first, second


def key_for(api, role, team_ids):
    return api.with_key(ok(api.post("/v3/admin/keys/create", {"role": role, "team_ids": team_ids}))["api_key"])


def add_message(api, scope, content):
    body = scope.body(session_id="s", messages=[{"role": "user", "content": content}])
    return ok(api.post("/v3/conversation/add", body))["accepted_ids"][0]


def pair(scope: Scope) -> dict[str, str]:
    return {"team_id": scope.team_id, "agent_id": scope.agent_id}


def counts(api, scope):
    return ok(api.post("/v3/memory/get", {"memory_id": scope.memory_id, **pair(scope)}))["counts"]


@pytest.fixture
def both(api):
    """Two pairs spelling one memory_id, each with an asset and one message and one record."""
    first, second = squatted()
    for scope in (first, second):
        add_message(api, scope, f"said by {scope.team_id}")
        ok(api.post("/v3/atomic/add", scope.body(content=f"fact of {scope.team_id}")))
    return first, second


# ---- no squatting --------------------------------------------------------------------------------------


def test_the_second_pair_writes_creates_and_imports_after_the_first(api):
    first, second = squatted()
    writer = key_for(api, "writer", [first.team_id, second.team_id])
    add_message(writer, first, "acme's")
    for path, body in (
        ("/v3/conversation/add", {"session_id": "s", "messages": [{"role": "user", "content": "acme-x's"}]}),
        ("/v3/atomic/add", {"content": "acme-x's fact"}),
        ("/v3/scenario/write", {"path": "a.md", "content": "acme-x's file"}),
        ("/v3/core/write", {"content": "acme-x's persona"}),
    ):
        ok(writer.post(path, second.body(**body)))
    made = ok(api.post("/v3/memory/create", pair(second)))
    assert (made["team_id"], made["agent_id"], made["memory_id"]) == (second.team_id, second.agent_id, second.memory_id)
    ok(api.post("/v3/memory/import", pair(second)))
    assert counts(api, second) == {"l0": 1, "l1": 1, "l2": 1, "l3": 1}
    assert counts(api, first) == {"l0": 1, "l1": 0, "l2": 0, "l3": 0}
    # each reads only its own
    assert [m["content"] for m in ok(api.post("/v3/conversation/query", first.body()))["messages"]] == ["acme's"]
    assert [m["content"] for m in ok(api.post("/v3/conversation/query", second.body()))["messages"]] == ["acme-x's"]


def test_a_team_key_resolves_the_one_pair_within_its_teams(api, both):
    first, _second = both
    for scope in both:
        admin = key_for(api, "admin", [scope.team_id])
        got = ok(admin.post("/v3/memory/get", {"memory_id": scope.memory_id}))
        assert (got["team_id"], got["agent_id"]) == (scope.team_id, scope.agent_id)
        assert got["counts"] == {"l0": 1, "l1": 1, "l2": 0, "l3": 0}
    # a key of neither team: 403, as for an unknown id
    stranger = key_for(api, "admin", ["elsewhere" + uuid.uuid4().hex[:6]])
    assert stranger.post("/v3/memory/get", {"memory_id": first.memory_id}).status == 403


# ---- ambiguity -----------------------------------------------------------------------------------------


def candidates(*scopes):
    return sorted([pair(s) for s in scopes], key=lambda c: (c["team_id"], c["agent_id"]))


def assert_ambiguous(answer, *scopes):
    assert answer.status == 409 and answer.body["code"] == 409, answer.body
    assert answer.message == AMBIGUOUS and answer.body["retryable"] is False, answer.body
    assert answer.data["candidates"] == candidates(*scopes), answer.body


def test_every_route_that_names_the_id_answers_409_with_the_candidates_and_does_nothing(api, both):
    first, second = both
    memory_id = first.memory_id
    routes = [
        ("/v3/memory/get", {"memory_id": memory_id}),
        ("/v3/memory/update", {"memory_id": memory_id, "name": "changed"}),
        ("/v3/memory/delete", {"memory_id": memory_id}),
        ("/v3/chat-memory/clear", {"memory_ids": [memory_id]}),
        ("/v3/memory/export", {"memory_id": memory_id}),
        ("/v3/user-memory/delete", {"memory_id": memory_id, "user_id": "u1"}),
    ]
    # headers never narrow
    headers = {"x-tdai-team-id": first.team_id, "x-tdai-agent-id": first.agent_id}
    for path, body in routes:
        assert_ambiguous(api.post(path, body, headers=headers), first, second)
    alias = api.post("/v2/memory", {"appId": memory_id, "userMemoryId": "u1"}, query={"Action": ["DeleteUserMemory"]})
    assert alias.status == 409 and alias.body["code"] == 409 and alias.body["message"] == AMBIGUOUS, alias.body
    # nothing was done
    for scope in both:
        asset = ok(api.post("/v3/memory/get", {"memory_id": memory_id, **pair(scope)}))
        assert asset["name"] is None and asset["last_cleared_at"] is None
        assert asset["counts"] == {"l0": 1, "l1": 1, "l2": 0, "l3": 0}
    # audit/query never answers 409: it shows both pairs' events
    events = ok(api.post("/v3/audit/query", {"memory_id": memory_id}))["events"]
    assert all("team_id" in e and "agent_id" in e and e["memory_id"] == memory_id for e in events)


def test_the_body_pair_picks_one_on_every_route(api, both):
    first, second = both
    memory_id = first.memory_id
    updated = ok(api.post("/v3/memory/update", {"memory_id": memory_id, **pair(second), "name": "second's"}))
    assert (updated["team_id"], updated["name"]) == (second.team_id, "second's")
    assert ok(api.post("/v3/memory/get", {"memory_id": memory_id, **pair(first)}))["name"] is None
    erased = ok(api.post("/v3/user-memory/delete", {"memory_id": memory_id, **pair(first), "user_id": "u1"}))
    assert (erased["l0_deleted"], erased["l1_deleted"]) == (1, 1)
    assert counts(api, first) == ZERO and counts(api, second) == {"l0": 1, "l1": 1, "l2": 0, "l3": 0}
    add_message(api, first, "again")
    alias = api.post(
        "/v2/memory",
        {"appId": memory_id, "userMemoryId": "u1", **pair(first)},
        query={"Action": ["DeleteUserMemory"]},
    )
    assert alias.status == 200 and alias.body["result"] is True, alias.body
    assert counts(api, first) == ZERO
    exported = ok(api.post("/v3/memory/export", {"memory_id": memory_id, **pair(second)}))
    assert exported
    deleted = ok(api.post("/v3/memory/delete", {"memory_id": memory_id, **pair(second)}))
    assert deleted["deleted"] is True and deleted["l0_deleted"] == 1
    # one left: the id alone now means it
    only = ok(api.post("/v3/memory/get", {"memory_id": memory_id}))
    assert (only["team_id"], only["agent_id"]) == (first.team_id, first.agent_id)


def test_clear_takes_targets_and_its_items_name_the_pair(api, both):
    first, second = both
    memory_id = first.memory_id
    one = ok(
        api.post(
            "/v3/chat-memory/clear", {"memory_ids": [memory_id], "targets": [{"memory_id": memory_id, **pair(first)}]}
        )
    )
    (item,) = one["items"]
    assert (item["memory_id"], item["team_id"], item["agent_id"], item["cleared"]) == (
        memory_id,
        first.team_id,
        first.agent_id,
        True,
    )
    assert (item["l0_deleted"], item["l1_deleted"]) == (1, 1)
    assert counts(api, first) == ZERO and counts(api, second)["l0"] == 1
    # several targets of one id clear each named pair, in the order given
    targets = [{"memory_id": memory_id, **pair(s)} for s in (second, first)]
    two = ok(api.post("/v3/chat-memory/clear", {"memory_ids": [memory_id], "targets": targets}))
    assert [(i["team_id"], i["cleared"]) for i in two["items"]] == [(second.team_id, True), (first.team_id, True)]
    assert counts(api, second) == ZERO


def test_a_pair_that_does_not_spell_the_id_is_400(api, both):
    first, _ = both
    memory_id = first.memory_id
    bad = {"team_id": first.team_id, "agent_id": "other"}
    for path, body in (
        ("/v3/memory/get", {"memory_id": memory_id, **bad}),
        ("/v3/memory/update", {"memory_id": memory_id, **bad, "name": "x"}),
        ("/v3/memory/delete", {"memory_id": memory_id, **bad}),
        ("/v3/memory/export", {"memory_id": memory_id, **bad}),
        ("/v3/user-memory/delete", {"memory_id": memory_id, **bad, "user_id": "u1"}),
        ("/v3/memory/get", {"memory_id": memory_id, "team_id": first.team_id}),
    ):
        answer = api.post(path, body)
        assert answer.status == 400 and answer.message.startswith("(root): "), (path, answer.body)
    target = {"memory_id": memory_id, **bad}
    answer = api.post("/v3/chat-memory/clear", {"memory_ids": [memory_id], "targets": [target]})
    assert answer.status == 400 and answer.message.startswith("targets.0: "), answer.body
    stray = {"memory_id": "chat_memory-a-b", "team_id": "a", "agent_id": "b"}
    answer = api.post("/v3/chat-memory/clear", {"memory_ids": [memory_id], "targets": [stray]})
    assert answer.status == 400 and answer.message.startswith("(root): "), answer.body


def test_a_named_pair_without_an_asset_is_unknown(api, both):
    first, _ = both
    lone = Scope(first.team_id + "-x", "support-other", "u")  # spells another id
    assert api.post("/v3/memory/get", {"memory_id": lone.memory_id, **pair(lone)}).status == 404
    team_admin = key_for(api, "admin", [lone.team_id])
    assert team_admin.post("/v3/memory/get", {"memory_id": lone.memory_id, **pair(lone)}).status == 403


def test_not_found_answers_before_ambiguous_in_a_clear(api, both):
    first, _ = both
    unknown = "chat_memory-nobody" + uuid.uuid4().hex[:6] + "-x"
    answer = api.post("/v3/chat-memory/clear", {"memory_ids": [first.memory_id, unknown]})
    assert answer.status == 404, answer.body


# ---- memory/list ---------------------------------------------------------------------------------------


def test_list_orders_by_memory_id_then_team_then_agent(api, both):
    first, second = both
    key = key_for(api, "admin", [first.team_id, second.team_id])
    ok(api.post("/v3/memory/create", {"team_id": first.team_id, "agent_id": "a"}))
    listed = ok(key.post("/v3/memory/list", {}))["items"]
    got = [(i["memory_id"], i["team_id"], i["agent_id"]) for i in listed]
    assert got == sorted(got) and len(got) == 3
    assert {(i["team_id"], i["agent_id"]) for i in listed if i["memory_id"] == first.memory_id} == {
        (first.team_id, first.agent_id),
        (second.team_id, second.agent_id),
    }
    # paging one at a time walks the same order, both pairs of the shared id included
    seen, token = [], None
    while True:
        page = ok(key.post("/v3/memory/list", {"limit": 1, **({"next_token": token} if token else {})}))
        seen += [(i["memory_id"], i["team_id"], i["agent_id"]) for i in page["items"]]
        token = page.get("next_token")
        if token is None:
            break
    assert seen == got
    # a '*' key sees them in the same order among everything
    everything = []
    token = None
    while True:
        page = ok(api.post("/v3/memory/list", {"limit": 100, **({"next_token": token} if token else {})}))
        everything += [(i["memory_id"], i["team_id"], i["agent_id"]) for i in page["items"]]
        token = page.get("next_token")
        if token is None:
            break
    assert everything == sorted(everything) and set(got) <= set(everything)


# ---- assets stored by the earlier key design -----------------------------------------------------------


def as_legacy(scope: Scope) -> dict:
    """Rewrite the pair's asset item as the earlier design stored it: keyed by memory_id alone,
    with no fence (that design had none)."""
    dynamodb = aws_client("dynamodb")
    key = {"pk": {"S": scope.memory_id}, "sk": {"S": f"A#{scope.team_id}:{scope.agent_id}"}}
    item = dynamodb.get_item(TableName=TABLES["assets"], Key=key, ConsistentRead=True)["Item"]
    dynamodb.delete_item(TableName=TABLES["assets"], Key=key)
    dynamodb.delete_item(TableName=TABLES["assets"], Key=dict(key, sk={"S": fence_key(scope)}))
    legacy = {name: value for name, value in item.items() if name != "fz"} | {"sk": {"S": "asset"}}
    dynamodb.put_item(TableName=TABLES["assets"], Item=legacy)
    return legacy


def fence_key(scope: Scope) -> str:
    return f"fence#{scope.team_id}:{scope.agent_id}"


def stored_keys(scope: Scope) -> list[str]:
    """The live asset items of the scope's memory_id (a moved legacy item keeps only its mark;
    the pairs' fences are not assets)."""
    items = [i for i in scan(TABLES["assets"]) if i["pk"]["S"] == scope.memory_id]
    return sorted(i["sk"]["S"] for i in items if "moved_to" not in i and not i["sk"]["S"].startswith("fence#"))


def fence_epoch(scope: Scope) -> int | None:
    """The epoch the pair's fence holds (None: no fence)."""
    key = {"pk": {"S": scope.memory_id}, "sk": {"S": fence_key(scope)}}
    item = aws_client("dynamodb").get_item(TableName=TABLES["assets"], Key=key, ConsistentRead=True).get("Item")
    return None if item is None else int(item["epoch"]["N"])


def no_asset_call_refused(hooks, since: int) -> None:
    """Moving (or reading in place) never needs more than each function's policy allows."""
    refused = [c for c in hooks.calls(since) if c["refused"] and "AssetsTable" in (c.get("tables") or [])]
    assert not refused, [(c["function"], c["operation"], c.get("actions")) for c in refused]


def test_an_asset_stored_by_memory_id_keeps_working_and_moves_on_first_use(api, hooks):
    since = hooks.last_seq()
    first, second = squatted()
    message = add_message(api, first, "before the upgrade")
    ok(api.post("/v3/scenario/write", first.body(path="old.md", content="kept")))
    legacy = as_legacy(first)
    assert stored_keys(first) == ["asset"]
    # the other pair is not blocked by it, and the old pair's content is all there
    add_message(api, second, "the other pair")
    got = ok(api.post("/v3/memory/get", {"memory_id": first.memory_id, **pair(first)}))
    assert got["counts"] == {"l0": 1, "l1": 0, "l2": 1, "l3": 0}
    assert got["created_at"] == legacy["created_at"]["S"]
    assert stored_keys(first) == sorted(
        [f"A#{first.team_id}:{first.agent_id}", f"A#{second.team_id}:{second.agent_id}"]
    )
    # writes go on in the same content epoch (the fence is the moved item, then its fence item:
    # the first write gives it one), clears still work and move the fence
    assert fence_epoch(first) is None
    add_message(api, first, "after the upgrade")
    assert fence_epoch(first) == int(legacy["epoch"]["N"])
    query = ok(api.post("/v3/conversation/query", first.body()))
    assert query["total"] == 2 and message in [m["id"] for m in query["messages"]]
    cleared = ok(
        api.post(
            "/v3/chat-memory/clear",
            {"memory_ids": [first.memory_id], "targets": [{"memory_id": first.memory_id, **pair(first)}]},
        )
    )
    assert cleared["items"][0]["l0_deleted"] == 2 and cleared["items"][0]["l2_deleted"] == 1
    assert fence_epoch(first) is not None and fence_epoch(first) > int(legacy["epoch"]["N"])
    no_asset_call_refused(hooks, since)


def test_functions_that_only_read_assets_use_a_stored_by_memory_id_asset_in_place(api, hooks):
    since = hooks.last_seq()
    first, _ = squatted()
    message = add_message(api, first, "before the upgrade")
    ok(api.post("/v3/atomic/add", first.body(content="a fact")))
    as_legacy(first)
    api.invoke("CleanupFunction", {})  # it may only read AssetsTable: it walks the legacy item as is
    assert stored_keys(first) == ["asset"]
    gone = ok(api.post("/v3/conversation/delete", first.body(message_ids=[message])))  # DeleteFunction
    assert gone["deleted_ids"] == [message] and stored_keys(first) == ["asset"]
    # the next function that may write assets moves it; nothing was lost on the way
    assert ok(api.post("/v3/atomic/count", first.body()))["total"] == 1
    assert stored_keys(first) == [f"A#{first.team_id}:{first.agent_id}"]
    assert ok(api.post("/v3/conversation/count", first.body()))["total"] == 0
    no_asset_call_refused(hooks, since)
