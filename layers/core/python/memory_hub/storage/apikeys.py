"""API keys (KeysTable): stored as SHA-256 hashes, created and revoked with their audit events."""

from __future__ import annotations

from pynamodb.exceptions import DoesNotExist

from . import audit, views
from .models import ApiKey, snapshot
from .transactions import Transaction


def get(key_id: str) -> views.ApiKey | None:
    """Always strongly consistent: a revoked key fails on the very next request."""
    if not key_id or len(key_id) > 64:
        return None
    try:
        return _view(ApiKey.get(key_id, consistent_read=True))
    except DoesNotExist:
        return None


def _with_events(transaction: Transaction, events: list[views.AuditEvent]) -> None:
    """Events ride in the transaction; copies beyond its room (a key of ~100 teams) follow it."""
    room = transaction.room()
    for event in events[:room]:
        transaction.put("audit", event)
    transaction.commit()
    audit.put(events[room:])


def create(
    key_id: str,
    key_hash: str,
    role: str,
    team_ids: list[str],
    name: str | None,
    created_at: str,
    created_by: str,
    events: list[views.AuditEvent],
) -> views.ApiKey:
    """A new key (its secret's hash only), with its events; Cancelled ('key') if the id is taken."""
    key = ApiKey(
        key_id,
        key_hash=key_hash,
        role=role,
        team_ids=team_ids,
        name=name,
        created_at=created_at,
        created_by=created_by,
    )
    transaction = Transaction()
    transaction.put("key", key, condition=ApiKey.key_id.does_not_exist())
    _with_events(transaction, events)
    return _view(key)


def revoke(key: views.ApiKey, events: list[views.AuditEvent]) -> None:
    """Cancelled ('key') when it is revoked already."""
    transaction = Transaction()
    transaction.update("key", key, [ApiKey.revoked.set(True)], condition=ApiKey.revoked == False)  # noqa: E712
    _with_events(transaction, events)


def everything() -> list[views.ApiKey]:
    return [_view(key) for key in ApiKey.scan(consistent_read=True)]


def _view(key: ApiKey) -> views.ApiKey:
    return snapshot(views.ApiKey, key)
