"""Asset-level clear and memory delete: every layer erased from storage before the answer,
the asset kept (or then dropped), validation and scope, Idempotency-Key, the content-epoch fence
against racing writes, faults before and after the epoch bump, purge_pending and its continuation,
and the request-size limits of the bulk deletes.

The functions run in their own processes over the emulated AWS side, so interleavings are made with
its hooks (a call paused until released, a call answered with an AWS error) and observed with its
call log; nothing of the product is patched. Continuations a clear hands on are either run for real
(asynchronously, through the Invoke API) or captured by a recorder standing in for Lambda."""

from __future__ import annotations

import json
import math
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from helpers import (
    BUCKET,
    TABLES,
    Api,
    Scope,
    aws_client,
    epoch_of,
    eventually,
    make_scope,
    memory_files,
    ok,
    own_stack,
    partition,
    scan,
    term_digests,
    traces_of,
)
from memory_hub.storage import bucket
from memory_hub.storage.layout import PURGE_PK, memory_part, purge_sk, scene_scope

CLEAR = "/v3/chat-memory/clear"
# The cleanup that finishes purges walks every memory, and the marker checks read tables whole:
# a stack of this module's own.
stack, api, hooks = own_stack()
ZERO_COUNTS = dict.fromkeys(
    ("l0_deleted", "l1_deleted", "l2_deleted", "l3_deleted", "profile_deleted", "files_deleted"), 0
)


# ---- requests ---------------------------------------------------------------------------------------


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


def read_scene(api, scope, path):
    return ok(api.post("/v3/scenario/read", scope.body(path=path)))


def write_persona(api, scope, content):
    return ok(api.post("/v3/core/write", scope.body(content=content)))


def read_persona(api, scope):
    return ok(api.post("/v3/core/read", scope.body()))


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


def purge_complete_events(api, scope):
    return [e for e in audit_events(api, scope.memory_id, "clear") if e["target"] == "purge_complete"]


def run_cleanup(api, event=None):
    return api.invoke("CleanupFunction", event or {})


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


EMPTY = {
    "l0_query": {"messages": [], "total": 0},
    "l0_count": 0,
    "l0_search": [],
    "l1_query": {"items": [], "total": 0},
    "l1_count": 0,
    "l1_search": [],
    "l2_ls": [],
    "l2_count": 0,
    "l3_count": 0,
    "l3_read": None,
}


def wait_for_purge_complete(api, scope, timeout_s=60.0):
    """A continuation running in the background: poll (bounded) for the event that ends it."""
    eventually(
        lambda: purge_complete_events(api, scope), "the asynchronous purge did not complete", timeout_s, every=0.05
    )


# ---- what is stored, seen directly in the emulated account ------------------------------------------
# Erasure is a promise about storage, which the API cannot show: these read it through the shared
# erasure scan (helpers.traces_of) and storage readers, with every key spelled by the runtime's own
# modules (memory_hub.storage.layout, .bucket), never restated here. The shape of the keys
# themselves is the unit tier's (tests/unit/test_use_cases.py).


def rows_of_epoch(scope, epoch):
    """Items (messages, records, guards, postings, counters) of the scope's partitions of ``epoch``,
    and its scene-index entries of that epoch (live ones and tombstones)."""
    part = memory_part(scope.team_id, scope.agent_id, epoch)
    items = [r for r in scan(TABLES["items"]) if r["pk"]["S"] != PURGE_PK and part in r["pk"]["S"]]
    scenes = [
        r
        for r in scan(TABLES["scenes"])
        if r["scope"]["S"] == scene_scope(scope.team_id, scope.agent_id) and int(r["epoch"]["N"]) == epoch
    ]
    return items + scenes


def purge_records(scope):
    """The records of the scope's unfinished purges, whatever their epoch."""
    mine = (scope.team_id, scope.agent_id)
    return [
        r
        for r in partition(TABLES["items"], PURGE_PK)
        if (r.get("team_id", {}).get("S"), r.get("agent_id", {}).get("S")) == mine
    ]


def purge_epochs(scope):
    """The epochs whose purge is unfinished."""
    return sorted(int(r["epoch"]["N"]) for r in purge_records(scope))


def seed_with_markers(api, scope, idempotency_key=None):
    """Content in every layer, each piece a unique marker string; returns the markers."""
    tag = uuid.uuid4().hex
    m = {
        name: f"{name}x{tag}"
        for name in (
            "l0",
            "l1content",
            "l1background",
            "l1tag",
            "l1meta",
            "scene",
            "summary",
            "persona1",
            "persona2",
            "persona3",
            "metadata",
        )
    }
    headers = {"Idempotency-Key": idempotency_key} if idempotency_key else None
    add_messages(api, scope, [f"marker {m['l0']} said", "plain"], headers=headers)
    add_record(
        api,
        scope,
        f"marker {m['l1content']}",
        background=m["l1background"],
        tags=[m["l1tag"]],
        metadata={"note": m["l1meta"]},
    )
    write_scene(api, scope, "notes/a.md", f"# marker\n{m['scene']}\n", summary=m["summary"])
    for n in (1, 2, 3):  # two overwrites: two persona backups
        write_persona(api, scope, f"persona {m[f'persona{n}']}")
    aws_client("s3").put_object(
        Bucket=BUCKET, Key=scope.prefix + bucket.METADATA + "state.json", Body=m["metadata"].encode()
    )
    assert len(memory_files(scope, bucket.PERSONA_BACKUPS)) == 2
    # the scan does see them before the clear: every marker, and the indexed ones as postings
    indexed = term_digests([m["l0"], m["l1content"], m["l1background"]])
    found = traces_of(m.values())
    assert set(m.values()) <= set(found) and set(indexed) <= set(found)
    return list(m.values())


# ---- interleavings at the AWS boundary ---------------------------------------------------------------


def bump_of(scope):
    """The clear's (or memory delete's) epoch bump: the one transaction that touches the asset."""
    return {
        "function": "ClearFunction",
        "operation": "TransactWriteItems",
        "table": "AssetsTable",
        "body_contains": scope.memory_id,
    }


FIRST_PURGE_CALL = {"function": "ClearFunction", "operation": "ListObjectsV2"}  # right after the bump


def fresh(api):
    """A client of its own (its own HTTP session) for a request run in a background thread."""
    return Api(api.base_url, api.key, api.service_id, lambda_url=api.lambda_url)


@contextmanager
def background(hooks) -> Iterator[ThreadPoolExecutor]:
    """Threads for requests that will block on a paused call while the test goes on. Should the
    test fail meanwhile, every hook is dropped, so held calls go on and the failure shows at once."""
    pool = ThreadPoolExecutor(max_workers=4)
    try:
        yield pool
    except BaseException:
        hooks.clear()
        raise
    finally:
        pool.shutdown(wait=True)


def calls_of(hooks, since, function="ClearFunction"):
    return [c for c in hooks.calls(since) if c["function"] == function]


ERASING = {"DeleteObjects", "DeleteObject", "BatchWriteItem", "DeleteItem"}


class _InvokeRecorder(BaseHTTPRequestHandler):
    """Stands in for Lambda's Invoke API: records each invocation, answers 202, runs nothing."""

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.server.invocations.append(
            {
                "path": self.path,  # type: ignore[attr-defined]
                "type": self.headers.get("X-Amz-Invocation-Type"),
                "event": json.loads(body or b"{}"),
            }
        )
        self.send_response(202)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def hold_continuations(function_env):
    """``hold(out_of_time=…)`` points ClearFunction's Invoke calls at a recorder, so a purge the
    clear hands on is captured instead of run; returns the list of captured invocations. With
    ``out_of_time`` the clear's purge budget is 0 s: it hands its purge on at once."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _InvokeRecorder)
    server.invocations = []  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()

    def hold(*, out_of_time: bool = False) -> list[dict[str, Any]]:
        env = {"AWS_ENDPOINT_URL_LAMBDA": f"http://127.0.0.1:{server.server_port}"}
        if out_of_time:
            env["MEMORY_HUB_CLEAR_BUDGET_S"] = "0"
        function_env("ClearFunction", **env)
        return server.invocations  # type: ignore[attr-defined,no-any-return]

    yield hold
    server.shutdown()
    server.server_close()


def continuation_of(invocations, scope):
    """The one continuation event the clear of ``scope`` handed on (checked as Lambda gets it)."""
    mine = [i for i in invocations if i["event"].get("memory_hub_purge", {}).get("agent_id") == scope.agent_id]
    assert len(mine) == 1, invocations
    [invocation] = mine
    assert invocation["type"] == "Event" and invocation["path"].endswith("/invocations")
    return invocation["event"]


# ---- TencentDB's scenario -------------------------------------------------------------------------


def test_tencentdb_scenario_clear_keeps_the_asset_and_the_memory_id(api, scope):
    made = ok(
        api.post(
            "/v3/memory/create",
            {
                "team_id": scope.team_id,
                "agent_id": scope.agent_id,
                "name": "Support",
                "visibility": "team",
                "acl": [{"principal": "team:ops", "permissions": ["read", "write"]}],
                "bindings": [{"agent_id": "helper", "injection_mode": "prepend", "priority": 2}],
            },
        )
    )
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
    for field in (
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
        "created_at",
    ):
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
    assert {k: third[k] for k in ZERO_COUNTS} == ZERO_COUNTS
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
    assert len(memory_files(scope)) == 6  # 3 scenes, persona, 2 backups
    old_epoch = epoch_of(scope)
    assert rows_of_epoch(scope, old_epoch)
    # every layer holds something, the search index included (what the clear must then erase)
    before = visible_everything(api, scope)
    assert (before["l0_count"], before["l1_count"], before["l2_count"], before["l3_count"]) == (4, 3, 3, 1)
    assert len(before["l0_search"]) == 1 and len(before["l1_search"]) == 1

    empty, untouched = make_scope(), make_scope()
    add_messages(api, empty, ["only to create the asset"])
    clear(api, empty.memory_id)
    add_messages(api, untouched, ["not named in the clear"])

    data = clear(api, empty.memory_id, scope.memory_id)
    assert [i["memory_id"] for i in data["items"]] == [empty.memory_id, scope.memory_id]
    assert data["all_cleared"] is True
    first, item = data["items"]
    assert first["cleared"] is True and first["l0_deleted"] == 0 and first["files_deleted"] == 0
    expected = {
        "memory_id": scope.memory_id,
        "cleared": True,
        "l0_deleted": 6,
        "l1_deleted": 4,
        "l2_deleted": 3,
        "l3_deleted": 1,
        "profile_deleted": 4,
        "files_deleted": 6,
    }
    assert {k: item[k] for k in expected} == expected
    assert isinstance(item["audit_ids"], list) and item["audit_ids"]

    # the audit events name the clear and the per-layer counts before it, never content
    events = {e["event_id"]: e for e in audit_events(api, scope.memory_id, "clear")}
    assert set(item["audit_ids"]) <= set(events)
    per_layer = {}
    for event_id in item["audit_ids"]:
        event = events[event_id]
        assert event["action"] == "clear" and event["actor"] == "bootstrap"
        per_layer[event["layer"]] = per_layer.get(event["layer"], 0) + event["count"]
    assert per_layer == {"L0": 6, "L1": 4, "L2": 3, "L3": 1}

    # nothing visible, for both users
    assert visible_everything(api, scope) == EMPTY
    assert visible_everything(api, other_user) == EMPTY
    assert get_asset(api, scope.memory_id)["counts"] == {"l0": 0, "l1": 0, "l2": 0, "l3": 0}
    assert read_scene(api, scope, "x.md")["content"] is None
    # and nothing stored: objects, items, guards, postings, counters, scene entries, purge record
    assert memory_files(scope) == []
    assert rows_of_epoch(scope, old_epoch) == []
    assert purge_records(scope) == []
    assert l0_total(api, untouched) == 1

    # the natural-key guard went too: the same record is new again
    again = add_record(api, scope, "likes tea marker", background="bg")
    assert again["created"] is True and again["id"] != kept["id"]
    assert again["version"] == 1 and again["reinforced_count"] == 1
    assert l1_total(api, scope) == 1
    assert ok(api.post("/v3/core/write", scope.body(content="fresh")))["version"] == 1


# ---- ordering: one transaction takes effect, then the erasure ---------------------------------------


def test_the_clear_takes_effect_in_one_transaction_before_anything_is_erased(api, hooks, scope):
    add_messages(api, scope, ["a", "b"])
    add_record(api, scope, "a record")
    write_scene(api, scope, "s.md", "scene")
    write_persona(api, scope, "persona")
    old_epoch = epoch_of(scope)
    since = hooks.last_seq()
    item = clear(api, scope.memory_id)["items"][0]
    assert item["cleared"] is True and "purge_pending" not in item

    calls = calls_of(hooks, since)
    bumps = [n for n, c in enumerate(calls) if c["operation"] == "TransactWriteItems" and "AssetsTable" in c["tables"]]
    assert len(bumps) == 1, calls
    bump = calls[bumps[0]]
    # the asset's new epoch and its fence's, the purge record and the four per-layer audit events:
    # all or nothing
    assert sorted(bump["tables"]) == sorted(["AssetsTable"] * 2 + ["ItemsTable"] + ["AuditTable"] * 4)
    assert bump["status"] == 200
    writes_before = [
        c
        for c in calls[: bumps[0]]
        if c["operation"] in ERASING | {"TransactWriteItems", "PutObject", "PutItem", "UpdateItem"}
    ]
    assert writes_before == []  # nothing is written, let alone erased, before the bump
    assert [c for c in calls[bumps[0] + 1 :] if c["operation"] in ERASING]  # the erasure follows it
    assert epoch_of(scope) > old_epoch


def test_memory_delete_takes_effect_in_one_transaction_before_anything_is_erased(api, hooks, scope):
    add_messages(api, scope, ["a"])
    write_scene(api, scope, "s.md", "scene")
    since = hooks.last_seq()
    assert ok(api.post("/v3/memory/delete", {"memory_id": scope.memory_id}))["deleted"] is True
    calls = calls_of(hooks, since)
    bumps = [n for n, c in enumerate(calls) if c["operation"] == "TransactWriteItems" and "AssetsTable" in c["tables"]]
    assert len(bumps) == 1, calls
    bump = calls[bumps[0]]
    # asset, fence and team listing deleted, purge record, four per-layer events and the
    # memory_delete event
    assert sorted(bump["tables"]) == sorted(["AssetsTable"] * 3 + ["ItemsTable"] + ["AuditTable"] * 5)
    assert [a for a, _ in bump["actions"]].count("dynamodb:DeleteItem") == 3
    assert not [c for c in calls[: bumps[0]] if c["operation"] in ERASING]


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
        assert read_scene(api, s, "s.md")["version"] == 1

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


def test_clear_removes_every_marker_and_its_index_terms_from_every_store(api, scope):
    markers = seed_with_markers(api, scope, idempotency_key="add-" + uuid.uuid4().hex)
    old_epoch = epoch_of(scope)
    data = clear(api, scope.memory_id, headers={"Idempotency-Key": "clear-" + uuid.uuid4().hex})
    item = data["items"][0]
    assert item["cleared"] is True and "purge_pending" not in item
    assert item["files_deleted"] == 5  # scene, persona, two backups, the .metadata object
    assert item["l3_deleted"] == 1 and item["l2_deleted"] == 1
    assert traces_of(markers) == []  # neither the markers nor the digests of their terms
    assert memory_files(scope) == []
    assert rows_of_epoch(scope, old_epoch) == []

    assert scan(TABLES["idempotency"])  # the records of the add and the clear exist ...
    assert traces_of(markers, ["tables"], tables=[TABLES["idempotency"]]) == []  # ... and hold no content


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


def test_a_duplicate_while_the_first_clear_runs_is_409_retryable(api, hooks, scope):
    add_messages(api, scope, ["one"])
    key = {"Idempotency-Key": "clear-" + uuid.uuid4().hex}
    body = {"memory_ids": [scope.memory_id]}
    with background(hooks) as pool, hooks.paused(bump_of(scope)) as bump:
        running = pool.submit(fresh(api).post, CLEAR, body, key)
        assert hooks.wait(bump)  # the first clear is in flight, held just before its bump
        duplicate = api.post(CLEAR, body, headers=key)
    first = ok(running.result())
    assert duplicate.status == 409 and duplicate.body["code"] == 409, duplicate.body
    assert duplicate.body["retryable"] is True
    assert first["items"][0]["l0_deleted"] == 1
    assert ok(api.post(CLEAR, body, headers=key)) == first  # once the first is done, it answers
    assert l0_total(api, scope) == 0


# ---- the fence ------------------------------------------------------------------------------------


def test_writes_before_the_bump_vanish_and_writes_after_it_survive(api, hooks, scope):
    add_messages(api, scope, ["old one"])
    write_scene(api, scope, "shared.md", "old scene")
    write_persona(api, scope, "old persona")
    late = {}
    bump = hooks.add(bump_of(scope))
    after_bump = hooks.add(FIRST_PURGE_CALL)
    with background(hooks) as pool:
        running = pool.submit(clear, fresh(api), scope.memory_id)
        assert hooks.wait(bump)  # just before the epoch bump
        add_messages(api, scope, ["slipped in before the bump"])
        add_record(api, scope, "record before the bump")
        write_scene(api, scope, "before.md", "scene before the bump")
        assert l0_total(api, scope) == 2 and len(memory_files(scope)) == 3  # nothing erased yet
        hooks.release(bump)
        assert hooks.wait(after_bump)  # the bump is done; the old epoch is not erased yet
        assert l0_total(api, scope) == 0
        late["msgs"] = add_messages(api, scope, ["written after the bump"])
        late["atom"] = add_record(api, scope, "record after the bump")
        late["scene"] = write_scene(api, scope, "shared.md", "new scene")
        late["persona"] = write_persona(api, scope, "new persona")
        hooks.release(after_bump)
        item = running.result()["items"][0]

    assert item["cleared"] is True and "purge_pending" not in item
    assert item["l0_deleted"] == 2 and item["l1_deleted"] == 1
    # before.md went with the purge; the old shared.md was already replaced by the write after the bump
    assert item["l2_deleted"] == 1
    assert late["scene"]["version"] == 1 and late["scene"]["created"] is True
    assert late["persona"]["version"] == 1

    messages = ok(api.post("/v3/conversation/query", scope.body()))["messages"]
    assert [m["content"] for m in messages] == ["written after the bump"]
    assert [m["id"] for m in messages] == late["msgs"]
    records = ok(api.post("/v3/atomic/query", scope.body()))["items"]
    assert [r["content"] for r in records] == ["record after the bump"]
    assert [e["path"] for e in ok(api.post("/v3/scenario/ls", scope.body()))["entries"]] == ["shared.md"]
    scene = read_scene(api, scope, "shared.md")
    assert scene["content"].endswith("new scene") and scene["version"] == 1
    assert read_scene(api, scope, "before.md")["content"] is None
    core = read_persona(api, scope)
    assert core["content"] == "new persona" and core["version"] == 1
    assert get_asset(api, scope.memory_id)["counts"] == {"l0": 1, "l1": 1, "l2": 1, "l3": 1}
    # the purge left the new objects alone and took everything else
    assert sorted(k.removeprefix(scope.prefix) for k in memory_files(scope)) == [
        bucket.PERSONA,
        bucket.SCENES + "shared.md",
    ]
    # and a later cleanup (orphan sweep included) leaves them alone too
    assert run_cleanup(api)["done"] is True
    assert get_asset(api, scope.memory_id)["counts"] == {"l0": 1, "l1": 1, "l2": 1, "l3": 1}
    assert read_persona(api, scope)["content"] == "new persona"


def test_writes_that_raced_the_bump_land_in_the_new_epoch(api, hooks, scope):
    """Each writer has read the asset (old epoch) and is held at its first write while a whole
    clear runs; released, it writes into the new epoch and leaves nothing in the old one."""
    add_messages(api, scope, ["before"])
    add_record(api, scope, "record before")
    write_scene(api, scope, "p.md", "before")
    write_persona(api, scope, "before")
    stale_epoch = epoch_of(scope)
    pair = f"{scope.team_id}:{scope.agent_id}"
    first_writes = {  # the first call each write makes after reading the asset
        "l0": {"function": "MemoryFunction", "operation": "BatchWriteItem", "body_contains": f"L0#{pair}#"},
        "l1": {"function": "MemoryFunction", "operation": "BatchWriteItem", "body_contains": f"L1#{pair}#"},
        "l2": {"function": "ScenarioFunction", "operation": "PutObject", "key_contains": scope.prefix + bucket.SCENES},
        "l3": {
            "function": "MemoryFunction",
            "operation": "CopyObject",
            "key_contains": scope.prefix + bucket.PERSONA_BACKUPS,
        },
    }
    held = {layer: hooks.add(match) for layer, match in first_writes.items()}
    with background(hooks) as pool:
        writes = {
            "l0": pool.submit(add_messages, fresh(api), scope, ["raced one", "raced two"]),
            "l1": pool.submit(add_record, fresh(api), scope, "raced record"),
            "l2": pool.submit(write_scene, fresh(api), scope, "p.md", "raced scene"),
            "l3": pool.submit(write_persona, fresh(api), scope, "raced persona"),
        }
        for hook in held.values():
            assert hooks.wait(hook)
        item = clear(api, scope.memory_id)["items"][0]
        for hook in held.values():
            hooks.release(hook)
        ids, atom, scene, persona = (writes[layer].result() for layer in ("l0", "l1", "l2", "l3"))
    assert item["cleared"] is True and item["l0_deleted"] == 1 and item["l1_deleted"] == 1
    assert epoch_of(scope) != stale_epoch
    assert atom["created"] is True and scene["version"] == 1 and persona["version"] == 1

    # acknowledged means visible, in the new epoch, with exact counters
    messages = ok(api.post("/v3/conversation/query", scope.body()))
    assert sorted(m["id"] for m in messages["messages"]) == sorted(ids) and messages["total"] == 2
    assert [r["id"] for r in ok(api.post("/v3/atomic/query", scope.body()))["items"]] == [atom["id"]]
    assert [
        m["content"] for m in ok(api.post("/v3/conversation/search", scope.body(query="raced")))["messages"]
    ] and ok(api.post("/v3/atomic/search", scope.body(query="raced")))["items"]
    assert read_scene(api, scope, "p.md")["content"].endswith("raced scene")
    assert read_persona(api, scope)["content"] == "raced persona"
    assert get_asset(api, scope.memory_id)["counts"] == {"l0": 2, "l1": 1, "l2": 1, "l3": 1}
    assert rows_of_epoch(scope, stale_epoch) == []  # the stale epoch kept nothing, postings included


def test_a_persona_backup_made_during_the_purge_does_not_outlive_the_clear(api, hooks, scope):
    write_persona(api, scope, "old persona text")
    backup = {
        "function": "MemoryFunction",
        "operation": "CopyObject",
        "key_contains": scope.prefix + bucket.PERSONA_BACKUPS,
    }
    purge_delete = {"function": "ClearFunction", "operation": "DeleteObjects"}
    with background(hooks) as pool:
        writer_hook = hooks.add(backup)
        write = pool.submit(write_persona, fresh(api), scope, "new persona")
        assert hooks.wait(writer_hook)  # the writer read the old epoch and is about to back it up
        delete_hook = hooks.add(purge_delete)
        running = pool.submit(clear, fresh(api), scope.memory_id)
        assert hooks.wait(delete_hook)  # bumped and listed; about to delete what it listed
        hooks.release(writer_hook)
        assert write.result()["version"] == 1  # written again, into the new epoch
        hooks.release(delete_hook)
        item = running.result()["items"][0]
    assert item["cleared"] is True and "purge_pending" not in item
    assert read_persona(api, scope)["content"] == "new persona"
    assert traces_of(["old persona text"], ["files"], terms=False, under=scope.prefix) == []


def test_the_counts_name_only_files_the_purge_really_deleted(api, hooks, scope):
    write_scene(api, scope, "keep.md", "old")
    write_persona(api, scope, "old")
    with background(hooks) as pool, hooks.paused({"function": "ClearFunction", "operation": "DeleteObjects"}) as hook:
        running = pool.submit(clear, fresh(api), scope.memory_id)
        assert hooks.wait(hook)  # listed, about to delete: both files are rewritten in the new epoch first
        write_scene(api, scope, "keep.md", "new")
        write_persona(api, scope, "new")
    item = running.result()["items"][0]
    assert sorted(k.removeprefix(scope.prefix) for k in memory_files(scope)) == [
        bucket.PERSONA,
        bucket.SCENES + "keep.md",
    ]
    assert item["files_deleted"] == 0
    assert (item["l2_deleted"], item["l3_deleted"], item["profile_deleted"]) == (0, 0, 0), item


def test_a_reinforcing_add_that_raced_the_bump_lands_in_the_new_epoch(api, hooks, scope):
    add_record(api, scope, "likes tea")
    # the add's create finds the natural key taken; it then reads the key's holder to reinforce it
    reinforce = {
        "function": "MemoryFunction",
        "operation": "GetItem",
        "body_contains": f"L1#{scope.team_id}:{scope.agent_id}#",
    }
    with background(hooks) as pool:
        writer_hook = hooks.add(reinforce)
        add = pool.submit(add_record, fresh(api), scope, "likes tea")
        assert hooks.wait(writer_hook)  # found the record of the old epoch; about to reinforce it
        after_bump = hooks.add(FIRST_PURGE_CALL)
        running = pool.submit(clear, fresh(api), scope.memory_id)
        assert hooks.wait(after_bump)  # the clear took effect; the old epoch is not erased yet
        hooks.release(writer_hook)
        acknowledged = add.result()  # answered after the clear took effect
        hooks.release(after_bump)
        assert running.result()["items"][0]["cleared"] is True
    records = ok(api.post("/v3/atomic/query", scope.body()))["items"]
    assert [r["id"] for r in records] == [acknowledged["id"]], acknowledged  # acknowledged means visible


def test_two_racing_clears_both_answer_cleared(api, hooks, scope):
    add_messages(api, scope, ["a", "b", "c"])
    write_scene(api, scope, "a.md", "x")
    with background(hooks) as pool, hooks.paused(bump_of(scope)) as bump:  # `times=1`: only the outer one
        outer = pool.submit(clear, fresh(api), scope.memory_id)
        assert hooks.wait(bump)  # the outer clear read the epoch; another clear moves it on first
        inner = clear(api, scope.memory_id)["items"][0]
    outer = outer.result()["items"][0]
    assert inner["cleared"] is True and inner["l0_deleted"] == 3 and inner["l2_deleted"] == 1
    assert outer["cleared"] is True and outer["l0_deleted"] == 0, outer
    assert visible_everything(api, scope) == EMPTY and purge_records(scope) == []
    assert memory_files(scope) == []


def test_a_write_that_raced_a_memory_delete_makes_a_new_asset(api, hooks, scope):
    add_messages(api, scope, ["before"])
    stale = get_asset(api, scope.memory_id)
    stale_epoch = epoch_of(scope)
    writer_held = {
        "function": "MemoryFunction",
        "operation": "BatchWriteItem",
        "body_contains": f"L0#{scope.team_id}:{scope.agent_id}#",
    }
    with background(hooks) as pool, hooks.paused(writer_held) as hook:
        write = pool.submit(add_messages, fresh(api), scope, ["raced the delete"])
        assert hooks.wait(hook)  # the writer read the asset that is about to be deleted
        assert ok(api.post("/v3/memory/delete", {"memory_id": scope.memory_id}))["deleted"] is True
    ids = write.result()
    assert [m["id"] for m in ok(api.post("/v3/conversation/query", scope.body()))["messages"]] == ids
    reborn = get_asset(api, scope.memory_id)
    assert reborn["created_at"] > stale["created_at"] and reborn["counts"]["l0"] == 1
    assert rows_of_epoch(scope, stale_epoch) == []


# ---- faults ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "code,status", [("ThrottlingException", 400), ("InternalServerError", 500)], ids=["throttling", "generic"]
)
def test_a_failure_before_the_bump_leaves_the_memory_untouched(api, hooks, scope, code, status):
    other = make_scope()
    for s in (scope, other):
        add_messages(api, s, ["a", "b", "c"])
        write_persona(api, s, "persona")
    before = get_asset(api, scope.memory_id)
    with hooks.failing(bump_of(scope), code, status):  # every attempt of `scope`'s bump fails
        data = ok(api.post(CLEAR, {"memory_ids": [scope.memory_id, other.memory_id]}))
    assert data["all_cleared"] is False
    failed, cleared = data["items"]
    assert failed["memory_id"] == scope.memory_id and failed["cleared"] is False
    assert {k: failed[k] for k in ZERO_COUNTS} == ZERO_COUNTS
    assert isinstance(failed["reason"], str) and failed["reason"]
    assert code not in failed["reason"] and "injected" not in failed["reason"]
    assert failed["retryable"] is True and failed.get("audit_ids", []) == []
    assert cleared["memory_id"] == other.memory_id and cleared["cleared"] is True
    assert cleared["l0_deleted"] == 3 and cleared["l3_deleted"] == 1

    after = get_asset(api, scope.memory_id)
    assert after == before  # last_cleared_at, updated_at, counts: all unchanged
    assert l0_total(api, scope) == 3
    assert read_persona(api, scope)["content"] == "persona"
    assert purge_records(scope) == [] and audit_events(api, scope.memory_id, "clear") == []
    # the retry the answer invites works
    assert clear(api, scope.memory_id)["items"][0]["l0_deleted"] == 3


def test_a_failure_in_the_purge_is_finished_by_the_cleanup(api, hooks, scope, hold_continuations):
    continuations = hold_continuations()
    markers = seed_with_markers(api, scope)
    old_epoch = epoch_of(scope)
    item_deletes = {
        "function": "ClearFunction",
        "operation": "BatchWriteItem",
        "table": "ItemsTable",
        "body_contains": f"{scope.team_id}:{scope.agent_id}#",
    }
    with hooks.failing(item_deletes):  # S3 objects and the scene index go; the items stay
        item = clear(api, scope.memory_id)["items"][0]
    assert item["cleared"] is True and item["purge_pending"] is True
    assert visible_everything(api, scope) == EMPTY
    assert get_asset(api, scope.memory_id)["counts"] == {"l0": 0, "l1": 0, "l2": 0, "l3": 0}
    assert purge_epochs(scope) == [old_epoch]
    assert rows_of_epoch(scope, old_epoch)  # still stored: the continuation's (or cleanup's) job now
    event = continuation_of(continuations, scope)
    assert event["memory_hub_purge"]["epoch"] == old_epoch
    assert purge_complete_events(api, scope) == []

    report = run_cleanup(api)  # the continuation never ran: the cleanup finishes the purge
    assert report["done"] is True and report["purges_completed"] >= 1
    assert purge_records(scope) == []
    assert rows_of_epoch(scope, old_epoch) == []
    assert traces_of(markers) == []
    [done] = purge_complete_events(api, scope)
    assert done["layer"] == "asset" and done["action"] == "clear"
    assert done["count"] >= 3  # the L0 and L1 items it erased


def test_a_purge_finished_by_the_cleanup_is_recorded_as_the_cleanups(api, hooks, scope, hold_continuations):
    hold_continuations(out_of_time=True)
    add_messages(api, scope, ["x"])
    assert clear(api, scope.memory_id)["items"][0]["purge_pending"] is True
    assert run_cleanup(api)["done"] is True
    [done] = purge_complete_events(api, scope)
    assert done["actor"] == "system:cleanup"


def test_a_failed_purge_continuation_request_leaves_the_record_for_the_cleanup(api, scope, function_env):
    add_messages(api, scope, ["x"])
    # out of time at once, and the Invoke call that would hand the purge on cannot connect
    function_env("ClearFunction", MEMORY_HUB_CLEAR_BUDGET_S="0", AWS_ENDPOINT_URL_LAMBDA="http://127.0.0.1:9")
    item = clear(api, scope.memory_id)["items"][0]
    assert item["cleared"] is True and item["purge_pending"] is True
    assert l0_total(api, scope) == 0 and len(purge_records(scope)) == 1
    assert purge_complete_events(api, scope) == []
    assert run_cleanup(api)["done"] is True
    assert purge_records(scope) == []
    assert len(purge_complete_events(api, scope)) == 1


STEPS_AFTER_THE_BUMP = {
    # the purge itself: its first listing fails, so nothing of the old epoch is erased in the request
    "purge": lambda scope: FIRST_PURGE_CALL,
    # dropping the purge record once everything is erased (the only ItemsTable delete in a transaction)
    "finish": lambda scope: {
        "function": "ClearFunction",
        "operation": "TransactWriteItems",
        "table": "ItemsTable",
        "action": "dynamodb:DeleteItem",
        "body_contains": f"{scope.team_id}:{scope.agent_id}#",
    },
}


@pytest.mark.parametrize("step", sorted(STEPS_AFTER_THE_BUMP))
def test_a_failure_after_the_bump_still_answers_cleared(api, hooks, scope, hold_continuations, step):
    """Once the epoch moved, the memory is invisible: the item must not claim ``cleared: false``
    (which promises an untouched memory and an unchanged last_cleared_at)."""
    hold_continuations()
    add_messages(api, scope, ["a", "b"])
    write_scene(api, scope, "s.md", "scene")
    before = get_asset(api, scope.memory_id)
    old_epoch = epoch_of(scope)
    with hooks.failing(STEPS_AFTER_THE_BUMP[step](scope)) as fault:
        data = ok(api.post(CLEAR, {"memory_ids": [scope.memory_id]}))
        assert hooks.state(fault)["hits"] >= 1
    item = data["items"][0]
    after = get_asset(api, scope.memory_id)
    assert l0_total(api, scope) == 0 and after["counts"] == {"l0": 0, "l1": 0, "l2": 0, "l3": 0}
    assert after["last_cleared_at"] != before["last_cleared_at"]
    assert item["cleared"] is True and data["all_cleared"] is True, item
    assert purge_epochs(scope) == [old_epoch]  # what is left is durable
    # whatever the failure left behind, the cleanup finishes without a trace
    assert run_cleanup(api)["done"] is True
    assert purge_records(scope) == [] and rows_of_epoch(scope, old_epoch) == []
    assert memory_files(scope) == []
    assert len(purge_complete_events(api, scope)) == 1


# ---- purge_pending and the continuation -----------------------------------------------------------


def test_purge_pending_is_finished_by_the_continuation(api, scope, hold_continuations):
    continuations = hold_continuations(out_of_time=True)  # as if the memory were too large to finish
    markers = seed_with_markers(api, scope)
    add_messages(api, scope, [f"bulk {n}" for n in range(100)])
    old_epoch = epoch_of(scope)
    item = clear(api, scope.memory_id)["items"][0]
    assert item["cleared"] is True and item["purge_pending"] is True
    assert visible_everything(api, scope) == EMPTY
    assert purge_complete_events(api, scope) == []

    # writes after the answer are never touched by the rest of the purge
    add_messages(api, scope, ["after the answer"])
    write_scene(api, scope, "notes/a.md", "after the answer")
    write_persona(api, scope, "after the answer")

    event = continuation_of(continuations, scope)
    assert event == {"memory_hub_purge": {"team_id": scope.team_id, "agent_id": scope.agent_id, "epoch": old_epoch}}
    result = api.invoke("ClearFunction", event)  # what Lambda would run with it
    assert result["done"] is True
    [done] = purge_complete_events(api, scope)
    assert done["layer"] == "asset"
    assert purge_records(scope) == [] and rows_of_epoch(scope, old_epoch) == []
    assert traces_of(markers) == []
    assert ok(api.post("/v3/conversation/query", scope.body()))["total"] == 1
    assert read_scene(api, scope, "notes/a.md")["content"].endswith("after the answer")
    assert read_persona(api, scope)["content"] == "after the answer"
    # running it again is harmless
    assert api.invoke("ClearFunction", event)["done"] is True
    assert len(purge_complete_events(api, scope)) == 1
    assert get_asset(api, scope.memory_id)["counts"] == {"l0": 1, "l1": 0, "l2": 1, "l3": 1}


def test_purge_pending_is_finished_by_a_real_asynchronous_invocation(api, scope, function_env):
    markers = seed_with_markers(api, scope)
    old_epoch = epoch_of(scope)
    function_env("ClearFunction", MEMORY_HUB_CLEAR_BUDGET_S="0")
    item = clear(api, scope.memory_id)["items"][0]
    assert item["cleared"] is True and item["purge_pending"] is True
    wait_for_purge_complete(api, scope)  # ClearFunction invoked itself (InvocationType=Event)
    assert purge_records(scope) == [] and rows_of_epoch(scope, old_epoch) == []
    assert memory_files(scope) == [] and traces_of(markers) == []


def test_a_continuation_for_the_current_epoch_erases_nothing(api, scope):
    """The event only names a purge record; a record for the epoch in use — which no clear writes —
    or no record at all must not erase live content."""
    add_messages(api, scope, ["still here marker"])
    add_record(api, scope, "kept record")
    write_scene(api, scope, "kept.md", "kept")
    write_persona(api, scope, "kept persona")
    visible = visible_everything(api, scope)
    keys = sorted(memory_files(scope))
    epoch = epoch_of(scope)
    event = {"memory_hub_purge": {"team_id": scope.team_id, "agent_id": scope.agent_id, "epoch": epoch}}

    assert api.invoke("ClearFunction", event)["done"] is True  # no such pending purge
    older = {"memory_hub_purge": {"team_id": scope.team_id, "agent_id": scope.agent_id, "epoch": epoch - 1}}
    assert api.invoke("ClearFunction", older)["done"] is True
    assert api.invoke("ClearFunction", {"memory_hub_purge": {"team_id": scope.team_id}})["done"] is True

    # even a purge record naming the current epoch is refused
    record = {
        "pk": {"S": PURGE_PK},
        "sk": {"S": purge_sk(scope.team_id, scope.agent_id, epoch)},
        "memory_id": {"S": scope.memory_id},
        "team_id": {"S": scope.team_id},
        "agent_id": {"S": scope.agent_id},
        "epoch": {"N": str(epoch)},
        "retired_ms": {"N": str(int(time.time() * 1000))},
    }
    client = aws_client("dynamodb")
    client.put_item(TableName=TABLES["items"], Item=record)
    try:
        answer = api.invoke("ClearFunction", event)
        assert answer["done"] is True and answer.get("ignored"), answer
    finally:
        client.delete_item(TableName=TABLES["items"], Key={"pk": record["pk"], "sk": record["sk"]})

    assert visible_everything(api, scope) == visible
    assert sorted(memory_files(scope)) == keys and epoch_of(scope) == epoch
    assert purge_complete_events(api, scope) == []


def test_the_continuation_never_deletes_a_file_rewritten_after_the_answer(api, hooks, scope, hold_continuations):
    continuations = hold_continuations()
    write_scene(api, scope, "keep.md", "old")
    with hooks.failing(FIRST_PURGE_CALL):  # the request erases nothing: all of it is handed on
        item = clear(api, scope.memory_id)["items"][0]
    assert item["purge_pending"] is True and len(memory_files(scope)) == 1
    event = continuation_of(continuations, scope)

    # the continuation lists the old file; it is rewritten before the continuation's delete
    with background(hooks) as pool, hooks.paused({"function": "ClearFunction", "operation": "DeleteObjects"}) as hook:
        running = pool.submit(fresh(api).invoke, "ClearFunction", event)
        assert hooks.wait(hook)
        rewritten = write_scene(api, scope, "keep.md", "written after the answer")
    assert running.result()["done"] is True
    assert rewritten["version"] == 1
    read = read_scene(api, scope, "keep.md")
    assert read["content"] is not None and read["content"].endswith("written after the answer")
    assert get_asset(api, scope.memory_id)["counts"]["l2"] == 1


# ---- request sizes of the bulk deletes ------------------------------------------------------------


def test_bulk_deletes_stay_within_the_aws_request_limits(api, hooks, scope):
    """The emulated AWS refuses DeleteObjects over 1,000 keys and BatchWriteItem over 25 items, as
    AWS does; a memory with more than 1,000 files and many items is still erased in one request."""
    add_messages(api, scope, [f"m{n}" for n in range(60)])
    for n in range(5):
        add_record(api, scope, f"record {n}")
    epoch = epoch_of(scope)
    items = len(rows_of_epoch(scope, epoch))
    base = scope.prefix + bucket.SCENES + "bulk/"
    client = aws_client("s3")
    with ThreadPoolExecutor(max_workers=16) as pool:
        list(
            pool.map(
                lambda n: client.put_object(
                    Bucket=BUCKET, Key=f"{base}{n:05d}.md", Body=b"x", Metadata={"epoch": str(epoch)}
                ),
                range(1100),
            )
        )
    since = hooks.last_seq()
    item = clear(api, scope.memory_id)["items"][0]
    assert item["cleared"] is True and "purge_pending" not in item
    assert item["l0_deleted"] == 60 and item["l1_deleted"] == 5
    assert item["files_deleted"] == 1100 and item["l2_deleted"] == 1100

    calls = calls_of(hooks, since)
    deletes = [c for c in calls if c["operation"] == "DeleteObjects"]
    sizes = [len(c["actions"]) for c in deletes]  # one s3:DeleteObject per key named
    assert len(sizes) >= 2 and max(sizes) <= 1000 and sum(sizes) == 1100
    assert all(c["status"] == 200 for c in deletes)
    batches = [c for c in calls if c["operation"] == "BatchWriteItem" and "ItemsTable" in c["tables"]]
    assert all(c["status"] == 200 for c in batches)  # a batch over 25 would have been refused (400)
    assert len(batches) >= math.ceil(items / 25), (len(batches), items)
    assert memory_files(scope) == [] and rows_of_epoch(scope, epoch) == []


# ---- memory delete --------------------------------------------------------------------------------


def test_memory_delete_erases_everything_then_the_asset(api, scope):
    markers = seed_with_markers(api, scope)
    old_epoch = epoch_of(scope)
    created = get_asset(api, scope.memory_id)["created_at"]
    answer = ok(api.post("/v3/memory/delete", {"memory_id": scope.memory_id}))
    assert answer["deleted"] is True and answer["memory_id"] == scope.memory_id
    expected = {
        "l0_deleted": 2,
        "l1_deleted": 1,
        "l2_deleted": 1,
        "l3_deleted": 1,
        "profile_deleted": 2,
        "files_deleted": 5,
    }
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
    assert memory_files(scope) == [] and purge_records(scope) == []
    assert rows_of_epoch(scope, old_epoch) == []
    assert traces_of([scope.memory_id], ["tables"], terms=False, tables=[TABLES["assets"]]) == []  # listing too

    events = audit_events(api, scope.memory_id)
    assert set(answer["audit_ids"]) <= {e["event_id"] for e in events}
    assert any(e["action"] == "memory_delete" and e["layer"] == "asset" for e in events)
    assert [e["event_id"] for e in audit_events(api, scope.memory_id, "memory_delete")]

    # a new write creates a new asset, with nothing of the old one
    add_messages(api, scope, ["a new life"])
    reborn = get_asset(api, scope.memory_id)
    assert reborn["created_at"] > created and reborn["last_cleared_at"] is None
    assert reborn["counts"] == {"l0": 1, "l1": 0, "l2": 0, "l3": 0}
    assert read_scene(api, scope, "notes/a.md")["content"] is None
    assert read_persona(api, scope)["content"] is None
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
