"""What each route answers, for the OpenAPI description: the envelope, each route's ``data``, and
the error envelope with the statuses a route can answer. These models document; they are not
imported by the functions (nothing at run time builds or checks answers with them): the OpenAPI
generator (``memory-hub openapi``) reads ``ROUTES`` below."""

from __future__ import annotations

from typing import Any, Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field

D = TypeVar("D")


class Doc(BaseModel):
    model_config = ConfigDict(defer_build=True)


class Envelope(Doc, Generic[D]):
    code: Literal[0] = 0
    message: Literal["ok"] = "ok"
    request_id: str = Field(pattern=r"^req-[0-9a-f]{16}$")
    data: D


class ErrorEnvelope(Doc):
    code: int = Field(description="the HTTP status")
    message: str = Field(description="what is wrong; a 400 names each bad field as `<field>: <problem>`")
    request_id: str
    data: dict[str, Any] | None = Field(None, description="details, e.g. current_version or conflicts on a 409")
    retryable: bool | None = Field(None, description="true on 500, 503 and an in-flight Idempotency-Key 409")


ERRORS = {
    400: "a field is invalid (named in the message), or the body is not a JSON object",
    401: "missing or unknown service id or key",
    403: "the key's role or teams do not cover the request",
    404: "unknown route, or the named memory/key/record does not exist",
    405: "another method on a known path",
    409: "a version or collision conflict (data tells which), or an in-flight Idempotency-Key",
    413: "the body is larger than 1 MiB (as received or after gzip decoding)",
    415: "a Content-Encoding other than gzip or identity",
    422: "isolation fields missing, or an Idempotency-Key reused with another body",
    500: "internal error (retryable)",
    503: "too much concurrent activity or a dependency failed; nothing was changed (retryable)",
}
COMMON = (400, 401, 403, 404, 405, 413, 415, 500)


class RouteDoc:
    """A route's answer: its ``data`` model and the error statuses it adds to the common ones."""

    def __init__(self, data: Any, *extra: int, description: str = "code 0 and the data") -> None:
        self.data, self.statuses, self.description = data, tuple(sorted(set(COMMON + extra))), description


# ---------------------------------------------------------------- data models


class ScenarioEntry(Doc):
    path: str
    summary: str | None
    version: int
    size: int = Field(description="bytes of the stored file (META block included)")
    created_at: str
    updated_at: str
    team_id: str
    agent_id: str


class ScenarioList(Doc):
    entries: list[ScenarioEntry]
    scenes: list[ScenarioEntry] = Field(description="the same list as entries (SDK compatibility)")
    total: int = Field(description="all files under the prefix")
    next_token: str | None = None


class ScenarioFile(Doc):
    path: str
    content: str | None = Field(description="raw, META block included; null when missing")
    version: int | None
    summary: str | None
    created_at: str | None
    updated_at: str | None
    team_id: str
    agent_id: str


class ScenarioWritten(Doc):
    path: str
    version: int
    created: bool
    created_at: str
    updated_at: str
    team_id: str
    agent_id: str


class ScenarioRemoved(Doc):
    success: Literal[True]
    deleted: int = Field(description="files removed (0 when nothing was there)")
    audit_ids: list[str]


class ScenarioCounted(Doc):
    count: int
    total: int


class Persona(Doc):
    content: str | None
    version: int | None
    created_at: str | None
    updated_at: str | None
    team_id: str
    agent_id: str


class PersonaWritten(Doc):
    version: int
    created_at: str
    updated_at: str
    team_id: str
    agent_id: str


class PersonaCount(Doc):
    total: Literal[0, 1]
    team_id: str
    agent_id: str


class Added(Doc):
    accepted_ids: list[str]
    accepted_versions: list[str]
    total_count: int


class MessageItem(Doc):
    id: str
    session_id: str
    team_id: str
    agent_id: str
    user_id: str
    task_id: str | None
    role: Literal["user", "assistant"]
    content: str
    timestamp: str


class Messages(Doc):
    messages: list[MessageItem]
    total: int


class MessageHit(Doc):
    id: str
    session_id: str
    role: str
    content: str
    timestamp: str
    score: float


class MessageHits(Doc):
    messages: list[MessageHit]


class Total(Doc):
    total: int


class MessagesDeleted(Doc):
    deleted_count: int
    deleted_ids: list[str]
    deleted_session_ids: list[str]
    not_found_ids: list[str]
    audit_ids: list[str]


class RecordItem(Doc):
    id: str
    type: str
    content: str
    background: str
    tags: list[str]
    metadata: dict[str, Any]
    version: int
    reinforced_count: int
    team_id: str
    agent_id: str
    user_id: str
    task_id: str | None
    session_id: str | None
    created_at: str
    updated_at: str


class RecordHit(RecordItem):
    score: float


class RecordAdded(Doc):
    id: str
    version: int
    created: bool
    reinforced_count: int


class Records(Doc):
    items: list[RecordItem]
    total: int


class RecordHits(Doc):
    items: list[RecordHit]


class RecordUpdated(Doc):
    id: str
    version: str = Field(description='"v<N>"')
    updated_at: str


class RecordsDeleted(Doc):
    deleted_count: int
    deleted_ids: list[str]
    not_found_ids: list[str]
    audit_ids: list[str]


class UserMemoryDeleted(Doc):
    memory_id: str
    user_id: str
    l0_deleted: int | None = None
    l1_deleted: int | None = None
    deleted_count: int | None = None
    deleted_ids: list[str] | None = None
    not_found_ids: list[str] | None = None
    audit_ids: list[str]


class ClearItem(Doc):
    memory_id: str
    cleared: bool
    l0_deleted: int
    l1_deleted: int
    l2_deleted: int
    l3_deleted: int
    profile_deleted: int
    files_deleted: int
    audit_ids: list[str]
    purge_pending: bool | None = None
    reason: str | None = None
    retryable: bool | None = None


class Cleared(Doc):
    items: list[ClearItem]
    all_cleared: bool


class AclEntryDoc(Doc):
    principal: str
    permissions: list[str]


class BindingDoc(Doc):
    agent_id: str
    injection_mode: str | None = None
    priority: int | None = None


class Asset(Doc):
    memory_id: str
    team_id: str
    agent_id: str
    owner: str
    name: str | None
    visibility: Literal["private", "team", "public"]
    acl: list[AclEntryDoc]
    bindings: list[BindingDoc]
    status: str
    retention_days: int | None
    created_at: str
    updated_at: str
    last_cleared_at: str | None


class LayerCounts(Doc):
    l0: int
    l1: int
    l2: int
    l3: int


class AssetWithCounts(Asset):
    counts: LayerCounts


class Assets(Doc):
    items: list[Asset]
    next_token: str | None = None


class MemoryDeleted(Doc):
    deleted: Literal[True]
    memory_id: str
    l0_deleted: int
    l1_deleted: int
    l2_deleted: int
    l3_deleted: int
    profile_deleted: int
    files_deleted: int
    audit_ids: list[str]
    purge_pending: bool | None = None


class KeyCreated(Doc):
    key_id: str
    api_key: str = Field(description="the secret, shown only now")
    role: str
    team_ids: list[str]
    name: str | None
    created_at: str


class KeyRow(Doc):
    key_id: str
    name: str | None
    role: str
    team_ids: list[str]
    created_at: str | None
    revoked: bool


class Keys(Doc):
    keys: list[KeyRow]


class KeyRevoked(Doc):
    key_id: str
    revoked: Literal[True]


class Event(Doc):
    event_id: str
    memory_id: str | None
    action: str
    layer: str
    target: str | None
    count: int
    actor: str
    request_id: str | None
    at: str
    team_id: str
    agent_id: str | None


class Events(Doc):
    events: list[Event]
    next_token: str | None = None


ROUTES: dict[str, RouteDoc] = {
    "/v2/memory": RouteDoc(
        UserMemoryDeleted, 503, description="the alias answers {requestId, result: true} or {requestId, code, message}"
    ),
    "/v3/admin/keys/create": RouteDoc(KeyCreated, 503),
    "/v3/admin/keys/list": RouteDoc(Keys),
    "/v3/admin/keys/revoke": RouteDoc(KeyRevoked, 409, 503),
    "/v3/atomic/add": RouteDoc(RecordAdded, 409, 503),
    "/v3/atomic/count": RouteDoc(Total),
    "/v3/atomic/delete": RouteDoc(RecordsDeleted, 409, 503),
    "/v3/atomic/query": RouteDoc(Records),
    "/v3/atomic/search": RouteDoc(RecordHits),
    "/v3/atomic/update": RouteDoc(RecordUpdated, 409, 503),
    "/v3/audit/query": RouteDoc(Events),
    "/v3/chat-memory/clear": RouteDoc(Cleared, 409, 422),
    "/v3/conversation/add": RouteDoc(Added, 409, 422, 503),
    "/v3/conversation/count": RouteDoc(Total),
    "/v3/conversation/delete": RouteDoc(MessagesDeleted, 503),
    "/v3/conversation/query": RouteDoc(Messages),
    "/v3/conversation/search": RouteDoc(MessageHits),
    "/v3/core/count": RouteDoc(PersonaCount),
    "/v3/core/read": RouteDoc(Persona),
    "/v3/core/write": RouteDoc(PersonaWritten, 409, 503),
    "/v3/memory/create": RouteDoc(Asset, 409, 503),
    "/v3/memory/delete": RouteDoc(MemoryDeleted, 503),
    "/v3/memory/get": RouteDoc(AssetWithCounts),
    "/v3/memory/list": RouteDoc(Assets),
    "/v3/memory/update": RouteDoc(Asset, 503),
    "/v3/scenario/count": RouteDoc(ScenarioCounted),
    "/v3/scenario/ls": RouteDoc(ScenarioList),
    "/v3/scenario/read": RouteDoc(ScenarioFile),
    "/v3/scenario/rm": RouteDoc(ScenarioRemoved, 503),
    "/v3/scenario/write": RouteDoc(ScenarioWritten, 409, 503),
    "/v3/user-memory/delete": RouteDoc(UserMemoryDeleted, 503),
}
