"""What the API answers besides a use case's answer, for the OpenAPI description: the envelope
around every answer, the error envelope and the statuses each route can answer, API Gateway's own
errors, and the DeleteUserMemory alias's shapes. A 200's ``data`` is the type its handler returns
(``resolver.Resolver.answers``); this module documents the rest."""

from __future__ import annotations

from typing import Any, Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from ..domain.results import REQUEST_ID, absent

D = TypeVar("D")


class Doc(BaseModel):
    model_config = ConfigDict(defer_build=True)


class Envelope(Doc, Generic[D]):
    code: Literal[0] = Field(description="0 on success")
    message: Literal["ok"]
    request_id: str = Field(pattern=REQUEST_ID, description="also sent as the x-request-id header")
    data: D


class ErrorEnvelope(Doc):
    code: int = Field(description="the HTTP status")
    message: str = Field(
        description="what is wrong; a 400 names each bad field as `<field>: <problem>`, joined by `; `"
    )
    request_id: str = Field(pattern=REQUEST_ID, description="also sent as the x-request-id header")
    data: dict[str, Any] | None = absent(
        "details, e.g. current_version (409 on a version), conflicts (409 on atomic/delete) or "
        "candidates: [{team_id, agent_id}] (409 memory_id ambiguous)",
    )
    retryable: bool | None = absent(
        "true on 500, 503 and on the 409 of an in-flight Idempotency-Key; false on every other 409; "
        "may be absent on other 4xx",
    )


class GatewayError(Doc):
    """An answer API Gateway makes itself on AWS (throttling, a failed or timed-out function): the
    envelope's shape, but the request id is API Gateway's own and no x-request-id header is sent."""

    code: int = Field(description="the HTTP status")
    message: str
    request_id: str = Field(pattern=r"^req-", description="req- + API Gateway's request id")
    retryable: Literal[True]


class AliasResult(Doc):
    """The DeleteUserMemory answer (``POST /v2/memory?Action=DeleteUserMemory``)."""

    requestId: str = Field(pattern=REQUEST_ID)  # noqa: N815 - the TencentDB wire name
    result: Literal[True]


class AliasError(Doc):
    """The DeleteUserMemory error shape, sent with that HTTP status."""

    requestId: str = Field(pattern=REQUEST_ID)  # noqa: N815 - the TencentDB wire name
    code: int = Field(description="the HTTP status")
    message: str


ERRORS = {
    400: "a field is invalid (each named as `<field>: <problem>`), or the body is not a JSON object",
    401: "x-tdai-service-id unknown, or the key missing, unknown or revoked",
    403: "the key's role or teams do not cover the request (or a named memory outside them)",
    404: "the named memory, key, record or job does not exist",
    409: "a version conflict (`data` tells which), a memory_id that several pairs spell (`memory_id ambiguous`, "
    "`data.candidates`: name team_id and agent_id too), or an Idempotency-Key still in flight",
    413: "the body is larger than 1 MiB (as received or after gzip decoding)",
    415: "a Content-Encoding other than gzip or identity",
    422: "isolation fields missing (team_id, agent_id, user_id), or an Idempotency-Key reused with another body",
    500: "internal error; the message is only `Internal server error`",
    503: "too much concurrent activity, or storage failed; nothing was changed (retryable)",
}
# On AWS only: answers API Gateway makes itself (template.yaml, GatewayResponses).
GATEWAY_ERRORS = {
    429: "throttled by API Gateway (AWS only; retryable)",
    502: "the function failed outside the application (AWS only; retryable)",
    504: "the function did not answer in time (AWS only; retryable)",
}
# What every POST route can answer: a bad body, auth, role or teams, size, encoding, a failure.
BASE = (400, 401, 403, 413, 415, 500)
ISOLATION = 422  # every isolated route (routes.ROUTES[path].isolated): missing team_id/agent_id/user_id

# The statuses each route adds to BASE (isolated routes also add ISOLATION).
EXTRA: dict[str, tuple[int, ...]] = {
    "/v2/memory": (404, 409, 503),
    "/v3/admin/keys/create": (503,),
    "/v3/admin/keys/list": (),
    "/v3/admin/keys/revoke": (404, 409, 503),
    "/v3/atomic/add": (409, 503),
    "/v3/atomic/count": (),
    "/v3/atomic/delete": (409, 503),
    "/v3/atomic/query": (),
    "/v3/atomic/search": (),
    "/v3/atomic/update": (404, 409, 503),
    "/v3/audit/query": (404,),
    "/v3/chat-memory/clear": (404, 409, 422),
    "/v3/conversation/add": (409, 503),
    "/v3/conversation/count": (),
    "/v3/conversation/delete": (503,),
    "/v3/conversation/query": (),
    "/v3/conversation/search": (),
    "/v3/core/count": (),
    "/v3/core/read": (),
    "/v3/core/write": (409, 503),
    "/v3/formation/run": (409, 503),
    "/v3/formation/status": (),
    "/v3/memory/create": (503,),
    "/v3/memory/delete": (404, 409, 503),
    "/v3/memory/export": (404, 409),
    "/v3/memory/export/status": (404,),
    "/v3/memory/get": (404, 409),
    "/v3/memory/import": (409,),
    "/v3/memory/import/start": (404, 409),
    "/v3/memory/import/status": (404,),
    "/v3/memory/list": (),
    "/v3/memory/update": (404, 409, 503),
    "/v3/scenario/count": (),
    "/v3/scenario/ls": (),
    "/v3/scenario/read": (),
    "/v3/scenario/rm": (503,),
    "/v3/scenario/write": (409, 503),
    "/v3/user-memory/delete": (404, 409, 503),
}
# Routes that honour an ``Idempotency-Key`` header (docs/RULES.md, "Deletes, clear and erasure").
IDEMPOTENT = ("/v3/chat-memory/clear", "/v3/conversation/add")
# Routes that answer without the envelope: (the 200 body, the body of every error status, a description).
ALIASES: dict[str, tuple[type[Doc], type[Doc], str]] = {
    "/v2/memory": (
        AliasResult,
        AliasError,
        "`{requestId, result: true}`; every error is `{requestId, code, message}` with that HTTP status",
    ),
}


def statuses(path: str, isolated: bool) -> tuple[int, ...]:
    """The error statuses a route can answer (besides API Gateway's own)."""
    return tuple(sorted(set(BASE + EXTRA[path] + ((ISOLATION,) if isolated else ()))))
