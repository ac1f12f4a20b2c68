"""Erasing meaning: the vectors of erased items leave S3 Vectors and DynamoDB before the erasure
answers. ``erase`` removes an erased item's stored vector from every index of its epoch that holds
its user, and its vector still waiting for a batched put (``forget_waiting``); ``drop_waiting``
takes every vector waiting in a user's partitions (a user's erasure). None of them raises: the
items are gone already, and what is left is swept — a stored vector by the cleanup, a waiting one
by the queue's consumer (which deletes what waited for a gone item) or its TTL."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ..observability import count_event, logger
from ..settings import get_settings
from ..storage import vectors, waiting_vectors
from ..storage.concurrency import for_each, parallel
from ..storage.counters import Where
from ..storage.messages import LAYER as L0
from ..storage.records import LAYER as L1


def layer_of(item_id: str) -> str:
    """An item's layer from its id (``msg-…`` L0, ``atom-…`` L1)."""
    return L0 if item_id.startswith("msg-") else L1


def erase(where: Where, erased: Iterable[tuple[str, str]]) -> int:
    """Remove the vectors of erased items (``(user id, item id)``) from every index of the epoch
    that holds their users (any vector size: the names say whose they are) and their vectors
    still waiting (``forget_waiting``). Never raises (the items are gone already; a leftover
    vector is reaped by the cleanup's sweep). The ids it asked indexes to delete."""
    pairs = list(erased)
    if not pairs or not get_settings().vector_buckets:
        return 0
    # both at once (no round trip more), whatever VectorWrites says now: vectors may wait from before
    _, asked = parallel(lambda: forget_waiting(where, pairs), lambda: erase_stored(where, pairs))
    return int(asked)


def forget_waiting(where: Where, erased: Sequence[tuple[str, str]]) -> int:
    """Delete the waiting vectors of erased items (``(user id, item id)``): each partition they
    were in is read for what waits there (one keys-only ``Query``: far cheaper than a delete for
    every item, most of which have none), and what of it was erased is deleted. A write that
    makes a vector wait reads its items back after, so one landing after this read is deleted by
    that write. Never raises (the consumer deletes what waited for a gone item): how many went."""
    by_partition: dict[str, set[str]] = {}
    for user_id, item_id in erased:
        by_partition.setdefault(where.item_pk(layer_of(item_id), user_id), set()).add(item_id)
    try:
        held = for_each(waiting_vectors.keys_of, list(by_partition))
        doomed = [(pk, i) for pk, keys in zip(by_partition, held, strict=True) for i in keys if i in by_partition[pk]]
        return waiting_vectors.delete(doomed) if doomed else 0
    except Exception:
        logger.exception("waiting vectors of erased items not deleted; the queue's consumer deletes them")
        count_event("VectorEraseFailures", 1)
        return 0


def drop_waiting(where: Where, user_id: str) -> int:
    """Delete every vector waiting in a user's partitions (a user's erasure: whatever item it was
    for, an orphan of a failed erasure included). Never raises: how many went."""
    pks = [where.item_pk(layer, user_id) for layer in (L0, L1)]
    try:
        doomed = [
            (pk, key) for pk, keys in zip(pks, for_each(waiting_vectors.keys_of, pks), strict=True) for key in keys
        ]
        return waiting_vectors.delete(doomed) if doomed else 0
    except Exception:
        logger.exception("waiting vectors of an erased user not deleted; they expire")
        count_event("VectorEraseFailures", 1)
        return 0


def erase_stored(where: Where, erased: Iterable[tuple[str, str]]) -> int:
    """``erase`` in S3 Vectors only."""
    by_user: dict[str, list[str]] = {}
    for user_id, item_id in erased:
        by_user.setdefault(user_id, []).append(item_id)
    if not by_user or not get_settings().vector_buckets:
        return 0
    try:
        bucket = where.vector_bucket
        names = vectors.indexes(bucket, vectors.epoch_prefix(where.team_id, where.agent_id, where.epoch))
        asked: set[str] = set()
        for name in names:
            parsed = vectors.parse_name(name)
            ids = [i for user, held in by_user.items() if parsed is None or parsed.holds(user) for i in held]
            if ids:
                vectors.delete(vectors.Index(bucket, name), ids)
                asked.update(ids)
        return len(asked)
    except Exception:
        logger.exception("vectors of erased items not deleted; the cleanup sweeps them")
        count_event("VectorEraseFailures", 1)
        return 0
