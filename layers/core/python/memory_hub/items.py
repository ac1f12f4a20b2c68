"""Storage layout of L0 messages, L1 records and their exact counters (one DynamoDB table).

    pk                                  sk                     lsi1 (by-time)    lsi2 (by-session)
    L0#<team>:<agent>#<epoch>#<user>    msg-…                  <ts>#<id>         <session>␟<ts>#<id>
    L1#<team>:<agent>#<epoch>#<user>    atom-…                 <updated>#<id>    —
    L1#<team>:<agent>#<epoch>#<user>    nk␟<sha256>            —                 —   (natural-key guard)
    C#<team>:<agent>#<epoch>            L0␟<user>[␟<session>] / L1␟<user>          (counters, n)

One partition per (memory, content epoch, user): a user's newest N is one Query reading N items,
a delete by id is one key, erasing a user or a whole epoch never touches another memory. ``␟`` is
U+001F, a control character, which ids can never contain (§3), so prefixes never run into each
other. Counters change in the same transaction as the items they count.
"""

from __future__ import annotations

import hashlib
import json
import random
import time
from functools import lru_cache
from typing import Any, Callable, Iterable

from .clock import format_ms
from .dal.models import Item
from .errors import Unavailable

SEP = "\x1f"
_TIME_OFFSET = 62_135_596_800_000  # ms from 0001-01-01 to 1970-01-01: keeps sort keys non-negative
TRANSACTION_MAX = 100


def memory_part(team_id: str, agent_id: str, epoch: int) -> str:
    return f"{team_id}:{agent_id}#{int(epoch)}"


def l0_pk(team_id: str, agent_id: str, epoch: int, user_id: str) -> str:
    return f"L0#{memory_part(team_id, agent_id, epoch)}#{user_id}"


def l1_pk(team_id: str, agent_id: str, epoch: int, user_id: str) -> str:
    return f"L1#{memory_part(team_id, agent_id, epoch)}#{user_id}"


def counter_pk(team_id: str, agent_id: str, epoch: int) -> str:
    return f"C#{memory_part(team_id, agent_id, epoch)}"


def counter_sk(layer: str, user_id: str, session_id: str | None = None) -> str:
    return f"{layer}{SEP}{user_id}" + (f"{SEP}{session_id}" if session_id is not None else "")


def time_key(ms: int, item_id: str) -> str:
    """Sortable time + id: string order is (time, id) order."""
    return f"{ms + _TIME_OFFSET:015d}#{item_id}"


def time_bound(ms: int | None, upper: bool) -> str:
    if ms is None:
        return "~" if upper else "0"  # every time key starts with a digit
    return f"{ms + _TIME_OFFSET:015d}#" + ("~" if upper else "")


def time_range(time_start: str | None, time_end: str | None) -> tuple[int | None, int | None]:
    """A request's (validated) time filters as epoch milliseconds; None where absent."""
    from .clock import parse_time

    return (parse_time(time_start) if time_start else None, parse_time(time_end) if time_end else None)


def could_be_id(value: str) -> bool:
    """Ids and session ids are at most 256 characters (§3): a longer one names nothing, and
    asking DynamoDB for it would break its key-size limit (a 500 instead of "not found")."""
    return len(value) <= 256


def natural_key(task_id: str | None, type_: str, background: str, content: str) -> str:
    """Same content, type and background in the same task (no task is a value of its own)."""
    raw = json.dumps([task_id, type_, background, content], ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(raw.encode("utf-8")).hexdigest()


def nk_sk(key: str) -> str:
    return f"nk{SEP}{key}"


@lru_cache(maxsize=1)
def _connection() -> Any:
    from pynamodb.connection import Connection

    from .settings import get_settings

    return Connection(region=get_settings().region, max_retry_attempts=4)


# PynamoDB sends a transaction's actions grouped by kind, in this order, whatever the call order.
_KIND_ORDER = ("condition_check", "delete", "save", "update")


class _Recorder:
    """Passes actions to PynamoDB's TransactWrite and remembers their call order, so that a
    cancellation can be reported in the positions the caller used (``failed_conditions``)."""

    def __init__(self, transaction: Any) -> None:
        self._transaction = transaction
        self.kinds: list[str] = []

    def __getattr__(self, kind: str) -> Callable[..., None]:
        if kind not in _KIND_ORDER:
            raise AttributeError(kind)

        def act(*args: Any, **kwargs: Any) -> None:
            self.kinds.append(kind)
            getattr(self._transaction, kind)(*args, **kwargs)

        return act

    def call_positions(self) -> list[int]:
        """For each action as sent, its position in call order."""
        return sorted(range(len(self.kinds)), key=lambda i: (_KIND_ORDER.index(self.kinds[i]), i))


def transact(build: Callable[[Any], None]) -> None:
    """One TransactWriteItems; conflicts with a concurrent transaction are retried here.

    Raises TransactWriteError when a condition failed; ``failed_conditions(exc)`` gives the
    positions, in the order ``build`` added the actions, of the conditions that failed."""
    from pynamodb.exceptions import TransactWriteError
    from pynamodb.transactions import TransactWrite

    for attempt in range(12):
        recorder = None
        try:
            with TransactWrite(connection=_connection()) as transaction:
                recorder = _Recorder(transaction)
                build(recorder)
            return
        except TransactWriteError as exc:
            reasons = [r.code if r is not None else None for r in (exc.cancellation_reasons or [])]
            if "ConditionalCheckFailed" in reasons and recorder is not None:
                sent = recorder.call_positions()
                exc.failed_positions = sorted(sent[i] for i, code in enumerate(reasons)  # type: ignore[attr-defined]
                                              if code == "ConditionalCheckFailed" and i < len(sent))
                raise
            if not ("TransactionConflict" in reasons or exc.cause_response_code in (
                    "TransactionConflictException", "TransactionInProgressException")):
                raise
            time.sleep(random.uniform(0, 0.01 * 2 ** min(attempt, 5)))
    raise Unavailable("storage busy: too many concurrent writers, try again")


def failed_conditions(exc: Any) -> list[int]:
    """Positions (in the order the actions were added) whose condition failed."""
    return list(getattr(exc, "failed_positions", []))


def epoch_guard(transaction: Any, memory_id: str, epoch: int) -> None:
    """Fail the transaction if a clear moved the memory to another epoch meanwhile (keep this the
    first action: callers read position 0 of the cancellation reasons)."""
    from .dal.models import Asset

    transaction.condition_check(Asset, memory_id, condition=Asset.epoch == int(epoch))


def counter_delta(transaction: Any, pk: str, deltas: dict[str, int]) -> None:
    for sk, delta in deltas.items():
        if delta:
            transaction.update(Item(pk, sk), actions=[Item.n.add(delta)])


def counter_values(pk: str, sks: Iterable[str]) -> dict[str, int]:
    keys = list(sks)
    found = {item.sk: int(item.n or 0) for item in Item.batch_get([(pk, sk) for sk in keys],
                                                                   consistent_read=True)}
    return {sk: found.get(sk, 0) for sk in keys}


def layer_totals(team_id: str, agent_id: str, epoch: int) -> dict[str, int]:
    """Items per layer in a memory: the sum of its per-user counters (one Query)."""
    totals = {"L0": 0, "L1": 0}
    for item in Item.query(counter_pk(team_id, agent_id, epoch), consistent_read=True):
        layer, *rest = item.sk.split(SEP)
        if layer in totals and len(rest) == 1:
            totals[layer] += int(item.n or 0)
    return totals


def batch_get(keys: list[tuple[str, str]]) -> dict[tuple[str, str], Item]:
    """Strongly consistent BatchGetItem (100 keys a call, unprocessed keys retried by PynamoDB)."""
    found: dict[tuple[str, str], Item] = {}
    for start in range(0, len(keys), 100):
        for item in Item.batch_get(keys[start : start + 100], consistent_read=True):
            found[(item.pk, item.sk)] = item
    return found


def iso(ms: int | float | None) -> str | None:
    return None if ms is None else format_ms(int(ms))
