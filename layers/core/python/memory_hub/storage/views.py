"""What storage hands the domain: each kind of item as a frozen dataclass of its fields.

The domain reads items and passes them back to storage to change or erase; it never builds one,
saves one or writes an update expression (storage does, in ``models``' terms, rebuilding the
stored item from the view's fields: ``models.own``). A view is a copy taken when storage read the
item (``models.snapshot``): it never follows a later change, so a storage function that changes
an item the domain goes on using answers the new view (``jobs.claim``, ``jobs.settle``,
``assets.commit_import``). A field that is absent on some items is ``| None`` here (PynamoDB's
own types say it is always there). Each view has every attribute of its model, no more.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any


@dataclass(frozen=True, slots=True, eq=False)
class _Keyed:
    """An item of ItemsTable: its partition and sort key (``layout``)."""

    pk: str
    sk: str


@dataclass(frozen=True, slots=True, eq=False)
class _UserItem(_Keyed):
    """What an L0 message and an L1 record both hold."""

    content: str
    id: str
    import_id: str | None
    index_format: float | None
    lsi1: str | None  # a message's only when it is kept under its id (``layout.message_sk``)
    task_id: str | None
    terms: float
    user_id: str


@dataclass(frozen=True, slots=True, eq=False)
class Asset:
    """A memory asset of one (team, agent) pair: ``epoch`` fences clears, ``importing`` names the
    imports running into it."""

    acl: Any
    agent_id: str
    bindings: Any
    created_at: str
    epoch: float
    export_marks: bool | None
    fenced: bool | None
    formation: str | None
    hidden_by: str | None
    importing: set[str] | None
    last_cleared_at: str | None
    memory_id: str
    moved_to: str | None
    name: str | None
    owner: str
    pk: str
    retention_days: float | None
    sk: str
    status: str
    team_id: str
    updated_at: str  # as created_at
    vector_bucket: str | None
    vector_groups: float | None
    visibility: str
    word_index: str | None


@dataclass(frozen=True, slots=True, eq=False)
class SceneEntry:
    """The index entry of one L2 path: its version, size, ETag and the epoch it is valid for."""

    created_at: str  # written with every version (absent only on old tombstones)
    epoch: float
    etag: str | None
    gen: float
    path: str
    removed: bool
    scope: str
    size: float
    summary: str | None
    updated_at: str  # as created_at
    version: float


@dataclass(frozen=True, slots=True, eq=False)
class ApiKey:
    """An API key: its role, its teams and the SHA-256 of its secret (never the secret)."""

    created_at: str
    created_by: str | None
    key_hash: str
    key_id: str
    name: str | None
    revoked: bool
    role: str
    team_ids: list[str]


@dataclass(frozen=True, slots=True, eq=False)
class AuditEvent:
    """One audit event: who did what to which layer of which memory, and how many items it touched."""

    action: str
    actor: str
    agent_id: str | None
    at: str
    count: float
    event_id: str
    layer: str
    memory_id: str | None
    pk: str
    request_id: str | None
    shard: str | None
    target: str | None
    team_id: str


@dataclass(frozen=True, slots=True, eq=False)
class Message(_UserItem):
    """An L0 message of one user's conversation."""

    lsi2: str
    recorded_at: float | None
    role: str
    session_id: str
    timestamp: float


@dataclass(frozen=True, slots=True, eq=False)
class Record(_UserItem):
    """An L1 record of one user, with the messages it was formed from (``sources``)."""

    absorbed: set[str] | None
    background: str
    cited: set[str] | None
    created_at: float
    formed: bool | None
    meta: Any
    natural_key: str
    reinforced_count: float
    session_id: str | None
    sources: list[str] | None
    tags: list[str]
    type: str
    updated_at: float
    version: float


@dataclass(frozen=True, slots=True, eq=False)
class Posting(_Keyed):
    """A term's posting of one item in the word index (or the index's progress marker)."""

    document_frequency: float | None
    item_length: float | None
    lsi3: str
    record_type: str | None
    session_digest: str | None
    task_digest: str | None
    term_frequency: float | None
    timestamp: float | None


@dataclass(frozen=True, slots=True, eq=False)
class FormationState(_Keyed):
    """A user's formation state: the queued run, its lease, failures and what it formed last."""

    dropped: float | None
    failures: float | None
    files_due: bool | None
    last_error: Any
    last_formed: str | None
    last_run_at: float | None
    lease_owner: str | None
    lease_until: float | None
    paused: bool | None
    queued_at: float | None
    state: str | None


@dataclass(frozen=True, slots=True, eq=False)
class Unformed(_Keyed):
    """A message waiting to be formed (its key names the session, the task and the message)."""


@dataclass(frozen=True, slots=True, eq=False)
class FormedFile(_Keyed):
    """An L2 file or persona formation wrote, with the records it was formed from."""

    kind: str
    path: str
    records: set[str] | None
    stale: bool | None
    updated: float | None


@dataclass(frozen=True, slots=True, eq=False)
class Job(_Keyed):
    """An export or import job: its state, its spec and its result or error."""

    agent_id: str
    created_at: float
    error: str | None
    expires: float | None
    kind: str
    memory_id: str
    owner: str
    result: Any
    spec: Any
    state: str
    team_id: str
    updated_at: float


@dataclass(frozen=True, slots=True, eq=False)
class PendingRun(_Keyed):
    """A formation run's validated answer, stored before anything of it is written (a retry replays it)."""

    message_ids: list[str]
    plan: Any
    run_id: str
    session_id: str
    task_id: str | None


@dataclass(frozen=True, slots=True, eq=False)
class Lease(_Keyed):
    """The cleanup's lease (``owner`` until ``until``) or its cursor (where a run resumes)."""

    owner: str | None
    phase: str | None
    position: Any
    run_started: float | None
    until: float | None


# Any item storage hands out (what a transaction may be given back).
Item = (
    Asset
    | SceneEntry
    | ApiKey
    | AuditEvent
    | Message
    | Record
    | Posting
    | FormationState
    | Unformed
    | FormedFile
    | Job
    | PendingRun
    | Lease
)

_NAMES: dict[type, tuple[str, ...]] = {}


def names(kind: type) -> tuple[str, ...]:
    """The fields of a view class, in declaration order (the stored item's attributes, every one)."""
    known = _NAMES.get(kind)
    if known is None:
        known = _NAMES[kind] = tuple(field.name for field in fields(kind))
    return known


def values(view: Item) -> dict[str, Any]:
    """A view's fields by name (what storage rebuilds the stored item from)."""
    return {name: getattr(view, name) for name in names(type(view))}
