"""PynamoDB models. Table names and region are bound from settings in one place: ``bind()``."""

from __future__ import annotations

from pynamodb.attributes import (
    BooleanAttribute,
    JSONAttribute,
    ListAttribute,
    NumberAttribute,
    UnicodeAttribute,
)
from pynamodb.indexes import AllProjection, GlobalSecondaryIndex, LocalSecondaryIndex
from pynamodb.models import Model

from ..dal.aws import RETRIES
from ..settings import Settings


class _Base(Model):
    class Meta:
        table_name = "unbound"
        region = "us-east-1"
        max_retry_attempts = RETRIES["max_attempts"]


class AssetsByTeam(GlobalSecondaryIndex["Asset"]):
    class Meta:
        index_name = "team-index"
        projection = AllProjection()

    team_id = UnicodeAttribute(hash_key=True)
    memory_id = UnicodeAttribute(range_key=True)


class Asset(_Base):
    """One memory asset per (team, agent). ``epoch`` fences clears (see README)."""

    class Meta(_Base.Meta):
        pass

    by_team = AssetsByTeam()

    memory_id = UnicodeAttribute(hash_key=True)
    team_id = UnicodeAttribute()
    agent_id = UnicodeAttribute()
    owner = UnicodeAttribute()
    name = UnicodeAttribute(null=True)
    visibility = UnicodeAttribute(default="private")
    acl = JSONAttribute(default=list)
    bindings = JSONAttribute(default=list)
    status = UnicodeAttribute(default="active")
    retention_days = NumberAttribute(null=True)
    created_at = UnicodeAttribute()
    updated_at = UnicodeAttribute()
    last_cleared_at = UnicodeAttribute(null=True)
    epoch = NumberAttribute(default=0)


class SceneEntry(_Base):
    """The scene index: one item per visible L2 file. ``scope`` = ``<team>:<agent>#<epoch>``."""

    class Meta(_Base.Meta):
        pass

    scope = UnicodeAttribute(hash_key=True)
    path = UnicodeAttribute(range_key=True)
    version = NumberAttribute()
    summary = UnicodeAttribute(null=True)
    created_at = UnicodeAttribute()
    updated_at = UnicodeAttribute()
    size = NumberAttribute()


class ApiKey(_Base):
    """An API key. Only the SHA-256 of the secret is stored."""

    class Meta(_Base.Meta):
        pass

    key_id = UnicodeAttribute(hash_key=True)
    key_hash = UnicodeAttribute()
    role = UnicodeAttribute()
    team_ids = ListAttribute(of=UnicodeAttribute)
    name = UnicodeAttribute(null=True)
    created_at = UnicodeAttribute()
    created_by = UnicodeAttribute(null=True)
    revoked = BooleanAttribute(default=False)


class TeamIndex(GlobalSecondaryIndex["AuditEvent"]):
    class Meta:
        index_name = "team-index"
        projection = AllProjection()

    team_id = UnicodeAttribute(hash_key=True)
    event_id = UnicodeAttribute(range_key=True)


class AllIndex(GlobalSecondaryIndex["AuditEvent"]):
    class Meta:
        index_name = "all-index"
        projection = AllProjection()

    shard = UnicodeAttribute(hash_key=True)
    event_id = UnicodeAttribute(range_key=True)


class AuditEvent(_Base):
    """Who did what, when, how many. Never content. ``pk`` = memory id, or ``key#<team>``."""

    class Meta(_Base.Meta):
        pass

    pk = UnicodeAttribute(hash_key=True)
    event_id = UnicodeAttribute(range_key=True)
    memory_id = UnicodeAttribute(null=True)
    team_id = UnicodeAttribute()
    shard = UnicodeAttribute(default="all")
    action = UnicodeAttribute()
    layer = UnicodeAttribute()
    target = UnicodeAttribute(null=True)
    count = NumberAttribute(default=0)
    actor = UnicodeAttribute()
    request_id = UnicodeAttribute(null=True)
    at = UnicodeAttribute()
    by_team = TeamIndex()
    by_all = AllIndex()


class ByTime(LocalSecondaryIndex["Item"]):
    """Newest first: L0 by message timestamp, L1 by updated_at (``lsi1`` = sortable time + id)."""

    class Meta:
        index_name = "by-time"
        projection = AllProjection()

    pk = UnicodeAttribute(hash_key=True)
    lsi1 = UnicodeAttribute(range_key=True)


class BySession(LocalSecondaryIndex["Item"]):
    """L0 of one session, newest first (``lsi2`` = session + US + sortable time + id)."""

    class Meta:
        index_name = "by-session"
        projection = AllProjection()

    pk = UnicodeAttribute(hash_key=True)
    lsi2 = UnicodeAttribute(range_key=True)


class Item(_Base):
    """L0 messages, L1 records, L1 natural-key guards and exact counters (see layout in items.py).

    Local (not global) secondary indexes, so every read of them can be strongly consistent."""

    class Meta(_Base.Meta):
        pass

    pk = UnicodeAttribute(hash_key=True)
    sk = UnicodeAttribute(range_key=True)
    lsi1 = UnicodeAttribute(null=True)
    lsi2 = UnicodeAttribute(null=True)
    # L0 and L1
    id = UnicodeAttribute(null=True)
    user_id = UnicodeAttribute(null=True)
    session_id = UnicodeAttribute(null=True)
    task_id = UnicodeAttribute(null=True)
    content = UnicodeAttribute(null=True)
    # L0
    role = UnicodeAttribute(null=True)
    timestamp = NumberAttribute(null=True)
    # L1
    type = UnicodeAttribute(null=True)
    background = UnicodeAttribute(null=True)
    tags = ListAttribute(of=UnicodeAttribute, null=True)
    meta = JSONAttribute(null=True)
    version = NumberAttribute(null=True)
    reinforced_count = NumberAttribute(null=True)
    created_at = NumberAttribute(null=True)
    updated_at = NumberAttribute(null=True)
    natural_key = UnicodeAttribute(null=True)
    # natural-key guard: the record that holds the key
    atom_id = UnicodeAttribute(null=True)
    # counters
    n = NumberAttribute(null=True)
    by_time = ByTime()
    by_session = BySession()


MODELS: dict[str, type[Model]] = {
    "items_table": Item,
    "assets_table": Asset,
    "scenes_table": SceneEntry,
    "keys_table": ApiKey,
    "audit_table": AuditEvent,
}


def bind(settings: Settings) -> None:
    """Point every model at the tables and region of ``settings`` (call before first use)."""
    for field, model in MODELS.items():
        model.Meta.table_name = getattr(settings, field)
        model.Meta.region = settings.region
        model._connection = None  # drop a connection bound to an earlier name
