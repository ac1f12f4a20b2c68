"""What each route answers, for the OpenAPI description: the envelope, each route's ``data``, and
the error envelope with the statuses a route can answer. These models document; they are not
imported by the functions (nothing at run time builds or checks answers with them): the OpenAPI
generator (``memory-hub openapi``, ``memory_hub_tools.openapi``) reads ``ROUTES`` below."""

from __future__ import annotations

from typing import Annotated, Any, Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from .admin import AuditAction

D = TypeVar("D")
REQUEST_ID = r"^req-[0-9a-f]{16}$"


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
    data: dict[str, Any] | None = Field(
        None,
        description="details, e.g. current_version (409 on a version), conflicts (409 on atomic/delete) or "
        "candidates: [{team_id, agent_id}] (409 memory_id ambiguous)",
    )
    retryable: bool | None = Field(
        None,
        description="true on 500, 503 and on the 409 of an in-flight Idempotency-Key; false on every other 409; "
        "may be absent on other 4xx",
    )


class GatewayError(Doc):
    """An answer API Gateway makes itself on AWS (throttling, a failed or timed-out function): the
    envelope's shape, but the request id is API Gateway's own and no x-request-id header is sent."""

    code: int = Field(description="the HTTP status")
    message: str
    request_id: str = Field(pattern=r"^req-", description="req- + API Gateway's request id")
    retryable: Literal[True]


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


class RouteDoc:
    """A route's answer: its ``data`` model and the error statuses it adds to ``BASE``.

    ``envelope=False`` marks an answer that is not the envelope (the DeleteUserMemory alias):
    ``data`` then describes the whole 200 body and ``error`` the body of every error status.
    ``idempotent``: the route honours an ``Idempotency-Key`` header (docs/RULES.md, "Deletes, clear
    and erasure")."""

    def __init__(
        self,
        data: Any,
        *extra: int,
        description: str = "code 0 and the data",
        envelope: bool = True,
        error: type[Doc] = ErrorEnvelope,
        idempotent: bool = False,
    ) -> None:
        self.data, self.description, self.envelope, self.error = data, description, envelope, error
        self.idempotent = idempotent
        self.statuses = tuple(sorted(set(BASE + extra)))


# ---------------------------------------------------------------- data models

# Times the service writes: YYYY-MM-DDTHH:MM:SS.mmmZ in UTC, so string order is time order.
Stamp = Annotated[str, Field(pattern=r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z$")]
# L2 times are read back from the file's META block (which the service writes in the same format).
MetaTime = Annotated[Stamp, Field(description="from the file's META block")]
MessageId = Annotated[str, Field(pattern=r"^msg-", description="msg-…, time-ordered")]
RecordId = Annotated[str, Field(pattern=r"^atom-", description="atom-…, time-ordered")]
AuditIds = Annotated[list[str], Field(description="ids of the audit events this change recorded (no content)")]


class ScenarioEntry(Doc):
    path: str
    summary: str | None = Field(description="null when unset")
    version: int
    size: int = Field(description="bytes of the stored file (META block included)")
    created_at: MetaTime
    updated_at: MetaTime
    team_id: str
    agent_id: str


class ScenarioList(Doc):
    entries: list[ScenarioEntry] = Field(description="files only, in ascending order of the path's UTF-8 bytes")
    scenes: list[ScenarioEntry] = Field(description="the same list as entries (SDK compatibility)")
    total: int = Field(description="all files under the prefix, not only this page")
    next_token: str | None = Field(None, description="present only when more files follow")


class ScenarioFile(Doc):
    path: str
    content: str | None = Field(description="raw, META block included; null when missing")
    version: int | None = Field(description="null when missing")
    summary: str | None
    created_at: MetaTime | None
    updated_at: MetaTime | None
    team_id: str
    agent_id: str


class ScenarioWritten(Doc):
    path: str
    version: int = Field(description="1 for a new file, then +1 per write")
    created: bool = Field(description="true when this write created the file (version 1)")
    created_at: Stamp
    updated_at: Stamp
    team_id: str
    agent_id: str


class ScenarioRemoved(Doc):
    success: Literal[True]
    deleted: int = Field(description="files removed (0 when nothing was there)")
    audit_ids: AuditIds


class ScenarioCounted(Doc):
    count: int
    total: int = Field(description="the same number as count")


class Persona(Doc):
    content: str | None = Field(description="exactly as written; null when there is no persona")
    version: int | None
    created_at: Stamp | None
    updated_at: Stamp | None
    team_id: str
    agent_id: str


class PersonaWritten(Doc):
    version: int = Field(description="1 for the first write, then +1 per write")
    created_at: Stamp
    updated_at: Stamp
    team_id: str
    agent_id: str


class PersonaCount(Doc):
    total: Literal[0, 1] = Field(description="1 if a persona exists (even empty)")
    team_id: str
    agent_id: str


class Added(Doc):
    accepted_ids: list[MessageId] = Field(description="one id per message, in request order")
    accepted_versions: list[Literal["v1"]] = Field(description='"v1" for each message')
    total_count: int = Field(description="the number of messages accepted")


class MessageItem(Doc):
    id: MessageId
    session_id: str
    team_id: str
    agent_id: str
    user_id: str
    task_id: str | None
    role: Literal["user", "assistant"]
    content: str
    timestamp: Stamp = Field(description="the message's own time")


class Messages(Doc):
    messages: list[MessageItem] = Field(description="newest timestamp first (ties: larger id first)")
    total: int = Field(description="all messages matching the filters")


SCORE = (
    "relevance, higher is better, on reciprocal-rank fusion's scale (at most 2/61) in every mode: BM25 "
    "relative to the query's best plus half the cosine similarity (hybrid); either part alone (keyword, "
    "semantic)"
)
ModeUsed = Annotated[
    Literal["hybrid", "keyword", "semantic"],
    Field(description="what ran: keyword when the query could not be embedded or the deployment has no embeddings"),
]


class MessageHit(Doc):
    id: MessageId
    session_id: str
    role: Literal["user", "assistant"]
    content: str
    timestamp: Stamp
    score: float = Field(description=SCORE)


class MessageHits(Doc):
    messages: list[MessageHit] = Field(description="best first")
    mode_used: ModeUsed


class Total(Doc):
    total: int


class MessagesDeleted(Doc):
    deleted_count: int = Field(description="messages removed, each counted once")
    deleted_ids: list[str] = Field(description="the named message ids that were removed, in request order")
    deleted_session_ids: list[str] = Field(description="the named sessions that removed at least one message")
    not_found_ids: list[str] = Field(description="named ids (message or session) that removed nothing")
    audit_ids: AuditIds


class RecordItem(Doc):
    id: RecordId
    type: str
    content: str
    background: str
    tags: list[str]
    metadata: dict[str, Any]
    version: int = Field(description="1 when added, +1 per update")
    reinforced_count: int = Field(description="how many adds brought this same record (1 when new)")
    team_id: str
    agent_id: str
    user_id: str
    task_id: str | None
    session_id: str | None
    created_at: Stamp
    updated_at: Stamp


class RecordHit(RecordItem):
    score: float = Field(description=SCORE)


class RecordAdded(Doc):
    id: RecordId
    version: int = Field(description="1 when new; unchanged when reinforced")
    created: bool = Field(description="false: the same content, type and background was there and is reinforced")
    reinforced_count: int


class Records(Doc):
    items: list[RecordItem] = Field(description="newest updated_at first (ties: larger id first)")
    total: int = Field(description="all records matching the filters")


class RecordHits(Doc):
    items: list[RecordHit] = Field(description="best first")
    mode_used: ModeUsed


class RecordUpdated(Doc):
    id: RecordId
    version: str = Field(pattern=r"^v[0-9]+$", description='"v<N>": the new version')
    updated_at: Stamp


class RecordsDeleted(Doc):
    deleted_count: int
    deleted_ids: list[str] = Field(description="in request order (after trimming and de-duplication)")
    not_found_ids: list[str] = Field(description="unknown, already gone, or outside the scope")
    audit_ids: AuditIds


class UserMemoryErased(Doc):
    """Without content_ids: every L0 and L1 item of the user in the memory was erased."""

    memory_id: str
    user_id: str
    l0_deleted: int
    l1_deleted: int
    audit_ids: AuditIds


class UserItemDeleted(Doc):
    """With content_ids: that one message or record of the user."""

    memory_id: str
    user_id: str
    deleted_count: int = Field(description="0 or 1")
    deleted_ids: list[str]
    not_found_ids: list[str] = Field(description="the id, when it named nothing of this user in this memory")
    audit_ids: AuditIds


UserMemoryDeleted = UserMemoryErased | UserItemDeleted


class AliasResult(Doc):
    """The DeleteUserMemory answer (``POST /v2/memory?Action=DeleteUserMemory``)."""

    requestId: str = Field(pattern=REQUEST_ID)
    result: Literal[True]


class AliasError(Doc):
    """The DeleteUserMemory error shape, sent with that HTTP status."""

    requestId: str = Field(pattern=REQUEST_ID)
    code: int = Field(description="the HTTP status")
    message: str


class ClearItem(Doc):
    memory_id: str
    team_id: str = Field(description="the pair whose memory this is (several pairs may spell one memory_id)")
    agent_id: str
    cleared: bool = Field(description="false: nothing of this memory was cleared (see reason); the call still succeeds")
    l0_deleted: int
    l1_deleted: int
    l2_deleted: int = Field(description="scenario files removed")
    l3_deleted: int = Field(description="1 if a persona was removed, else 0")
    profile_deleted: int = Field(description="l2_deleted + l3_deleted")
    files_deleted: int = Field(description="storage objects removed (files, persona, backups, metadata, exports)")
    audit_ids: AuditIds
    purge_pending: bool | None = Field(
        None, description="true: a very large memory is still being erased physically (already invisible)"
    )
    reason: str | None = Field(None, description="why it was not cleared (cleared: false)")
    retryable: bool | None = Field(None, description="with cleared: false")


class Cleared(Doc):
    items: list[ClearItem] = Field(description="in request order")
    all_cleared: bool


class AclEntryDoc(Doc):
    principal: str
    permissions: list[Literal["read", "write", "admin"]]


class BindingDoc(Doc):
    agent_id: str
    injection_mode: str | None = None
    priority: int | None = None


class Asset(Doc):
    memory_id: str = Field(description='"chat_memory-" + team_id + "-" + agent_id')
    team_id: str
    agent_id: str
    owner: str = Field(description="the key id that created it")
    name: str | None
    visibility: Literal["private", "team", "public"] = Field(
        description="stored and returned as given, default private (access is decided by key role and teams)"
    )
    acl: list[AclEntryDoc] = Field(description="stored and returned as given")
    bindings: list[BindingDoc] = Field(description="stored and returned as given")
    status: str
    retention_days: int | None = Field(description="null: the deployment default")
    created_at: Stamp
    updated_at: Stamp
    last_cleared_at: Stamp | None


class LayerCounts(Doc):
    l0: int
    l1: int
    l2: int
    l3: int


class AssetWithCounts(Asset):
    counts: LayerCounts


class Assets(Doc):
    items: list[Asset] = Field(description="by memory_id, then team_id, then agent_id")
    next_token: str | None = Field(None, description="present only when more assets follow")


class MemoryDeleted(Doc):
    deleted: Literal[True]
    memory_id: str
    team_id: str = Field(description="the pair whose memory was deleted")
    agent_id: str
    l0_deleted: int
    l1_deleted: int
    l2_deleted: int
    l3_deleted: int
    profile_deleted: int
    files_deleted: int
    audit_ids: AuditIds
    purge_pending: bool | None = Field(
        None, description="true: a very large memory is still being erased physically (already invisible)"
    )


Role = Literal["reader", "writer", "admin"]


class KeyCreated(Doc):
    key_id: str
    api_key: str = Field(description="the secret, shown only now (stored only as a SHA-256 hash)")
    role: Role
    team_ids: list[str]
    name: str | None
    created_at: Stamp


class KeyRow(Doc):
    key_id: str
    name: str | None
    role: Role
    team_ids: list[str]
    created_at: Stamp | None = Field(description="null for the bootstrap key")
    revoked: bool


class Keys(Doc):
    keys: list[KeyRow] = Field(description="the keys within the caller's teams; never a secret")


class KeyRevoked(Doc):
    key_id: str
    revoked: Literal[True]


class Event(Doc):
    event_id: str
    memory_id: str | None
    action: AuditAction
    layer: Literal["L0", "L1", "L2", "L3", "asset", "key"]
    target: str | None = Field(
        description="an id, a path, purge_complete, or for a user-memory delete the first 16 hex of sha256(user_id)"
    )
    count: int
    actor: str = Field(description="the key id, or system:cleanup")
    request_id: str | None
    at: Stamp
    team_id: str
    agent_id: str | None


class Events(Doc):
    events: list[Event] = Field(description="newest first; never content")
    next_token: str | None = Field(None, description="present only when more events follow")


LayerName = Literal["l0", "l1", "l2", "l3"]
JobState = Literal["created", "queued", "running", "done", "failed"]


class ExportJob(Doc):
    export_id: str
    state: JobState | Literal["erased"] = Field(
        description="done: url is set; erased: the archive was erased since (a clear, a delete, a day passed)"
    )
    memory_id: str
    counts: LayerCounts | None = Field(None, description="items of each layer in the archive (once done)")
    bytes: int | None = Field(None, description="size of the .tar.gz (once done)")
    url: str | None = Field(None, description="presigned GET of the .tar.gz, valid for up to 1 hour (state done)")
    expires_at: Stamp | None = Field(None, description="when url stops working")
    error: str | None = Field(None, description="why it failed (state failed)")


class ImportCreated(Doc):
    import_id: str
    upload_url: str = Field(description="presigned PUT for the .tar.gz of the tree, valid for up to 1 hour")
    method: Literal["PUT"]
    headers: dict[str, str] = Field(description="headers the upload must send (Content-Type: application/gzip)")
    expires_at: Stamp
    state: Literal["created"]


class ImportJobState(Doc):
    import_id: str
    state: JobState
    memory_id: str
    counts: dict[LayerName, int] | None = Field(None, description="items written per layer (state done)")
    skipped: dict[LayerName, int] | None = Field(None, description="items already there, unchanged (state done)")
    problems: list[str] | None = Field(
        None, description="malformed lines as `<file>:<line>: <problem>` (state failed; nothing was kept)"
    )
    error: str | None = Field(None, description="why it failed (state failed)")


# Every route of the API (edge.routes.ROUTES) and what it answers. Isolated routes add 422 (ISOLATION).
ROUTES: dict[str, RouteDoc] = {
    "/v2/memory": RouteDoc(
        AliasResult,
        404,
        409,
        503,
        description="`{requestId, result: true}`; every error is `{requestId, code, message}` with that HTTP status",
        envelope=False,
        error=AliasError,
    ),
    "/v3/admin/keys/create": RouteDoc(KeyCreated, 503),
    "/v3/admin/keys/list": RouteDoc(Keys),
    "/v3/admin/keys/revoke": RouteDoc(KeyRevoked, 404, 409, 503),
    "/v3/atomic/add": RouteDoc(RecordAdded, ISOLATION, 409, 503),
    "/v3/atomic/count": RouteDoc(Total, ISOLATION),
    "/v3/atomic/delete": RouteDoc(RecordsDeleted, ISOLATION, 409, 503),
    "/v3/atomic/query": RouteDoc(Records, ISOLATION),
    "/v3/atomic/search": RouteDoc(RecordHits, ISOLATION),
    "/v3/atomic/update": RouteDoc(RecordUpdated, ISOLATION, 404, 409, 503),
    "/v3/audit/query": RouteDoc(Events, 404),
    "/v3/chat-memory/clear": RouteDoc(Cleared, 404, 409, 422, idempotent=True),
    "/v3/conversation/add": RouteDoc(Added, ISOLATION, 409, 503, idempotent=True),
    "/v3/conversation/count": RouteDoc(Total, ISOLATION),
    "/v3/conversation/delete": RouteDoc(MessagesDeleted, ISOLATION, 503),
    "/v3/conversation/query": RouteDoc(Messages, ISOLATION),
    "/v3/conversation/search": RouteDoc(MessageHits, ISOLATION),
    "/v3/core/count": RouteDoc(PersonaCount, ISOLATION),
    "/v3/core/read": RouteDoc(Persona, ISOLATION),
    "/v3/core/write": RouteDoc(PersonaWritten, ISOLATION, 409, 503),
    "/v3/memory/create": RouteDoc(Asset, 503),
    "/v3/memory/delete": RouteDoc(MemoryDeleted, 404, 409, 503),
    "/v3/memory/export": RouteDoc(ExportJob, 404, 409),
    "/v3/memory/export/status": RouteDoc(ExportJob, 404),
    "/v3/memory/get": RouteDoc(AssetWithCounts, 404, 409),
    "/v3/memory/import": RouteDoc(ImportCreated, 409),
    "/v3/memory/import/start": RouteDoc(ImportJobState, 404, 409),
    "/v3/memory/import/status": RouteDoc(ImportJobState, 404),
    "/v3/memory/list": RouteDoc(Assets),
    "/v3/memory/update": RouteDoc(Asset, 404, 409, 503),
    "/v3/scenario/count": RouteDoc(ScenarioCounted, ISOLATION),
    "/v3/scenario/ls": RouteDoc(ScenarioList, ISOLATION),
    "/v3/scenario/read": RouteDoc(ScenarioFile, ISOLATION),
    "/v3/scenario/rm": RouteDoc(ScenarioRemoved, ISOLATION, 503),
    "/v3/scenario/write": RouteDoc(ScenarioWritten, ISOLATION, 409, 503),
    "/v3/user-memory/delete": RouteDoc(UserMemoryDeleted, 404, 409, 503),
}
