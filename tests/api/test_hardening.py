"""What an outside review broke, each as a test through the local stack: writes racing deletes and
clears (run on purpose: a hook holds one call while the other request runs), index and file
drifting apart, audit across teams, numbers JSON cannot carry, oversized assets, a forged purge
continuation, a change whose audit write fails, stale reads under load, input edges, and the
gateway's framing."""

from __future__ import annotations

import json
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import urlsplit

import pytest
from helpers import ADMIN_KEY, SERVICE_ID, Scope, epoch_of, make_scope, ok


def write(api, scope, path, content, **fields):
    return api.post("/v3/scenario/write", scope.body(path=path, content=content, **fields))


def read(api, scope, path):
    return ok(api.post("/v3/scenario/read", scope.body(path=path)))


def listing(api, scope, prefix=""):
    return {e["path"]: e["version"] for e in ok(api.post("/v3/scenario/ls", scope.body(path_prefix=prefix)))["entries"]}


def agree(api, scope, paths):
    """ls, count and read tell the same story about every path."""
    listed = listing(api, scope)
    assert ok(api.post("/v3/scenario/count", scope.body()))["total"] == len(listed)
    for path in paths:
        file = read(api, scope, path)
        assert (path in listed) == (file["content"] is not None), (path, listed, file)
        if path in listed:
            assert listed[path] == file["version"], (path, listed, file)
    return listed


def in_background(call):
    pool = ThreadPoolExecutor(1)
    return pool, pool.submit(call)


# ---------------------------------------------------------------- 1, 2: writes racing removals


def test_a_write_whose_object_was_removed_after_its_read_retries_and_lands(api, scope, hooks):
    ok(write(api, scope, "race/a.md", "v1"))
    hook = hooks.add({"function": "ScenarioFunction", "operation": "PutObject", "key_contains": "race/a.md"})
    pool, pending = in_background(lambda: write(api, scope, "race/a.md", "after the rm"))
    assert hooks.wait(hook), "the write never reached its put"
    assert ok(api.post("/v3/scenario/rm", scope.body(path="race/a.md")))["deleted"] == 1
    hooks.release(hook)
    answer = pending.result(timeout=60)
    pool.shutdown()
    assert answer.status == 200, answer.body  # NoSuchKey on IfMatch means "changed": read again
    assert answer.data["version"] == 1  # the rm came first: the path started over
    assert agree(api, scope, ["race/a.md"]) == {"race/a.md": 1}
    assert read(api, scope, "race/a.md")["content"].endswith("after the rm")


def test_a_write_committing_after_a_removal_of_its_version_leaves_index_and_file_agreeing(api, scope, hooks):
    ok(write(api, scope, "race/b.md", "v1"))
    hook = hooks.add({"function": "ScenarioFunction", "operation": "TransactWriteItems", "table": "ScenesTable"})
    pool, pending = in_background(lambda: write(api, scope, "race/b.md", "v2"))
    assert hooks.wait(hook)  # v2 is in S3, not yet indexed
    removed = ok(api.post("/v3/scenario/rm", scope.body(path="race/b.md")))
    hooks.release(hook)
    answer = pending.result(timeout=60)
    pool.shutdown()
    assert answer.status == 200, answer.body
    listed = agree(api, scope, ["race/b.md"])
    # either the removal took v1 and v2 came after it, or it took v2 too: never a mix
    assert removed["deleted"] == 1 and listed in ({}, {"race/b.md": 2})


def test_a_folder_removal_racing_writers_leaves_listing_and_files_agreeing(api, scope):
    paths = [f"r/{i}.md" for i in range(4)]
    for path in paths:
        ok(write(api, scope, path, "seed"))
    stop = time.monotonic() + 4

    def writer(path):
        failures = []
        while time.monotonic() < stop:
            answer = write(api, scope, path, f"at {time.monotonic()}")
            if answer.status != 200:
                failures.append(answer.body)
        return failures

    def remover():
        failures = []
        while time.monotonic() < stop:
            answer = api.post("/v3/scenario/rm", scope.body(path="r/"))
            if answer.status != 200:
                failures.append(answer.body)
        return failures

    with ThreadPoolExecutor(5) as pool:
        results = list(pool.map(lambda f: f(), [lambda p=p: writer(p) for p in paths] + [remover]))
    assert results == [[]] * 5, "writes never fail because of concurrent writers or removals"
    agree(api, scope, paths)


def test_a_persona_write_racing_a_clear_lands_whole_in_one_epoch(api, scope, hooks):
    ok(api.post("/v3/core/write", scope.body(content="before")))
    hook = hooks.add({"function": "MemoryFunction", "operation": "PutObject", "key_contains": "persona.md"})
    pool, pending = in_background(lambda: api.post("/v3/core/write", scope.body(content="during the clear")))
    assert hooks.wait(hook)
    assert ok(api.post("/v3/chat-memory/clear", {"memory_ids": [scope.memory_id]}))["all_cleared"] is True
    hooks.release(hook)
    answer = pending.result(timeout=60)
    pool.shutdown()
    assert answer.status == 200, answer.body
    persona = ok(api.post("/v3/core/read", scope.body()))
    assert persona["content"] in (None, "during the clear")  # erased whole or kept whole
    if persona["content"] is not None:
        assert persona["version"] == answer.data["version"] == 1


def test_messages_added_while_a_memory_is_deleted_make_a_new_memory(api, scope, hooks):
    ok(api.post("/v3/conversation/add", scope.body(session_id="s", messages=[{"role": "user", "content": "old"}])))
    hook = hooks.add({"function": "MemoryFunction", "operation": "TransactWriteItems", "table": "ItemsTable"})
    pool, pending = in_background(
        lambda: api.post(
            "/v3/conversation/add",
            scope.body(session_id="s", messages=[{"role": "user", "content": "racing the delete"}]),
        )
    )
    assert hooks.wait(hook)
    assert ok(api.post("/v3/memory/delete", {"memory_id": scope.memory_id}))["deleted"] is True
    hooks.release(hook)
    answer = pending.result(timeout=60)
    pool.shutdown()
    assert answer.status == 200, answer.body
    messages = ok(api.post("/v3/conversation/query", scope.body()))["messages"]
    assert [m["content"] for m in messages] == ["racing the delete"]


# ---------------------------------------------------------------- 3: audit belongs to the pair


def test_audit_events_belong_to_the_team_and_agent_pair_not_the_memory_id_string(api):
    suffix = str(int(time.time() * 1000))[-6:]
    first = Scope(f"dx{suffix}", "dy-dz", "u")
    second = Scope(f"dx{suffix}-dy", "dz", "u")
    assert first.memory_id == second.memory_id
    first_admin = api.with_key(
        ok(api.post("/v3/admin/keys/create", {"role": "admin", "team_ids": [first.team_id]}))["api_key"]
    )
    second_admin = api.with_key(
        ok(api.post("/v3/admin/keys/create", {"role": "admin", "team_ids": [second.team_id]}))["api_key"]
    )
    ok(first_admin.post("/v3/scenario/write", first.body(path="private/salary-review-alice.md", content="x")))
    ok(first_admin.post("/v3/scenario/rm", first.body(path="private/salary-review-alice.md")))
    ok(first_admin.post("/v3/memory/delete", {"memory_id": first.memory_id}))
    ok(second_admin.post("/v3/memory/create", {"team_id": second.team_id, "agent_id": second.agent_id}))
    seen_by_second = ok(second_admin.post("/v3/audit/query", {"memory_id": second.memory_id, "limit": 100}))["events"]
    assert not any("salary" in (e["target"] or "") for e in seen_by_second)
    assert all(e["team_id"] == second.team_id for e in seen_by_second)
    seen_by_first = ok(first_admin.post("/v3/audit/query", {"memory_id": first.memory_id, "limit": 100}))["events"]
    actions = {e["action"] for e in seen_by_first}
    assert {"scenario_write", "scenario_rm", "memory_delete"} <= actions
    assert all(e["team_id"] == first.team_id for e in seen_by_first)
    # a '*' key sees both pairs' events under the shared string
    everyone = ok(api.post("/v3/audit/query", {"memory_id": first.memory_id, "limit": 100}))["events"]
    assert {e["team_id"] for e in everyone} == {first.team_id}  # the second pair has no events yet
    outsider = api.with_key(ok(api.post("/v3/admin/keys/create", {"role": "admin", "team_ids": ["nobody"]}))["api_key"])
    assert outsider.post("/v3/audit/query", {"memory_id": first.memory_id}).status == 403


# ---------------------------------------------------------------- 4, 5: numbers and asset bounds


@pytest.mark.parametrize("number", ["1e999", "-1e999", "1" + "0" * 400])
def test_a_number_beyond_a_finite_double_is_400_naming_its_field(api, scope, number):
    raw = json.dumps(scope.body(content="c")).replace(
        '"content": "c"', f'"content": "c", "metadata": {{"x": {number}}}'
    )
    answer = api.raw("POST", "/v3/atomic/add", raw.encode(), api.auth_headers())
    assert answer.status == 400 and answer.message == "metadata.x: must be a finite number", answer.body
    assert ok(api.post("/v3/atomic/count", scope.body()))["total"] == 0


def test_answers_are_strict_json(api, scope):
    ok(
        api.post(
            "/v3/atomic/add", scope.body(content="big numbers", metadata={"x": 1.7976931348623157e308, "y": -1e-300})
        )
    )
    text = api.post("/v3/atomic/query", scope.body()).raw.decode("utf-8")
    json.loads(text, parse_constant=lambda name: pytest.fail(f"{name} in an answer"))


@pytest.mark.parametrize(
    "fields, field",
    [
        ({"bindings": [{"agent_id": "a", "priority": int("9" * 4200)}]}, "bindings.0.priority"),
        ({"bindings": [{"agent_id": "a", "priority": 1_000_001}]}, "bindings.0.priority"),
        ({"bindings": [{"agent_id": "a"}] * 101}, "bindings"),
        ({"bindings": [{"agent_id": "a" * 65}]}, "bindings.0.agent_id"),
        ({"bindings": [{"agent_id": "a", "injection_mode": "m" * 65}]}, "bindings.0.injection_mode"),
        ({"acl": [{"principal": "p" * 257, "permissions": ["read"]}]}, "acl.0.principal"),
        ({"acl": [{"principal": "p", "permissions": ["read", "read"]}]}, "acl.0.permissions"),
        ({"acl": [{"principal": "p", "permissions": []}]}, "acl.0.permissions"),
        ({"acl": [{"principal": "p", "permissions": ["read"]}] * 101}, "acl"),
        ({"name": "n" * 257}, "name"),
    ],
)
def test_asset_fields_beyond_their_bounds_are_400(api, scope, fields, field):
    answer = api.post("/v3/memory/create", {"team_id": scope.team_id, "agent_id": scope.agent_id, **fields})
    assert answer.status == 400 and answer.message.startswith(f"{field}: "), answer.body


def test_a_single_id_longer_than_any_issued_is_an_unknown_one(api, scope):
    """Not a 400 naming a length no client was told: no such memory, record or key."""
    ok(api.post("/v3/atomic/add", scope.body(content="one record")))
    long_memory = scope.memory_id + "x" * 300
    for route, body in (
        ("/v3/memory/get", {"memory_id": long_memory}),
        ("/v3/memory/update", {"memory_id": long_memory, "name": "n"}),
        ("/v3/memory/delete", {"memory_id": long_memory}),
        ("/v3/memory/export", {"memory_id": long_memory}),
        ("/v3/user-memory/delete", {"memory_id": long_memory, "user_id": scope.user_id}),
        ("/v3/audit/query", {"memory_id": long_memory}),
        ("/v3/admin/keys/revoke", {"key_id": "k" * 65}),
        ("/v3/atomic/update", scope.body(id="atom-" + "0" * 300, content="changed")),
    ):
        answer = api.post(route, body)
        assert answer.status == 404, (route, answer.body)
    assert ok(api.post("/v3/atomic/count", scope.body()))["total"] == 1


# ---------------------------------------------------------------- 6: the purge continuation


def test_a_purge_event_naming_the_current_epoch_erases_nothing(api, scope):
    ok(write(api, scope, "live.md", "stays"))
    ok(api.post("/v3/conversation/add", scope.body(session_id="s", messages=[{"role": "user", "content": "stays"}])))
    epoch = epoch_of(scope)
    answer = api.invoke(
        "ClearFunction",
        {
            "memory_hub_purge": {
                "team_id": scope.team_id,
                "agent_id": scope.agent_id,
                "epoch": epoch,
                "memory_id": scope.memory_id,
            }
        },
    )
    assert answer["done"] is True and "ignored" in answer
    assert read(api, scope, "live.md")["content"].endswith("stays")
    assert ok(api.post("/v3/conversation/count", scope.body()))["total"] == 1
    events = ok(api.post("/v3/audit/query", {"memory_id": scope.memory_id}))["events"]
    assert not any(e["target"] == "purge_complete" for e in events)


# ---------------------------------------------------------------- 7: a change and its audit event


AUDIT_DOWN = {"table": "AuditTable"}


def test_a_message_delete_whose_audit_write_fails_deletes_nothing(api, scope, hooks):
    ids = ok(
        api.post(
            "/v3/conversation/add",
            scope.body(session_id="s", messages=[{"role": "user", "content": "keep me until audited"}]),
        )
    )["accepted_ids"]
    with hooks.failing(AUDIT_DOWN):
        answer = api.post("/v3/conversation/delete", scope.body(message_ids=ids))
    assert answer.status >= 500 and answer.body.get("retryable") is True, answer.body
    assert ok(api.post("/v3/conversation/count", scope.body()))["total"] == 1
    retried = ok(api.post("/v3/conversation/delete", scope.body(message_ids=ids)))
    assert retried["deleted_ids"] == ids and len(retried["audit_ids"]) == 1


def test_a_scenario_write_whose_audit_write_fails_leaves_the_file_as_it_was(api, scope, hooks):
    ok(write(api, scope, "audited.md", "first"))
    with hooks.failing(AUDIT_DOWN):
        answer = write(api, scope, "audited.md", "second")
    assert answer.status == 503 and answer.body["retryable"] is True, answer.body
    file = read(api, scope, "audited.md")
    assert file["version"] == 1 and file["content"].endswith("first")
    assert agree(api, scope, ["audited.md"]) == {"audited.md": 1}
    assert ok(write(api, scope, "audited.md", "second"))["version"] == 2


def test_a_persona_write_whose_audit_write_fails_leaves_the_persona_as_it_was(api, scope, hooks):
    ok(api.post("/v3/core/write", scope.body(content="first")))
    with hooks.failing(AUDIT_DOWN):
        answer = api.post("/v3/core/write", scope.body(content="second"))
    assert answer.status == 503, answer.body
    persona = ok(api.post("/v3/core/read", scope.body()))
    assert persona["content"] == "first" and persona["version"] == 1


def test_a_key_whose_audit_write_fails_is_not_created(api, hooks):
    before = {k["key_id"] for k in ok(api.post("/v3/admin/keys/list", {}))["keys"]}
    with hooks.failing(AUDIT_DOWN):
        answer = api.post("/v3/admin/keys/create", {"role": "reader", "team_ids": ["audit-down"]})
    assert answer.status >= 500, answer.body
    after = {k["key_id"] for k in ok(api.post("/v3/admin/keys/list", {}))["keys"]}
    assert after == before


# ---------------------------------------------------------------- 8: read after write under load


PAIRS_PER_CLIENT = 6


def test_eight_clients_always_read_what_they_just_wrote(api):
    """Eight clients at once, each writing its own file and reading it back a fixed number of
    times: every read returns the write just answered (the work is counted, not timed)."""
    scope = make_scope()

    def client(n):
        stale = []
        path = f"load/{n}.md"
        for pair in range(PAIRS_PER_CLIENT):
            marker = f"{n}-{pair}"
            ok(write(api, scope, path, marker))
            content = read(api, scope, path)["content"]
            if not content.endswith(marker):
                stale.append((marker, content[-20:]))
        return stale

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(client, range(8)))
    assert results == [[]] * 8, results
    assert listing(api, scope, "load/") == {f"load/{n}.md": PAIRS_PER_CLIENT for n in range(8)}


# ---------------------------------------------------------------- 9: input edges


def test_rfc3339_offsets_are_accepted_and_normalised(api, scope):
    ok(
        api.post(
            "/v3/conversation/add",
            scope.body(
                session_id="s",
                messages=[{"role": "user", "content": "offset", "timestamp": "2026-01-01T08:00:00+08:00"}],
            ),
        )
    )
    message = ok(api.post("/v3/conversation/query", scope.body()))["messages"][0]
    assert message["timestamp"] == "2026-01-01T00:00:00.000Z"
    assert ok(api.post("/v3/conversation/count", scope.body(time_start="2026-01-01T09:00:00+09:00")))["total"] == 1


@pytest.mark.parametrize(
    "value", ["２０２６-01-01T00:00:00Z", "2026-01-01T00:00:00\u0661Z", "2026-01-01T00:00:00+٠٨:00"]
)
def test_times_with_other_digits_are_400(api, scope, value):
    answer = api.post("/v3/conversation/count", scope.body(time_start=value))
    assert answer.status == 400 and answer.message.startswith("time_start: "), answer.body


def test_filter_bounds_compare_at_the_precision_written(api, scope):
    ok(
        api.post(
            "/v3/conversation/add",
            scope.body(
                session_id="s",
                messages=[{"role": "user", "content": "at zero", "timestamp": "2026-01-01T00:00:00.000Z"}],
            ),
        )
    )
    assert ok(api.post("/v3/conversation/count", scope.body(time_start="2026-01-01T00:00:00.0005Z")))["total"] == 0
    assert ok(api.post("/v3/conversation/count", scope.body(time_end="2025-12-31T23:59:59.9995Z")))["total"] == 0
    assert ok(api.post("/v3/conversation/count", scope.body(time_start="2026-01-01T00:00:00Z")))["total"] == 1


def test_searches_honour_time_windows(api, scope):
    ok(
        api.post(
            "/v3/conversation/add",
            scope.body(
                session_id="s",
                messages=[
                    {"role": "user", "content": "tea in january", "timestamp": "2026-01-05T00:00:00Z"},
                    {"role": "user", "content": "tea in march", "timestamp": "2026-03-05T00:00:00Z"},
                ],
            ),
        )
    )
    found = ok(api.post("/v3/conversation/search", scope.body(query="tea", time_start="2026-02-01T00:00:00Z")))
    assert [m["content"] for m in found["messages"]] == ["tea in march"]
    record = ok(api.post("/v3/atomic/add", scope.body(content="tea record")))
    later = ok(api.post("/v3/atomic/search", scope.body(query="tea", time_end="2000-01-01T00:00:00Z")))
    assert later["items"] == []
    now_window = ok(api.post("/v3/atomic/search", scope.body(query="tea", time_start="2000-01-01T00:00:00Z")))
    assert [i["id"] for i in now_window["items"]] == [record["id"]]


def test_a_reused_idempotency_key_on_a_foreign_memory_is_403_first(api, scope):
    ok(write(api, scope, "x.md", "x"))
    key = "clear-once-" + scope.team_id
    ok(api.post("/v3/chat-memory/clear", {"memory_ids": [scope.memory_id]}, headers={"Idempotency-Key": key}))
    team_admin = api.with_key(
        ok(api.post("/v3/admin/keys/create", {"role": "admin", "team_ids": ["elsewhere"]}))["api_key"]
    )
    answer = team_admin.post(
        "/v3/chat-memory/clear", {"memory_ids": [scope.memory_id]}, headers={"Idempotency-Key": key}
    )
    assert answer.status == 403, answer.body


def test_team_id_of_a_control_character_is_400_not_missing(api):
    answer = api.post("/v3/scenario/count", {"team_id": "\x1f", "agent_id": "a", "user_id": "u"})
    assert answer.status == 400 and answer.message.startswith("team_id: "), answer.body
    blank = api.post("/v3/scenario/count", {"team_id": "\u3000", "agent_id": "a", "user_id": "u"})
    assert blank.status == 422 and blank.message == "missing isolation fields: team_id", blank.body


def test_the_service_id_must_be_exactly_the_deployments(api, scope):
    """HTTP parsers drop the blanks around a header value; a function handed one as it is (here
    straight through the Invoke API) still refuses anything but the exact id."""
    from memory_hub_local.gateway import api_event

    for service in (" default ", "default\t", "Default"):
        event = api_event(
            "POST",
            "/v3/scenario/count",
            {"Authorization": f"Bearer {ADMIN_KEY}", "x-tdai-service-id": service},
            json.dumps(scope.body()).encode(),
        )
        answer = api.invoke("ScenarioFunction", event)
        assert answer["statusCode"] == 401, (service, answer)
        assert json.loads(answer["body"])["message"] == "x-tdai-service-id: unknown service"


def test_a_utf8_isolation_header_is_read_as_utf8(api, scope):
    headers = {"x-tdai-user-id": "客户 1"}
    body = {
        "team_id": scope.team_id,
        "agent_id": scope.agent_id,
        "session_id": "s",
        "messages": [{"role": "user", "content": "hello"}],
    }
    ok(api.post("/v3/conversation/add", body, headers=headers))
    messages = ok(
        api.post("/v3/conversation/query", {"team_id": scope.team_id, "agent_id": scope.agent_id}, headers=headers)
    )["messages"]
    assert messages[0]["user_id"] == "客户 1"


def test_the_longest_valid_ids_and_paths_work_on_every_route_and_one_more_byte_is_400(api):
    team, agent = "t" * 64, "a" * 64
    user, session, task = "😀" * 256, "会" * 256, "\U0010ffff" * 256
    path = "é" * 253 + "/" + "x.md"  # 506 + 1 + 4 = 511 bytes
    path = "p" * (512 - len(path.encode())) + path
    assert len(path.encode()) == 512
    scope = Scope(team, agent, user)
    base = scope.body(session_id=session, task_id=task)
    ok(api.post("/v3/scenario/write", dict(base, path=path, content="long")))
    assert ok(api.post("/v3/scenario/read", dict(base, path=path)))["version"] == 1
    ok(api.post("/v3/scenario/ls", base))
    ok(api.post("/v3/core/write", dict(base, content="persona")))
    ids = ok(api.post("/v3/conversation/add", dict(base, messages=[{"role": "user", "content": "longest"}])))[
        "accepted_ids"
    ]
    assert ok(api.post("/v3/conversation/search", dict(base, query="longest")))["messages"]
    atom = ok(api.post("/v3/atomic/add", dict(base, content="longest record")))["id"]
    ok(api.post("/v3/atomic/update", dict(base, id=atom, content="longest record, updated")))
    assert ok(api.post("/v3/atomic/search", dict(base, query="updated")))["items"]
    ok(api.post("/v3/conversation/delete", dict(base, message_ids=ids, session_ids=[session])))
    ok(api.post("/v3/atomic/delete", dict(base, ids=[atom])))
    ok(api.post("/v3/user-memory/delete", {"memory_id": scope.memory_id, "user_id": user}))
    ok(api.post("/v3/scenario/rm", dict(base, path=path)))
    ok(api.post("/v3/chat-memory/clear", {"memory_ids": [scope.memory_id]}))
    for field, value in (("team_id", "t" * 65), ("user_id", "😀" * 257), ("session_id", "会" * 257)):
        answer = api.post("/v3/scenario/count", dict(base, **{field: value}))
        assert answer.status == 400 and answer.message.startswith(f"{field}: "), answer.body
    answer = api.post("/v3/scenario/read", dict(base, path="p" + path))
    assert answer.status == 400 and answer.message.startswith("path: "), answer.body


# ---------------------------------------------------------------- 10: the gateway's framing


def _raw(stack, request: bytes, *, half_close: bool = False) -> bytes:
    host, port = urlsplit(stack.api_url).hostname, urlsplit(stack.api_url).port
    with socket.create_connection((host, port), timeout=30) as sock:
        sock.sendall(request)
        if half_close:
            sock.shutdown(socket.SHUT_WR)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
            if b"\r\n\r\n" in b"".join(chunks):
                head, _, rest = b"".join(chunks).partition(b"\r\n\r\n")
                length = [
                    int(line.split(b":")[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length")
                ]
                if length and len(rest) >= length[0]:
                    break
        return b"".join(chunks)


def _head(path: str, extra: str) -> bytes:
    return (
        f"POST {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {ADMIN_KEY}\r\n"
        f"x-tdai-service-id: {SERVICE_ID}\r\n{extra}\r\n"
    ).encode()


@pytest.mark.parametrize(
    "framing",
    [
        "Content-Length: -5\r\n",
        "Content-Length: 12abc\r\n",
        "Content-Length: 5\r\nContent-Length: 6\r\n",
        "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n",
    ],
)
def test_malformed_framing_is_a_400_envelope_and_nothing_is_processed(stack, api, framing):
    scope = make_scope()
    body = json.dumps(scope.body(path="framed.md", content="x")).encode()
    reply = _raw(stack, _head("/v3/scenario/write", framing) + body)
    status = int(reply.split(b" ", 2)[1])
    envelope = json.loads(reply.partition(b"\r\n\r\n")[2])
    assert status == 400 and envelope["code"] == 400 and b"x-request-id" in reply.lower(), reply[:300]
    assert ok(api.post("/v3/scenario/count", scope.body()))["total"] == 0


def test_bad_chunking_is_a_400_envelope(stack, api):
    scope = make_scope()
    reply = _raw(stack, _head("/v3/scenario/write", "Transfer-Encoding: chunked\r\n") + b"zz\r\n{}\r\n0\r\n\r\n")
    assert int(reply.split(b" ", 2)[1]) == 400
    assert ok(api.post("/v3/scenario/count", scope.body()))["total"] == 0


def test_a_body_shorter_than_its_length_then_half_closed_is_not_processed(stack, api):
    scope = make_scope()
    body = json.dumps(scope.body(path="cut.md", content="truncated")).encode()
    reply = _raw(stack, _head("/v3/scenario/write", f"Content-Length: {len(body)}\r\n") + body[:-10], half_close=True)
    assert int(reply.split(b" ", 2)[1]) == 400, reply[:200]
    assert ok(api.post("/v3/scenario/count", scope.body()))["total"] == 0


def test_a_body_over_10_mib_is_413_with_a_request_id(stack):
    big = b"x" * (10 * 1024 * 1024 + 1)
    reply = _raw(stack, _head("/v3/scenario/write", f"Content-Length: {len(big)}\r\n") + big)
    assert int(reply.split(b" ", 2)[1]) == 413 and b"x-request-id" in reply.lower()


def test_64_connections_at_once_are_all_answered(stack):
    host, port = urlsplit(stack.api_url).hostname, urlsplit(stack.api_url).port
    ready = threading.Barrier(64)

    def one(_):
        ready.wait(timeout=30)
        with socket.create_connection((host, port), timeout=60) as sock:
            sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            data = b""
            while chunk := sock.recv(4096):
                data += chunk
            return data.split(b" ", 2)[1]

    with ThreadPoolExecutor(64) as pool:
        statuses = list(pool.map(one, range(64)))
    assert statuses == [b"200"] * 64
