"""§9 asset-level clear and §4 memory delete: every layer erased from storage before the answer,
the asset kept (or then dropped), validation and scope, Idempotency-Key, the content-epoch fence
against racing writes, faults before and during the purge, purge_pending and its continuation,
and the request-size limits of the bulk deletes."""

from __future__ import annotations

import json
import os
import uuid

import boto3
import pytest
from botocore.exceptions import ClientError

from helpers import Scope, make_scope

BUCKET = "memory-hub-local"
CLEAR = "/v3/chat-memory/clear"


# ---- helpers --------------------------------------------------------------------------------------

def ok(answer):
    assert answer.status == 200, answer.body
    assert answer.body["code"] == 0, answer.body
    return answer.data


def new_key(api, role, team_ids):
    data = ok(api.post("/v3/admin/keys/create", {"role": role, "team_ids": team_ids}))
    return api.with_key(data["api_key"])


def add_messages(api, scope, contents, session="s1", headers=None, **fields):
    body = scope.body(session_id=session, messages=[{"role": "user", "content": c} for c in contents], **fields)
    return ok(api.post("/v3/conversation/add", body, headers=headers))["accepted_ids"]


def add_record(api, scope, content, **fields):
    return ok(api.post("/v3/atomic/add", scope.body(content=content, **fields)))


def write_scene(api, scope, path, content, **fields):
    return ok(api.post("/v3/scenario/write", scope.body(path=path, content=content, **fields)))


def write_persona(api, scope, content):
    return ok(api.post("/v3/core/write", scope.body(content=content)))


def clear(api, *memory_ids, headers=None):
    return ok(api.post(CLEAR, {"memory_ids": list(memory_ids)}, headers=headers))


def get_asset(api, memory_id):
    return ok(api.post("/v3/memory/get", {"memory_id": memory_id}))


def l0_total(api, scope):
    return ok(api.post("/v3/conversation/count", scope.body()))["total"]


def l1_total(api, scope):
    return ok(api.post("/v3/atomic/count", scope.body()))["total"]


def audit_events(api, memory_id, action=None):
    body = {"memory_id": memory_id, "limit": 100}
    if action:
        body["action"] = action
    return ok(api.post("/v3/audit/query", body))["events"]


def visible_everything(api, scope):
    """Every read, count and search of every layer for ``scope``, as one comparable dict."""
    post = lambda path, **f: ok(api.post(path, scope.body(**f)))  # noqa: E731
    return {
        "l0_query": post("/v3/conversation/query", limit=100),
        "l0_count": post("/v3/conversation/count")["total"],
        "l0_search": post("/v3/conversation/search", query="marker")["messages"],
        "l1_query": post("/v3/atomic/query", limit=100),
        "l1_count": post("/v3/atomic/count")["total"],
        "l1_search": post("/v3/atomic/search", query="marker")["items"],
        "l2_ls": post("/v3/scenario/ls")["entries"],
        "l2_count": post("/v3/scenario/count")["total"],
        "l3_count": post("/v3/core/count")["total"],
        "l3_read": post("/v3/core/read")["content"],
    }


EMPTY = {"l0_query": {"messages": [], "total": 0}, "l0_count": 0, "l0_search": [],
         "l1_query": {"items": [], "total": 0}, "l1_count": 0, "l1_search": [], "l2_ls": [], "l2_count": 0,
         "l3_count": 0, "l3_read": None}


def epoch_of(memory_id):
    from memory_hub import assets

    return int(assets.get(memory_id).epoch)


def s3():
    return boto3.client("s3", region_name=os.environ.get("AWS_DEFAULT_REGION", "us-east-1"))


def dynamodb():
    return boto3.client("dynamodb", region_name=os.environ.get("AWS_DEFAULT_REGION", "us-east-1"))


def prefix_of(scope):
    return f"profiles/{scope.team_id}:{scope.agent_id}/{scope.memory_id}/"


def s3_keys(prefix):
    found = []
    for page in s3().get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix):
        found += [o["Key"] for o in page.get("Contents", [])]
    return found


def table_names():
    from memory_hub.settings import get_settings

    s = get_settings()
    return [s.assets_table, s.items_table, s.scenes_table, s.keys_table, s.audit_table, s.idempotency_table]


def table_rows(table):
    rows = []
    for page in dynamodb().get_paginator("scan").paginate(TableName=table):
        rows += page.get("Items", [])
    return rows


def rows_of_epoch(scope, epoch):
    """Items-table and scene-index rows written in ``epoch`` of the scope's memory."""
    from memory_hub.settings import get_settings

    part = f"{scope.team_id}:{scope.agent_id}#{epoch}"
    items = [r for r in table_rows(get_settings().items_table) if part in r["pk"]["S"]]
    scenes = [r for r in table_rows(get_settings().scenes_table) if r["scope"]["S"] == part]
    purges = [r for r in items if r["pk"]["S"] == "PURGE"]
    return [r for r in items if r not in purges] + scenes


def purge_records(scope):
    from memory_hub.settings import get_settings

    return [r for r in table_rows(get_settings().items_table)
            if r["pk"]["S"] == "PURGE" and r["sk"]["S"].startswith(f"{scope.team_id}:{scope.agent_id}#")]


def all_stored_text():
    """Everything the bucket (every version, key and metadata) and every table hold, as text."""
    client = s3()
    parts = []
    for page in client.get_paginator("list_object_versions").paginate(Bucket=BUCKET):
        for marker in page.get("DeleteMarkers", []):
            parts.append(marker["Key"])
        for version in page.get("Versions", []):
            parts.append(version["Key"])
            extra = {"VersionId": version["VersionId"]} if version.get("VersionId") not in (None, "null") else {}
            obj = client.get_object(Bucket=BUCKET, Key=version["Key"], **extra)
            parts.append(obj["Body"].read().decode("utf-8", "replace"))
            parts.append(json.dumps(obj.get("Metadata", {})))
    for table in table_names():
        parts.append(json.dumps(table_rows(table)))
    return "\n".join(parts)


def traces_of(markers):
    text = all_stored_text()
    return sorted(m for m in markers if m in text)


def seed_with_markers(api, scope, idempotency_key=None):
    """Content in every layer, each piece a unique marker string; returns the markers."""
    tag = uuid.uuid4().hex
    m = {name: f"{name}x{tag}" for name in
         ("l0", "l1content", "l1background", "l1tag", "l1meta", "scene", "summary", "persona1", "persona2",
          "persona3", "metadata")}
    headers = {"Idempotency-Key": idempotency_key} if idempotency_key else None
    add_messages(api, scope, [f"marker {m['l0']} said", "plain"], headers=headers)
    add_record(api, scope, f"marker {m['l1content']}", background=m["l1background"], tags=[m["l1tag"]],
               metadata={"note": m["l1meta"]})
    write_scene(api, scope, "notes/a.md", f"# marker\n{m['scene']}\n", summary=m["summary"])
    for n in (1, 2, 3):  # two overwrites: two persona backups
        write_persona(api, scope, f"persona {m[f'persona{n}']}")
    s3().put_object(Bucket=BUCKET, Key=prefix_of(scope) + ".metadata/state.json", Body=m["metadata"].encode())
    assert len(s3_keys(prefix_of(scope) + ".backup/persona/")) == 2
    assert sorted(traces_of(m.values())) == sorted(m.values())  # the scan does see them before the clear
    return list(m.values())


@pytest.fixture
def no_continuation(monkeypatch):
    """Capture the asynchronous purge continuations a clear asks for, instead of starting them."""
    from memory_hub import clear as clear_logic

    started = []
    monkeypatch.setattr(clear_logic, "invoke_async", started.append)
    return started


# ---- TencentDB's scenario -------------------------------------------------------------------------

def test_tencentdb_scenario_clear_keeps_the_asset_and_the_memory_id(api, scope):
    made = ok(api.post("/v3/memory/create", {
        "team_id": scope.team_id, "agent_id": scope.agent_id, "name": "Support", "visibility": "team",
        "acl": [{"principal": "team:ops", "permissions": ["read", "write"]}],
        "bindings": [{"agent_id": "helper", "injection_mode": "prepend", "priority": 2}]}))
    ok(api.post("/v3/memory/update", {"memory_id": scope.memory_id, "retention_days": 45}))
    add_messages(api, scope, ["hello", "how are you", "fine"])
    assert write_scene(api, scope, "a/b.md", "before")["version"] == 1
    assert write_scene(api, scope, "a/b.md", "before again")["version"] == 2
    before = get_asset(api, scope.memory_id)
    assert before["counts"]["l0"] == 3 and before["last_cleared_at"] is None

    data = clear(api, scope.memory_id)
    assert data["all_cleared"] is True
    [item] = data["items"]
    assert item["memory_id"] == scope.memory_id and item["cleared"] is True
    assert item["l0_deleted"] == 3 and item["l1_deleted"] == 0 and item["l2_deleted"] == 1
    assert "purge_pending" not in item

    assert l0_total(api, scope) == 0
    after = get_asset(api, scope.memory_id)
    assert after["counts"] == {"l0": 0, "l1": 0, "l2": 0, "l3": 0}
    for field in ("memory_id", "team_id", "agent_id", "owner", "name", "visibility", "acl", "bindings", "status",
                  "retention_days", "created_at"):
        assert after[field] == before[field], field
    assert after["retention_days"] == 45 and after["created_at"] == made["created_at"]
    assert after["last_cleared_at"] is not None and after["last_cleared_at"] > before["updated_at"]
    assert after["updated_at"] == after["last_cleared_at"]

    # later writes land in the same memory; a path starts again at version 1
    add_messages(api, scope, ["after the clear"])
    written = write_scene(api, scope, "a/b.md", "after")
    assert written["version"] == 1 and written["created"] is True
    again = get_asset(api, scope.memory_id)
    assert again["memory_id"] == scope.memory_id and again["created_at"] == made["created_at"]
    assert again["counts"] == {"l0": 1, "l1": 0, "l2": 1, "l3": 0}

    # clearing again is harmless
    ok(api.post("/v3/memory/update", {"memory_id": scope.memory_id, "name": "Renamed"}))
    second = clear(api, scope.memory_id)
    assert second["all_cleared"] is True
    assert second["items"][0]["cleared"] is True and second["items"][0]["l0_deleted"] == 1
    third = clear(api, scope.memory_id)["items"][0]
    assert third["cleared"] is True
    assert {k: third[k] for k in ("l0_deleted", "l1_deleted", "l2_deleted", "l3_deleted", "profile_deleted",
                                  "files_deleted")} == dict.fromkeys(
        ("l0_deleted", "l1_deleted", "l2_deleted", "l3_deleted", "profile_deleted", "files_deleted"), 0)
    assert get_asset(api, scope.memory_id)["name"] == "Renamed"


# ---- every layer ----------------------------------------------------------------------------------

def test_clear_erases_every_layer_with_per_layer_counts_in_request_order(api, scope):
    other_user = Scope(scope.team_id, scope.agent_id, scope.user_id + "-b")
    add_messages(api, scope, ["one marker", "two", "three", "four"])
    add_messages(api, other_user, ["five", "six"], session="s2")
    kept = add_record(api, scope, "likes tea marker", background="bg", tags=["t"])
    add_record(api, scope, "likes tea marker", background="bg")  # reinforces, no new record
    add_record(api, scope, "lives in Paris")
    add_record(api, scope, "works nights", type="profile")
    add_record(api, other_user, "other user's record")
    for path in ("x.md", "dir/y.md", "dir/deeper/z.md"):
        write_scene(api, scope, path, f"scene {path}", summary="s")
    for n in range(3):
        write_persona(api, scope, f"persona v{n + 1}")
    prefix = prefix_of(scope)
    assert len(s3_keys(prefix)) == 6  # 3 scenes, persona, 2 backups
    old_epoch = epoch_of(scope.memory_id)
    assert rows_of_epoch(scope, old_epoch)

    empty, untouched = make_scope(), make_scope()
    add_messages(api, empty, ["only to create the asset"])
    clear(api, empty.memory_id)
    add_messages(api, untouched, ["not named in the clear"])

    data = clear(api, empty.memory_id, scope.memory_id)
    assert [i["memory_id"] for i in data["items"]] == [empty.memory_id, scope.memory_id]
    assert data["all_cleared"] is True
    first, item = data["items"]
    assert first["cleared"] is True and first["l0_deleted"] == 0 and first["files_deleted"] == 0
    expected = {"memory_id": scope.memory_id, "cleared": True, "l0_deleted": 6, "l1_deleted": 4, "l2_deleted": 3,
                "l3_deleted": 1, "profile_deleted": 4, "files_deleted": 6}
    assert {k: item[k] for k in expected} == expected
    assert isinstance(item["audit_ids"], list) and item["audit_ids"]

    # the audit events name the clear and its counts, never content
    events = {e["event_id"]: e for e in audit_events(api, scope.memory_id, "clear")}
    assert set(item["audit_ids"]) <= set(events)
    per_layer = {}
    for event_id in item["audit_ids"]:
        event = events[event_id]
        assert event["action"] == "clear" and event["actor"] == "bootstrap"
        per_layer[event["layer"]] = per_layer.get(event["layer"], 0) + event["count"]
    assert per_layer.get("L0") == 6 and per_layer.get("L1") == 4 and per_layer.get("L2") == 3
    assert per_layer.get("L3") == 1

    # nothing visible, for both users
    assert visible_everything(api, scope) == EMPTY
    assert visible_everything(api, other_user) == EMPTY
    assert get_asset(api, scope.memory_id)["counts"] == {"l0": 0, "l1": 0, "l2": 0, "l3": 0}
    assert ok(api.post("/v3/scenario/read", scope.body(path="x.md")))["content"] is None
    # and nothing stored: objects, items, guards, index entries, counters, purge record
    assert s3_keys(prefix) == []
    assert rows_of_epoch(scope, old_epoch) == []
    assert purge_records(scope) == []
    assert l0_total(api, untouched) == 1

    # the natural-key guard went too: the same record is new again
    again = add_record(api, scope, "likes tea marker", background="bg")
    assert again["created"] is True and again["id"] != kept["id"]
    assert again["version"] == 1 and again["reinforced_count"] == 1
    assert l1_total(api, scope) == 1
    assert ok(api.post("/v3/core/write", scope.body(content="fresh")))["version"] == 1


# ---- validation and scope -------------------------------------------------------------------------

def test_memory_ids_are_trimmed_and_deduplicated(api, scope):
    add_messages(api, scope, ["a"])
    data = clear(api, f"  {scope.memory_id} ", scope.memory_id, "", "   ")
    assert [i["memory_id"] for i in data["items"]] == [scope.memory_id]
    assert data["items"][0]["l0_deleted"] == 1


@pytest.mark.parametrize("ids", [[], [""], ["  ", "\t"], None, "one-id", [1]])
def test_no_usable_memory_id_is_400(api, ids):
    answer = api.post(CLEAR, {} if ids is None else {"memory_ids": ids})
    assert answer.status == 400 and answer.body["code"] == 400, answer.body
    assert answer.body["message"].startswith("memory_ids"), answer.body


def test_more_than_100_ids_is_400_and_clears_nothing(api, scope):
    add_messages(api, scope, ["keep me"])
    answer = api.post(CLEAR, {"memory_ids": [scope.memory_id] + [f"chat_memory-x-{n}" for n in range(100)]})
    assert answer.status == 400 and answer.body["message"].startswith("memory_ids"), answer.body
    assert l0_total(api, scope) == 1
    at_limit = api.post(CLEAR, {"memory_ids": [scope.memory_id] * 100})
    assert ok(at_limit)["items"][0]["l0_deleted"] == 1


def test_one_unknown_id_clears_nothing(api, scope):
    team_b = make_scope()
    mate = Scope(scope.team_id, scope.agent_id + "2", scope.user_id)
    for s in (scope, mate, team_b):
        add_messages(api, s, ["survives"])
        write_scene(api, s, "s.md", "survives")
    unknown = f"chat_memory-{scope.team_id}-nosuchagent"

    # a `*` admin key: unknown → 404
    answer = api.post(CLEAR, {"memory_ids": [scope.memory_id, unknown, mate.memory_id]})
    assert answer.status == 404 and answer.body["code"] == 404, answer.body
    # a team-scoped admin key: unknown → 403, another team's memory → 403
    team_admin = new_key(api, "admin", [scope.team_id])
    answer = team_admin.post(CLEAR, {"memory_ids": [scope.memory_id, unknown]})
    assert answer.status == 403 and answer.body["code"] == 403, answer.body
    answer = team_admin.post(CLEAR, {"memory_ids": [scope.memory_id, team_b.memory_id]})
    assert answer.status == 403, answer.body
    answer = team_admin.post(CLEAR, {"memory_ids": [team_b.memory_id]})
    assert answer.status == 403, answer.body
    # the first failing id answers, in order
    answer = team_admin.post(CLEAR, {"memory_ids": [team_b.memory_id, unknown]})
    assert answer.status == 403, answer.body
    answer = api.post(CLEAR, {"memory_ids": [unknown, team_b.memory_id]})
    assert answer.status == 404, answer.body

    for s in (scope, mate, team_b):
        assert l0_total(api, s) == 1
        assert get_asset(api, s.memory_id)["last_cleared_at"] is None
        assert ok(api.post("/v3/scenario/read", s.body(path="s.md")))["version"] == 1

    # the team admin may clear its own team's memories
    data = ok(team_admin.post(CLEAR, {"memory_ids": [scope.memory_id, mate.memory_id]}))
    assert data["all_cleared"] is True
    assert l0_total(api, scope) == 0 and l0_total(api, mate) == 0 and l0_total(api, team_b) == 1


@pytest.mark.parametrize("role", ["writer", "reader"])
def test_writer_and_reader_keys_may_not_clear(api, scope, role):
    add_messages(api, scope, ["survives"])
    key = new_key(api, role, ["*"])
    answer = key.post(CLEAR, {"memory_ids": [scope.memory_id]})
    assert answer.status == 403 and answer.body["code"] == 403, answer.body
    assert l0_total(api, scope) == 1
    assert key.post("/v3/memory/delete", {"memory_id": scope.memory_id}).status == 403
    assert get_asset(api, scope.memory_id)["counts"]["l0"] == 1


# ---- erasure --------------------------------------------------------------------------------------

def test_clear_removes_every_marker_from_every_store(api, scope):
    markers = seed_with_markers(api, scope, idempotency_key="add-" + uuid.uuid4().hex)
    data = clear(api, scope.memory_id, headers={"Idempotency-Key": "clear-" + uuid.uuid4().hex})
    item = data["items"][0]
    assert item["cleared"] is True and "purge_pending" not in item
    assert item["files_deleted"] == 5  # scene, persona, two backups, the .metadata object
    assert item["l3_deleted"] == 1 and item["l2_deleted"] == 1
    assert traces_of(markers) == []
    assert s3_keys(prefix_of(scope)) == []
    from memory_hub.settings import get_settings

    stored = json.dumps(table_rows(get_settings().idempotency_table))
    assert stored != "[]"  # the records of the add and the clear exist ...
    assert not any(m in stored for m in markers)  # ... and hold no content


# ---- Idempotency-Key ------------------------------------------------------------------------------

def test_idempotency_key_replays_without_clearing_again(api, scope):
    add_messages(api, scope, ["one", "two"])
    key = {"Idempotency-Key": "clear-" + uuid.uuid4().hex}
    first = api.post(CLEAR, {"memory_ids": [scope.memory_id]}, headers=key)
    data = ok(first)
    assert data["items"][0]["l0_deleted"] == 2
    cleared_at = get_asset(api, scope.memory_id)["last_cleared_at"]

    add_messages(api, scope, ["written after the first clear"])
    replay = api.post(CLEAR, {"memory_ids": [scope.memory_id]}, headers=key)
    assert ok(replay) == data
    assert replay.body["request_id"] != first.body["request_id"]
    assert l0_total(api, scope) == 1  # the replay deleted nothing
    assert get_asset(api, scope.memory_id)["last_cleared_at"] == cleared_at
    assert len(audit_events(api, scope.memory_id, "clear")) == len(data["items"][0]["audit_ids"])

    other = make_scope()
    add_messages(api, other, ["x"])
    changed = api.post(CLEAR, {"memory_ids": [scope.memory_id, other.memory_id]}, headers=key)
    assert changed.status == 422 and changed.body["code"] == 422, changed.body
    assert l0_total(api, scope) == 1 and l0_total(api, other) == 1


def test_a_duplicate_while_the_first_clear_runs_is_409_retryable(api, scope, monkeypatch):
    from memory_hub import clear as clear_logic

    add_messages(api, scope, ["one"])
    key = {"Idempotency-Key": "clear-" + uuid.uuid4().hex}
    body = {"memory_ids": [scope.memory_id]}
    real_retire = clear_logic._retire
    duplicates = []

    def retire(asset, *, drop):
        if not duplicates:
            duplicates.append(None)
            duplicates[0] = api.post(CLEAR, body, headers=key)
        return real_retire(asset, drop=drop)

    monkeypatch.setattr(clear_logic, "_retire", retire)
    first = ok(api.post(CLEAR, body, headers=key))
    monkeypatch.undo()
    duplicate = duplicates[0]
    assert duplicate.status == 409 and duplicate.body["code"] == 409, duplicate.body
    assert duplicate.body["retryable"] is True
    assert first["items"][0]["l0_deleted"] == 1
    assert ok(api.post(CLEAR, body, headers=key)) == first  # once the first is done, it answers


# ---- the fence ------------------------------------------------------------------------------------

def test_writes_before_the_bump_vanish_and_writes_after_it_survive(api, scope, monkeypatch):
    from memory_hub import clear as clear_logic
    from memory_hub import purge

    add_messages(api, scope, ["old one"])
    write_scene(api, scope, "shared.md", "old scene")
    write_persona(api, scope, "old persona")
    real_retire, real_run = clear_logic._retire, purge.run
    late = {}

    def retire(asset, *, drop):  # just before the epoch bump
        add_messages(api, scope, ["slipped in before the bump"])
        add_record(api, scope, "record before the bump")
        write_scene(api, scope, "before.md", "scene before the bump")
        return real_retire(asset, drop=drop)

    def run(target, deadline):  # after the bump, before the old epoch is erased
        late["msgs"] = add_messages(api, scope, ["written after the bump"])
        late["atom"] = add_record(api, scope, "record after the bump")
        late["scene"] = write_scene(api, scope, "shared.md", "new scene")
        late["persona"] = write_persona(api, scope, "new persona")
        return real_run(target, deadline)

    monkeypatch.setattr(clear_logic, "_retire", retire)
    monkeypatch.setattr(purge, "run", run)
    item = clear(api, scope.memory_id)["items"][0]
    monkeypatch.undo()

    assert item["cleared"] is True
    assert item["l0_deleted"] == 2 and item["l1_deleted"] == 1 and item["l2_deleted"] == 2
    assert late["scene"]["version"] == 1 and late["scene"]["created"] is True
    assert late["persona"]["version"] == 1

    messages = ok(api.post("/v3/conversation/query", scope.body()))["messages"]
    assert [m["content"] for m in messages] == ["written after the bump"]
    assert [m["id"] for m in messages] == late["msgs"]
    records = ok(api.post("/v3/atomic/query", scope.body()))["items"]
    assert [r["content"] for r in records] == ["record after the bump"]
    assert [e["path"] for e in ok(api.post("/v3/scenario/ls", scope.body()))["entries"]] == ["shared.md"]
    scene = ok(api.post("/v3/scenario/read", scope.body(path="shared.md")))
    assert scene["content"].endswith("new scene") and scene["version"] == 1
    assert ok(api.post("/v3/scenario/read", scope.body(path="before.md")))["content"] is None
    core = ok(api.post("/v3/core/read", scope.body()))
    assert core["content"] == "new persona" and core["version"] == 1
    assert get_asset(api, scope.memory_id)["counts"] == {"l0": 1, "l1": 1, "l2": 1, "l3": 1}
    # the purge left the new objects alone and took everything else
    assert sorted(k.removeprefix(prefix_of(scope)) for k in s3_keys(prefix_of(scope))) == [
        "persona.md", "scene_blocks/shared.md"]
    # and a later cleanup (orphan sweep included) leaves them alone too
    assert pool_cleanup(api)["done"] is True
    assert get_asset(api, scope.memory_id)["counts"] == {"l0": 1, "l1": 1, "l2": 1, "l3": 1}
    assert ok(api.post("/v3/core/read", scope.body()))["content"] == "new persona"


def pool_cleanup(api, event=None):
    return api.invoke("CleanupFunction", event or {})


def test_a_write_that_raced_the_bump_lands_in_the_new_epoch(api, scope, monkeypatch):
    from memory_hub import assets

    add_messages(api, scope, ["before"])
    write_scene(api, scope, "p.md", "before")
    write_persona(api, scope, "before")
    real_get = assets.get
    stale = real_get(scope.memory_id)
    item = clear(api, scope.memory_id)["items"][0]
    assert item["cleared"] is True and item["l0_deleted"] == 1
    assert int(real_get(scope.memory_id).epoch) != int(stale.epoch)

    def race_once():
        served = []

        def get(memory_id):  # the writer read the asset just before the clear moved it on
            if memory_id == scope.memory_id and not served:
                served.append(memory_id)
                return stale
            return real_get(memory_id)

        monkeypatch.setattr(assets, "get", get)
        return served

    served = race_once()
    ids = add_messages(api, scope, ["raced one", "raced two"])
    assert served
    served = race_once()
    atom = add_record(api, scope, "raced record")
    assert served and atom["created"] is True
    served = race_once()
    scene = write_scene(api, scope, "p.md", "raced scene")
    assert served and scene["version"] == 1
    served = race_once()
    persona = write_persona(api, scope, "raced persona")
    assert served and persona["version"] == 1
    monkeypatch.setattr(assets, "get", real_get)

    # acknowledged means visible, in the new epoch, with exact counters
    messages = ok(api.post("/v3/conversation/query", scope.body()))
    assert sorted(m["id"] for m in messages["messages"]) == sorted(ids) and messages["total"] == 2
    assert [r["id"] for r in ok(api.post("/v3/atomic/query", scope.body()))["items"]] == [atom["id"]]
    assert ok(api.post("/v3/scenario/read", scope.body(path="p.md")))["content"].endswith("raced scene")
    assert ok(api.post("/v3/core/read", scope.body()))["content"] == "raced persona"
    assert get_asset(api, scope.memory_id)["counts"] == {"l0": 2, "l1": 1, "l2": 1, "l3": 1}
    assert rows_of_epoch(scope, int(stale.epoch)) == []  # the stale epoch took nothing


def test_two_racing_clears_both_answer_cleared(api, scope, monkeypatch):
    from memory_hub import clear as clear_logic

    add_messages(api, scope, ["a", "b", "c"])
    write_scene(api, scope, "a.md", "x")
    real_retire = clear_logic._retire
    inner, started = [], []

    def retire(asset, *, drop):  # another clear moves the epoch on between our read and our bump
        if not started:
            started.append(1)
            inner.append(clear(api, scope.memory_id)["items"][0])
        return real_retire(asset, drop=drop)

    monkeypatch.setattr(clear_logic, "_retire", retire)
    outer = clear(api, scope.memory_id)["items"][0]
    monkeypatch.undo()
    [first] = inner
    assert first["cleared"] is True and first["l0_deleted"] == 3 and first["l2_deleted"] == 1
    assert outer["cleared"] is True and outer["l0_deleted"] == 0, outer
    assert visible_everything(api, scope) == EMPTY and purge_records(scope) == []
    assert s3_keys(prefix_of(scope)) == []


def test_a_write_that_raced_a_memory_delete_makes_a_new_asset(api, scope, monkeypatch):
    from memory_hub import assets

    add_messages(api, scope, ["before"])
    real_get = assets.get
    stale = real_get(scope.memory_id)
    assert ok(api.post("/v3/memory/delete", {"memory_id": scope.memory_id}))["deleted"] is True
    served = []

    def get(memory_id):
        if memory_id == scope.memory_id and not served:
            served.append(memory_id)
            return stale
        return real_get(memory_id)

    monkeypatch.setattr(assets, "get", get)
    ids = add_messages(api, scope, ["raced the delete"])
    monkeypatch.undo()
    assert served
    assert [m["id"] for m in ok(api.post("/v3/conversation/query", scope.body()))["messages"]] == ids
    reborn = get_asset(api, scope.memory_id)
    assert reborn["created_at"] > stale.created_at and reborn["counts"]["l0"] == 1
    assert rows_of_epoch(scope, int(stale.epoch)) == []


# ---- faults ---------------------------------------------------------------------------------------

def throttled(operation="TransactWriteItems"):
    return ClientError({"Error": {"Code": "ThrottlingException", "Message": "Rate exceeded"}}, operation)


@pytest.mark.parametrize("fault", [throttled(), RuntimeError("boom")], ids=["throttling", "generic"])
def test_a_failure_before_the_bump_leaves_the_memory_untouched(api, scope, monkeypatch, fault):
    from memory_hub import items

    other = make_scope()
    for s in (scope, other):
        add_messages(api, s, ["a", "b", "c"])
        write_persona(api, s, "persona")
    before = get_asset(api, scope.memory_id)
    real_transact = items.transact
    calls = []

    def transact(build):  # the first transaction of the clear is the epoch bump of `scope`
        calls.append(build)
        if len(calls) == 1:
            raise fault
        return real_transact(build)

    monkeypatch.setattr(items, "transact", transact)
    answer = api.post(CLEAR, {"memory_ids": [scope.memory_id, other.memory_id]})
    monkeypatch.undo()
    data = ok(answer)
    assert data["all_cleared"] is False
    failed, cleared = data["items"]
    assert failed["memory_id"] == scope.memory_id and failed["cleared"] is False
    assert {k: failed[k] for k in ("l0_deleted", "l1_deleted", "l2_deleted", "l3_deleted", "profile_deleted",
                                   "files_deleted")} == dict.fromkeys(
        ("l0_deleted", "l1_deleted", "l2_deleted", "l3_deleted", "profile_deleted", "files_deleted"), 0)
    assert isinstance(failed["reason"], str) and failed["reason"]
    assert "boom" not in failed["reason"] and "Throttling" not in failed["reason"]
    assert failed["retryable"] is True and failed.get("audit_ids", []) == []
    assert cleared["memory_id"] == other.memory_id and cleared["cleared"] is True
    assert cleared["l0_deleted"] == 3 and cleared["l3_deleted"] == 1

    after = get_asset(api, scope.memory_id)
    assert after == before  # last_cleared_at, updated_at, counts: all unchanged
    assert l0_total(api, scope) == 3
    assert ok(api.post("/v3/core/read", scope.body()))["content"] == "persona"
    assert purge_records(scope) == []
    # the retry the answer invites works
    assert clear(api, scope.memory_id)["items"][0]["l0_deleted"] == 3


def test_a_failure_in_the_purge_is_finished_by_the_cleanup(api, scope, monkeypatch, no_continuation):
    from memory_hub import purge

    markers = seed_with_markers(api, scope)
    old_epoch = epoch_of(scope.memory_id)

    def broken(*args, **kwargs):
        raise throttled("BatchWriteItem")

    monkeypatch.setattr(purge, "_items", broken)  # S3 objects and the scene index go; items stay
    item = clear(api, scope.memory_id)["items"][0]
    monkeypatch.undo()
    assert item["cleared"] is True and item["purge_pending"] is True
    assert visible_everything(api, scope) == EMPTY
    assert get_asset(api, scope.memory_id)["counts"] == {"l0": 0, "l1": 0, "l2": 0, "l3": 0}
    assert [r["sk"]["S"] for r in purge_records(scope)] == [f"{scope.team_id}:{scope.agent_id}#{old_epoch}"]
    assert rows_of_epoch(scope, old_epoch)  # still stored: the cleanup's job now
    assert len(no_continuation) == 1

    report = pool_cleanup(api)
    assert report["done"] is True and report["purges_completed"] >= 1
    assert purge_records(scope) == []
    assert rows_of_epoch(scope, old_epoch) == []
    assert traces_of(markers) == []
    done = [e for e in audit_events(api, scope.memory_id, "clear") if e["target"] == "purge_complete"]
    assert len(done) == 1 and done[0]["layer"] == "asset" and done[0]["actor"] == "system:cleanup"
    assert done[0]["count"] >= 3  # the L0 and L1 items it erased


def test_a_failed_purge_continuation_request_leaves_the_record_for_the_cleanup(api, scope, monkeypatch):
    from memory_hub import clear as clear_logic

    add_messages(api, scope, ["x"])

    def cannot_invoke(event):
        raise throttled("Invoke")

    monkeypatch.setattr(clear_logic, "invoke_async", cannot_invoke)
    monkeypatch.setattr(clear_logic, "SYNC_BUDGET_S", 0.0)
    item = clear(api, scope.memory_id)["items"][0]
    monkeypatch.undo()
    assert item["cleared"] is True and item["purge_pending"] is True
    assert l0_total(api, scope) == 0 and len(purge_records(scope)) == 1
    assert pool_cleanup(api)["done"] is True
    assert purge_records(scope) == []
    assert any(e["target"] == "purge_complete" for e in audit_events(api, scope.memory_id, "clear"))


@pytest.mark.parametrize("step", ["audit", "forget"])
def test_a_failure_after_the_bump_still_answers_cleared(api, scope, monkeypatch, no_continuation, step):
    """Once the epoch moved, the memory is invisible: the item must not claim ``cleared: false``
    (which promises an untouched memory and an unchanged last_cleared_at)."""
    from memory_hub import audit, purge

    add_messages(api, scope, ["a", "b"])
    before = get_asset(api, scope.memory_id)
    old_epoch = epoch_of(scope.memory_id)
    module, name = (audit, "record") if step == "audit" else (purge, "forget")
    real = getattr(module, name)
    calls = []

    def failing_once(*args, **kwargs):
        calls.append(1)
        if len(calls) == 1:
            raise throttled("BatchWriteItem")
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, failing_once)
    data = ok(api.post(CLEAR, {"memory_ids": [scope.memory_id]}))
    monkeypatch.undo()
    assert calls
    item = data["items"][0]
    after = get_asset(api, scope.memory_id)
    assert l0_total(api, scope) == 0 and after["counts"]["l0"] == 0
    assert after["last_cleared_at"] != before["last_cleared_at"]
    assert item["cleared"] is True and data["all_cleared"] is True, item
    # whatever the failure left behind, the cleanup finishes without a trace
    assert pool_cleanup(api)["done"] is True
    assert purge_records(scope) == [] and rows_of_epoch(scope, old_epoch) == []


# ---- purge_pending and the continuation -----------------------------------------------------------

def test_purge_pending_is_finished_by_the_continuation(api, scope, monkeypatch, no_continuation):
    from memory_hub import clear as clear_logic

    markers = seed_with_markers(api, scope)
    add_messages(api, scope, [f"bulk {n}" for n in range(100)])
    old_epoch = epoch_of(scope.memory_id)
    monkeypatch.setattr(clear_logic, "SYNC_BUDGET_S", 0.0)  # as if the memory were too large to finish
    item = clear(api, scope.memory_id)["items"][0]
    monkeypatch.undo()
    assert item["cleared"] is True and item["purge_pending"] is True
    assert visible_everything(api, scope) == EMPTY
    assert not any(e["target"] == "purge_complete" for e in audit_events(api, scope.memory_id, "clear"))

    # writes after the answer are never touched by the rest of the purge
    add_messages(api, scope, ["after the answer"])
    write_scene(api, scope, "notes/a.md", "after the answer")
    write_persona(api, scope, "after the answer")

    [event] = no_continuation
    spec = event[clear_logic.PURGE_EVENT_KEY]
    assert spec["memory_id"] == scope.memory_id and int(spec["epoch"]) == old_epoch
    json.dumps(event)  # a Lambda payload
    result = api.invoke("ClearFunction", event)
    assert result["done"] is True
    done = [e for e in audit_events(api, scope.memory_id, "clear") if e["target"] == "purge_complete"]
    assert len(done) == 1 and done[0]["layer"] == "asset"
    assert purge_records(scope) == [] and rows_of_epoch(scope, old_epoch) == []
    assert traces_of(markers) == []
    assert ok(api.post("/v3/conversation/query", scope.body()))["total"] == 1
    scene = ok(api.post("/v3/scenario/read", scope.body(path="notes/a.md")))
    assert scene["content"].endswith("after the answer")
    assert ok(api.post("/v3/core/read", scope.body()))["content"] == "after the answer"
    # running it again is harmless
    assert api.invoke("ClearFunction", event)["done"] is True
    assert get_asset(api, scope.memory_id)["counts"] == {"l0": 1, "l1": 0, "l2": 1, "l3": 1}


def test_the_continuation_never_deletes_a_file_rewritten_after_the_answer(api, scope, monkeypatch,
                                                                           no_continuation):
    from memory_hub import purge
    from memory_hub.dal import blobs

    write_scene(api, scope, "keep.md", "old")
    real_objects = purge._objects
    monkeypatch.setattr(purge, "_objects", lambda target, result, deadline: False)  # out of time at once
    item = clear(api, scope.memory_id)["items"][0]
    monkeypatch.setattr(purge, "_objects", real_objects)
    assert item["purge_pending"] is True and len(s3_keys(prefix_of(scope))) == 1
    real_delete = blobs.delete_keys
    rewritten = []

    def delete_keys(keys, etags=None):  # listed by the continuation, rewritten before its delete
        if not rewritten:
            rewritten.append(write_scene(api, scope, "keep.md", "written after the answer"))
        return real_delete(keys, etags)

    monkeypatch.setattr(blobs, "delete_keys", delete_keys)
    assert api.invoke("ClearFunction", no_continuation[0])["done"] is True
    monkeypatch.undo()
    assert rewritten and rewritten[0]["version"] == 1
    read = ok(api.post("/v3/scenario/read", scope.body(path="keep.md")))
    assert read["content"] is not None and read["content"].endswith("written after the answer")


# ---- request sizes of the bulk deletes ------------------------------------------------------------

def test_bulk_deletes_stay_within_the_aws_request_limits(api, scope, monkeypatch):
    from botocore.client import BaseClient

    add_messages(api, scope, [f"m{n}" for n in range(60)])
    for n in range(5):
        add_record(api, scope, f"record {n}")
    epoch = epoch_of(scope.memory_id)
    client = s3()
    base = prefix_of(scope) + "scene_blocks/bulk/"
    for n in range(1100):
        client.put_object(Bucket=BUCKET, Key=f"{base}{n:05d}.md", Body=b"x", Metadata={"epoch": str(epoch)})
    sizes = {"BatchWriteItem": [], "DeleteObjects": []}
    real_call = BaseClient._make_api_call

    def recording(self, operation, params):
        if operation == "BatchWriteItem":
            sizes[operation].append(sum(len(v) for v in params["RequestItems"].values()))
        elif operation == "DeleteObjects":
            sizes[operation].append(len(params["Delete"]["Objects"]))
        return real_call(self, operation, params)

    monkeypatch.setattr(BaseClient, "_make_api_call", recording)
    item = clear(api, scope.memory_id)["items"][0]
    monkeypatch.undo()
    assert item["cleared"] is True and "purge_pending" not in item
    assert item["l0_deleted"] == 60 and item["l1_deleted"] == 5 and item["files_deleted"] == 1100
    assert sizes["BatchWriteItem"] and max(sizes["BatchWriteItem"]) <= 25
    assert sum(sizes["BatchWriteItem"]) >= 60 + 5 * 2  # messages, records, their guards (+ counters)
    assert sizes["DeleteObjects"] and max(sizes["DeleteObjects"]) <= 1000
    assert sum(sizes["DeleteObjects"]) == 1100
    assert s3_keys(prefix_of(scope)) == []


def test_delete_keys_splits_into_batches_of_1000():
    from memory_hub.dal import blobs

    base = f"profiles/chunk{uuid.uuid4().hex}/"
    keys = [f"{base}{n:05d}" for n in range(2300)]  # deleting a missing key succeeds, as on S3
    seen = []

    def hook(params, **_):
        seen.append(len(params["Delete"]["Objects"]))

    client = blobs.s3()
    client.meta.events.register("before-parameter-build.s3.DeleteObjects", hook)
    try:
        assert blobs.delete_keys(keys) == 2300
    finally:
        client.meta.events.unregister("before-parameter-build.s3.DeleteObjects", hook)
    assert sorted(seen) == [300, 1000, 1000]


# ---- memory delete --------------------------------------------------------------------------------

def test_memory_delete_erases_everything_then_the_asset(api, scope):
    markers = seed_with_markers(api, scope)
    created = get_asset(api, scope.memory_id)["created_at"]
    answer = ok(api.post("/v3/memory/delete", {"memory_id": scope.memory_id}))
    assert answer["deleted"] is True and answer["memory_id"] == scope.memory_id
    expected = {"l0_deleted": 2, "l1_deleted": 1, "l2_deleted": 1, "l3_deleted": 1, "profile_deleted": 2,
                "files_deleted": 5}
    assert {k: answer[k] for k in expected} == expected
    assert "purge_pending" not in answer
    assert answer["audit_ids"]

    missing = api.post("/v3/memory/get", {"memory_id": scope.memory_id})
    assert missing.status == 404 and missing.body["code"] == 404
    again = api.post("/v3/memory/delete", {"memory_id": scope.memory_id})
    assert again.status == 404, again.body
    assert api.post(CLEAR, {"memory_ids": [scope.memory_id]}).status == 404
    assert visible_everything(api, scope) == EMPTY
    assert traces_of(markers) == []
    assert s3_keys(prefix_of(scope)) == [] and purge_records(scope) == []

    events = audit_events(api, scope.memory_id)
    assert set(answer["audit_ids"]) <= {e["event_id"] for e in events}
    assert any(e["action"] == "memory_delete" and e["layer"] == "asset" for e in events)
    assert [e["event_id"] for e in audit_events(api, scope.memory_id, "memory_delete")]

    # a new write creates a new asset, with nothing of the old one
    add_messages(api, scope, ["a new life"])
    reborn = get_asset(api, scope.memory_id)
    assert reborn["created_at"] > created and reborn["last_cleared_at"] is None
    assert reborn["counts"] == {"l0": 1, "l1": 0, "l2": 0, "l3": 0}
    assert ok(api.post("/v3/scenario/read", scope.body(path="notes/a.md")))["content"] is None
    assert ok(api.post("/v3/core/read", scope.body()))["content"] is None
    messages = ok(api.post("/v3/conversation/query", scope.body()))["messages"]
    assert [m["content"] for m in messages] == ["a new life"]


def test_memory_delete_is_admin_over_the_team_only(api, scope):
    add_messages(api, scope, ["x"])
    other_team_admin = new_key(api, "admin", [make_scope().team_id])
    answer = other_team_admin.post("/v3/memory/delete", {"memory_id": scope.memory_id})
    assert answer.status == 403, answer.body
    unknown = other_team_admin.post("/v3/memory/delete", {"memory_id": "chat_memory-nobody-nothing"})
    assert unknown.status == 403, unknown.body
    assert api.post("/v3/memory/delete", {"memory_id": "chat_memory-nobody-nothing"}).status == 404
    assert get_asset(api, scope.memory_id)["counts"]["l0"] == 1
