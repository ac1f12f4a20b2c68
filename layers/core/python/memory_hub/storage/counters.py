"""Exact counters of a memory epoch: items and search tokens per user and layer, items per session.

They change in the same transaction as the items they count, so counts never drift; the users of
a memory epoch are the users that have a counter (clear and cleanup enumerate them here)."""

from __future__ import annotations

from dataclasses import dataclass

from pynamodb.exceptions import DeleteError
from pynamodb.expressions.update import Action

from . import layout
from .models import Counter
from .transactions import Transaction


@dataclass(frozen=True)
class Where:
    """One memory epoch: every counter and item key derives from it."""

    team_id: str
    agent_id: str
    epoch: int
    memory_id: str = ""

    def item_pk(self, layer: str, user_id: str) -> str:
        return layout.item_pk(layer, self.team_id, self.agent_id, self.epoch, user_id)

    @property
    def counter_pk(self) -> str:
        return layout.counter_pk(self.team_id, self.agent_id, self.epoch)


def change(transaction: Transaction, where: Where, layer: str, user_id: str, items: int, tokens: int = 0) -> None:
    if items == 0 and tokens == 0:
        return
    actions: list[Action] = [Counter.user_id.set(user_id)]
    if items:
        actions.append(Counter.item_count.add(items))
    if tokens:
        actions.append(Counter.token_count.add(tokens))
    transaction.update("counter", Counter(where.counter_pk, layout.user_counter_sk(layer, user_id)), actions)


def change_session(transaction: Transaction, where: Where, user_id: str, session_id: str, items: int) -> None:
    if items:
        counter = Counter(where.counter_pk, layout.session_counter_sk(user_id, session_id))
        transaction.update(
            "counter",
            counter,
            [Counter.item_count.add(items), Counter.user_id.set(user_id), Counter.session_id.set(session_id)],
        )


def of_user(where: Where, layer: str, user_id: str) -> tuple[int, int]:
    """(items, tokens) of one user in one layer."""
    try:
        counter = Counter.get(where.counter_pk, layout.user_counter_sk(layer, user_id), consistent_read=True)
    except Counter.DoesNotExist:
        return 0, 0
    return int(counter.item_count or 0), int(counter.token_count or 0)


def of_session(where: Where, user_id: str, session_id: str) -> int:
    try:
        counter = Counter.get(where.counter_pk, layout.session_counter_sk(user_id, session_id), consistent_read=True)
    except Counter.DoesNotExist:
        return 0
    return int(counter.item_count or 0)


def _all(where: Where) -> list[Counter]:
    return list(Counter.query(where.counter_pk, consistent_read=True))


def layer_totals(where: Where) -> dict[str, int]:
    """Items per layer in the memory epoch: the sum of its per-user counters (one Query)."""
    totals = {"L0": 0, "L1": 0}
    for counter in _all(where):
        layer, _, rest = counter.sk.partition(layout.SEP)
        if layer in totals and layout.SEP not in rest:
            totals[layer] += int(counter.item_count or 0)
    return totals


def users(where: Where) -> list[str]:
    """Every user that has (or had) items in the memory epoch."""
    return sorted({c.user_id for c in _all(where) if c.user_id is not None})


def user_counters(where: Where, user_id: str) -> list[Counter]:
    """The counters of one user (layers and sessions) — erased with the user's memory."""
    marker = layout.digest(user_id)
    return [c for c in _all(where) if marker in c.sk.split(layout.SEP)[1:2]]


def drop(where: Where) -> int:
    """Delete every counter of the memory epoch (the end of its erasure)."""
    found = _all(where)
    with Counter.batch_write() as batch:
        for counter in found:
            batch.delete(counter)
    return len(found)


def forget_user(where: Where, user_id: str) -> int:
    """Delete a user's counters once they count nothing (after their memory was erased); a
    counter that a concurrent add moved on stays."""
    dropped = 0
    for counter in user_counters(where, user_id):
        try:
            counter.delete(condition=Counter.item_count == 0)
            dropped += 1
        except DeleteError as exc:
            if exc.cause_response_code != "ConditionalCheckFailedException":
                raise
    return dropped
