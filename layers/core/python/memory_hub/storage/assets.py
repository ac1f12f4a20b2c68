"""Memory assets and their teams' listings (AssetsTable)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from . import layout
from .errors import Cancelled
from .models import ASSET_SK, Asset, AuditEvent, TeamEntry
from .transactions import Transaction

TEAM_PREFIX = "team#"


def get(memory_id: str) -> Asset | None:
    """The asset, strongly consistent (its epoch fences clears); None for an id it cannot be."""
    if not memory_id or len(memory_id) > layout.MAX_MEMORY_ID_CHARS:
        return None
    try:
        return Asset.get(memory_id, ASSET_SK, consistent_read=True)
    except Asset.DoesNotExist:
        return None


def new(**fields: Any) -> Asset:
    return Asset(fields["memory_id"], ASSET_SK, **fields)


def create(asset: Asset) -> bool:
    """Store a new asset and its team listing unless the asset exists (a conditional put decides
    a race between creators)."""
    transaction = Transaction()
    transaction.put("asset", asset, condition=Asset.pk.does_not_exist())
    transaction.put("team", TeamEntry(TEAM_PREFIX + asset.team_id, asset.memory_id))
    try:
        transaction.commit()
        return True
    except Cancelled:
        return False


def team_entry(asset: Asset) -> TeamEntry:
    return TeamEntry(TEAM_PREFIX + asset.team_id, asset.memory_id)


def update(asset: Asset, changes: dict[str, Any], updated_at: str, events: list[AuditEvent]) -> Asset | None:
    """Change fields (None removes one) and record the events, in one transaction; the asset as
    stored afterwards, or None when it no longer exists."""
    actions = [Asset.updated_at.set(updated_at)]
    for name, value in changes.items():
        attribute = getattr(Asset, name)
        actions.append(attribute.remove() if value is None else attribute.set(value))
    transaction = Transaction()
    transaction.update("asset", asset, actions, condition=Asset.pk.exists())
    for event in events:
        transaction.put("audit", event)
    try:
        transaction.commit()
    except Cancelled:
        return None
    return get(asset.memory_id)


def of_team(team_id: str, after: str | None, limit: int) -> list[str]:
    """Memory ids of a team in order, after ``after`` (strongly consistent)."""
    condition = TeamEntry.sk > after if after else None
    return [entry.sk for entry in TeamEntry.query(TEAM_PREFIX + team_id, condition, limit=limit, consistent_read=True)]


def get_many(memory_ids: list[str]) -> list[Asset]:
    found = {a.memory_id: a for a in Asset.batch_get([(m, ASSET_SK) for m in memory_ids], consistent_read=True)}
    return [found[m] for m in memory_ids if m in found]


def scan_page(position: dict[str, Any] | None, limit: int) -> tuple[list[Asset], dict[str, Any] | None]:
    """One page of every asset from ``position``: (assets, next position or None)."""
    result = Asset.scan(Asset.sk == ASSET_SK, last_evaluated_key=position, limit=limit, consistent_read=True)
    page = list(result)
    return page, result.last_evaluated_key


def everything() -> Iterator[Asset]:
    return iter(Asset.scan(Asset.sk == ASSET_SK, consistent_read=True))


def guard_epoch(transaction: Transaction, memory_id: str, epoch: int) -> None:
    """Make ``transaction`` fail (as 'epoch') if a clear moved the memory to another content epoch
    since ``epoch`` was read: a write never lands in content that is already cleared."""
    transaction.check("epoch", Asset, memory_id, ASSET_SK, condition=Asset.epoch == int(epoch))


def retire_epoch(
    asset: Asset, *, new_epoch: int | None, stamp: str, purge_record: Any, events: list[AuditEvent]
) -> None:
    """Move the asset to ``new_epoch`` (or delete it and its team listing, with None), note the
    old epoch for purging and record the events — one transaction, the instant a clear (or a
    memory delete) takes effect. Cancelled ('asset') if the epoch moved since it was read."""
    transaction = Transaction()
    still = Asset.epoch == int(asset.epoch)
    if new_epoch is None:
        transaction.delete("asset", asset, condition=still)
        transaction.delete("team", team_entry(asset))
    else:
        transaction.update(
            "asset",
            asset,
            [Asset.epoch.set(new_epoch), Asset.last_cleared_at.set(stamp), Asset.updated_at.set(stamp)],
            condition=still,
        )
    transaction.put("purge", purge_record)
    for event in events:
        transaction.put("audit", event)
    transaction.commit()


def record_in_epoch(memory_id: str, epoch: int, events: list[AuditEvent]) -> None:
    """Record audit events only while the memory is still at ``epoch`` (Cancelled 'epoch' else):
    the commit of a change whose data lives outside DynamoDB (the persona)."""
    transaction = Transaction()
    guard_epoch(transaction, memory_id, epoch)
    for event in events:
        transaction.put("audit", event)
    transaction.commit()
