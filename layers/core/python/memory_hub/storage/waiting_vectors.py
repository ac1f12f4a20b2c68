"""Vectors waiting for their ``PutVectors`` (``VectorWrites: Batched``), kept in DynamoDB beside
their items so that a search finds a new item by meaning from the next request, as with immediate
writes, while the queue's consumer gathers the vectors of many writes into one ``PutVectors`` (each
billed at least 128 KB).

A vector waits in two copies, each for one reader:

- *the search's*, one item ``wv␟<item id>`` in its item's partition (``models.WaitingVector``): 4
  bits a component with its step (1,024 components: 512 bytes), the filterable metadata S3 Vectors
  will hold but what the partition says (layer, user), a digest of the embedded text and a random
  key of 16 bytes (``secret``) — under 1 KB, so one write unit to put and one to delete (8 bits a
  component and the whole metadata were ~1.4 KB: two each);
- *the consumer's*, in the queue's message that names the item (``sealed``): 8 bits a component,
  XORed with a SHAKE-256 stream of the row's key, with its scale and a check of the key (~1.4 KB of
  the message's 256 KB; ``per_message``). That is what S3 Vectors gets, once the consumer has read
  the row and opened the copy with its key (``opened``). Erasing the row erases the key: a copy
  left in a queue (for a day, or two weeks in the dead-letter queue) is then noise to anyone — the
  erasure of an item reaches it with the row, and a message holds no content nor anything that can
  be read back into it.

A search reads its user's waiting vectors of one layer newest first, at most ``READ_LIMIT`` (one
strongly consistent ``Query``), and a write never lets a partition hold more (``count``: past it,
the write puts its vectors at once; counted again after its rows land, one over it because writes
raced has the writer put its own at once and delete their rows); the consumer reads the rows its
messages name, puts each one's copy (a message's sealed copy for that row's key, or a row of
before's 8 bits) and deletes the row unless an update has replaced it meanwhile
(``delete_unchanged``); a row with no copy to open (its message is of another row, or carries
none) has its item embedded again. Rows are the item's personal data like its vector in S3
Vectors: an erasure of the item deletes its waiting vector before it answers, a user's erasure
every one in their partitions, and a clear's or memory delete's purge takes them with the rest of
the epoch's partitions. One its consumer never reached (a message in the dead-letter queue)
expires after ``KEPT_S`` (ItemsTable's TTL). Rows of before (8 bits, the whole metadata, no key)
are read as they are.

8 bits a component: a component's error is at most half a step (the largest component ÷ 254), so
the copy is within √n × largest ÷ 254 of the vector (n components); for a vector whose length is
spread over its components, as an embedding's is, the copy's cosine with it stays above 0.9999.
4 bits: 16 levels at the midpoints of steps of 6 × the components' root mean square ÷ 16 (a
component past ±3 root mean squares takes the end level); a 1,024-component random unit vector's
copy keeps a cosine above 0.99 with it (tested) — a search's score off by ~0.003 while it waits
(an hour with the default drain)."""

from __future__ import annotations

import base64
import hashlib
import math
import operator
import os
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
MESSAGE_BUDGET = 192 * 1024  # bytes of sealed copies one queue message carries at most (SQS takes 256 KiB)
KEY_BYTES = 16
KEPT_S = 2 * 86_400  # a waiting vector's TTL: far past any batching window and the queue's retries
_BATCH = 25  # BatchWriteItem's limit
_GET_BATCH = 100  # BatchGetItem's limit
_STEPS = 127
_CLIP = 3.0  # a 4-bit copy spans this many root mean squares of the components either side of zero
_LEVELS = 16
_HIGH = bytes(b >> 4 for b in range(256))
_LOW = bytes(b & 15 for b in range(256))
_KEPT = ("session", "task", "type", "at", "model")  # the metadata a row keeps (its partition says the rest)


@dataclass(frozen=True)
class Waiting:
    """One waiting vector as read back: its item's id, its components, its metadata and the digest
    of the text it embeds."""

    key: str
    vector: list[float]
    metadata: dict[str, Any]
    text_digest: str
    exact: bool = True  # 8 bits a component: what S3 Vectors may get (a 4-bit copy is the search's only)
    secret: bytes | None = None  # a 4-bit row's key, which opens its sealed copy (``opened``)


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


def pack(vector: Sequence[float]) -> tuple[bytes, float]:
    """The components in 4 bits each, two a byte, and the step that gives them back (``unpack``)."""
    n = len(vector)
    rms = math.sqrt(sum(x * x for x in vector) / n) if n else 0.0
    step = 2 * _CLIP * rms / _LEVELS if rms > 0 else 1.0
    middle = _LEVELS // 2
    codes = [min(_LEVELS - 1, max(0, math.floor(x / step) + middle)) for x in vector] + [middle] * (n % 2)
    return bytes((codes[i] << 4) | codes[i + 1] for i in range(0, len(codes), 2)), step


def unpack(data: bytes, step: float, n: int) -> list[float]:
    """The ``n`` components ``pack`` gave ``data`` and ``step`` for: each its step's midpoint."""
    codes = [0] * (2 * len(data))
    codes[0::2] = data.translate(_HIGH)
    codes[1::2] = data.translate(_LOW)
    middle = _LEVELS / 2 - 0.5
    return [(code - middle) * step for code in codes[:n]]


def per_message(dimensions: int) -> int:
    """Sealed copies of vectors of ``dimensions`` one queue message carries at most."""
    return max(1, MESSAGE_BUDGET // (4 * (dimensions + 2) // 3 + 64))


def _check(secret: bytes) -> str:
    """What names a row's key in a message, and tells nothing of it."""
    return hashlib.sha256(secret).hexdigest()[:12]


def _xor(data: bytes, secret: bytes) -> bytes:
    stream = hashlib.shake_256(secret).digest(len(data))
    return (int.from_bytes(data, "big") ^ int.from_bytes(stream, "big")).to_bytes(len(data), "big")


def _sealed(vector: Sequence[float], secret: bytes) -> list[Any]:
    """The consumer's copy of a vector, for the queue's message: 8 bits a component sealed with the
    row's key (base64), the scale, the key's check."""
    data, scale = quantize(vector)
    return [base64.b64encode(_xor(data, secret)).decode("ascii"), scale, _check(secret)]


def opened(row: Waiting, copies: Iterable[Any]) -> Waiting | None:
    """The 8-bit vector one of ``copies`` (sealed for some rows of the item) holds for ``row``, as
    an exact waiting vector with the row's metadata and digest; None when none is sealed with the
    row's key (another row's, a malformed one) or the row has none."""
    if row.secret is None:
        return None
    mine = _check(row.secret)
    for copy in copies:
        try:
            data, scale, check = copy
            if check != mine:
                continue
            vector = restore(_xor(base64.b64decode(data, validate=True), row.secret), float(scale))
        except (TypeError, ValueError):
            continue
        if len(vector) == len(row.vector):
            return Waiting(row.key, vector, row.metadata, row.text_digest)
    return None


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    if len(a) != len(b):
        return 0.0  # another vector size (the setting changed): never a match
    norms = math.sqrt(sum(map(operator.mul, a, a))) * math.sqrt(sum(map(operator.mul, b, b)))
    return sum(map(operator.mul, a, b)) / norms if norms else 0.0


def _row(
    pk: str, key: str, vector: Sequence[float], metadata: dict[str, Any], digest: str, secret: bytes
) -> WaitingVector:
    data, step = pack(vector)
    kept = [metadata.get(name) for name in _KEPT] + [len(vector)]
    expires = int(time.time()) + KEPT_S
    sk = layout.waiting_vector_sk(key)
    return WaitingVector(pk, sk, packed=data, secret=secret, scale=step, meta=kept, text_digest=digest, expires=expires)


def _waiting(row: Any) -> Waiting:
    key = str(row.sk)[len(layout.WAITING_VECTORS) :]
    if row.packed is None:  # a row of before: 8 bits, the whole metadata
        return Waiting(key, restore(bytes(row.vector), float(row.scale)), dict(row.meta or {}), str(row.text_digest))
    *kept, n = row.meta
    pk = str(row.pk)
    metadata = {"layer": layout.layer_of(pk), "user": layout.user_digest_of(pk), **dict(zip(_KEPT, kept, strict=True))}
    metadata["at"] = int(metadata["at"] or 0)
    vector = unpack(bytes(row.packed), float(row.scale), int(n))
    secret = bytes(row.secret) if row.secret is not None else None
    return Waiting(key, vector, metadata, str(row.text_digest), exact=False, secret=secret)


def put(rows: Iterable[tuple[str, str, Sequence[float], dict[str, Any], str]]) -> dict[str, list[Any]]:
    """Write waiting vectors: (partition, item id, vector, metadata, text digest) each, each row
    with a key of its own; one that is there already (an updated record's) is replaced. The
    consumer's copies, sealed with those keys, by item id (for the queue's messages)."""
    given = list(rows)
    secrets = [os.urandom(KEY_BYTES) for _ in given]
    built = [_row(*row, secret) for row, secret in zip(given, secrets, strict=True)]

    def one(chunk: list[WaitingVector]) -> None:
        with WaitingVector.batch_write() as batch:  # retries unprocessed items itself
            for row in chunk:
                batch.save(row)

    for_each(one, in_batches(built, _BATCH))
    return {key: _sealed(vector, secret) for (_, key, vector, _, _), secret in zip(given, secrets, strict=True)}


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
