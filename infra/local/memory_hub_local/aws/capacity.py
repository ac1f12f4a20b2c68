"""DynamoDB's consumed capacity, computed as AWS documents it: plain arithmetic over items in
DynamoDB JSON, no moto in sight (``moto_capacity`` feeds it the items a request read and wrote).

Why it exists: on-demand DynamoDB bills read and write request units, and what a route costs is
those units times a list price. moto answers ``ReturnConsumedCapacity`` with a constant (1.0 for
any PutItem, 0.5 for any GetItem, nothing for a transaction), so neither the bench nor the
functions' metrics could see a route's real bill on the local stack.

The rules, from the DynamoDB Developer Guide (read 2026-12-04):

- Item size (``CapacityUnitCalculations.html``, "DynamoDB item sizes and formats"): the sum of
  each attribute's UTF-8 name and its value; a string is its UTF-8 bytes, a binary its raw
  bytes, a number 1 byte per two significant digits (leading and trailing zeros trimmed) plus 1,
  a Boolean or null 1 byte; a list or map 3 bytes of overhead plus 1 byte per element plus the
  elements (a map's element names count like attribute names); a set, the sum of its elements.
  1 KB is 1,024 bytes.
- Reads (``read-write-operations.html``): each item's size rounded up to 4 KB is one read unit
  strongly consistent, half eventually consistent, two transactional. GetItem of a missing item
  still consumes the minimum. BatchGetItem rounds each item on its own. Query and Scan add the
  sizes of every item they evaluated (before a filter, whatever the projection) and round the sum
  once, to at least one unit.
- Writes (same page): the item's size rounded up to 1 KB is one write unit, two in a
  transaction (``transaction-apis.html``, "Capacity management for transactions": every item is
  prepared and committed). PutItem and UpdateItem count the larger of the item before and after;
  DeleteItem the deleted item, and a delete of a missing item one unit. A write whose condition
  fails still consumes units for the item as it is (at least one; "Condition expressions").
- Indexes (``GSI.html`` "Provisioned throughput considerations for global secondary indexes",
  the same for local ones in ``LSI.html``): an item entering or leaving an index is one index
  write; an update that changes the index's key is two (the old entry deleted, the new put); one
  that changes only projected attributes is one; an item in neither image, or whose projected
  entry is unchanged, costs the index nothing. Each index write is sized by the projected entry
  (its key, the table's key and the projected attributes). An index Query or Scan is charged to
  the index, with entries sized as projected.

What is not modelled: the extra read of an LSI Query that fetches unprojected attributes (the
service's indexes project ALL), per-partition minimums of a Scan, and the 100 bytes of overhead an
item is billed for in storage (it is not counted in request units)."""

from __future__ import annotations

import base64
import math
from dataclasses import dataclass, field
from typing import Any

WRITE_UNIT_BYTES = 1024
READ_UNIT_BYTES = 4096
TRANSACTION_FACTOR = 2

Attributes = dict[str, Any]  # one item, attribute name → DynamoDB JSON value ({"S": "…"})


# ---------------------------------------------------------------- item size


def _utf8(text: str) -> int:
    return len(text.encode("utf-8"))


def _number_size(text: str) -> int:
    mantissa = str(text).strip().lstrip("+-").lower().split("e", 1)[0]
    digits = mantissa.replace(".", "").strip("0")  # leading and trailing zeros are not stored
    return math.ceil(len(digits) / 2) + 1


def _binary_size(raw: Any) -> int:
    if isinstance(raw, (bytes, bytearray)):
        return len(raw)
    return len(base64.b64decode(str(raw)))  # DynamoDB JSON carries binary as base64 text


def value_size(value: Attributes) -> int:
    """Bytes one attribute value counts for (without its name)."""
    kind, content = next(iter(value.items()))
    if kind == "S":
        return _utf8(content)
    if kind == "N":
        return _number_size(content)
    if kind == "B":
        return _binary_size(content)
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "SS":
        return sum(_utf8(v) for v in content)
    if kind == "NS":
        return sum(_number_size(v) for v in content)
    if kind == "BS":
        return sum(_binary_size(v) for v in content)
    if kind == "L":
        return 3 + sum(1 + value_size(v) for v in content)
    if kind == "M":
        return 3 + sum(1 + _utf8(name) + value_size(v) for name, v in content.items())
    raise ValueError(f"not a DynamoDB attribute value type: {kind}")


def item_size(item: Attributes | None) -> int:
    """Bytes of a whole item (0 for no item)."""
    if not item:
        return 0
    return sum(_utf8(name) + value_size(value) for name, value in item.items())


def write_units(size: int) -> int:
    """Write units of writing ``size`` bytes: per 1 KB started, at least one."""
    return max(1, math.ceil(size / WRITE_UNIT_BYTES))


def read_units(size: int, consistent: bool) -> float:
    """Read units of reading ``size`` bytes: per 4 KB started, at least one; half when eventually
    consistent."""
    units = max(1, math.ceil(size / READ_UNIT_BYTES))
    return float(units) if consistent else units / 2


# ---------------------------------------------------------------- tables and indexes


@dataclass(frozen=True)
class Index:
    name: str
    keys: tuple[str, ...]  # its key attributes (partition, then sort)
    projection: str = "ALL"  # ALL, KEYS_ONLY or INCLUDE
    included: tuple[str, ...] = ()  # INCLUDE's non-key attributes
    is_global: bool = True


@dataclass(frozen=True)
class Schema:
    """What capacity needs of a table: its name, key attributes and indexes."""

    name: str
    keys: tuple[str, ...]
    indexes: tuple[Index, ...] = ()

    def index(self, name: str) -> Index:
        return next(index for index in self.indexes if index.name == name)

    def entry(self, index: Index, item: Attributes | None) -> Attributes | None:
        """The item as ``index`` holds it, or None when the index does not hold it (a key missing)."""
        if item is None or any(key not in item for key in index.keys):
            return None
        if index.projection == "ALL":
            return item
        kept = {*self.keys, *index.keys, *(index.included if index.projection == "INCLUDE" else ())}
        return {name: value for name, value in item.items() if name in kept}


def index_write_units(index: Index, old: Attributes | None, new: Attributes | None) -> int:
    """Write units an index takes for one item's change from entry ``old`` to entry ``new``."""
    if old is None and new is None:
        return 0
    if old is None or new is None:
        return write_units(item_size(old if new is None else new))
    if any(old.get(key) != new.get(key) for key in index.keys):
        return write_units(item_size(old)) + write_units(item_size(new))
    return 0 if old == new else write_units(item_size(new))


# ---------------------------------------------------------------- what a request consumed


@dataclass
class Consumed:
    """Units one request consumed on one table and its indexes."""

    table: str
    reads: bool  # read units (else write units)
    on_table: float = 0.0
    on_indexes: dict[str, float] = field(default_factory=dict)
    global_indexes: set[str] = field(default_factory=set)

    @property
    def total(self) -> float:
        return self.on_table + sum(self.on_indexes.values())

    def add(self, other: Consumed) -> None:
        self.on_table += other.on_table
        for name, units in other.on_indexes.items():
            self.on_indexes[name] = self.on_indexes.get(name, 0.0) + units
        self.global_indexes |= other.global_indexes

    def charge_index(self, index: Index, units: float) -> None:
        self.on_indexes[index.name] = self.on_indexes.get(index.name, 0.0) + units
        if index.is_global:
            self.global_indexes.add(index.name)

    def described(self, mode: str) -> dict[str, Any]:
        """The ``ConsumedCapacity`` element DynamoDB answers for ``mode`` (TOTAL or INDEXES)."""
        kind = "ReadCapacityUnits" if self.reads else "WriteCapacityUnits"
        answer: dict[str, Any] = {"TableName": self.table, "CapacityUnits": self.total, kind: self.total}
        if mode != "INDEXES":
            return answer
        answer["Table"] = {"CapacityUnits": self.on_table, kind: self.on_table}
        for group, is_global in (("GlobalSecondaryIndexes", True), ("LocalSecondaryIndexes", False)):
            named = {
                name: {"CapacityUnits": units, kind: units}
                for name, units in self.on_indexes.items()
                if (name in self.global_indexes) == is_global
            }
            if named:
                answer[group] = named
        return answer


def write(
    schema: Schema,
    before: Attributes | None,
    after: Attributes | None,
    *,
    transactional: bool = False,
    failed: bool = False,
) -> Consumed:
    """A PutItem, UpdateItem or DeleteItem (or a transaction's action) that changed an item from
    ``before`` to ``after`` (None: no item); ``failed``: its condition was false, nothing changed."""
    factor = TRANSACTION_FACTOR if transactional else 1
    consumed = Consumed(schema.name, reads=False)
    if failed:
        consumed.on_table = float(write_units(item_size(before)) * factor)
        return consumed
    consumed.on_table = float(write_units(max(item_size(before), item_size(after))) * factor)
    for index in schema.indexes:
        units = index_write_units(index, schema.entry(index, before), schema.entry(index, after))
        if units:
            consumed.charge_index(index, float(units * factor))
    return consumed


def condition_check(schema: Schema, item: Attributes | None) -> Consumed:
    """A TransactWriteItems ConditionCheck: a transactional write of the item as it is, no index."""
    return Consumed(schema.name, reads=False, on_table=float(write_units(item_size(item)) * TRANSACTION_FACTOR))


def get(schema: Schema, item: Attributes | None, *, consistent: bool, transactional: bool = False) -> Consumed:
    """A GetItem (or one key of a BatchGetItem or TransactGetItems)."""
    units = read_units(item_size(item), consistent or transactional)
    return Consumed(schema.name, reads=True, on_table=units * (TRANSACTION_FACTOR if transactional else 1))


def scan(schema: Schema, sizes: list[int], *, consistent: bool, index: str | None = None) -> Consumed:
    """A Query or Scan that evaluated items (or index entries) of ``sizes`` bytes."""
    units = read_units(sum(sizes), consistent)
    consumed = Consumed(schema.name, reads=True)
    if index is None:
        consumed.on_table = units
    else:
        consumed.charge_index(schema.index(index), units)
    return consumed


def by_table(parts: list[Consumed]) -> list[Consumed]:
    """Each table's parts added up, in the order the tables first appear (a batch or transaction)."""
    tables: dict[str, Consumed] = {}
    for part in parts:
        if part.table in tables:
            tables[part.table].add(part)
        else:
            tables[part.table] = Consumed(part.table, part.reads)
            tables[part.table].add(part)
    return list(tables.values())
