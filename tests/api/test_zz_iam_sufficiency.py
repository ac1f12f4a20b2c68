"""Sufficient privilege, checked over everything the suite did (this module runs last in the tier):
every AWS call a function made was allowed by that function's own policy in template.yaml (SAM
policy templates expanded by AWS's translator, evaluated per call by the emulated AWS side). A
missing permission fails here — not in a deployment. (Meaning's calls — Bedrock, S3 Vectors, SQS —
are checked the same way over the meaning stack: tests/api/meaning/test_zz_iam_meaning.py.)"""

from __future__ import annotations

from helpers import ok


def _drive_every_function(api, scope, hooks) -> None:
    """Whatever ran before in the session, every function and the kinds of calls it makes."""
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


def test_no_function_call_of_the_session_was_denied_by_its_iam_policy(api, scope, hooks):
    _drive_every_function(api, scope, hooks)
    calls = hooks.calls()
    by_function = {c["function"] for c in calls if c["function"]}
    assert {
        "ScenarioFunction",
        "MemoryFunction",
        "DeleteFunction",
        "ClearFunction",
        "AdminFunction",
        "CleanupFunction",
    } <= by_function
    denied = [
        c
        for c in calls
        if c["function"]
        and not c.get("injected")  # a test's fault hook, not a policy
        and c["refused"] in ("AccessDenied", "AccessDeniedException")
        and not str(c.get("key") or "").startswith("outside/")
        and not str(c.get("key")).startswith("profiles/iam/")
    ]
    assert denied == [], denied[:5]


def test_every_kind_of_call_was_checked(api, scope, hooks):
    _drive_every_function(api, scope, hooks)
    """The check above is not vacuous: the session's calls cover the actions the functions need."""
    actions = {action for c in hooks.calls() if c["function"] for action, _ in c["actions"]}
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
