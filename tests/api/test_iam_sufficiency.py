"""Sufficient privilege: every AWS call a function made is allowed by that function's own policy in
template.yaml (SAM policy templates expanded by AWS's translator, evaluated per call by the emulated
AWS side). These tests drive every function themselves, so they hold in any order; the same check
over every call of the whole session runs at the teardown of the session's stack
(helpers.checked_stack). Meaning's calls — Bedrock, S3 Vectors, SQS — are checked the same way over
the meaning stack: tests/api/meaning/test_iam_meaning.py."""

from __future__ import annotations

import pytest
from helpers import denied_calls, make_scope, ok, own_stack

stack, api, hooks = own_stack()


def _drive_every_function(api, scope, hooks) -> None:
    """Every function and the kinds of calls it makes, whatever ran before in the session."""
    ok(api.post("/v3/scenario/write", scope.body(path="iam/a.md", content="iam check")))
    ok(api.post("/v3/scenario/ls", scope.body()))
    ok(api.post("/v3/core/write", scope.body(content="persona")))
    ids = ok(
        api.post(
            "/v3/conversation/add", scope.body(session_id="s", messages=[{"role": "user", "content": "iam check"}])
        )
    )["accepted_ids"]
    atom = ok(api.post("/v3/atomic/add", scope.body(content="iam check")))["id"]
    ok(api.post("/v3/conversation/search", scope.body(query="iam")))
    ok(api.post("/v3/atomic/update", scope.body(id=atom, content="iam check, changed")))
    ok(api.post("/v3/user-memory/delete", {"memory_id": scope.memory_id, "user_id": scope.user_id}))
    ok(api.post("/v3/conversation/delete", scope.body(message_ids=ids)))
    ok(api.post("/v3/atomic/delete", scope.body(ids=[atom])))
    ok(api.post("/v3/scenario/rm", scope.body(path="iam/")))
    ok(api.post("/v3/memory/get", {"memory_id": scope.memory_id}))
    ok(api.post("/v3/chat-memory/clear", {"memory_ids": [scope.memory_id]}))
    api.invoke("CleanupFunction", {})


@pytest.fixture(scope="module")
def calls(api, hooks) -> list:
    """Every call of the module's stack once every function was driven."""
    _drive_every_function(api, make_scope(), hooks)
    return hooks.calls()


def test_no_function_call_was_denied_by_its_iam_policy(calls):
    by_function = {c["function"] for c in calls if c["function"]}
    assert {
        "ScenarioFunction",
        "MemoryFunction",
        "DeleteFunction",
        "ClearFunction",
        "AdminFunction",
        "CleanupFunction",
    } <= by_function
    denied = denied_calls(calls)
    assert denied == [], denied[:5]


def test_every_kind_of_call_was_checked(calls):
    """The check above is not vacuous: the calls cover the actions the functions need."""
    actions = {action for c in calls if c["function"] for action, _ in c["actions"]}
    assert {
        "dynamodb:GetItem",
        "dynamodb:PutItem",
        "dynamodb:UpdateItem",
        "dynamodb:DeleteItem",
        "dynamodb:ConditionCheckItem",
        "dynamodb:Query",
        "dynamodb:BatchWriteItem",
        "dynamodb:BatchGetItem",
        "s3:GetObject",
        "s3:PutObject",
        "s3:DeleteObject",
        "s3:ListBucket",
        "secretsmanager:GetSecretValue",
    } <= actions
