"""TransactWriteItems with named actions.

Each action gets a name when it is added; a cancelled transaction reports the names of the
actions whose condition failed (DynamoDB's cancellation reasons are in request order, and the
request keeps the order the actions were added in). Callers never read failures by position.

A transaction cancelled only by conflicting concurrent transactions is retried here (the one
retry policy); one cancelled by a condition raises ``Cancelled``.
"""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from . import aws
from .errors import Cancelled
from .retry import attempts

MAX_ACTIONS = 100  # DynamoDB's limit per transaction
_RETRYABLE_REASONS = {"TransactionConflict", "ThrottlingError", "ProvisionedThroughputExceeded"}


class Transaction:
    def __init__(self) -> None:
        self._items: list[dict[str, Any]] = []
        self._names: list[str] = []

    def __len__(self) -> int:
        return len(self._items)

    def room(self) -> int:
        return MAX_ACTIONS - len(self._items)

    def _add(self, name: str, kind: str, kwargs: dict[str, Any]) -> None:
        if len(self._items) >= MAX_ACTIONS:
            raise ValueError(f"a transaction holds at most {MAX_ACTIONS} actions")
        allowed = _FIELDS[kind]
        self._items.append({kind: {k: v for k, v in kwargs.items() if k in allowed}})
        self._names.append(name)

    def put(self, name: str, item: Any, condition: Any = None) -> None:
        self._add(name, "Put", item.get_save_kwargs_from_instance(condition=condition))

    def update(self, name: str, item: Any, actions: list[Any], condition: Any = None) -> None:
        self._add(name, "Update", item.get_update_kwargs_from_instance(actions=actions, condition=condition))

    def delete(self, name: str, item: Any, condition: Any = None) -> None:
        self._add(name, "Delete", item.get_delete_kwargs_from_instance(condition=condition))

    def check(self, name: str, model: Any, hash_key: Any, range_key: Any = None, *, condition: Any) -> None:
        self._add(
            name,
            "ConditionCheck",
            model.get_operation_kwargs_from_class(hash_key, range_key=range_key, condition=condition),
        )

    def commit(self) -> None:
        """Send it; retried while only concurrent transactions stand in the way."""
        if not self._items:
            return
        for _ in attempts("transaction"):
            try:
                aws.dynamodb().transact_write_items(TransactItems=self._items)
                return
            except ClientError as exc:
                code = aws.error_code(exc)
                if code == "TransactionInProgressException":
                    continue
                if code != "TransactionCanceledException":
                    raise
                reasons = [r.get("Code", "None") for r in exc.response.get("CancellationReasons", [])]
                failed = [
                    self._names[i]
                    for i, reason in enumerate(reasons)
                    if reason == "ConditionalCheckFailed" and i < len(self._names)
                ]
                if failed:
                    raise Cancelled(failed) from None
                if not any(reason in _RETRYABLE_REASONS for reason in reasons):
                    raise


_COMMON = {
    "TableName",
    "Key",
    "ConditionExpression",
    "ExpressionAttributeNames",
    "ExpressionAttributeValues",
    "ReturnValuesOnConditionCheckFailure",
}
_FIELDS = {
    "Put": (_COMMON - {"Key"}) | {"Item"},
    "Update": _COMMON | {"UpdateExpression"},
    "Delete": _COMMON,
    "ConditionCheck": _COMMON,
}
