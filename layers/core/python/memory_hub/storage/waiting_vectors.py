"""Vectors waiting for their ``PutVectors`` (``VectorWrites: Batched``), kept in DynamoDB beside
their items so that a search finds a new item by meaning from the next request, as with immediate
writes, while the queue's consumer gathers the vectors of many writes into one ``PutVectors`` (each
billed at least 128 KB).

A waiting vector is one item, ``wv␟<item id>`` in its item's partition (``models.WaitingVector``):
the vector in 8 bits a component with its scale (1,024 components: ~1.3 KB, two write units), the
metadata S3 Vectors will hold (ids as digests, never content) and a digest of the embedded text.
A search reads its user's waiting vectors of one layer newest first, at most ``READ_LIMIT`` (one
strongly consistent ``Query``), and a write never lets a partition hold more (``count``: past it,
the write puts its vectors at once; counted again after its rows land, one over it because writes
raced has the writer put its own at once and delete their rows); the consumer reads them by key,
puts them and deletes each unless an update has replaced it meanwhile (``delete_unchanged``). They
are the item's personal data like its vector in S3 Vectors: an erasure of the item deletes its
waiting vector before it answers, a user's erasure every one in their partitions, and a clear's
or memory delete's purge takes them with the rest of the epoch's partitions. One its consumer
never reached (a message in the dead-letter queue) expires after ``KEPT_S`` (ItemsTable's TTL).

8 bits a component: a component's error is at most half a step (the largest component ÷ 254), so
the copy is within √n × largest ÷ 254 of the vector (n components). For a vector whose length is
spread over its components, as an embedding's is, the copy's cosine with it stays above 0.9999 (a
unit test holds 1,024-component random unit vectors to that). What S3 Vectors stores is the same
copy: the consumer puts what waited, and the model is not asked twice."""

from __future__ import annotations

import math
import operator
import time
from array import array
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from pynamodb.constants import COUNT
from pynamodb.exceptions import DeleteError

from . import layout
from .concurrency import for_each, in_batches
from .models import WaitingVector

READ_LIMIT = 100  # waiting vectors a search reads at most (one user, one layer), and a partition holds
KEPT_S = 2 * 86_400  # a waiting vector's TTL: far past any batching window and the queue's retries
_BATCH = 25  # BatchWriteItem's limit
_GET_BATCH = 100  # BatchGetItem's limit
_STEPS = 127


@dataclass(frozen=True)
class Waiting:
    """One waiting vector as read back: its item's id, its components, its metadata and the digest
    of the text it embeds."""

    key: str
    vector: list[float]
    metadata: dict[str, Any]
    text_digest: str


def text_digest(text: str) -> str:
    return layout.digest(text, 16)


def quantize(vector: Sequence[float]) -> tuple[bytes, float]:
    """The components in 8 bits each (-127…127) and the scale that gives them back."""
    largest = max((abs(x) for x in vector), default=0.0)
    scale = largest / _STEPS if largest > 0 else 1.0
    steps = array("b", (max(-_STEPS, min(_STEPS, round(x / scale))) for x in vector))
    return steps.tobytes(), scale


def restore(data: bytes, scale: float) -> list[float]:
    return [step * scale for step in array("b", data)]


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    if len(a) != len(b):
        return 0.0  # another vector size (the setting changed): never a match
    norms = math.sqrt(sum(map(operator.mul, a, a))) * math.sqrt(sum(map(operator.mul, b, b)))
    return sum(map(operator.mul, a, b)) / norms if norms else 0.0


def _row(pk: str, key: str, vector: Sequence[float], metadata: dict[str, Any], digest: str) -> WaitingVector:
    data, scale = quantize(vector)
    expires = int(time.time()) + KEPT_S
    sk = layout.waiting_vector_sk(key)
    return WaitingVector(pk, sk, vector=data, scale=scale, meta=metadata, text_digest=digest, expires=expires)


def _waiting(row: Any) -> Waiting:
    key = str(row.sk)[len(layout.WAITING_VECTORS) :]
    return Waiting(key, restore(bytes(row.vector), float(row.scale)), dict(row.meta or {}), str(row.text_digest))


def put(rows: Iterable[tuple[str, str, Sequence[float], dict[str, Any], str]]) -> int:
    """Write waiting vectors: (partition, item id, vector, metadata, text digest) each; one that is
    there already (an updated record's) is replaced. How many were written."""
    built = [_row(*row) for row in rows]

    def one(chunk: list[WaitingVector]) -> None:
        with WaitingVector.batch_write() as batch:  # retries unprocessed items itself
            for row in chunk:
                batch.save(row)

    for_each(one, in_batches(built, _BATCH))
    return len(built)


def of_user(pk: str, limit: int | None = None) -> list[Waiting]:
    """The waiting vectors of one partition (a user's layer), newest first (ids are time-ordered),
    at most ``limit`` (``READ_LIMIT`` by default): one strongly consistent ``Query`` (a write's
    vector is found from the next request)."""
    rows = WaitingVector.query(
        pk,
        WaitingVector.sk.startswith(layout.WAITING_VECTORS),
        consistent_read=True,
        scan_index_forward=False,
        limit=READ_LIMIT if limit is None else limit,
    )
    return [_waiting(row) for row in rows]


def get_many(keys: Sequence[tuple[str, str]]) -> dict[str, Waiting]:
    """The waiting vectors of these (partition, item id), by item id (strongly consistent)."""
    wanted = [(pk, layout.waiting_vector_sk(key)) for pk, key in dict.fromkeys(keys)]
    found = for_each(
        lambda chunk: list(WaitingVector.batch_get(chunk, consistent_read=True)), in_batches(wanted, _GET_BATCH)
    )
    return {w.key: w for rows in found for w in map(_waiting, rows)}


def delete(keys: Iterable[tuple[str, str]]) -> int:
    """Delete the waiting vectors of these (partition, item id) — one that is not there costs the
    same write unit, so callers name only items that may have one. How many were named."""
    doomed = [WaitingVector(pk, layout.waiting_vector_sk(key)) for pk, key in dict.fromkeys(keys)]

    def one(chunk: list[WaitingVector]) -> None:
        with WaitingVector.batch_write() as batch:
            for row in chunk:
                batch.delete(row)

    for_each(one, in_batches(doomed, _BATCH))
    return len(doomed)


def count(pk: str, limit: int | None = None, *, consistent: bool = True) -> int:
    """How many vectors wait in one partition, counted up to ``limit`` (``READ_LIMIT`` by default;
    one ``Query`` that answers a count, billed for the rows it counts: half as much when not
    ``consistent``, which may miss the latest writes)."""
    answer = WaitingVector._get_connection().query(
        pk,
        range_key_condition=WaitingVector.sk.startswith(layout.WAITING_VECTORS),
        limit=READ_LIMIT if limit is None else limit,
        select=COUNT,
        consistent_read=consistent,
    )
    return int(answer["Count"])


def delete_unchanged(rows: Iterable[tuple[str, str, str]]) -> int:
    """Delete the waiting vectors of these (partition, item id, text digest) that still wait for
    that text: one replaced meanwhile (an update's, for its new text) stays for its own message.
    One conditional ``DeleteItem`` each (a batch write takes no condition). How many went."""

    def one(row: tuple[str, str, str]) -> bool:
        pk, key, digest = row
        try:
            WaitingVector(pk, layout.waiting_vector_sk(key)).delete(condition=WaitingVector.text_digest == digest)
        except DeleteError as exc:
            if exc.cause_response_code != "ConditionalCheckFailedException":
                raise
            return False
        return True

    return sum(for_each(one, list(dict.fromkeys(rows))))


def keys_of(pk: str) -> list[str]:
    """The item ids of every waiting vector of one partition (a user's erasure)."""
    rows = WaitingVector.query(
        pk, WaitingVector.sk.startswith(layout.WAITING_VECTORS), consistent_read=True, attributes_to_get=["pk", "sk"]
    )
    return [str(row.sk)[len(layout.WAITING_VECTORS) :] for row in rows]
