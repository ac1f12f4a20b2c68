"""``consumed_capacity``: the emulated DynamoDB answers ``ReturnConsumedCapacity`` (TOTAL and
INDEXES) with the units AWS would charge, installed by ``moto_patches.install()`` and held to the
same rules (tests/contract/test_moto_capacity.py: moto alone answers a 3.5 KB PutItem with 1.0,
AWS with 4).

moto 5.2.5 answers a constant per operation (1.0 a PutItem, UpdateItem or DeleteItem, 0.5 a
GetItem, 1.0 a Query, one unit per key of a batch, 2.0 per item of a TransactGetItems, nothing for a
TransactWriteItems) and a batch's answer carries ``ConsumedCapacity`` even when none was asked
for. Here each DynamoDB action of moto's handler is wrapped: the items it touches are read before
and after it runs, the arithmetic is ``capacity``'s, and the answer's ``ConsumedCapacity`` is
replaced (or removed when none was asked for). A Query or Scan notes the items it evaluated
(before its filter and projection) as moto's table finds them.

The units of the thread's last request, failures included (a false condition still consumes;
its error carries no ``ConsumedCapacity``, as on AWS), are kept for the local stack's call log:
``take_last()``."""

from __future__ import annotations

import functools
import inspect
import threading
from collections.abc import Callable
from typing import Any

from . import capacity, moto_items
from .patching import once

_local = threading.local()  # per serving thread: .last (the last request's units), .evaluated (a Query's items)

LIST_ANSWERS = {"batch_get_item", "batch_write_item", "transact_get_items", "transact_write_items"}


def take_last() -> list[dict[str, Any]] | None:
    """The units (one INDEXES-shaped element per table) of the last DynamoDB request this thread
    served, once; None when it consumed none or was refused before moto ran it."""
    last = getattr(_local, "last", None)
    _local.last = None
    return last


def install() -> None:
    from moto.dynamodb.models.table import Table
    from moto.dynamodb.responses import DynamoHandler

    if not once(DynamoHandler, "_memory_hub_capacity"):
        return
    Table.query = _noting_evaluated(Table.query, "filter_expression", "projection_expressions")  # type: ignore[method-assign]
    Table.scan = _noting_evaluated(Table.scan, "filter_expression", "projection_expression")  # type: ignore[method-assign]
    for name, measure in MEASURES.items():
        setattr(DynamoHandler, name, _measured(name, getattr(DynamoHandler, name), measure))


# ---------------------------------------------------------------- reading the items


class _Meter:
    """One request's view of the tables it touches (errors of moto's lookups read as no item:
    moto's own handler answers them)."""

    def __init__(self, handler: Any) -> None:
        self.backend = handler.dynamodb_backend
        self.body: dict[str, Any] = handler.body

    def schema(self, table_name: str) -> capacity.Schema:
        table = self.backend.get_table(table_name)
        keys = tuple(k for k in (table.hash_key_attr, table.range_key_attr) if k)
        indexes = [(index, False) for index in table.indexes or []]
        indexes += [(index, True) for index in table.global_indexes or []]
        return capacity.Schema(table_name, keys, tuple(_index(index, is_global) for index, is_global in indexes))

    def key_of(self, table_name: str, item: dict[str, Any]) -> dict[str, Any] | None:
        try:
            table = self.backend.get_table(table_name)
            return {k: item[k] for k in (table.hash_key_attr, table.range_key_attr) if k}
        except Exception:  # noqa: BLE001 - moto answers the request's own error
            return None

    def current(self, table_name: str, key: dict[str, Any] | None) -> dict[str, Any] | None:
        """The item at ``key`` now, in DynamoDB JSON (None: no such item)."""
        if key is None:
            return None
        try:
            table = self.backend.get_table(table_name)
            item = table.get_item(*self.backend.get_keys_value(table, key))
        except Exception:  # noqa: BLE001 - moto answers the request's own error
            return None
        return moto_items.attributes(item) if item is not None else None


def _index(index: Any, is_global: bool) -> capacity.Index:
    projection = index.projection or {}
    return capacity.Index(
        index.name,
        tuple(k["AttributeName"] for k in index.schema),
        projection.get("ProjectionType", "ALL"),
        tuple(projection.get("NonKeyAttributes") or ()),
        is_global,
    )


# ---------------------------------------------------------------- the measures, action by action

Run = Callable[[], Any]
Parts = list[capacity.Consumed]


def _conditional_failure(exc: BaseException) -> bool:
    return type(exc).__name__ in ("ConditionalCheckFailed", "TransactionCanceledException")


def _single_write(meter: _Meter, run: Run, key: dict[str, Any] | None, new: Callable[[], Any]) -> tuple[Any, Parts]:
    name = meter.body["TableName"]
    before = meter.current(name, key)
    try:
        result = run()
    except Exception as exc:
        if _conditional_failure(exc):
            _local.last = [capacity.write(meter.schema(name), before, None, failed=True).described("INDEXES")]
        raise
    return result, [capacity.write(meter.schema(name), before, new())]


def _put(meter: _Meter, run: Run) -> tuple[Any, Parts]:
    item = meter.body["Item"]
    return _single_write(meter, run, meter.key_of(meter.body["TableName"], item), lambda: item)


def _update(meter: _Meter, run: Run) -> tuple[Any, Parts]:
    key = meter.body["Key"]
    return _single_write(meter, run, key, lambda: meter.current(meter.body["TableName"], key))


def _delete(meter: _Meter, run: Run) -> tuple[Any, Parts]:
    return _single_write(meter, run, meter.body["Key"], lambda: None)


def _get(meter: _Meter, run: Run) -> tuple[Any, Parts]:
    result = run()
    name = meter.body["TableName"]
    item = meter.current(name, meter.body["Key"])
    return result, [capacity.get(meter.schema(name), item, consistent=bool(meter.body.get("ConsistentRead")))]


def _batch_get(meter: _Meter, run: Run) -> tuple[Any, Parts]:
    result = run()
    parts = []
    for name, request in meter.body["RequestItems"].items():
        schema, consistent = meter.schema(name), bool(request.get("ConsistentRead"))
        parts += [capacity.get(schema, meter.current(name, key), consistent=consistent) for key in request["Keys"]]
    return result, parts


def _batch_write(meter: _Meter, run: Run) -> tuple[Any, Parts]:
    writes = []
    for name, requests in meter.body["RequestItems"].items():
        for request in requests:
            if "PutRequest" in request:
                item = request["PutRequest"]["Item"]
                writes.append((name, meter.current(name, meter.key_of(name, item)), item))
            else:
                writes.append((name, meter.current(name, request["DeleteRequest"]["Key"]), None))
    result = run()
    return result, [capacity.write(meter.schema(name), before, after) for name, before, after in writes]


def _query(meter: _Meter, run: Run) -> tuple[Any, Parts]:
    _local.evaluated = []
    try:
        result = run()
        sizes = list(_local.evaluated)
    finally:
        _local.evaluated = None
    name = meter.body["TableName"]
    consistent = bool(meter.body.get("ConsistentRead"))
    return result, [capacity.scan(meter.schema(name), sizes, consistent=consistent, index=meter.body.get("IndexName"))]


def _transact_get(meter: _Meter, run: Run) -> tuple[Any, Parts]:
    result = run()
    parts = []
    for action in meter.body["TransactItems"]:
        name, key = action["Get"]["TableName"], action["Get"]["Key"]
        parts.append(capacity.get(meter.schema(name), meter.current(name, key), consistent=True, transactional=True))
    return result, parts


def _transact_write(meter: _Meter, run: Run) -> tuple[Any, Parts]:
    actions = []
    for action in meter.body["TransactItems"]:
        kind, op = next(iter(action.items()))
        name = op["TableName"]
        key = meter.key_of(name, op["Item"]) if kind == "Put" else op.get("Key")
        actions.append((kind, op, name, key, meter.current(name, key)))
    try:
        result = run()
    except Exception as exc:
        if _conditional_failure(exc):
            failed = [
                capacity.write(meter.schema(name), before, None, transactional=True, failed=True)
                for _, _, name, _, before in actions
            ]
            _local.last = [part.described("INDEXES") for part in capacity.by_table(failed)]
        raise
    return result, [_transaction_part(meter, *action) for action in actions]


def _transaction_part(
    meter: _Meter, kind: str, op: dict[str, Any], name: str, key: Any, before: Any
) -> capacity.Consumed:
    schema = meter.schema(name)
    if kind == "ConditionCheck":
        return capacity.condition_check(schema, before)
    after = op["Item"] if kind == "Put" else meter.current(name, key) if kind == "Update" else None
    return capacity.write(schema, before, after, transactional=True)


MEASURES: dict[str, Callable[[_Meter, Run], tuple[Any, Parts]]] = {
    "put_item": _put,
    "update_item": _update,
    "delete_item": _delete,
    "get_item": _get,
    "batch_get_item": _batch_get,
    "batch_write_item": _batch_write,
    "query": _query,
    "scan": _query,
    "transact_get_items": _transact_get,
    "transact_write_items": _transact_write,
}


# ---------------------------------------------------------------- the hooks


def _measured(name: str, original: Callable[[Any], Any], measure: Callable[[_Meter, Run], Any]) -> Callable[..., Any]:
    """moto's handler method ``name`` answering the units ``measure`` finds."""

    @functools.wraps(original)
    def method(self: Any) -> Any:
        _local.last = None
        result, parts = measure(_Meter(self), lambda: original(self))
        consumed = capacity.by_table(parts)
        _local.last = [part.described("INDEXES") for part in consumed]
        payload = getattr(result, "result", None)
        if isinstance(payload, dict):
            payload.pop("ConsumedCapacity", None)
            mode = self.body.get("ReturnConsumedCapacity", "NONE")
            if mode in ("TOTAL", "INDEXES") and consumed:
                described = [part.described(mode) for part in consumed]
                payload["ConsumedCapacity"] = described if name in LIST_ANSWERS else described[0]
        return result

    return method


def _noting_evaluated(original: Callable[..., Any], filter_name: str, projection_name: str) -> Callable[..., Any]:
    """moto's Table.query (or scan) run without its filter and projection, the sizes of the items
    it evaluated noted for the request, then filtered and projected as moto does last."""
    signature = inspect.signature(original)

    @functools.wraps(original)
    def evaluate(self: Any, *args: Any, **kwargs: Any) -> Any:
        noting = getattr(_local, "evaluated", None)
        if noting is None:
            return original(self, *args, **kwargs)
        bound = signature.bind(self, *args, **kwargs)
        condition = bound.arguments.get(filter_name)
        projection = bound.arguments.get(projection_name)
        for name in (filter_name, projection_name):
            if name in bound.arguments:
                bound.arguments[name] = None
        results, scanned, last_key = original(*bound.args, **bound.kwargs)
        noting.extend(capacity.item_size(moto_items.attributes(item)) for item in results)
        if condition is not None:
            results = [item for item in results if condition.expr(item)]
        if projection:
            results = [item.project(projection) for item in results]
        return results, scanned, last_key

    return evaluate
