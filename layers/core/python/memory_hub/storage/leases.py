"""The cleanup's lease (one run at a time) and its cursor (a run resumes where it stopped)."""

from __future__ import annotations

from typing import Any

from pynamodb.exceptions import DeleteError, DoesNotExist, PutError

from . import layout, views
from .models import Lease, snapshot

LEASE_SK, CURSOR_SK = "lease", "cursor"


def acquire(owner: str, until_ms: int, now_ms: int) -> bool:
    """Take the lease unless another owner holds one that has not expired."""
    lease = Lease(layout.CLEANUP_PK, LEASE_SK, owner=owner, until=until_ms)
    try:
        lease.save(condition=Lease.sk.does_not_exist() | (Lease.until < now_ms))
        return True
    except PutError as exc:
        if exc.cause_response_code == "ConditionalCheckFailedException":
            return False
        raise


def release(owner: str) -> None:
    try:
        Lease(layout.CLEANUP_PK, LEASE_SK).delete(condition=Lease.owner == owner)
    except DeleteError as exc:
        if exc.cause_response_code != "ConditionalCheckFailedException":
            raise


def cursor() -> views.Lease | None:
    try:
        found = Lease.get(layout.CLEANUP_PK, CURSOR_SK, consistent_read=True)
    except DoesNotExist:
        return None
    return snapshot(views.Lease, found)


def save_cursor(run_started: int, position: Any) -> None:
    Lease(layout.CLEANUP_PK, CURSOR_SK, run_started=run_started, position=position).save()


def drop_cursor() -> None:
    Lease(layout.CLEANUP_PK, CURSOR_SK).delete()
