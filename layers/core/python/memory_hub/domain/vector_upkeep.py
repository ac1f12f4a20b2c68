"""The upkeep of a memory's vectors away from requests: the embedding queue's consumer
(``consume``: the vectors of one memory's writes put together, those that waited in DynamoDB as
they are, the others embedded now; ``drain``: the waiting vectors' queue taken by a scheduled
run, in rounds that ``consume`` each) and the scheduled cleanup's pass (``backfill``: indexes of
retired epochs and old vector sizes dropped, vectors of gone items swept, items without a vector
of the current model embedded, oldest first). The rules they keep are ``meaning``'s."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from ..observability import logger
from ..settings import get_settings
from ..storage import counters, embed_queue, messages, records, vectors, waiting_vectors
from ..storage.counters import Where
from ..storage.messages import LAYER as L0
from ..storage.records import LAYER as L1
from ..storage.views import Message, Record
from .meaning import Outcome, Piece, embed_and_store, enabled, live_items, model, piece

BACKFILL_BATCH = 32
BACKFILL_BATCH_BUDGET_S = 20.0  # the cleanup is not waited for by anyone: a batch may take its time


class Named(NamedTuple):
    """One queued message: its id, the layer, the user, the item ids it names, whether their
    vectors may be waiting in DynamoDB (a batched write's) and the sealed copies of them it carries
    (as sent: opened only for the rows read, chunk by chunk)."""

    message_id: str
    layer: str
    user_id: str
    ids: list[str]
    waiting: bool = False
    carried: dict[str, Any] | None = None


CONSUME_CHUNK = vectors.PUT_BATCH  # ids embedded together at most (one PutVectors)
CONSUME_MIN_S = 5.0  # a chunk is not begun with less time than this left: its messages come again


DRAIN_ROUND = 1_000  # messages a drain's round gathers at most before it puts their vectors
GATHER_S = 30.0  # a round gathers for this long at most: a steady trickle of writes never holds it open
# A round's messages are done within this of its first receive, and a run (600 s) ends before the
# first message it received could come back to it (the queue's 660 s visibility timeout).
ROUND_BUDGET_S = 420.0
ROUND_MIN_S = 60.0  # a round is begun only with this much of the invocation left: its messages get done


@dataclass
class Drained:
    """What a drain did: messages received, those left to come again, rounds."""

    messages: int = 0
    again: int = 0
    rounds: int = 0


def body_of(message_id: str, raw: str) -> dict[str, Any] | None:
    """A queued message's body, or None (logged) for one that is not a JSON object: it is dropped."""
    try:
        body = json.loads(raw or "")
    except ValueError:
        body = None
    if not isinstance(body, dict):
        logger.warning("embedding message that is not a JSON object dropped", extra={"message_id": message_id})
        return None
    return body


def drain(remaining_s: Callable[[], float]) -> Drained:
    """Take the queue of waiting vectors (``VectorDrainMinutes``: VectorQueue, which no event source
    polls), as a scheduled run does: rounds of up to DRAIN_ROUND messages gathered for GATHER_S at most, each round's
    vectors put as ``consume`` puts a batch's (every message of one memory's group of users in that
    round shares a ``PutVectors``) and its handled messages deleted. A message to try again is not
    deleted: it comes back after the visibility timeout, to a later run. Another round follows only
    a full one (a backlog); a round ends short when a receive finds the queue empty or its
    gathering time is up, and none begins with less than ROUND_MIN_S left, so no message is
    received only to be left undone."""
    drained = Drained()
    full = True
    while full and remaining_s() >= ROUND_MIN_S:
        began = time.monotonic()
        received: list[embed_queue.Received] = []
        while len(received) < DRAIN_ROUND and time.monotonic() - began < GATHER_S:
            got = embed_queue.receive(DRAIN_ROUND - len(received))
            if not got:
                break
            received += got
        full = len(received) >= DRAIN_ROUND
        if not received:
            break
        bodies = [(m.message_id, body) for m in received if (body := body_of(m.message_id, m.body)) is not None]
        again = set(consume(bodies, _round_clock(remaining_s, began + ROUND_BUDGET_S)))
        embed_queue.delete([m for m in received if m.message_id not in again])
        drained.rounds += 1
        drained.messages += len(received)
        drained.again += sum(1 for m in received if m.message_id in again)
    return drained


def _round_clock(remaining_s: Callable[[], float], ends: float) -> Callable[[], float]:
    """The time left to a round: the invocation's, or what is left of the round's budget if less."""
    return lambda: min(remaining_s(), ends - time.monotonic())


def consume(bodies: Sequence[tuple[str, dict[str, Any]]], remaining_s: Callable[[], float]) -> list[str]:
    """Embed the items named by queued messages (``(message id, body)``) within the invocation's
    remaining time, the items of one memory together (one ``PutVectors`` for up to CONSUME_CHUNK
    of them); the message ids to deliver again (a retryable failure, or time ran out: a chunk is
    begun only with CONSUME_MIN_S left, so few are cut off halfway). A message of items since
    erased (or cleared) does nothing."""
    again: list[str] = []
    batches: dict[Where, list[Named]] = {}
    for message_id, body in bodies:
        try:
            where = Where(
                str(body["team_id"]),
                str(body["agent_id"]),
                int(body["epoch"]),
                str(body["memory_id"]),
                groups=int(body.get("groups", 1)),  # absent: queued before memories had groups
                bucket=str(body.get("bucket") or ""),  # absent: queued before memories were pinned
                words=body.get("words") is True,  # its messages' words go with their vectors
            )
            layer, user_id, ids = str(body["layer"]), str(body["user_id"]), [str(i) for i in body["ids"]]
        except (KeyError, TypeError, ValueError):
            logger.warning("malformed embedding message dropped", extra={"message_id": message_id})
            continue
        copies = body.get("vectors")
        carried = {str(i): copy for i, copy in copies.items()} if isinstance(copies, dict) else None
        named = Named(message_id, layer, user_id, ids, body.get("waiting") is True, carried)
        if enabled():
            batches.setdefault(where, []).append(named)
        elif named.waiting:  # meaning was turned off since: what waits is never put, nor kept
            waiting_vectors.delete((where.item_pk(layer, user_id), i) for i in ids)
    for where, of_memory in batches.items():
        # a group's messages side by side (in order), so a chunk's edge splits one group's put at most
        of_memory.sort(key=_by_group(where.groups))
        for chunk in _chunks(of_memory):
            if remaining_s() < CONSUME_MIN_S:
                again += [message.message_id for message in chunk]
                continue
            retry = _consume_chunk(where, chunk, remaining_s)
            again += [message.message_id for message in chunk if retry.intersection(message.ids)]
    return again


def _by_group(groups: int) -> Callable[[Named], int]:
    """A message's group of users (its vector index) in a memory of ``groups``; 0 for a count out of range."""

    def group(message: Named) -> int:
        try:
            return vectors.group_of(message.user_id, groups)
        except ValueError:
            return 0

    return group


def _chunks(named: list[Named]) -> list[list[Named]]:
    """Messages of one memory in order, gathered while they name CONSUME_CHUNK ids at most (a
    message naming more is a chunk of its own)."""
    chunks: list[list[Named]] = []
    size = 0
    for message in named:
        if not chunks or size + len(message.ids) > CONSUME_CHUNK:
            chunks.append([])
            size = 0
        chunks[-1].append(message)
        size += len(message.ids)
    return chunks


def _consume_chunk(where: Where, chunk: list[Named], remaining_s: Callable[[], float]) -> set[str]:
    """Put one chunk's live items' vectors — those that waited as they are (of the current model
    and text: a row's copy that a message carries sealed with its key, or a row of before's 8
    bits), the others embedded now — and delete what waited, unless an update replaced it
    meanwhile: the ids to try again. A vector put for a text its item no longer holds (an update
    overtook the put) is deleted again and its message comes again: the update's own message may
    have been taken before, its vector replaced by this put."""
    # Items of a cleared epoch are gone (or going): nothing of them is read back below, and a
    # vector put meanwhile is reaped at once or its index dropped by the purge or the cleanup.
    try:
        wanted = _wanted(chunk)
        flagged = {i for message in chunk if message.waiting for i in message.ids}
        keys = [(where.item_pk(layer, user), i) for (layer, user), ids in wanted.items() for i in ids if i in flagged]
        copies: dict[str, list[Any]] = {}  # every copy of an item the chunk carries (an update's too)
        for message in chunk:
            for i, copy in (message.carried or {}).items():
                copies.setdefault(i, []).append(copy)
        rows = waiting_vectors.get_many(keys) if keys else {}
        waited = {i: waiting_vectors.opened(row, copies.get(i, ())) or row for i, row in rows.items()}
        pieces: list[Piece] = []
        for (layer, user_id), ids in wanted.items():
            live = live_items(where, layer, user_id, ids)
            pieces += [piece(live[i]) for i in ids if i in live]
        described = model()
        usable = {
            p.id: waited[p.id].vector
            for p in pieces
            if p.id in waited
            and waited[p.id].exact  # a row's 4-bit copy is the search's, never S3 Vectors'
            and waited[p.id].metadata.get("model") == described
            and waited[p.id].text_digest == waiting_vectors.text_digest(p.text)
        }
        retry = set(embed_and_store(where, pieces, remaining_s(), Outcome(), waited=usable)) if pieces else set()
        # put, or its item is gone: what waited goes, if it still waits for the text read above
        done = [(pk, i, waited[i].text_digest) for pk, i in keys if i in waited and i not in retry]
        if done:
            waiting_vectors.delete_unchanged(done)
        return retry
    except Exception:
        logger.exception("queued embeddings failed; delivered again")
        return {i for message in chunk for i in message.ids}


def _wanted(named: list[Named]) -> dict[tuple[str, str], list[str]]:
    """The ids the messages of one memory name, by (layer, user), each once, in order."""
    wanted: dict[tuple[str, str], dict[str, None]] = {}
    for message in named:
        wanted.setdefault((message.layer, message.user_id), {}).update(dict.fromkeys(message.ids))
    return {key: list(ids) for key, ids in wanted.items()}


def _current(where: Where, report: Backfill) -> list[vectors.Index]:
    """The memory's indexes of its current epoch, vector size and groups; every other index of an
    epoch up to the current one (a retired epoch, an old vector size) is dropped on the way."""
    bucket = where.vector_bucket
    dimensions = get_settings().embedding_dimensions
    current: list[vectors.Index] = []
    for name in vectors.indexes(bucket, vectors.prefix(where.team_id, where.agent_id)):
        parsed = vectors.parse_name(name)
        if parsed is None:
            continue
        if (parsed.epoch, parsed.dimensions, parsed.groups) == (where.epoch, dimensions, where.groups):
            current.append(vectors.Index(bucket, name))
        elif parsed.epoch <= where.epoch and vectors.drop(vectors.Index(bucket, name)):
            report.indexes_dropped += 1
    report.indexes_dropped += _strays(where)
    return current


def _strays(where: Where) -> int:
    """Drop what a memory pinned elsewhere has in the bucket the rule of before gives it: only a
    release of before puts vectors there (its functions, for the minutes a deploy updates them one
    by one, or after a rollback), and nothing else reads or erases them. The backfill embeds those
    items again where the memory lives. How many indexes went."""
    legacy = vectors.home(where.team_id, where.agent_id, None)
    if not where.bucket or where.bucket == legacy:
        return 0
    stray = vectors.indexes(legacy, vectors.prefix(where.team_id, where.agent_id))
    return sum(1 for name in stray if vectors.drop(vectors.Index(legacy, name)))


def _sweep(home: dict[str, vectors.Index], live: set[str]) -> int:
    """Delete the vectors (``home``: key → its index) whose items are not ``live``: how many."""
    orphans: dict[vectors.Index, list[str]] = {}
    for key, index in home.items():
        if key not in live:
            orphans.setdefault(index, []).append(key)
    for index, keys in orphans.items():
        vectors.delete(index, keys)
    return sum(len(keys) for keys in orphans.values())


@dataclass
class Backfill:
    embedded: int = 0
    swept: int = 0
    indexes_dropped: int = 0
    remaining: int = 0


def backfill(where: Where, deadline_passed: Callable[[], bool]) -> Backfill:
    """The cleanup's pass over one memory: drop indexes of retired epochs and old vector sizes,
    delete vectors whose items are gone, and embed items without a vector of the current model,
    oldest first, until the deadline. A memory with exactly as many vectors of the current model as
    items (its exact counters) is left after one ListVectors pass: its items are not read."""
    report = Backfill()
    settings = get_settings()
    if not settings.vector_buckets:
        return report
    current = _current(where, report)
    stored: dict[str, dict[str, Any]] = {}
    home: dict[str, vectors.Index] = {}
    for index in current:
        for key, meta in vectors.keys(index):
            stored[key], home[key] = meta, index
    if not settings.embeddings and not stored:
        return report  # meaning is off and no vector is left to sweep: nothing to read
    described = model()
    totals = counters.layer_totals(where)
    if len(stored) == totals.get(L0, 0) + totals.get(L1, 0) and (
        not settings.embeddings or all(meta.get("model") == described for meta in stored.values())
    ):
        return report  # as many vectors as items, all of the current model: nothing to read (the usual day)
    items: list[Message | Record] = []
    for user_id in counters.users(where):
        items += messages.of_user(where, user_id)
        items += records.of_user(where, user_id)
    live = {i.id for i in items}
    report.swept = _sweep(home, live)
    if not settings.embeddings:
        return report
    shown = messages.shown(where, items)  # an import's items wait for its commit (it embeds them then)
    missing = sorted((piece(i) for i in shown if stored.get(i.id, {}).get("model") != described), key=lambda p: p.at)
    for start in range(0, len(missing), BACKFILL_BATCH):
        if deadline_passed():
            report.remaining = len(missing) - start
            break
        outcome = Outcome()
        embed_and_store(where, missing[start : start + BACKFILL_BATCH], BACKFILL_BATCH_BUDGET_S, outcome)
        report.embedded += outcome.embedded
    return report
