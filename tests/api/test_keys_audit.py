"""Keys (create, list, revoke, team scope) and audit (events, never content, query)."""

from __future__ import annotations

import functools
import hashlib
import json
import operator
import re
import uuid

import pytest
from helpers import ADMIN_KEY, TABLES, make_scope, scan

TIME = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")
EVENT_FIELDS = {"event_id", "memory_id", "action", "layer", "target", "count", "actor", "request_id", "at"}


def ok(answer):
    assert answer.status == 200, answer.body
    return answer.data


def create_key(api, role="writer", team_ids=None, name=None):
    body = {"role": role}
    if team_ids is not None:
        body["team_ids"] = team_ids
    if name is not None:
        body["name"] = name
    return ok(api.post("/v3/admin/keys/create", body))


def listed(api):
    return {row["key_id"]: row for row in ok(api.post("/v3/admin/keys/list", {}))["keys"]}


def table_items(setting):
    return scan(TABLES[setting.removesuffix("_table")])


def audit(api, **fields):
    return ok(api.post("/v3/audit/query", fields))


# --- keys ---------------------------------------------------------------------------------------------


def test_create_returns_the_secret_once_and_it_works(api, scope):
    created = create_key(api, "writer", [scope.team_id], name="ci bot")
    assert set(created) >= {"key_id", "api_key", "role", "team_ids", "name"}
    assert (created["role"], created["team_ids"], created["name"]) == ("writer", [scope.team_id], "ci bot")
    assert created["key_id"] != created["api_key"] and len(created["api_key"]) >= 32
    user = api.with_key(created["api_key"])
    assert user.post("/v3/scenario/write", scope.body(path="k.md", content="c")).status == 200
    row = listed(api)[created["key_id"]]
    assert row == {
        **row,
        "key_id": created["key_id"],
        "name": "ci bot",
        "role": "writer",
        "team_ids": [scope.team_id],
        "revoked": False,
    }
    assert TIME.match(row["created_at"])


def test_team_ids_default_to_all_teams(api):
    created = create_key(api, "reader")
    assert created["team_ids"] == ["*"]
    assert listed(api)[created["key_id"]]["team_ids"] == ["*"]


def test_a_key_may_span_several_teams(api):
    one, two = make_scope(), make_scope()
    created = create_key(api, "writer", [one.team_id, two.team_id])
    assert created["team_ids"] == [one.team_id, two.team_id]
    user = api.with_key(created["api_key"])
    for scope in (one, two):
        assert user.post("/v3/core/write", scope.body(content="p")).status == 200
    assert user.post("/v3/core/write", make_scope().body(content="p")).status == 403


def test_list_never_shows_a_secret_or_a_hash(api):
    created = create_key(api, "admin", name="lister")
    text = json.dumps(ok(api.post("/v3/admin/keys/list", {})))
    secret_hash = hashlib.sha256(created["api_key"].encode()).hexdigest()
    assert created["api_key"] not in text and secret_hash not in text and ADMIN_KEY not in text
    for row in ok(api.post("/v3/admin/keys/list", {}))["keys"]:
        assert set(row) == {"key_id", "name", "role", "team_ids", "created_at", "revoked"}


def test_only_the_sha256_of_a_secret_is_stored(api):
    created = create_key(api, "writer")
    items = table_items("keys_table")
    raw = json.dumps(items)
    assert created["api_key"] not in raw
    secret_part = created["api_key"].split("_", 2)[2]  # mhk_<id>_<secret>; the secret may hold "_"
    assert secret_part not in raw
    mine = [i for i in items if i["key_id"]["S"] == created["key_id"]]
    assert len(mine) == 1
    assert hashlib.sha256(created["api_key"].encode()).hexdigest() in json.dumps(mine[0])


def test_bootstrap_key_is_listed_and_cannot_be_revoked(api):
    boot = listed(api)["bootstrap"]
    assert boot["role"] == "admin" and boot["team_ids"] == ["*"] and boot["revoked"] is False
    answer = api.post("/v3/admin/keys/revoke", {"key_id": "bootstrap"})
    assert 400 <= answer.status < 500 and answer.body["code"] == answer.status
    assert api.post("/v3/admin/keys/list", {}).status == 200
    assert listed(api)["bootstrap"]["revoked"] is False


def test_revoke_is_idempotent_and_unknown_ids_are_404(api, scope):
    created = create_key(api, "reader")
    assert ok(api.post("/v3/admin/keys/revoke", {"key_id": created["key_id"]})) == {
        "key_id": created["key_id"],
        "revoked": True,
    }
    assert ok(api.post("/v3/admin/keys/revoke", {"key_id": created["key_id"]}))["revoked"] is True
    assert listed(api)[created["key_id"]]["revoked"] is True
    assert api.with_key(created["api_key"]).post("/v3/scenario/count", scope.body()).status == 401
    for unknown in ("key-000000000000", "nope", "key-" + uuid.uuid4().hex[:12]):
        answer = api.post("/v3/admin/keys/revoke", {"key_id": unknown})
        assert answer.status == 404 and answer.body["code"] == 404, answer.body
    revokes = [e for e in audit(api, action="key_revoke", limit=100)["events"] if e["target"] == created["key_id"]]
    assert len(revokes) == 1


@pytest.mark.parametrize(
    "body, field",
    [
        ({"role": "owner"}, "role"),
        ({}, "role"),
        ({"role": "reader", "team_ids": []}, "team_ids"),
        ({"role": "reader", "team_ids": ["bad team"]}, "team_ids.0"),
        ({"role": "reader", "team_ids": ["*", "team1"]}, "team_ids"),  # all teams stands alone
        ({"role": "reader", "team_ids": ["team1", "*"]}, "team_ids"),
        ({"role": "reader", "team_ids": "*"}, "team_ids"),
        ({"role": "reader", "name": ""}, "name"),
        ({"role": "reader", "name": "a\nb"}, "name"),
    ],
)
def test_create_validates_its_fields(api, body, field):
    answer = api.post("/v3/admin/keys/create", body)
    assert answer.status == 400 and answer.message.startswith(f"{field}: "), answer.body


def test_revoke_needs_a_key_id(api):
    answer = api.post("/v3/admin/keys/revoke", {})
    assert answer.status == 400 and answer.message.startswith("key_id: ")


@pytest.fixture
def team_admin(api):
    """An admin key for two fresh teams, plus a team it does not cover."""
    mine, also, foreign = make_scope(), make_scope(), make_scope()
    created = create_key(api, "admin", [mine.team_id, also.team_id])
    return api.with_key(created["api_key"]), created["key_id"], mine, also, foreign


def test_team_admin_creates_keys_only_within_its_teams(api, team_admin):
    admin, _, mine, also, foreign = team_admin
    assert ok(admin.post("/v3/admin/keys/create", {"role": "writer", "team_ids": [mine.team_id]}))
    assert ok(admin.post("/v3/admin/keys/create", {"role": "admin", "team_ids": [also.team_id, mine.team_id]}))
    for team_ids in (["*"], [foreign.team_id], [mine.team_id, foreign.team_id], None):
        body = {"role": "reader"} if team_ids is None else {"role": "reader", "team_ids": team_ids}
        answer = admin.post("/v3/admin/keys/create", body)
        assert answer.status == 403 and answer.body["code"] == 403, (team_ids, answer.body)


@pytest.mark.parametrize(
    "route,body",
    [
        ("/v3/memory/create", {"agent_id": "agent", "name": 5}),
        ("/v3/memory/list", {"limit": "x"}),
        ("/v3/memory/import", {"agent_id": "agent", "from_team": 5}),
        # a memory_id's routes: their optional pair names a team too
        ("/v3/memory/get", {"memory_id": "", "agent_id": "agent"}),
        ("/v3/memory/update", {"memory_id": "", "agent_id": "agent"}),
        ("/v3/memory/delete", {"memory_id": "", "agent_id": "agent"}),
        ("/v3/memory/export", {"memory_id": "", "agent_id": "agent"}),
        ("/v3/user-memory/delete", {"memory_id": "m", "agent_id": "agent", "user_id": "u", "content_ids": None}),
        ("/v2/memory?Action=DeleteUserMemory", {"appId": "", "userMemoryId": "u", "agent_id": "agent"}),
    ],
)
def test_a_team_the_body_names_outside_the_keys_teams_is_403_before_its_fields(api, team_admin, route, body):
    """The order of checks: team outside the key's scope (403) before field validation (400)."""
    admin, _, mine, _, foreign = team_admin
    outside = admin.post(route, {**body, "team_id": foreign.team_id})
    assert outside.status == 403 and outside.message == "team_id: outside this key's teams", outside.body
    inside = admin.post(route, {**body, "team_id": mine.team_id})
    assert inside.status == 400, inside.body  # the same bad field, within its teams


def test_team_admin_sees_and_revokes_only_keys_within_its_teams(api, team_admin):
    admin, admin_id, mine, also, foreign = team_admin
    own = create_key(api, "writer", [mine.team_id])
    both = create_key(api, "reader", [mine.team_id, also.team_id])
    wider = create_key(api, "reader", [mine.team_id, foreign.team_id])
    theirs = create_key(api, "writer", [foreign.team_id])
    everyone = create_key(api, "reader", ["*"])
    rows = listed(admin)
    assert {own["key_id"], both["key_id"], admin_id} <= set(rows)
    assert not {wider["key_id"], theirs["key_id"], everyone["key_id"], "bootstrap"} & set(rows)
    assert all(set(r["team_ids"]) <= {mine.team_id, also.team_id} for r in rows.values())
    for key_id in (wider["key_id"], theirs["key_id"], everyone["key_id"], "bootstrap"):
        answer = admin.post("/v3/admin/keys/revoke", {"key_id": key_id})
        assert answer.status == 404, (key_id, answer.body)
    assert listed(api)[theirs["key_id"]]["revoked"] is False
    assert api.with_key(theirs["api_key"]).post("/v3/scenario/count", foreign.body()).status == 200
    assert ok(admin.post("/v3/admin/keys/revoke", {"key_id": own["key_id"]}))["revoked"] is True
    assert api.with_key(own["api_key"]).post("/v3/scenario/count", mine.body()).status == 401


# --- audit events ---------------------------------------------------------------------------------------


def _check_event(event, *, memory_id, action, layer, actor, request_id):
    assert set(event) >= EVENT_FIELDS, event
    assert (event["memory_id"], event["action"], event["layer"], event["actor"], event["request_id"]) == (
        memory_id,
        action,
        layer,
        actor,
        request_id,
    )
    assert event["event_id"] and TIME.match(event["at"]) and isinstance(event["count"], int)


def test_data_plane_changes_record_audit_events(api, scope):
    key = create_key(api, "writer", [scope.team_id])
    writer = api.with_key(key["api_key"])
    written = writer.post("/v3/scenario/write", scope.body(path="au/a.md", content="x"))
    writer.post("/v3/scenario/write", scope.body(path="au/b.md", content="y"))
    core = writer.post("/v3/core/write", scope.body(content="persona"))
    removed = writer.post("/v3/scenario/rm", scope.body(path="au/"))
    events = audit(api, memory_id=scope.memory_id)["events"]
    assert [e["action"] for e in events] == ["scenario_rm", "core_write", "scenario_write", "scenario_write"]
    rm_event, core_event, _, first = events
    _check_event(
        first,
        memory_id=scope.memory_id,
        action="scenario_write",
        layer="L2",
        actor=key["key_id"],
        request_id=written.body["request_id"],
    )
    assert first["target"] == "au/a.md" and first["count"] == 1
    _check_event(
        core_event,
        memory_id=scope.memory_id,
        action="core_write",
        layer="L3",
        actor=key["key_id"],
        request_id=core.body["request_id"],
    )
    assert core_event["count"] == 1
    _check_event(
        rm_event,
        memory_id=scope.memory_id,
        action="scenario_rm",
        layer="L2",
        actor=key["key_id"],
        request_id=removed.body["request_id"],
    )
    assert rm_event["target"] == "au/" and rm_event["count"] == 2
    assert removed.data["audit_ids"] == [rm_event["event_id"]]
    assert [e["at"] for e in events] == sorted((e["at"] for e in events), reverse=True)
    assert [e["event_id"] for e in events] == sorted((e["event_id"] for e in events), reverse=True)


def test_key_changes_record_audit_events(api):
    scope = make_scope()
    created = api.post("/v3/admin/keys/create", {"role": "reader", "team_ids": [scope.team_id]})
    revoked = api.post("/v3/admin/keys/revoke", {"key_id": created.data["key_id"]})
    events = [e for e in audit(api, limit=100)["events"] if e["target"] == created.data["key_id"]]
    assert [e["action"] for e in events] == ["key_revoke", "key_create"]
    _check_event(
        events[1],
        memory_id=None,
        action="key_create",
        layer="key",
        actor="bootstrap",
        request_id=created.body["request_id"],
    )
    _check_event(
        events[0],
        memory_id=None,
        action="key_revoke",
        layer="key",
        actor="bootstrap",
        request_id=revoked.body["request_id"],
    )


def test_a_multi_team_key_event_is_seen_once_by_all_and_by_each_team(api):
    one, two = make_scope(), make_scope()
    created = create_key(api, "reader", [one.team_id, two.team_id])
    everything = [e for e in audit(api, action="key_create", limit=100)["events"] if e["target"] == created["key_id"]]
    assert len(everything) == 1
    for team in (one, two):
        admin = api.with_key(create_key(api, "admin", [team.team_id])["api_key"])
        seen = [e for e in audit(admin, limit=100)["events"] if e["target"] == created["key_id"]]
        assert [e["action"] for e in seen] == ["key_create"]


def test_audit_events_never_hold_content(api, scope):
    marker = "MARKER-" + uuid.uuid4().hex
    api.post("/v3/scenario/write", scope.body(path="secret.md", content=f"top {marker} secret", summary=marker))
    api.post("/v3/scenario/write", scope.body(path="secret.md", content=f"again {marker}"))
    api.post("/v3/core/write", scope.body(content=f"persona {marker}"))
    api.post("/v3/core/write", scope.body(content=f"persona 2 {marker}"))
    api.post("/v3/scenario/rm", scope.body(path="secret.md"))
    api.post("/v3/admin/keys/create", {"role": "reader", "team_ids": [scope.team_id], "name": "plain"})
    assert len(audit(api, memory_id=scope.memory_id)["events"]) == 5
    items = table_items("audit_table")
    assert items and marker not in json.dumps(items, ensure_ascii=False)


def test_audit_query_filters_by_action_and_pages_newest_first(api, scope):
    for i in range(5):
        api.post("/v3/scenario/write", scope.body(path=f"p/{i}.md", content="c"))
    api.post("/v3/core/write", scope.body(content="p"))
    everything = audit(api, memory_id=scope.memory_id, limit=100)["events"]
    assert len(everything) == 6 and "next_token" not in audit(api, memory_id=scope.memory_id, limit=100)
    writes = audit(api, memory_id=scope.memory_id, action="scenario_write")["events"]
    assert [e["target"] for e in writes] == [f"p/{i}.md" for i in reversed(range(5))]
    assert audit(api, memory_id=scope.memory_id, action="core_write")["events"] == [everything[0]]
    assert audit(api, memory_id=scope.memory_id, action="key_create")["events"] == []
    pages, token = [], None
    while True:
        fields = {"memory_id": scope.memory_id, "action": "scenario_write", "limit": 2}
        if token:
            fields["next_token"] = token
        page = audit(api, **fields)
        pages.append(page["events"])
        token = page.get("next_token")
        if not token:
            break
    assert [len(p) for p in pages] == [2, 2, 1]
    assert functools.reduce(operator.iadd, pages, []) == writes
    first_token = audit(api, memory_id=scope.memory_id, limit=2)["next_token"]
    for fields in (
        {"memory_id": scope.memory_id, "action": "scenario_write", "next_token": first_token},
        {"memory_id": make_scope().memory_id, "next_token": first_token},
        {"memory_id": scope.memory_id, "next_token": first_token[:-3] + "xyz"},
    ):
        answer = api.post("/v3/audit/query", fields)
        assert answer.status == 400 and answer.message == "next_token: invalid", answer.body
    continued = audit(api, memory_id=scope.memory_id, limit=10, next_token=first_token)["events"]
    assert continued == everything[2:]


@pytest.mark.parametrize(
    "fields, field",
    [({"action": "explode"}, "action"), ({"limit": 0}, "limit"), ({"limit": 101}, "limit"), ({"limit": "5"}, "limit")],
)
def test_audit_query_validates_fields(api, fields, field):
    answer = api.post("/v3/audit/query", fields)
    assert answer.status == 400 and answer.message.startswith(f"{field}: "), answer.body


def test_team_admin_sees_only_its_teams_events(api, team_admin):
    admin, _, mine, _, foreign = team_admin
    api.post("/v3/scenario/write", mine.body(path="a.md", content="c"))
    api.post("/v3/scenario/write", foreign.body(path="a.md", content="c"))
    created = create_key(api, "reader", [mine.team_id])
    own = audit(admin, memory_id=mine.memory_id)["events"]
    assert [e["action"] for e in own] == ["scenario_write"]
    answer = admin.post("/v3/audit/query", {"memory_id": foreign.memory_id})
    assert answer.status == 403, answer.body
    unknown = admin.post("/v3/audit/query", {"memory_id": make_scope().memory_id})
    assert unknown.status == 403, unknown.body
    seen = audit(admin, limit=100)["events"]
    assert seen, "the team admin's own key events and its team's writes are visible"
    assert all(e["memory_id"] in (None, mine.memory_id) for e in seen)
    assert all(e["memory_id"] != foreign.memory_id for e in seen)
    assert any(e["action"] == "key_create" and e["target"] == created["key_id"] for e in seen)
    assert any(e["memory_id"] == mine.memory_id for e in seen)


def test_all_teams_key_gets_404_for_an_unknown_memory(api):
    answer = api.post("/v3/audit/query", {"memory_id": make_scope().memory_id})
    assert answer.status == 404 and answer.body["code"] == 404, answer.body


def test_only_admins_may_query_audit(api, scope):
    reader = api.with_key(create_key(api, "writer", [scope.team_id])["api_key"])
    assert reader.post("/v3/audit/query", {"memory_id": scope.memory_id}).status == 403
