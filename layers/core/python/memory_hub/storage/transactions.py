"""TransactWriteItems with named actions, built and sent by PynamoDB's ``TransactWrite``.

Each action gets a name when it is added; a cancelled transaction reports the names of the
actions whose condition failed, in the order they were added. Callers never read failures by
position.

PynamoDB's cancellation reasons (``TransactWriteError.cancellation_reasons``) are in request
order, and ``TransactWrite`` sends its actions grouped by kind — condition checks, deletes, puts,
updates (``REQUEST_ORDER``), each group in the order it was added — whatever order they were
added in. So the names are kept by kind too, and a reason's position finds its action's name.
``tests/unit/test_transactions.py`` holds that order to PynamoDB's on every permutation of kinds.

A transaction cancelled only by concurrent transactions or throttling is retried here (the one
retry policy); one cancelled by a condition raises ``Cancelled``; any other error is raised as
botocore's ``ClientError`` (what callers catch), not PynamoDB's wrapper.
"""

from __future__ import annotations

from typing import Any

from pynamodb.exceptions import TransactWriteError
from pynamodb.models import Model
from pynamodb.transactions import TransactWrite

from . import views
from .errors import Cancelled
from .models import OneClient, own
from .retry import attempts

MAX_ACTIONS = 100  # DynamoDB's limit per transaction
# The kinds of action in the order TransactWrite puts them in the request.
REQUEST_ORDER = ("ConditionCheck", "Delete", "Put", "Update")
_RETRYABLE_REASONS = {"TransactionConflict", "ThrottlingError", "ProvisionedThroughputExceeded"}
_IN_PROGRESS = "TransactionInProgressException"  # retried like a conflict
_CANCELLED = "TransactionCanceledException"


class Transaction:
    """An action's item is one of ``models``' items, or the domain's view of one (``views``,
    handed back: the stored item is rebuilt from it, ``models.own``)."""

    def __init__(self) -> None:
        # PynamoDB serializes each action when it is added (as before: a later change to an item
        # is not sent); the TransactWrite is sent when its ``with`` block ends, once per attempt.
        self._write = TransactWrite(connection=OneClient())
        self._names: dict[str, list[tuple[int, str]]] = {kind: [] for kind in REQUEST_ORDER}
        self._count = 0

    def __len__(self) -> int:
        return self._count

    def room(self) -> int:
        return MAX_ACTIONS - self._count

    def _room_for_one(self) -> None:
        if self._count >= MAX_ACTIONS:
            raise ValueError(f"a transaction holds at most {MAX_ACTIONS} actions")

    def _named(self, kind: str, name: str) -> None:
        """Called once PynamoDB has taken the action (an item it cannot serialize leaves no name)."""
        self._names[kind].append((self._count, name))
        self._count += 1

    def put(self, name: str, item: Model | views.Item, condition: Any = None) -> None:
        self._room_for_one()
        self._write.save(own(Model, item), condition=condition)
        self._named("Put", name)

    def update(self, name: str, item: Model | views.Item, actions: list[Any], condition: Any = None) -> None:
        self._room_for_one()
        self._write.update(own(Model, item), actions, condition=condition)
        self._named("Update", name)

    def delete(self, name: str, item: Model | views.Item, condition: Any = None) -> None:
        self._room_for_one()
        self._write.delete(own(Model, item), condition=condition)
        self._named("Delete", name)

    def check(self, name: str, model: type[Model], hash_key: Any, range_key: Any = None, *, condition: Any) -> None:
        self._room_for_one()
        self._write.condition_check(model, hash_key, range_key=range_key, condition=condition)
        self._named("ConditionCheck", name)

    def commit(self) -> None:
        """Send it; retried while only concurrent transactions (or throttling) stand in the way."""
        if not self._count:
            return
        for _ in attempts("transaction"):
            try:
                with self._write:  # TransactWrite sends its actions as its block ends
                    pass
                return
            except TransactWriteError as exc:
                if not self._retryable(exc):
                    raise exc.cause or exc from None

    def _retryable(self, exc: TransactWriteError) -> bool:
        """True to try again; raises ``Cancelled`` when conditions failed; False for anything else."""
        code = exc.cause_response_code
        if code == _IN_PROGRESS:
            return True
        if code != _CANCELLED:
            return False
        reasons = [reason.code if reason else "None" for reason in exc.cancellation_reasons]
        in_request_order = [added for kind in REQUEST_ORDER for added in self._names[kind]]
        # one reason per action from DynamoDB; zip tolerates an answer that gives fewer
        paired = zip(in_request_order, reasons, strict=False)
        failed = sorted(added for added, reason in paired if reason == "ConditionalCheckFailed")
        if failed:
            raise Cancelled([name for _, name in failed]) from None
        return any(reason in _RETRYABLE_REASONS for reason in reasons)
