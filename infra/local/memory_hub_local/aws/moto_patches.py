"""Changes to moto's own code: each one makes moto faster without changing what it answers, or
makes it refuse what DynamoDB refuses. Every patch is a claim about moto 5.2.5: a test
(tests/contract/test_moto_patches.py) shows moto alone lacks it, so the patch goes the day moto
gains it, and ``install()`` refuses to patch a moto version nobody has tested.

- ``transactions``: moto deep-copies a whole table once per action of a TransactWriteItems; here
  every condition is checked against the state before the transaction (DynamoDB's rule) and an
  undo log of only the touched items restores them if an action fails.
- ``fast_reads``: moto runs each item of a Query/Scan/GetItem/BatchGetItem answer through its
  generic serializer (~3 ms an item); the items already are DynamoDB JSON and are spliced in.
- ``sorted_partitions``: moto answers a Query by sorting every item of the table; here each
  partition keeps its items sorted by each of its range keys (table and local indexes), so a Query
  hands moto only the items its key condition and Limit can reach — newest N reads N. An
  UpdateItem moves its one item where it now sorts (the partition is not sorted again). The items
  of a partition share one hash-key object (moto makes one per item).
- ``index_key_sizes``: DynamoDB refuses an item whose local-index sort key exceeds 1,024 bytes, also
  when an UpdateItem sets it; moto checks keys only on PutItem, and never LSI keys.
- ``untracked_models``: moto keeps every model object it ever made in a list on its class (for its
  own dashboard and its reset): every version of every item ever written, overwritten or deleted,
  every vector, every S3 object. Nothing of the emulated account reads those lists; here objects
  are no longer added to them, so what the account no longer holds is freed.
- ``parsed_expressions``, ``fast_traversal`` (in ``moto_expressions``): each expression string
  parsed once, and moto's UpdateExpression validation without its per-node overheads.
- ``packed_items`` (in ``moto_items``): an item at rest is one packed string instead of an object
  per attribute value, unpacked while a request uses it (the local stack's AWS side only).
- ``replaced_sizes`` (in ``moto_items``): an item's size is checked as it is after a write (moto
  counts the value an update replaces as well, refusing updates DynamoDB takes).
- ``action_lookup``: to find the method of a request's action, moto lists every function of its
  response class (``inspect.getmembers``: DynamoDB's has 76) on every request; here the one name is looked up.
"""

from __future__ import annotations

import base64
import bisect
import copy
import functools
import inspect
import json
import threading
from collections.abc import Callable
from typing import Any

from . import moto_items
from .patching import once as _once

_QUERY_LOCK = threading.RLock()

TESTED_MOTO = ("5.2.5",)
MAX_PARTITION_KEY, MAX_SORT_KEY = 2048, 1024


class UntestedMoto(RuntimeError):
    pass


def check_version() -> None:
    import moto

    if moto.__version__ not in TESTED_MOTO:
        raise UntestedMoto(
            f"moto {moto.__version__} is not one the local stack's patches were tested with "
            f"({', '.join(TESTED_MOTO)}): pin it, or re-run tests/contract/test_moto_patches.py "
            "and add the version"
        )


def install() -> None:
    check_version()
    transactions()
    fast_reads()
    sorted_partitions()
    index_key_sizes()
    untracked_models()
    action_lookup()
    from . import moto_capacity, moto_expressions, s3vectors  # each documented (and tested) there

    moto_expressions.install()
    moto_items.install()
    moto_items.replaced_sizes()
    s3vectors.install()
    moto_capacity.install()  # last: it wraps moto's handler and Table.query as the others left them


# ---------------------------------------------------------------- transactions


def transactions() -> None:
    from moto.dynamodb.models import DynamoDBBackend

    if not _once(DynamoDBBackend, "_memory_hub_transactions"):
        return

    def transact_write_items(self: Any, transact_items: list[dict[str, Any]]) -> None:
        _apply_transaction(self, _transaction_plan(self, transact_items))

    DynamoDBBackend.transact_write_items = transact_write_items  # type: ignore[method-assign]


_Planned = tuple[str, dict[str, Any], dict[str, Any], Any]  # action, its request, the item's key, the item before


def _transaction_plan(backend: Any, transact_items: list[dict[str, Any]]) -> list[_Planned]:
    """Every action checked against the state before the transaction: the plan of its writes, or
    the cancellation (each action's reason, in order) when any condition is false."""
    from moto.dynamodb.exceptions import (
        MultipleTransactionsException,
        TooManyTransactionsException,
        TransactionCanceledException,
    )

    if len(transact_items) > 100:
        raise TooManyTransactionsException()
    seen: set[tuple[str, str]] = set()
    plan: list[_Planned] = []
    reasons: list[tuple[str | None, str | None, Any]] = []
    for entry in transact_items:
        op_type, op = next(iter(entry.items()))
        key = _action_key(backend.get_table(op["TableName"]), op_type, op)
        marker = (op["TableName"], json.dumps(key, sort_keys=True))
        if marker in seen:
            raise MultipleTransactionsException()
        seen.add(marker)
        current = backend.get_item(op["TableName"], key)
        if _condition_holds(op, current):
            reasons.append((None, None, None))
            plan.append((op_type, op, key, copy.deepcopy(current)))
        else:
            returned = op.get("ReturnValuesOnConditionCheckFailure") == "ALL_OLD" and current is not None
            old = current.to_json()["Attributes"] if returned else None
            reasons.append(("ConditionalCheckFailed", "The conditional request failed", old))
    if len(plan) < len(transact_items):
        raise TransactionCanceledException(reasons)
    return plan


def _action_key(table: Any, op_type: str, op: dict[str, Any]) -> dict[str, Any]:
    if op_type != "Put":
        return op["Key"]  # type: ignore[no-any-return]
    return {k: op["Item"][k] for k in (table.hash_key_attr, table.range_key_attr) if k is not None}


def _condition_holds(op: dict[str, Any], current: Any) -> bool:
    from moto.dynamodb.comparisons import get_filter_expression

    condition = op.get("ConditionExpression")
    if condition is None:
        return True
    names, values = op.get("ExpressionAttributeNames"), op.get("ExpressionAttributeValues")
    return bool(get_filter_expression(condition, names, values).expr(current))


def _apply_transaction(backend: Any, plan: list[_Planned]) -> None:
    """The plan's writes in order; if one fails, the items written so far are put back as they were."""
    undo = []
    try:
        for op_type, op, key, before in plan:
            if _transaction_write(backend, op_type, op, key):
                undo.append((op["TableName"], key, before))
    except Exception:
        for table_name, key, before in reversed(undo):
            if before is None:
                backend.delete_item(table_name, key)
            else:
                backend.put_item(table_name, before.to_json()["Attributes"])
        raise


def _transaction_write(backend: Any, op_type: str, op: dict[str, Any], key: dict[str, Any]) -> bool:
    """One action's write (False for a ConditionCheck, which writes nothing)."""
    if op_type == "Put":
        backend.put_item(op["TableName"], op["Item"])
    elif op_type == "Delete":
        backend.delete_item(op["TableName"], key)
    elif op_type == "Update":
        backend.update_item(
            op["TableName"],
            key,
            update_expression=op["UpdateExpression"],
            expression_attribute_names=op.get("ExpressionAttributeNames"),
            expression_attribute_values=op.get("ExpressionAttributeValues"),
        )
    else:
        return False
    return True


# ---------------------------------------------------------------- untracked models


def untracked_models() -> None:
    from moto.core.common_models import BaseModel

    if not _once(BaseModel, "_memory_hub_untracked"):
        return

    def untracked_new(cls: Any, *args: Any, **kwargs: Any) -> Any:
        return super(BaseModel, cls).__new__(cls)  # moto's adds the object to cls.instances_tracked

    BaseModel.__new__ = staticmethod(untracked_new)  # type: ignore[method-assign]


# ---------------------------------------------------------------- fast reads


def _wire_binary(value: Any) -> str:
    """A binary attribute's value as DynamoDB's JSON carries it (base64): moto keeps it as bytes."""
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(bytes(value)).decode("ascii")
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def fast_reads() -> None:
    from moto.dynamodb.responses import DynamoResult

    if not _once(DynamoResult, "_memory_hub_fast_reads"):
        return
    original = DynamoResult.execute_result
    bulky_members = {"Query": "Items", "Scan": "Items", "GetItem": "Item", "BatchGetItem": "Responses"}

    def execute_result(self: Any, context: Any) -> Any:
        bulky = bulky_members.get(str(context.operation_model.name))
        result = self._result
        if bulky is None or not isinstance(result, dict) or bulky not in result:
            return original(self, context)
        self._result = {k: v for k, v in result.items() if k != bulky}
        try:
            status, headers, body = original(self, context)
        finally:
            self._result = result
        payload = json.loads(body or "{}")
        payload[bulky] = result[bulky]
        headers = {k: v for k, v in dict(headers).items() if k.lower() != "content-length"}
        return status, headers, json.dumps(payload, separators=(",", ":"), default=_wire_binary)

    DynamoResult.execute_result = execute_result  # type: ignore[method-assign]


# ---------------------------------------------------------------- sorted partitions


class SortedPartition:
    """One partition's items, in order of one range attribute (then the table's range key)."""

    def __init__(self, items: list[Any], attribute: str, table_range: str | None) -> None:
        self.attribute, self.table_range = attribute, table_range
        rows = sorted((key, i) for i in items if (key := self.key(i)) is not None)
        self.keys = [k for k, _ in rows]
        self.items = [i for _, i in rows]
        self.placed = {id(i): k for k, i in rows}  # where each item is (an item changed in place moves)

    def key(self, item: Any) -> tuple[str, str] | None:
        rest = item.range_key  # the table's range key: held beside the attributes (a packed item stays packed)
        value = rest if self.attribute == self.table_range else item.attrs.get(self.attribute)
        if value is None or value.type != "S":
            return None
        return value.value, (rest.value if rest is not None and rest.type == "S" else "")

    def add(self, item: Any) -> None:
        key = self.key(item)
        if key is not None:
            at = bisect.bisect_left(self.keys, key)
            self.keys.insert(at, key)
            self.items.insert(at, item)
            self.placed[id(item)] = key

    def remove(self, item: Any) -> None:
        key = self.placed.pop(id(item), None)
        if key is None:
            return
        at = bisect.bisect_left(self.keys, key)
        if at < len(self.keys) and self.keys[at] == key:
            del self.keys[at]
            del self.items[at]

    def window(
        self, comparison: str | None, values: list[str], start: tuple[str, str] | None, forward: bool, limit: int | None
    ) -> list[Any]:
        """The items a Query reads, in ascending order: within the key condition, after the
        exclusive start key, and (with a limit) only as many as it can reach, plus one. moto
        answers a LastEvaluatedKey when any item follows the Limit-th match (DynamoDB stops at
        the Limit-th), so the first item past the key condition, in the query's direction, is read too."""
        low, high = 0, len(self.keys)
        if comparison is not None:
            low, high = _bounds(self.keys, comparison, values)
            low, high = (low, min(high + 1, len(self.keys))) if forward else (max(low - 1, 0), high)
        if start is not None:
            if forward:
                low = max(low, bisect.bisect_right(self.keys, start))
            else:
                high = min(high, bisect.bisect_left(self.keys, start))
        if limit is not None and high - low > limit + 1:
            low, high = (low, low + limit + 1) if forward else (high - limit - 1, high)
        return self.items[low:high]


_TOP = "\U0010ffff" * 4


_SYMBOLS = {"=": "EQ", "<": "LT", "<=": "LE", ">": "GT", ">=": "GE"}


def _bounds(keys: list[tuple[str, str]], comparison: str, values: list[str]) -> tuple[int, int]:
    comparison = _SYMBOLS.get(comparison, comparison.upper())
    first = values[0] if values else ""
    if comparison == "BETWEEN":
        return bisect.bisect_left(keys, (first, "")), bisect.bisect_right(keys, (values[1], _TOP))
    if comparison == "BEGINS_WITH":
        return bisect.bisect_left(keys, (first, "")), bisect.bisect_left(keys, (first + _TOP, ""))
    if comparison == "EQ":
        return bisect.bisect_left(keys, (first, "")), bisect.bisect_right(keys, (first, _TOP))
    if comparison == "LT":
        return 0, bisect.bisect_left(keys, (first, ""))
    if comparison == "LE":
        return 0, bisect.bisect_right(keys, (first, _TOP))
    if comparison == "GT":
        return bisect.bisect_right(keys, (first, _TOP)), len(keys)
    if comparison == "GE":
        return bisect.bisect_left(keys, (first, "")), len(keys)
    return 0, len(keys)


def _sorted_views(table: Any) -> dict[tuple[Any, str], SortedPartition]:
    views = getattr(table, "_memory_hub_sorted", None)
    if views is None:
        views = {}
        table._memory_hub_sorted = views
    return views


def _range_attributes(table: Any) -> list[str]:
    attributes = [table.range_key_attr] if table.range_key_attr else []
    for index in table.indexes or []:  # local indexes share the table's partition key
        attributes += [k["AttributeName"] for k in index.schema if k["KeyType"] == "RANGE"]
    return attributes


def _forget(table: Any, item: Any) -> None:
    views = _sorted_views(table)
    for attribute in _range_attributes(table):
        view = views.get((item.hash_key, attribute))
        if view is not None:
            view.remove(item)


def _remember(table: Any, item: Any) -> None:
    views = _sorted_views(table)
    for attribute in _range_attributes(table):
        view = views.get((item.hash_key, attribute))
        if view is not None:
            view.add(item)


def _partition_query(table: Any, hash_value: Any, attribute: str, arguments: Any, query: Callable[[], Any]) -> Any:
    """moto's Query (``query``) over only the items of one partition its key condition, start key
    and Limit can reach, in the order of ``attribute`` (the table's or a local index's range key)."""
    views = _sorted_views(table)
    view = views.get((hash_value, attribute))
    if view is None:
        view = SortedPartition(list(table.items.get(hash_value, {}).values()), attribute, table.range_key_attr)
        views[(hash_value, attribute)] = view
    comparison = arguments.get("range_comparison")
    values = [v.value for v in (arguments.get("range_objs") or [])]
    start = arguments.get("exclusive_start_key")
    start_key = None
    if start:
        first = start.get(attribute, {}).get("S")
        rest = start.get(table.range_key_attr, {}).get("S", "")
        start_key = (first, rest) if first is not None else None
    forward = arguments.get("scan_index_forward") is not False
    candidates = view.window(comparison, values, start_key, forward, arguments.get("limit"))
    table.all_items = lambda: list(candidates)
    try:
        return query()
    finally:
        del table.all_items  # back to the class's method


def _update_unsorted(backend: Any, table: Any, key: dict[str, Any], update: Callable[[], Any]) -> Any:
    try:
        return update()
    finally:  # the views of the item's partition are made again on the next query
        hash_value, _ = backend.get_keys_value(table, key)
        for view in [v for v in _sorted_views(table) if v[0] == hash_value]:
            del _sorted_views(table)[view]


def sorted_partitions() -> None:
    from moto.dynamodb.models import DynamoDBBackend
    from moto.dynamodb.models.table import Table

    if not _once(Table, "_memory_hub_sorted_partitions"):
        return
    Table.put_item = _locked(_sorted_put(Table.put_item))  # type: ignore[method-assign]
    Table.delete_item = _locked(_sorted_delete(Table.delete_item))  # type: ignore[method-assign]
    Table.query = _sorted_query(Table.query)  # type: ignore[method-assign]
    DynamoDBBackend.update_item = _locked(_sorted_update(DynamoDBBackend.update_item))  # type: ignore[method-assign]


def _sorted_put(original_put: Callable[..., Any]) -> Callable[..., Any]:
    """moto's Table.put_item, the item then placed in its partition's views (the one it replaces taken out)."""

    def put_item(self: Any, item_attrs: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
        if not self.range_key_attr:
            return original_put(self, item_attrs, *args, **kwargs)
        from moto.dynamodb.models.dynamo_type import DynamoType

        old = self.items.get(DynamoType(item_attrs[self.hash_key_attr]), {}).get(
            DynamoType(item_attrs[self.range_key_attr])
        )
        item = original_put(self, item_attrs, *args, **kwargs)
        item.hash_key = moto_items.partition_key(self, item.hash_key)
        if old is not None:
            _forget(self, old)
        _remember(self, item)
        return item

    return put_item


def _sorted_delete(original_delete: Callable[..., Any]) -> Callable[..., Any]:
    def delete_item(self: Any, hash_key: Any, range_key: Any) -> Any:
        item = original_delete(self, hash_key, range_key)
        if item is not None and self.range_key_attr:
            _forget(self, item)
            moto_items.forget_partition(self, hash_key)
        return item

    return delete_item


def _sorted_update(original_update: Callable[..., Any]) -> Callable[..., Any]:
    """moto's UpdateItem, the item then moved to where it now sorts in its partition's views."""

    def update_item(self: Any, table_name: str, key: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
        table = self.get_table(table_name)
        try:
            hash_value, range_value = self.get_keys_value(table, key)
            before = table.get_item(hash_value, range_value)
        except Exception:  # noqa: BLE001 - moto's update answers it; the partition is sorted again
            return _update_unsorted(self, table, key, lambda: original_update(self, table_name, key, *args, **kwargs))
        try:
            return original_update(self, table_name, key, *args, **kwargs)
        finally:  # moto changes the item in place (or makes it): it moves to where it now sorts
            _resort(table, hash_value, before, table.get_item(hash_value, range_value))

    return update_item


def _resort(table: Any, hash_value: Any, before: Any, now: Any) -> None:
    if now is not None and now is not before:  # made by the update: its partition's hash key
        now.hash_key = moto_items.partition_key(table, now.hash_key)
    for (partition, _), view in _sorted_views(table).items():
        if partition == hash_value:
            for item in {id(i): i for i in (before, now) if i is not None}.values():
                view.remove(item)
            if now is not None:
                view.add(now)


def _sorted_query(original_query: Callable[..., Any]) -> Callable[..., Any]:
    """moto's Table.query over one partition's view, when the query is of one partition of the
    table or of a local index (a global index's, or a table without a range key, as moto does)."""
    signature = inspect.signature(original_query)

    @functools.wraps(original_query)  # its signature stays moto's (moto_capacity binds to it)
    def query(self: Any, *args: Any, **kwargs: Any) -> Any:
        arguments = signature.bind(self, *args, **kwargs).arguments
        hash_value = arguments.get("hash_key")
        if hash_value is None:
            hash_value = dict(arguments.get("hash_key_conditions") or []).get(self.hash_key_attr)
        index_name = arguments.get("index_name")
        local = index_name is None or any(index.name == index_name for index in (self.indexes or []))
        if not local or hash_value is None or not self.range_key_attr:
            return original_query(self, *args, **kwargs)
        attribute = self.range_key_attr
        if index_name:
            index = next(i for i in self.indexes if i.name == index_name)
            attribute = next(k["AttributeName"] for k in index.schema if k["KeyType"] == "RANGE")
        with _QUERY_LOCK:  # in-process moto (the unit tier) serves calls from several threads
            return _partition_query(
                self, hash_value, attribute, arguments, lambda: original_query(self, *args, **kwargs)
            )

    return query


def _locked(change: Callable[..., Any]) -> Callable[..., Any]:
    """A change of the views as one step: in-process moto (the unit tier) serves several threads,
    and a view's keys and items are two lists; a query reads the views under the same lock."""

    def change_locked(*args: Any, **kwargs: Any) -> Any:
        with _QUERY_LOCK:
            return change(*args, **kwargs)

    return change_locked


# ---------------------------------------------------------------- index key sizes


def index_key_sizes() -> None:
    from moto.dynamodb.exceptions import MockValidationException
    from moto.dynamodb.models import DynamoDBBackend
    from moto.dynamodb.models.table import Table

    if not _once(Table, "_memory_hub_index_key_sizes"):
        return
    original_put, original_update = Table.put_item, DynamoDBBackend.update_item

    def key_problem(table: Any, attrs: dict[str, Any]) -> str | None:
        for index in list(table.indexes or []) + list(table.global_indexes or []):
            for key in index.schema:
                value = attrs.get(key["AttributeName"])
                size = _size(value)
                limit = MAX_PARTITION_KEY if key["KeyType"] == "HASH" else MAX_SORT_KEY
                if size > limit:
                    kind = "partition" if key["KeyType"] == "HASH" else "sort"
                    return (
                        f"One or more parameter values were invalid: Aggregated size of all {kind} keys "
                        f"of index {index.name} has exceeded the size limit of {limit} bytes"
                    )
        return None

    def put_item(self: Any, item_attrs: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
        problem = key_problem(self, item_attrs)
        if problem:
            raise MockValidationException(problem)
        return original_put(self, item_attrs, *args, **kwargs)

    def update_item(self: Any, table_name: str, key: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
        table = self.get_table(table_name)
        before = copy.deepcopy(table.get_item(*self.get_keys_value(table, key)))
        item = original_update(self, table_name, key, *args, **kwargs)
        problem = key_problem(table, item.attrs)
        if problem:
            if before is None:
                table.delete_item(*self.get_keys_value(table, key))
            else:
                table.put_item(before.to_json()["Attributes"])
            raise MockValidationException(problem)
        return item

    Table.put_item = put_item  # type: ignore[method-assign]
    DynamoDBBackend.update_item = update_item  # type: ignore[method-assign]


def _size(value: Any) -> int:
    """Bytes of a key attribute value in DynamoDB JSON (``{"S": …}``) or a moto DynamoType."""
    if value is None:
        return 0
    if hasattr(value, "type"):
        value = {value.type: value.value}
    if "S" in value:
        return len(value["S"].encode("utf-8"))
    if "B" in value:
        raw = value["B"]
        return len(raw) if isinstance(raw, bytes) else len(raw) * 3 // 4
    if "N" in value:
        return len(str(value["N"]).lstrip("-").replace(".", "")) // 2 + 1
    return 0


# ---------------------------------------------------------------- action lookup


class _ActionNames:
    """What moto's ``method_names_from_class`` answers (the names of a class's functions), asked
    only ``name in …``: whether that one attribute of the class is a function."""

    def __init__(self, owner: Any) -> None:
        self.owner = owner

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and inspect.isfunction(getattr(self.owner, name, None))

    def __iter__(self) -> Any:
        return iter([name for name, _ in inspect.getmembers(self.owner, predicate=inspect.isfunction)])


def action_lookup() -> None:
    from moto.core import responses

    if not _once(responses.BaseResponse, "_memory_hub_action_lookup"):
        return
    setattr(responses, "method_names_from_class", _ActionNames)  # noqa: B010 - not an exported name
