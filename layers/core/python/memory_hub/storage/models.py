"""PynamoDB models: one per kind of item, bound to their tables from the settings on first use.

A model names the setting that holds its table (``Meta.setting``), bound (table, region) the first
time any model talks to DynamoDB; every model shares the process's one DynamoDB client
(``aws.dynamodb()``): a cold start builds one botocore client. Nothing calls a set-up function.
Several models share ItemsTable (see ``layout``): each declares only the attributes of its kind.
"""

from __future__ import annotations

import json
import threading
from typing import Any, ClassVar, TypeVar, cast

from pynamodb.attributes import (
    BinaryAttribute,
    BooleanAttribute,
    JSONAttribute,
    ListAttribute,
    MapAttribute,
    NumberAttribute,
    UnicodeAttribute,
    UnicodeSetAttribute,
)
from pynamodb.connection import Connection, TableConnection
from pynamodb.indexes import AllProjection, GlobalSecondaryIndex, LocalSecondaryIndex
from pynamodb.models import Model

from ..settings import get_settings
from . import aws, views

_bind_lock = threading.Lock()


class OneClient(Connection):
    """PynamoDB's connection speaking through the process's one DynamoDB client (``aws.dynamodb()``:
    the retry policy and timeouts of ``aws``). ``client`` is PynamoDB's public property for the
    botocore client a connection sends with; every model's connection and every transaction use one."""

    @property
    def client(self) -> Any:
        return aws.dynamodb()


class Bound(Model):
    """A model whose table comes from the settings the first time it is used."""

    class Meta:
        table_name: str | None = None
        setting: ClassVar[str] = ""
        # Declared only (no value): PynamoDB's metaclass fills in a default; binding sets it.
        region: ClassVar[str | None]

    # Overrides PynamoDB's (private) ``_get_connection``, kept on purpose: PynamoDB 6.1 has no public
    # way to (1) read a model's table name from the settings when it is first used, not when the
    # class is defined (tests and the local stack set the environment after import), nor (2) hand a
    # model a client: each model's connection would make its own botocore session and client (one
    # per model and per thread, about 0.1 s each at a cold start, where a client of the one shared
    # session costs a few ms) with PynamoDB's retry settings instead of ours. So the first call binds
    # the table and swaps in a ``OneClient`` connection carrying the model's table description.
    @classmethod
    def _get_connection(cls) -> TableConnection:
        if not cls._bound():
            with _bind_lock:
                if not cls._bound():
                    settings = get_settings()
                    cls.Meta.table_name = getattr(settings, cls.Meta.setting)
                    cls.Meta.region = settings.region
                    table = super()._get_connection()
                    one = OneClient(region=settings.region)
                    one.add_meta_table(table.get_meta_table())
                    table.connection = one
        return super()._get_connection()

    @classmethod
    def _bound(cls) -> bool:
        """This model's own connection (not a parent's) speaks through the one client. Until it does,
        another thread waits for the binding instead of using the connection PynamoDB has just made
        (and the botocore client of its own that connection would make)."""
        table = cls.__dict__.get("_connection")
        return table is not None and isinstance(table.connection, OneClient)

    @classmethod
    def table_name(cls) -> str:
        return cls._get_connection().table_name


M = TypeVar("M", bound=Model)


V = TypeVar("V")


def snapshot(kind: type[V], item: Model) -> V:
    """The view (``views``) of a stored item: a copy of every attribute as it is now, read from
    the item's values (an attribute never set is None, as PynamoDB answers it)."""
    found = item.attribute_values.get
    return kind(*[found(name) for name in views.names(kind)])


def own(kind: type[M], item: object) -> M:
    """The stored item behind a view this package handed the domain (``views``), taken back to
    change or erase: rebuilt from the view's fields, which are all of its model's attributes. An
    item that is a model already (storage's own) is itself."""
    if isinstance(item, Model):
        return cast(M, item)
    model = VIEWED[type(item)]
    if not issubclass(model, kind):
        raise TypeError(f"a {type(item).__name__} view is not a {kind.__name__}")
    return cast(M, model(**views.values(cast(views.Item, item))))


class Json(JSONAttribute):
    """JSON stored as UTF-8 text: ``é`` one character, not the six of ``\\u00e9`` (PynamoDB's own
    escapes every non-ASCII character, up to 12 bytes for an emoji: an asset's longest ACL and
    bindings, within their limits, outgrew DynamoDB's 400 KB item). A string that cannot be UTF-8
    (a lone surrogate from a JSON escape) is stored escaped, as before; both read back the same."""

    def serialize(self, value: Any) -> str | None:
        if value is None:
            return None
        text = json.dumps(value, ensure_ascii=False)
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            return json.dumps(value)
        return text


# ---------------------------------------------------------------- AssetsTable

ASSET_SK = "asset"


class Asset(Bound):
    """One memory asset per (team, agent): ``pk`` = memory_id, ``sk`` = "A#<team>:<agent>" (several
    pairs may spell one memory_id; see ``assets``). ``epoch`` is the content epoch that fences
    clears. An item of the earlier design has ``sk`` = "asset"; once moved to its pair's key it
    keeps only the mark ``moved_to``."""

    class Meta(Bound.Meta):
        setting = "assets_table"

    pk = UnicodeAttribute(hash_key=True)
    sk = UnicodeAttribute(range_key=True, default=ASSET_SK)
    memory_id = UnicodeAttribute()
    team_id = UnicodeAttribute()
    agent_id = UnicodeAttribute()
    owner = UnicodeAttribute()
    name = UnicodeAttribute(null=True)
    visibility = UnicodeAttribute(default="private")
    acl = Json(default=list)
    bindings = Json(default=list)
    status = UnicodeAttribute(default="active")
    retention_days = NumberAttribute(null=True)
    formation = UnicodeAttribute(null=True)  # off | records | all; absent: records
    created_at = UnicodeAttribute()
    updated_at = UnicodeAttribute()
    last_cleared_at = UnicodeAttribute(null=True)
    epoch = NumberAttribute()
    moved_to = UnicodeAttribute(null=True)
    # the imports running into it: what they wrote is invisible until each commits (``domain/transfer``)
    importing = UnicodeSetAttribute(null=True, attr_name="imp")
    # its vector indexes (``vectors``), all fixed when it is created; absent on a memory of before:
    # the groups of users they are split into (one), the bucket they are pinned to (the rule's),
    # and where its messages are indexed by words (``Settings.word_index``; postings)
    vector_groups = NumberAttribute(null=True, attr_name="vg")
    vector_bucket = UnicodeAttribute(null=True, attr_name="vb")
    word_index = UnicodeAttribute(null=True, attr_name="wi")
    # has its ``Fence`` (every asset since 2026-12-05; one of before at its next write): read by epoch checks
    fenced = BooleanAttribute(null=True, attr_name="fz")
    export_marks = BooleanAttribute(null=True, attr_name="xm")  # since 2026-12-06: ``assets.forget_exports``
    # the import that created it, until it commits or a client's write claims it: not shown till then
    hidden_by = UnicodeAttribute(null=True, attr_name="hb")


class Fence(Bound):
    """The clear fence of one memory, beside its asset (``pk`` = memory_id, ``sk`` = fence#<pair>):
    the asset's ``epoch`` and ``importing`` and nothing else, written in the same transaction as
    every change of those two. Every write's epoch check reads this item instead of the asset,
    whose ACL and bindings can make it tens of KB: a transaction bills a check by the size of the
    item it reads, twice."""

    class Meta(Bound.Meta):
        setting = "assets_table"

    pk = UnicodeAttribute(hash_key=True)
    sk = UnicodeAttribute(range_key=True)
    epoch = NumberAttribute()
    importing = UnicodeSetAttribute(null=True, attr_name="imp")


class TeamEntry(Bound):
    """A team's list of its memories (``pk`` = team#<team>, ``sk`` = memory_id): memory/list reads
    it strongly consistent, so a memory is listed from the moment it is created."""

    class Meta(Bound.Meta):
        setting = "assets_table"

    pk = UnicodeAttribute(hash_key=True)
    sk = UnicodeAttribute(range_key=True)


# ---------------------------------------------------------------- ScenesTable


class SceneEntry(Bound):
    """The scene index: one item per L2 path of a (team, agent) (``scope`` = team:agent), valid for
    the content epoch it names (entries of a cleared epoch are invisible, then purged).

    ``gen`` orders every change of the path within an epoch, across removals (a removal leaves a
    tombstone, ``removed``); the S3 object carries the gen and epoch it was written with, the entry
    the ETag of the version it indexes. ``version`` is what users see: 1 for a new file, +1 per
    write."""

    class Meta(Bound.Meta):
        setting = "scenes_table"

    scope = UnicodeAttribute(hash_key=True)
    path = UnicodeAttribute(range_key=True)
    epoch = NumberAttribute()
    gen = NumberAttribute()
    version = NumberAttribute(default=0)
    summary = UnicodeAttribute(null=True)
    created_at = UnicodeAttribute(null=True)
    updated_at = UnicodeAttribute(null=True)
    size = NumberAttribute(default=0)
    etag = UnicodeAttribute(null=True)
    removed = BooleanAttribute(default=False)


# ---------------------------------------------------------------- KeysTable


class ApiKey(Bound):
    """An API key: only the SHA-256 of the secret is stored."""

    class Meta(Bound.Meta):
        setting = "keys_table"

    key_id = UnicodeAttribute(hash_key=True)
    key_hash = UnicodeAttribute()
    role = UnicodeAttribute()
    # PynamoDB types ``of`` as the element's value type, not its Attribute class: the values are str.
    team_ids: ListAttribute[str] = ListAttribute(of=UnicodeAttribute)  # type: ignore[arg-type]
    name = UnicodeAttribute(null=True)
    created_at = UnicodeAttribute()
    created_by = UnicodeAttribute(null=True)
    revoked = BooleanAttribute(default=False)


# ---------------------------------------------------------------- AuditTable


class AuditByTeam(GlobalSecondaryIndex["AuditEvent"]):  # type: ignore[no-untyped-call]  # PynamoDB's Index.__init_subclass__
    class Meta:
        index_name = "team-index"
        projection = AllProjection()

    team_id = UnicodeAttribute(hash_key=True)
    event_id = UnicodeAttribute(range_key=True)


class AuditByAll(GlobalSecondaryIndex["AuditEvent"]):  # type: ignore[no-untyped-call]  # PynamoDB's Index.__init_subclass__
    class Meta:
        index_name = "all-index"
        projection = AllProjection()

    shard = UnicodeAttribute(hash_key=True)
    event_id = UnicodeAttribute(range_key=True)


class AuditEvent(Bound):
    """Who did what, when, how many — never content. ``pk``: the (team, agent) pair, or a team's
    key events. Copies of one key event (one per team of the key) share the ``event_id``."""

    class Meta(Bound.Meta):
        setting = "audit_table"

    pk = UnicodeAttribute(hash_key=True)
    event_id = UnicodeAttribute(range_key=True)
    memory_id = UnicodeAttribute(null=True)
    team_id = UnicodeAttribute()
    agent_id = UnicodeAttribute(null=True)
    shard = UnicodeAttribute(null=True)  # on exactly one copy: its all-teams view partition (layout)
    action = UnicodeAttribute()
    layer = UnicodeAttribute()
    target = UnicodeAttribute(null=True)
    # How many items the event covers (stored as "count"); shadows Model.count(), never called on AuditEvent.
    count = NumberAttribute(default=0)  # type: ignore[assignment]
    actor = UnicodeAttribute()
    request_id = UnicodeAttribute(null=True)
    at = UnicodeAttribute()
    by_team = AuditByTeam()
    by_all = AuditByAll()


# ---------------------------------------------------------------- ItemsTable


class _Items(Bound):
    class Meta(Bound.Meta):
        setting = "items_table"

    pk = UnicodeAttribute(hash_key=True)
    sk = UnicodeAttribute(range_key=True)


class ItemKey(_Items):
    """Any item of ItemsTable, keys only (listings for bulk erasure)."""


class MessagesByTime(LocalSecondaryIndex["Message"]):  # type: ignore[no-untyped-call]  # PynamoDB's Index.__init_subclass__
    class Meta:
        index_name = "by-time"
        projection = AllProjection()

    pk = UnicodeAttribute(hash_key=True)
    lsi1 = UnicodeAttribute(range_key=True)


class MessagesBySession(LocalSecondaryIndex["Message"]):  # type: ignore[no-untyped-call]  # PynamoDB's Index.__init_subclass__
    class Meta:
        index_name = "by-session"
        projection = AllProjection()

    pk = UnicodeAttribute(hash_key=True)
    lsi2 = UnicodeAttribute(range_key=True)


class Message(_Items):
    """An L0 message: ``terms`` its search tokens (BM25 length); ``lsi1`` only if kept by id (``layout``)."""

    lsi1 = UnicodeAttribute(null=True)
    lsi2 = UnicodeAttribute()
    id = UnicodeAttribute()
    user_id = UnicodeAttribute()
    session_id = UnicodeAttribute()
    task_id = UnicodeAttribute(null=True)
    role = UnicodeAttribute()
    content = UnicodeAttribute()
    timestamp = NumberAttribute()
    recorded_at = NumberAttribute(null=True)
    terms = NumberAttribute(default=0)
    # the index format its postings were written in (none: before impact order)
    index_format = NumberAttribute(null=True, attr_name="ix")
    import_id = UnicodeAttribute(null=True, attr_name="im")  # the import that wrote it (staged while it runs)
    by_time = MessagesByTime()
    by_session = MessagesBySession()


class RecordsByTime(LocalSecondaryIndex["Record"]):  # type: ignore[no-untyped-call]  # PynamoDB's Index.__init_subclass__
    class Meta:
        index_name = "by-time"
        projection = AllProjection()

    pk = UnicodeAttribute(hash_key=True)
    lsi1 = UnicodeAttribute(range_key=True)


class Record(_Items):
    """An L1 record. ``lsi1`` orders by ``updated_at``; ``natural_key`` names its guard."""

    lsi1 = UnicodeAttribute()
    id = UnicodeAttribute()
    user_id = UnicodeAttribute()
    session_id = UnicodeAttribute(null=True)
    task_id = UnicodeAttribute(null=True)
    content = UnicodeAttribute()
    type = UnicodeAttribute()
    background = UnicodeAttribute(default="")
    tags: ListAttribute[str] = ListAttribute(of=UnicodeAttribute, default=list)  # type: ignore[arg-type]  # as team_ids
    meta = Json(default=dict)
    version = NumberAttribute()
    reinforced_count = NumberAttribute()
    created_at = NumberAttribute()
    updated_at = NumberAttribute()
    natural_key = UnicodeAttribute()
    terms = NumberAttribute(default=0)
    index_format = NumberAttribute(null=True, attr_name="ix")  # its postings' format (none: before impact order)
    absorbed = UnicodeSetAttribute(null=True, attr_name="ab")  # imported lines it absorbed: a re-import skips them
    # provenance: the messages shown as its sources (the newest 100, in the order they came) and
    # every message it ever cited (each has a citation entry; see ``citations``)
    sources: ListAttribute[str] = ListAttribute(of=UnicodeAttribute, null=True, attr_name="src")  # type: ignore[arg-type]  # as team_ids
    cited = UnicodeSetAttribute(null=True, attr_name="ci")
    formed = BooleanAttribute(null=True, attr_name="fm")  # written by formation; absent: false
    import_id = UnicodeAttribute(null=True, attr_name="im")  # the import that wrote it (staged while it runs)
    by_time = RecordsByTime()


class Citation(_Items):
    """Provenance, message → record: ``c␟<message id>␟<record id>`` in the user's L1 partition
    says that record cites that message (keys only)."""


class Guard(_Items):
    """L1 natural-key guard: which record holds this (task, type, background, content)."""

    atom_id = UnicodeAttribute()


class PostingsByTerm(LocalSecondaryIndex["Posting"]):  # type: ignore[no-untyped-call]  # PynamoDB's Index.__init_subclass__
    class Meta:
        index_name = "by-term"
        projection = AllProjection()

    pk = UnicodeAttribute(hash_key=True)
    lsi3 = UnicodeAttribute(range_key=True)


class Posting(_Items):
    """One search term of one item: term frequency and the item's length, plus what filters need
    (time and session digest for messages, type for records, task digest for both). A term's
    document-frequency row (``df␟<term>``) shares the model: it holds only ``document_frequency``
    (no ``lsi3``: it stays out of the ``by-term`` index).

    Stored under short names (``attr_name``): an item writes one posting per distinct term, so the
    names are paid for in every posting's size (and write units)."""

    lsi3 = UnicodeAttribute(null=True)
    term_frequency = NumberAttribute(null=True, attr_name="tf")
    item_length = NumberAttribute(null=True, attr_name="dl")  # the item's number of search tokens
    document_frequency = NumberAttribute(null=True, attr_name="n")
    timestamp = NumberAttribute(null=True, attr_name="ts")
    session_digest = UnicodeAttribute(null=True, attr_name="sd")
    record_type = UnicodeAttribute(null=True, attr_name="ty")
    task_digest = UnicodeAttribute(null=True, attr_name="tk")
    by_term = PostingsByTerm()


class Counter(_Items):
    """Exact counters of one memory epoch: items and search tokens per user and layer, and in a memory
    whose words are in its vectors the items indexed by postings all the same (``posted``). They
    change in the same transaction as what they count. (Epochs of before 2026-12-05 may also hold a
    counter per session, with ``session_id`` set: no longer written or read; see ``counters``.)"""

    item_count = NumberAttribute(default=0, attr_name="n")
    token_count = NumberAttribute(default=0, attr_name="tl")
    posted = NumberAttribute(null=True, attr_name="np")
    user_id = UnicodeAttribute(null=True)
    session_id = UnicodeAttribute(null=True)
    # what imports still running added to ``n`` and ``tl`` (import id → items, import id + ".t" →
    # tokens): a count subtracts the entries of the imports its asset says are running
    staged = MapAttribute(null=True, attr_name="st")  # type: ignore[var-annotated,no-untyped-call]  # a raw map


class WaitingVector(_Items):
    """A vector waiting for its batched put (``wv␟<item id>``), in 4 bits or 8: ``waiting_vectors``."""

    vector = BinaryAttribute(legacy_encoding=False, attr_name="v", null=True)
    packed = BinaryAttribute(legacy_encoding=False, attr_name="q", null=True)
    secret = BinaryAttribute(legacy_encoding=False, attr_name="k", null=True)  # opens the queue's copy
    scale = NumberAttribute(attr_name="sc")
    meta = Json(attr_name="m")  # a list on 4-bit rows, a dict on rows of before
    text_digest = UnicodeAttribute(attr_name="td")
    expires = NumberAttribute(null=True)  # TTL (epoch seconds): one its consumer never reached goes by itself


class FormationState(_Items):
    """One user's formation (``fs`` in their L0 partition): its runs' lease, whether a run is queued,
    failures, the pause and its error, what was formed last — ids, counts and times, never content."""

    state = UnicodeAttribute(null=True)  # "queued" while a run is asked for; else absent
    queued_at = NumberAttribute(null=True)
    lease_owner = UnicodeAttribute(null=True)
    lease_until = NumberAttribute(null=True)
    failures = NumberAttribute(null=True)
    paused = BooleanAttribute(null=True)
    last_error = Json(null=True)  # {at, kind, message}: a fixed message per kind
    last_run_at = NumberAttribute(null=True)
    last_formed = UnicodeAttribute(null=True)  # the newest message id a run formed
    dropped = NumberAttribute(null=True)  # model entries refused since the last clear
    files_due = BooleanAttribute(null=True)  # formed files to write again (a record they came from was erased)


class Unformed(_Items):
    """A message waiting to be formed: ``fu␟<session digest>␟<task digest or ->␟<message id>`` in
    the user's L0 partition (keys only), written with the message while formation is on."""


class PendingRun(_Items):
    """A run's validated answer, stored before anything of it is written (``fp``: one per user, as
    runs of a user never overlap): a retry replays it instead of asking the model again. It holds
    the formed records' text until the run commits — and goes with any of its messages erased."""

    run_id = UnicodeAttribute()
    message_ids: ListAttribute[str] = ListAttribute(of=UnicodeAttribute)  # type: ignore[arg-type]  # as team_ids
    session_id = UnicodeAttribute()
    task_id = UnicodeAttribute(null=True)
    plan = Json()  # the entries to apply, each with the ids chosen for it


class FormedRun(_Items):
    """A committed run (``fr␟<run id>``): the messages it formed (ids only) — what a backfill skips."""

    message_ids: ListAttribute[str] = ListAttribute(of=UnicodeAttribute)  # type: ignore[arg-type]  # as team_ids
    at = NumberAttribute()


class FormedFile(_Items):
    """A formed scene or persona of one user (``ff␟<file id>`` in their L1 partition): its path
    under ``formed/<user digest>/`` and the records it was formed from (``fl␟<record>␟<file>``
    entries point back at it). ``stale``: a record it came from was erased; the file was removed
    and is formed again from ``records`` by a later run."""

    path = UnicodeAttribute()
    kind = UnicodeAttribute()  # scene | persona
    records = UnicodeSetAttribute(null=True)
    stale = BooleanAttribute(null=True)
    updated = NumberAttribute(null=True)


class PurgeRecord(_Items):
    """A retired content epoch whose physical erasure is not finished (durable across failures)."""

    memory_id = UnicodeAttribute()
    team_id = UnicodeAttribute()
    agent_id = UnicodeAttribute()
    epoch = NumberAttribute()
    retired_ms = NumberAttribute()
    actor = UnicodeAttribute(null=True)
    request_id = UnicodeAttribute(null=True)
    bucket = UnicodeAttribute(null=True, attr_name="vb")  # the memory's pinned vector bucket


class Lease(_Items):
    """The cleanup run's lease (one run at a time) and its resumable cursor."""

    owner = UnicodeAttribute(null=True)
    until = NumberAttribute(null=True)
    run_started = NumberAttribute(null=True)
    position = Json(null=True)
    phase = UnicodeAttribute(null=True)


class Job(_Items):
    """An export or import job (its status to poll; never content)."""

    kind = UnicodeAttribute()
    state = UnicodeAttribute()
    memory_id = UnicodeAttribute()
    team_id = UnicodeAttribute()
    agent_id = UnicodeAttribute()
    owner = UnicodeAttribute()
    spec = Json(default=dict)
    result = Json(null=True)
    error = UnicodeAttribute(null=True)
    created_at = NumberAttribute()
    updated_at = NumberAttribute()
    expires = NumberAttribute(null=True)


ITEM_MODELS: tuple[type[Bound], ...] = (
    Message,
    Record,
    Guard,
    Citation,
    FormationState,
    Unformed,
    PendingRun,
    FormedRun,
    WaitingVector,
    FormedFile,
    Posting,
    Counter,
    PurgeRecord,
    Lease,
    Job,
    ItemKey,
)
TABLE_MODELS: dict[str, tuple[type[Bound], ...]] = {
    "assets_table": (Asset, TeamEntry, Fence),
    "scenes_table": (SceneEntry,),
    "keys_table": (ApiKey,),
    "audit_table": (AuditEvent,),
    "items_table": ITEM_MODELS,
}


def attribute_values(item: Any) -> dict[str, Any]:
    """An item's attributes as plain values (for tests and tooling)."""
    return {name: getattr(item, name) for name in item.get_attributes()}


# The model each view (``views``) is a copy of: ``own`` rebuilds one from the other.
VIEWED: dict[type, type[Bound]] = {
    views.Asset: Asset,
    views.SceneEntry: SceneEntry,
    views.ApiKey: ApiKey,
    views.AuditEvent: AuditEvent,
    views.Message: Message,
    views.Record: Record,
    views.Posting: Posting,
    views.FormationState: FormationState,
    views.Unformed: Unformed,
    views.FormedFile: FormedFile,
    views.Job: Job,
    views.PendingRun: PendingRun,
    views.Lease: Lease,
}
