"""Items held packed between requests, installed by ``moto_patches.install()`` and held to the same
rules (tests/contract/test_moto_patches.py: moto alone lacks it; patched answers are moto's own).

moto holds an item as a ``LimitedSizeDict`` of ``DynamoType`` objects, one per attribute value (and
one per element of a list or map), and the collector tracks every one of them. A census of 2,000
restored LoCoMo messages (their items and vectors): 69.4 MiB traced as moto holds them, 28.3 MiB
packed, with float32 vectors (~230 bytes an item). Here, once packing is on (``start_packing()``:
the local stack's AWS side), an item at rest is its DynamoDB JSON attributes as one ``marshal``
string, an attribute equal to the item's hash or range key held as a mark (the key is beside it
already). ``Item.attrs`` becomes a property: the first read in a request unpacks the item into the
very objects moto made (so every moto code path — expressions, conditions, updates in place — sees
what it always saw), and the server calls ``pack_touched()`` under its lock when the request is
answered: what a write touched is packed again from the objects as they are now; what a read
touched drops its unpacked copy (a read changes nothing; the packed string still holds it).

Without ``start_packing()`` (the unit tier's in-process moto) nothing is ever packed, and an item
is exactly moto's."""

from __future__ import annotations

import marshal
from typing import Any

from .patching import once

_touched: list[Any] | None = None  # items unpacked (or made) since the last pack; None: packing is off
_HASH, _RANGE = 0, 1  # in a packed string: "the value of the item's hash (range) key" (a value is never an int)


def install() -> None:
    from moto.dynamodb.models.dynamo_type import Item

    if not once(Item, "_memory_hub_packed"):
        return
    item_class: Any = Item
    item_class._attrs = None  # the unpacked attributes (moto's own objects), None while packed
    item_class._packed = None  # the packed string, None when what is unpacked is newer

    def get_attrs(self: Any) -> Any:
        attrs = self._attrs
        if attrs is None:
            attrs = self._attrs = _unpack(self)
            if _touched is not None:
                _touched.append(self)
        return attrs

    def set_attrs(self: Any, attrs: Any) -> None:
        self._attrs, self._packed = attrs, None  # moto made it anew: what is packed is no longer it
        if _touched is not None:
            _touched.append(self)

    Item.attrs = property(get_attrs, set_attrs)  # type: ignore[assignment]


def start_packing() -> None:
    """From now on, items are packed by ``pack_touched()`` (the caller calls it after every request)."""
    global _touched
    if _touched is None:
        _touched = []


def packed(hash_key: Any, range_key: Any, attributes: dict[str, Any]) -> Any:
    """A moto Item made packed from its DynamoDB JSON attributes (a restore, a replayed write): its
    keys as moto holds them, its attributes not unpacked until a request reads them."""
    from moto.dynamodb.models.dynamo_type import Item

    item: Any = Item.__new__(Item)
    item.hash_key, item.range_key = hash_key, range_key
    if _touched is None:
        item.attrs = _as_moto(attributes)
    else:
        item._packed = _pack(item, attributes)
    return item


def partition_key(table: Any, key: Any) -> Any:
    """The one hash-key object every item of a partition holds (moto makes one per item: a string
    each, repeated on every item of the partition). Only string keys: a number's text is kept as
    each item gave it."""
    if key.type != "S":
        return key
    keys = table.__dict__.setdefault("_memory_hub_partition_keys", {})
    return keys.setdefault(key.value, key)


def forget_partition(table: Any, key: Any) -> None:
    """The partition holds no item any more: its hash-key object is not kept for it."""
    if not table.items.get(key):
        table.__dict__.get("_memory_hub_partition_keys", {}).pop(key.value, None)


def _pack(item: Any, attributes: dict[str, Any]) -> bytes:
    keys = [(mark, k.type, k.value) for mark, k in ((_HASH, item.hash_key), (_RANGE, item.range_key)) if k is not None]
    held: dict[str, Any] = {}
    for name, value in attributes.items():
        for mark, kind, key_value in keys:
            if len(value) == 1 and value.get(kind) == key_value and type(key_value) is str:
                held[name] = mark
                break
        else:
            held[name] = value
    return marshal.dumps(held)


def _attributes(item: Any) -> dict[str, Any]:
    """The packed item's attributes in DynamoDB JSON."""
    held: dict[str, Any] = marshal.loads(item._packed)  # noqa: S302 - a string this process packed
    for name, value in held.items():
        if type(value) is int:
            key = item.hash_key if value == _HASH else item.range_key
            held[name] = {key.type: key.value}
    return held


def _unpack(item: Any) -> Any:
    return _as_moto(_attributes(item))


def _as_moto(attributes: dict[str, Any]) -> Any:
    """Attributes as moto holds them: a ``LimitedSizeDict`` of ``DynamoType`` objects."""
    from moto.dynamodb.models.dynamo_type import DynamoType, LimitedSizeDict

    attrs = LimitedSizeDict.__new__(LimitedSizeDict)  # moto's own size check ran when it was written
    dict.update(attrs, {name: DynamoType(value) for name, value in attributes.items()})
    return attrs


def attributes(item: Any) -> dict[str, Any]:
    """The item's attributes in DynamoDB JSON, without unpacking it (a snapshot reads every item)."""
    if item._attrs is None and item._packed is not None:
        return _attributes(item)
    return item.to_json()["Attributes"]  # type: ignore[no-any-return]


def pack_touched(changed: bool) -> None:
    """After a request (under the lock that makes it atomic): every item it unpacked or made is held
    packed again. ``changed``: the request may have written (packed anew from moto's objects);
    otherwise the packed string still holds the item and the objects are dropped."""
    if not _touched:
        return
    items = list(_touched)
    _touched.clear()
    for item in items:
        if item._attrs is None:
            continue  # touched twice: packed already
        if changed or item._packed is None:
            try:
                item._packed = _pack(item, item.to_json()["Attributes"])
            except ValueError:  # a value marshal cannot hold (moto never makes one): kept unpacked
                item._packed = None
                continue
        item._attrs = None


def replaced_sizes() -> None:
    """DynamoDB refuses an item over 400 KB as it is after the write. moto's ``LimitedSizeDict``
    adds a value's size to the item's size *with the value it replaces still in it*, so an update
    that rewrites a 300 KB attribute with 150 KB of a 310 KB item is refused (``Item size to
    update has exceeded the maximum allowed size``) where DynamoDB takes it. Here the replaced
    value no longer counts; moto's own limit (405,000 bytes) is kept."""
    from moto.dynamodb.exceptions import ItemSizeTooLarge
    from moto.dynamodb.models.dynamo_type import DynamoType, LimitedSizeDict
    from moto.dynamodb.models.utilities import bytesize

    if not once(LimitedSizeDict, "_memory_hub_replaced_sizes"):
        return

    def size_of(value: Any) -> int:
        return int(value.size()) if type(value) is DynamoType else bytesize(str(value))

    def set_item(self: Any, key: str, value: Any) -> None:
        kept = sum(bytesize(name) + size_of(held) for name, held in self.items() if name != key)
        if kept + bytesize(key) + size_of(value) > 405_000:
            raise ItemSizeTooLarge
        dict.__setitem__(self, key, value)

    LimitedSizeDict.__setitem__ = set_item  # type: ignore[method-assign]
