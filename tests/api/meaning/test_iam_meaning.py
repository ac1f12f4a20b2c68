"""Sufficient privilege for meaning: every Bedrock, S3 Vectors and SQS call a function made — and
every other call — was allowed by that function's own policy in template.yaml. The test drives
every kind of call itself, so it holds in any order; every call of the meaning tests is checked
again at the teardown of their stack (helpers.checked_stack)."""

from __future__ import annotations

from helpers import denied_calls, make_scope, ok
from test_vectors import THROTTLED, wait_for_vector

MEANING_ACTIONS = {
    "bedrock:InvokeModel",
    "s3vectors:PutVectors",
    "s3vectors:CreateIndex",
    "s3vectors:QueryVectors",
    "s3vectors:GetVectors",
    "s3vectors:DeleteVectors",
    "s3vectors:ListIndexes",
    "s3vectors:ListVectors",
    "s3vectors:DeleteIndex",
    "sqs:SendMessage",
    "sqs:ReceiveMessage",
    "sqs:DeleteMessage",
}


def _drive_meaning(api, scope, hooks) -> None:
    """Writes that embed, a search by meaning, a queued embedding, erasures and a cleanup."""
    ok(api.post("/v3/conversation/add", scope.body(session_id="s", messages=[{"role": "user", "content": "iam"}])))
    atom = ok(api.post("/v3/atomic/add", scope.body(content="iam check")))["id"]
    ok(api.post("/v3/conversation/search", scope.body(query="iam", mode="hybrid")))
    ok(api.post("/v3/atomic/update", scope.body(id=atom, content="iam check, changed")))
    hook = hooks.add({"operation": "InvokeModel", "function": "MemoryFunction"}, "fail", None, THROTTLED)
    queued = ok(api.post("/v3/atomic/add", scope.body(content="iam check queued")))["id"]
    hooks.remove(hook)
    wait_for_vector(scope, queued)
    ok(api.post("/v3/atomic/delete", scope.body(ids=[atom])))
    ok(api.post("/v3/user-memory/delete", {"memory_id": scope.memory_id, "user_id": scope.user_id}))
    ok(api.post("/v3/chat-memory/clear", {"memory_ids": [scope.memory_id]}))
    # a memory that keeps its vectors: the cleanup's pass lists them (ListVectors), whichever meaning
    # tests ran on this stack before (the clear above left this scope's epoch without an index)
    kept = make_scope()
    said = ok(
        api.post("/v3/conversation/add", kept.body(session_id="s", messages=[{"role": "user", "content": "iam"}]))
    )
    wait_for_vector(kept, said["accepted_ids"][0])
    api.invoke("CleanupFunction", {})


def test_no_call_of_the_meaning_stack_was_denied_and_every_kind_was_made(api, scope, hooks):
    _drive_meaning(api, scope, hooks)
    calls = hooks.calls()
    assert {"MemoryFunction", "DeleteFunction", "ClearFunction", "EmbedFunction", "CleanupFunction"} <= {
        c["function"] for c in calls if c["function"]
    }
    denied = denied_calls(calls)
    assert denied == [], denied[:5]
    actions = {action for c in calls if c["function"] for action, _ in c["actions"]}
    assert actions >= MEANING_ACTIONS, MEANING_ACTIONS - actions
