"""Blank session and task ids mean none, on every route: TencentDB's TypeScript SDK sends
``task_id: ""`` on every call and its Python SDK ``session_id: ""``. A blank body value does not
fall back to the header; white space around a non-blank id is refused; conversation/add still
needs a real session."""

from __future__ import annotations

import pytest
from helpers import ok

ADD = "/v3/conversation/add"


def add(api, scope, content, session="s1", **fields):
    body = scope.body(session_id=session, messages=[{"role": "user", "content": content}], **fields)
    return ok(api.post(ADD, body))["accepted_ids"]


@pytest.mark.parametrize("blank", ["", "  ", "\u3000\t"])
def test_a_blank_task_id_means_no_task_on_every_kind_of_route(api, scope, blank):
    add(api, scope, "untasked")
    add(api, scope, "tasked", task_id="t1")
    # L0 read: no task filter, so both messages
    listed = ok(api.post("/v3/conversation/query", scope.body(task_id=blank)))
    assert sorted(m["content"] for m in listed["messages"]) == ["tasked", "untasked"]
    # writes with a blank task store no task
    add(api, scope, "also untasked", task_id=blank)
    record = ok(api.post("/v3/atomic/add", scope.body(content="a fact", task_id=blank, session_id=blank)))
    assert record["id"].startswith("atom-")
    # L2/L3 writes and reads, updates and deletes accept it too
    ok(api.post("/v3/scenario/write", scope.body(path="a.md", content="x", task_id=blank, session_id=blank)))
    ok(api.post("/v3/core/write", scope.body(content="persona", task_id=blank)))
    ok(api.post("/v3/core/read", scope.body(task_id=blank, session_id=blank)))
    ok(api.post("/v3/atomic/delete", scope.body(ids=[record["id"]], task_id=blank)))
    counted = ok(api.post("/v3/conversation/count", scope.body(task_id=blank, session_id=blank)))
    assert counted["total"] == 3


def test_a_blank_body_value_does_not_fall_back_to_the_header(api, scope):
    add(api, scope, "one", task_id="t1")
    add(api, scope, "two", task_id="t2")
    narrowed = ok(api.post("/v3/conversation/count", scope.body(), headers={"x-tdai-task-id": "t1"}))
    assert narrowed["total"] == 1
    # the body's blank wins over the header: no task, so both
    both = ok(api.post("/v3/conversation/count", scope.body(task_id=""), headers={"x-tdai-task-id": "t1"}))
    assert both["total"] == 2


def test_a_blank_header_means_none(api, scope):
    add(api, scope, "one", task_id="t1")
    add(api, scope, "two")
    counted = ok(api.post("/v3/conversation/count", scope.body(), headers={"x-tdai-task-id": ""}))
    assert counted["total"] == 2


@pytest.mark.parametrize("name", ["task_id", "session_id"])
@pytest.mark.parametrize("value", [" t1", "t1 ", "\u00a0t1"])
def test_white_space_around_a_non_blank_id_is_400(api, scope, name, value):
    answer = api.post("/v3/conversation/count", scope.body(**{name: value}))
    assert answer.status == 400, answer.body
    assert answer.message.startswith(f"{name}: "), answer.body


@pytest.mark.parametrize("blank", ["", "   "])
def test_conversation_add_still_needs_a_session(api, scope, blank):
    body = scope.body(session_id=blank, messages=[{"role": "user", "content": "hi"}])
    answer = api.post(ADD, body, headers={"x-tdai-session-id": "from-header"})
    assert answer.status == 400, answer.body
    assert answer.message.startswith("session_id: "), answer.body
