"""The wire's conventions the pipeline enforces, stated once and importing nothing: the order of
its checks, the isolation headers, which ids may be blank. The pipeline (``edge.pipeline``) runs
them; the OpenAPI document and docs/API.md render them from here (the tools read shapes and rules,
never what serves them)."""

from __future__ import annotations

# The contract's checks, (status, what is checked), in the order they answer: when several fail,
# the first one here answers. ``pipeline._handle`` runs them up to the isolation format, and
# ``pipeline.fail`` lets no error answer before the key's (nor, but for 404/405, before the role's
# and, once the scope or the team a body names is known, the team's); the route runs the rest: its
# fields, the memories it names (domain.assets), its Idempotency-Key, its conflicts.
CHECK_ORDER: tuple[tuple[str, str], ...] = (
    ("401", "service id and key"),
    ("404", "path"),
    ("405", "method"),
    ("403", "role"),
    ("413", "size"),
    ("415", "encoding"),
    ("400", "JSON object"),
    ("422", "missing isolation fields"),
    ("400", "isolation format"),
    ("403", "team outside the key"),
    ("400", "other fields"),
    ("403", "a named memory outside the key"),
    ("404", "not found"),
    ("409", "`memory_id ambiguous`"),
    ("422/409", "`Idempotency-Key`"),
    ("409", "other conflicts"),
)
ISOLATION_HEADERS = {
    "team_id": "x-tdai-team-id",
    "agent_id": "x-tdai-agent-id",
    "user_id": "x-tdai-user-id",
    "session_id": "x-tdai-session-id",
    "task_id": "x-tdai-task-id",
}
# Optional ids: blank (in the body or a header) means none, on every route — TencentDB's SDKs send "" for them.
OPTIONAL_IDS = ("session_id", "task_id")
FREE_IDS = ("user_id", *OPTIONAL_IDS)
# Deeper bodies would exhaust the recursion of the parser and of every walk over the body (a 500);
# no route's schema nests more than a few levels.
MAX_JSON_DEPTH = 100
