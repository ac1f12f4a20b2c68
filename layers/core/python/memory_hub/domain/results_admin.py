"""What the admin use cases answer — erasure, assets, keys, audit, export and import — under the
rules of ``results.Answer``."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from .results import (
    Answer,
    AuditAction,
    AuditIds,
    AuditLayer,
    FormationLayers,
    KeyRole,
    Permission,
    Stamp,
    Visibility,
    absent,
)

# ---------------------------------------------------------------- erasure

PURGE_PENDING = "true: a very large memory is still being erased physically (already invisible)"


class Erased(Answer):
    """What an erasure removed, per layer (a clear's or a memory delete's part of the answer)."""

    memory_id: str
    team_id: str = Field(description="the pair whose memory this is (several pairs may spell one memory_id)")
    agent_id: str
    l0_deleted: int
    l1_deleted: int
    l2_deleted: int = Field(description="scenario files removed")
    l3_deleted: int = Field(description="1 if a persona was removed, else 0")
    profile_deleted: int = Field(description="l2_deleted + l3_deleted")
    files_deleted: int = Field(description="storage objects removed (files, persona, backups, metadata, exports)")
    audit_ids: AuditIds
    purge_pending: bool | None = absent(PURGE_PENDING)


# Erased's fields with ``cleared`` second and the reason last: the wire's order, which a subclass of
# Erased could not keep (pydantic puts a base's fields first). A comment, not a docstring: a model's
# docstring is its OpenAPI description.
class ClearItem(Answer):
    memory_id: str
    cleared: bool = Field(description="false: nothing of this memory was cleared (see reason); the call still succeeds")
    team_id: str = Field(description="the pair whose memory this is (several pairs may spell one memory_id)")
    agent_id: str
    l0_deleted: int
    l1_deleted: int
    l2_deleted: int = Field(description="scenario files removed")
    l3_deleted: int = Field(description="1 if a persona was removed, else 0")
    profile_deleted: int = Field(description="l2_deleted + l3_deleted")
    files_deleted: int = Field(description="storage objects removed (files, persona, backups, metadata, exports)")
    audit_ids: AuditIds
    purge_pending: bool | None = absent(PURGE_PENDING)
    reason: str | None = absent("why it was not cleared (cleared: false)")
    retryable: bool | None = absent("with cleared: false")


class Cleared(Answer):
    items: list[ClearItem] = Field(description="in request order")
    all_cleared: bool


class MemoryDeleted(Answer):
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
    purge_pending: bool | None = absent(PURGE_PENDING)


class UserMemoryErased(Answer):
    """Without content_ids: every L0 and L1 item of the user in the memory was erased."""

    memory_id: str
    user_id: str
    l0_deleted: int
    l1_deleted: int
    files_deleted: int = Field(
        description="the user's formed files removed (their formed/<digest>/ folder), and the memory's exports"
    )
    audit_ids: AuditIds


class UserItemDeleted(Answer):
    """With content_ids: that one message or record of the user, with what goes with it."""

    memory_id: str
    user_id: str
    deleted_count: int = Field(description="0 or 1")
    deleted_ids: list[str]
    not_found_ids: list[str] = Field(description="the id, when it named nothing of this user in this memory")
    records_deleted: int = Field(description="records erased because they cited the erased message")
    files_deleted: int = Field(
        description="formed files removed because a record they came from was erased, and the memory's exports"
        " erased with what was deleted"
    )
    audit_ids: AuditIds


UserMemoryDeleted = UserMemoryErased | UserItemDeleted

# ---------------------------------------------------------------- assets


# Named apart from the request models AclEntry and Binding: one OpenAPI component namespace.
class AclEntryDoc(Answer):
    principal: str
    permissions: list[Permission]


class BindingDoc(Answer):
    agent_id: str
    injection_mode: str | None = absent()
    priority: int | None = absent()


class Asset(Answer):
    memory_id: str = Field(description='"chat_memory-" + team_id + "-" + agent_id')
    team_id: str
    agent_id: str
    owner: str = Field(description="the key id that created it")
    name: str | None
    visibility: Visibility = Field(
        description="stored and returned as given, default private (access is decided by key role and teams)"
    )
    acl: list[AclEntryDoc] = Field(description="stored and returned as given")
    bindings: list[BindingDoc] = Field(description="stored and returned as given")
    status: str
    retention_days: int | None = Field(description="null: the deployment default")
    formation: FormationLayers = Field(
        description="what the service forms from this memory's conversation: off, records (L1; the default) "
        "or all (L1 plus each user's scenes and persona under formed/<user digest>/, readable by all the agent's users)"
    )
    created_at: Stamp
    updated_at: Stamp
    last_cleared_at: Stamp | None


class LayerCounts(Answer):
    l0: int
    l1: int
    l2: int
    l3: int


class AssetWithCounts(Asset):
    counts: LayerCounts


class Assets(Answer):
    items: list[Asset] = Field(description="by memory_id, then team_id, then agent_id")
    next_token: str | None = absent(
        "present only when more assets follow: past `limit`, or sooner when the page would pass Lambda's 6 MB"
        " answer (assets at their ACL and binding limits)"
    )


# ---------------------------------------------------------------- keys and audit


class KeyCreated(Answer):
    key_id: str
    api_key: str = Field(description="the secret, shown only now (stored only as a SHA-256 hash)")
    role: KeyRole
    team_ids: list[str]
    name: str | None
    created_at: Stamp


class KeyRow(Answer):
    key_id: str
    name: str | None
    role: KeyRole
    team_ids: list[str]
    created_at: Stamp | None = Field(description="null for the bootstrap key")
    revoked: bool


class Keys(Answer):
    keys: list[KeyRow] = Field(description="the keys within the caller's teams; never a secret")


class KeyRevoked(Answer):
    key_id: str
    revoked: Literal[True]


class Event(Answer):
    event_id: str
    memory_id: str | None
    action: AuditAction
    layer: AuditLayer
    target: str | None = Field(
        description="an id, a path, purge_complete, or for a user-memory delete the first 16 hex of sha256(user_id)"
    )
    count: int
    actor: str = Field(description="the key id, or system:cleanup")
    request_id: str | None
    at: Stamp
    team_id: str
    agent_id: str | None


class Events(Answer):
    events: list[Event] = Field(description="newest first; never content")
    next_token: str | None = absent("present only when more events follow")


# ---------------------------------------------------------------- export and import

LayerName = Literal["l0", "l1", "l2", "l3"]
JobState = Literal["created", "queued", "running", "done", "failed"]
FAILED = "why it failed (state failed)"


class ExportJob(Answer):
    export_id: str
    state: JobState | Literal["erased"] = Field(
        description="done: url is set; erased: the archive was erased since (a clear, a delete, a day passed)"
    )
    memory_id: str
    counts: LayerCounts | None = absent("items of each layer in the archive (once done)")
    bytes: int | None = absent("size of the .tar.gz (once done)")
    url: str | None = absent("presigned GET of the .tar.gz, valid for up to 1 hour (state done)")
    expires_at: Stamp | None = absent("when url stops working")
    error: str | None = absent(FAILED)  # never beside url: a job that failed has no archive


class ImportCreated(Answer):
    import_id: str
    upload_url: str = Field(description="presigned PUT for the .tar.gz of the tree, valid for up to 1 hour")
    method: Literal["PUT"]
    headers: dict[str, str] = Field(description="headers the upload must send (Content-Type: application/gzip)")
    expires_at: Stamp
    state: Literal["created"]


class ImportJobState(Answer):
    import_id: str
    state: JobState
    memory_id: str
    counts: dict[LayerName, int] | None = absent("items written per layer (state done)")
    skipped: dict[LayerName, int] | None = absent("items already there, unchanged (state done)")
    problems: list[str] | None = absent(
        "malformed lines as `<file>:<line>: <problem>` (state failed; nothing was kept)"
    )
    error: str | None = absent(FAILED)
