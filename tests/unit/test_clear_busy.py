"""A clear that runs out of retries against concurrent changes reports it as such: the retry loop
of storage gives up with storage's own Busy (not the domain's), and the item must still say why
and that the client may retry — never "storage error before anything was cleared"."""

from __future__ import annotations

import itertools
import uuid

from aws_faults import error, hook
from memory_hub.domain import assets, clear
from memory_hub.domain.principal import Principal
from memory_hub.storage import aws as clients
from memory_hub.storage import retry

ADMIN = Principal("unit-admin", "admin", ("*",))


class _FastClock:
    """Stands in for the time module of the retry loop: each reading is 10 s later, no sleeping."""

    def __init__(self) -> None:
        self._ticks = itertools.count()

    def monotonic(self) -> float:
        return next(self._ticks) * 10.0

    def sleep(self, _seconds: float) -> None:
        return None


def _conflict(**_: object) -> object:
    """Every TransactWriteItems cancelled by a conflicting transaction (retried, never settled)."""
    return error(400, "TransactionCanceledException", CancellationReasons=[{"Code": "TransactionConflict"}] * 10)


def test_a_clear_that_gives_up_on_concurrent_changes_says_so_and_may_be_retried(aws, monkeypatch):
    suffix = uuid.uuid4().hex[:8]
    asset = assets.ensure(None, f"team{suffix}", f"agent{suffix}", ADMIN.key_id)
    monkeypatch.setattr(retry, "time", _FastClock())
    with hook(clients.dynamodb(), "before-call.dynamodb.TransactWriteItems", _conflict):
        answer = clear.clear(ADMIN, [asset], "req-0000000000000000", lambda: 60_000)
    (item,) = answer.items
    assert item.cleared is False and answer.all_cleared is False
    assert item.retryable is True
    assert item.reason != "storage error before anything was cleared"
    assert item.reason and "too many concurrent changes" in item.reason, item
    assert (item.team_id, item.agent_id) == (asset.team_id, asset.agent_id)
    # and nothing was cleared
    assert assets.of_pair(asset.team_id, asset.agent_id).last_cleared_at is None
