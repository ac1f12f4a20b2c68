"""API keys (KeysTable): stored as SHA-256 hashes, created and revoked with their audit events."""

from __future__ import annotations

from pynamodb.exceptions import DoesNotExist

from . import audit
from .models import ApiKey, AuditEvent
from .transactions import Transaction


def get(key_id: str) -> ApiKey | None:
    """Always strongly consistent: a revoked key fails on the very next request."""
    if not key_id or len(key_id) > 64:
        return None
    try:
        return ApiKey.get(key_id, consistent_read=True)
    except DoesNotExist:
        return None


def _with_events(transaction: Transaction, events: list[AuditEvent]) -> None:
    """Events ride in the transaction; copies beyond its room (a key of ~100 teams) follow it."""
    room = transaction.room()
    for event in events[:room]:
        transaction.put("audit", event)
    transaction.commit()
    audit.put(events[room:])


def create(key: ApiKey, events: list[AuditEvent]) -> None:
    transaction = Transaction()
    transaction.put("key", key, condition=ApiKey.key_id.does_not_exist())
    _with_events(transaction, events)


def revoke(key: ApiKey, events: list[AuditEvent]) -> None:
    """Cancelled ('key') when it is revoked already."""
    transaction = Transaction()
    transaction.update("key", key, [ApiKey.revoked.set(True)], condition=ApiKey.revoked == False)  # noqa: E712
    _with_events(transaction, events)


def everything() -> list[ApiKey]:
    return list(ApiKey.scan(consistent_read=True))
