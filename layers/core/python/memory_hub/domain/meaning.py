"""Meaning: an embedding per L0 message (its ``content``) and L1 record (its ``background`` and
``content``), kept as a vector keyed by the item's id in the memory's own vector index of its
user's group (``vectors``: a memory's users are spread over ``Where.groups`` indexes).

- Writing never depends on meaning: ``embed_after_write`` embeds within the request's time budget
  and queues the rest (by id) — or, with batched vector writes (``VectorWrites: Batched``), queues
  everything, and the queue's consumer puts the vectors of one memory together (``consume``: one
  ``PutVectors`` for many writes, each billed at least 128 KB). Bedrock throttling or failing
  never fails or loses a write — the item is found by words at once, its embedding is retried from
  the queue and, failing that, backfilled by the scheduled cleanup, oldest first. A 4xx other than
  throttling is final: logged (without content) and counted, never retried.
- A vector written after its item was erased is removed again: every writer of vectors reads its
  items back after the put and deletes the vectors of those that are gone.
- Every erasure removes the vectors of what it erased before it answers (``erase``); a clear or a
  memory delete drops its old epoch's indexes whole (``drop_epoch``).
- Vectors record the model id and vector size; a search uses only vectors of the current model,
  and the cleanup re-embeds the others (also after embeddings go from Disabled to Enabled).
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future, wait
from dataclasses import dataclass
from typing import Any

from ..observability import count_event, logger
from ..settings import get_settings
from ..storage import counters, embed_queue, embeddings, messages, records, vectors
from ..storage.concurrency import parallel, submit
from ..storage.counters import Where
from ..storage.messages import NewMessage
from ..storage.views import Message, Record
from .retrieval import Meant, Place

L0 = "L0"
L1 = "L1"
BACKFILL_BATCH = 32
BACKFILL_BATCH_BUDGET_S = 20.0  # the cleanup is not waited for by anyone: a batch may take its time
QUERY_BUDGET_S = 3.0


def enabled() -> bool:
    settings = get_settings()
    return bool(settings.embeddings and settings.vector_buckets)


def model() -> str:
    settings = get_settings()
    return embeddings.describe(settings.embedding_model, settings.embedding_dimensions)


def text_of(item: Message | Record) -> str:
    """The text that is embedded: L0 ``content``; L1 ``background`` and ``content``."""
    if records.is_record(item):
        background = item.background or ""
        return f"{background}\n{item.content}" if background else item.content
    return item.content


@dataclass(frozen=True)
class Piece:
    """One item as meaning sees it: ids, time and the text to embed."""

    id: str
    layer: str
    user_id: str
    session_id: str | None
    task_id: str | None
    type: str | None
    at: int
    text: str


def piece(item: Message | Record) -> Piece:
    if records.is_record(item):
        return Piece(
            item.id, L1, item.user_id, item.session_id, item.task_id, item.type, int(item.updated_at), text_of(item)
        )
    return Piece(item.id, L0, item.user_id, item.session_id, item.task_id, None, int(item.timestamp), item.content)


def new_messages(user_id: str, session_id: str | None, task_id: str | None, new: Sequence[NewMessage]) -> list[Piece]:
    """Pieces of messages just added (as ``messages.add`` stored them)."""
    return [Piece(m.id, L0, user_id, session_id, task_id, None, int(m.timestamp), m.content) for m in new]


def _index(where: Where, user_id: str) -> vectors.Index:
    """The index of the user's vectors of the current size."""
    dims = get_settings().embedding_dimensions
    return vectors.index_of(where.team_id, where.agent_id, where.epoch, dims, user_id, where.groups)


def _vector(item: Piece, data: list[float], described: str) -> vectors.Vector:
    return vectors.Vector(
        item.id,
        data,
        vectors.metadata(
            layer=item.layer,
            user_id=item.user_id,
            session_id=item.session_id,
            task_id=item.task_id,
            type_=item.type,
            at_ms=item.at,
            model=described,
        ),
    )


@dataclass
class Outcome:
    """What happened to the items of one call (counts only)."""

    embedded: int = 0
    queued: int = 0
    refused: int = 0
    reaped: int = 0


def _groups(items: Iterable[Piece]) -> dict[tuple[str, str], list[Piece]]:
    grouped: dict[tuple[str, str], list[Piece]] = {}
    for item in items:
        grouped.setdefault((item.layer, item.user_id), []).append(item)
    return grouped


def _live(where: Where, layer: str, user_id: str, ids: list[str]) -> dict[str, Message | Record]:
    found: dict[str, Any] = (
        messages.get_many(where, user_id, ids) if layer == L0 else records.get_many(where, user_id, ids)
    )
    return found


Ahead = Future[list[embeddings.Outcome]]


def embed_ahead(items: Sequence[Piece], budget_s: float | None = None) -> Ahead | None:
    """Start the model calls for items about to be written, so that they run beside the write
    (the items' ids and texts are known before it); ``embed_after_write`` takes the result. None
    when meaning is off. Whoever starts it settles it (``settle``) if the write fails."""
    if not items or not enabled() or get_settings().vectors_batched:
        return None
    settings = get_settings()
    budget = settings.embed_budget_s if budget_s is None else budget_s
    texts = [i.text for i in items]
    return submit(embeddings.embed_many, settings.embedding_model, settings.embedding_dimensions, texts, budget)


def settle(ahead: Ahead | None) -> None:
    """Wait for model calls started ahead of a write that failed: no call outlives its request."""
    if ahead is not None:
        wait([ahead])


def _embed(
    where: Where, items: Sequence[Piece], budget_s: float, outcome: Outcome, ahead: Ahead | None = None
) -> list[str]:
    """Embed (or take what ``ahead`` embedded) and store vectors for ``items``: the ids worth
    retrying later."""
    settings = get_settings()
    described = model()
    results = (
        ahead.result()
        if ahead is not None
        else embeddings.embed_many(
            settings.embedding_model, settings.embedding_dimensions, [i.text for i in items], budget_s
        )
    )
    ready = [_vector(i, r, described) for i, r in zip(items, results, strict=True) if isinstance(r, list)]
    retry = [i.id for i, r in zip(items, results, strict=True) if r == embeddings.RETRY]
    refused = sum(1 for r in results if r == embeddings.FINAL)
    if refused:
        outcome.refused += refused
        logger.warning("embedding refused by the model (final, not retried)", extra={"items": refused})
        count_event("EmbeddingsRefused", refused)
    users = {i.id: i.user_id for i in items}
    by_index: dict[vectors.Index, list[vectors.Vector]] = {}
    for vector in ready:  # a user's vectors go to the index of the user's group
        by_index.setdefault(_index(where, users[vector.key]), []).append(vector)

    def put(index: vectors.Index, chunk: list[vectors.Vector]) -> tuple[list[str], int]:
        """(the keys to retry, the vectors reaped) of one index's put."""
        try:
            vectors.put(index, settings.embedding_dimensions, chunk)
        except Exception:
            logger.exception("vectors not written; queued for later")
            return [v.key for v in chunk], 0
        return [], _reap(where, index, items, [v.key for v in chunk])

    puts = parallel(*[lambda i=index, c=chunk: put(i, c) for index, chunk in by_index.items()]) if by_index else []
    for (failed, reaped), chunk in zip(puts, by_index.values(), strict=True):
        retry += failed
        outcome.embedded += 0 if failed else len(chunk)
        outcome.reaped += reaped
    return retry


def _reap(where: Where, index: vectors.Index, items: Sequence[Piece], keys: list[str]) -> int:
    """Delete the vectors just written whose items are gone meanwhile (an erasure overtook us)."""
    gone: list[str] = []
    wanted = set(keys)
    for (layer, user_id), group in _groups(i for i in items if i.id in wanted).items():
        ids = [i.id for i in group]
        live = _live(where, layer, user_id, ids)
        gone += [i for i in ids if i not in live]
    if gone:
        vectors.delete(index, gone)
    return len(gone)


def _queue(where: Where, layer: str, user_id: str, ids: list[str]) -> bool:
    try:
        for start in range(0, len(ids), embed_queue.MAX_IDS):
            body = {
                "team_id": where.team_id,
                "agent_id": where.agent_id,
                "epoch": int(where.epoch),
                "memory_id": where.memory_id,
                "groups": where.groups,
                "layer": layer,
                "user_id": user_id,
                "ids": ids[start : start + embed_queue.MAX_IDS],
            }
            if not embed_queue.send(body):
                return False
        count_event("EmbeddingsQueued", len(ids))
        return True
    except Exception:
        logger.exception("embeddings not queued; the scheduled cleanup backfills them")
        return False


def embed_after_write(
    where: Where, items: Sequence[Piece], budget_s: float | None = None, ahead: Ahead | None = None
) -> Outcome:
    """Give just-written items their vectors within ``budget_s`` (the settings' budget by default)
    and queue the rest; ``ahead``: the model calls ``embed_ahead`` started beside the write. Never
    raises: a write's answer never depends on meaning."""
    outcome = Outcome()
    if not items or not enabled():
        settle(ahead)
        return outcome
    budget = get_settings().embed_budget_s if budget_s is None else budget_s
    if get_settings().vectors_batched:
        retry = [i.id for i in items]  # the queue's consumer embeds them with others of the memory
    else:
        try:
            retry = _embed(where, items, budget, outcome, ahead)
        except Exception:
            logger.exception("embedding after a write failed; queued")
            retry = [i.id for i in items]
    if retry:
        wanted = set(retry)
        for (layer, user_id), group in _groups(i for i in items if i.id in wanted).items():
            ids = [i.id for i in group]
            if _queue(where, layer, user_id, ids):
                outcome.queued += len(ids)
    return outcome


def text_changed(before: Record | None, content: str, background: str) -> bool:
    """Whether an update changes the embedded text of a record."""
    return before is None or text_of(before) != (f"{background}\n{content}" if background else content)


def after_update(where: Where, after: Record | None) -> None:
    """An L1 update that changed the embedded text: re-embed; should that fail, the old vector is
    removed now (the old text is never found by meaning) and the new one queued. A record deleted
    meanwhile has nothing to embed (its delete erased its vector)."""
    if after is None:
        return
    if not enabled():
        erase(where, [(after.user_id, after.id)])
        return
    outcome = Outcome()
    if get_settings().vectors_batched:
        retry = [after.id]  # the old vector goes now, the new one comes from the queue
    else:
        try:
            retry = _embed(where, [piece(after)], get_settings().embed_budget_s, outcome)
        except Exception:
            logger.exception("re-embedding an updated record failed")
            retry = [after.id]
    if outcome.embedded:
        return
    erase(where, [(after.user_id, after.id)])
    if retry:
        _queue(where, L1, after.user_id, [after.id])


def erase(where: Where, erased: Iterable[tuple[str, str]]) -> int:
    """Remove the vectors of erased items (``(user id, item id)``) from every index of the epoch
    that holds their users (any vector size: the names say whose they are). Never raises (the
    items are gone already; a leftover vector is reaped by the cleanup's sweep). The ids it asked
    indexes to delete."""
    by_user: dict[str, list[str]] = {}
    for user_id, item_id in erased:
        by_user.setdefault(user_id, []).append(item_id)
    if not by_user or not get_settings().vector_buckets:
        return 0
    try:
        bucket = vectors.bucket_of(where.team_id, where.agent_id)
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


def drop_epoch(team_id: str, agent_id: str, epoch: int) -> int:
    """Drop every index of a retired content epoch (a clear, a memory delete): the indexes dropped."""
    return vectors.drop_epoch(team_id, agent_id, epoch)


def semantic(
    where: Where,
    layer: str,
    user_id: str,
    text: str,
    limit: int,
    *,
    session_id: str | None = None,
    task_id: str | None = None,
    type_: str | None = None,
    with_places: bool = False,
) -> Meant | None:
    """The meaning half of a search: ids best first with their cosine similarity, from one vector
    query over this memory's current index of the user's group, hard-filtered to the user (and
    the task, the session for L0 and the type for L1 where the request names one) and to the
    current model; with ``with_places``, also each item's session and time (from the vectors'
    metadata: the same call).
    None when the query cannot be embedded or the vector query fails: the caller answers by words."""
    if not enabled():
        return None
    settings = get_settings()
    started = time.monotonic()
    vector = _query_vector(settings.embedding_model, settings.embedding_dimensions, text)
    if not isinstance(vector, list):
        count_event("QueryEmbeddingFailures", 1)
        return None
    where_filter = vectors.search_filter(
        layer=layer,
        user_id=user_id,
        model=model(),
        session_id=session_id if layer == L0 else None,
        task_id=task_id,
        type_=type_ if layer == L1 else None,
    )
    top_k = min(vectors.MAX_TOP_K, max(20, 4 * limit))
    try:
        hits = vectors.query(_index(where, user_id), vector, top_k, where_filter, with_metadata=with_places)
    except Exception:
        logger.exception("vector query failed; answering by words")
        count_event("VectorQueryFailures", 1)
        return None
    logger.debug("semantic half", extra={"hits": len(hits), "ms": int((time.monotonic() - started) * 1000)})
    return Meant([(hit.key, 1.0 - hit.distance) for hit in hits], _places(hits) if with_places else {})


_QUERIES: OrderedDict[tuple[str, int, str], list[float]] = OrderedDict()
_QUERIES_KEPT = 64
_queries_lock = threading.Lock()


def _query_vector(model_id: str, dimensions: int, text: str) -> Any:
    """The query's embedding — computed once for the two halves of a conversation search (its
    turns and the records that lead to them) and for a query asked again soon; a failure is not kept."""
    key = (model_id, dimensions, text)
    with _queries_lock:
        found = _QUERIES.get(key)
    if found is not None:
        return found
    [vector] = embeddings.embed_many(model_id, dimensions, [text], QUERY_BUDGET_S)
    if isinstance(vector, list):
        with _queries_lock:
            _QUERIES[key] = vector
            while len(_QUERIES) > _QUERIES_KEPT:
                _QUERIES.popitem(last=False)
    return vector


def _places(hits: Sequence[vectors.Match]) -> dict[str, Place]:
    """Where each found message was said, from its vector's metadata (none for an item without a
    session)."""
    places: dict[str, Place] = {}
    for hit in hits:
        session, at = hit.metadata.get("session"), hit.metadata.get("at")
        if isinstance(session, str) and session != vectors.NONE and isinstance(at, int | float):
            places[hit.key] = (session, int(at))
    return places


# --- the queue's consumer and the cleanup's backfill ---------------------------------------------


Named = tuple[str, str, str, list[str]]
"""One queued message: its id, the layer, the user and the item ids it names."""

CONSUME_CHUNK = vectors.PUT_BATCH  # ids embedded together at most (one PutVectors)
CONSUME_MIN_S = 5.0  # a chunk is not begun with less time than this left: its messages come again


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
            )
            layer, user_id, ids = str(body["layer"]), str(body["user_id"]), [str(i) for i in body["ids"]]
        except (KeyError, TypeError, ValueError):
            logger.warning("malformed embedding message dropped", extra={"message_id": message_id})
            continue
        if enabled():
            batches.setdefault(where, []).append((message_id, layer, user_id, ids))
    for where, named in batches.items():
        for chunk in _chunks(named):
            if remaining_s() < CONSUME_MIN_S:
                again += [message_id for message_id, _, _, _ in chunk]
                continue
            retry = _consume_chunk(where, chunk, remaining_s)
            again += [message_id for message_id, _, _, ids in chunk if retry.intersection(ids)]
    return again


def _chunks(named: list[Named]) -> list[list[Named]]:
    """Messages of one memory in order, gathered while they name CONSUME_CHUNK ids at most (a
    message naming more is a chunk of its own)."""
    chunks: list[list[Named]] = []
    size = 0
    for message in named:
        if not chunks or size + len(message[3]) > CONSUME_CHUNK:
            chunks.append([])
            size = 0
        chunks[-1].append(message)
        size += len(message[3])
    return chunks


def _consume_chunk(where: Where, chunk: list[Named], remaining_s: Callable[[], float]) -> set[str]:
    """Embed one chunk's live items: the ids to try again."""
    # Items of a cleared epoch are gone (or going): nothing of them is read back below, and a
    # vector put meanwhile is reaped at once or its index dropped by the purge or the cleanup.
    try:
        pieces: list[Piece] = []
        for (layer, user_id), ids in _wanted(chunk).items():
            live = _live(where, layer, user_id, ids)
            pieces += [piece(live[i]) for i in ids if i in live]
        return set(_embed(where, pieces, remaining_s(), Outcome())) if pieces else set()
    except Exception:
        logger.exception("queued embeddings failed; delivered again")
        return {i for _, _, _, ids in chunk for i in ids}


def _wanted(named: list[Named]) -> dict[tuple[str, str], list[str]]:
    """The ids the messages of one memory name, by (layer, user), each once, in order."""
    wanted: dict[tuple[str, str], dict[str, None]] = {}
    for _, layer, user_id, ids in named:
        wanted.setdefault((layer, user_id), {}).update(dict.fromkeys(ids))
    return {key: list(ids) for key, ids in wanted.items()}


def _current(where: Where, report: Backfill) -> list[vectors.Index]:
    """The memory's indexes of its current epoch, vector size and groups; every other index of an
    epoch up to the current one (a retired epoch, an old vector size) is dropped on the way."""
    bucket = vectors.bucket_of(where.team_id, where.agent_id)
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
    return current


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
        _embed(where, missing[start : start + BACKFILL_BATCH], BACKFILL_BATCH_BUDGET_S, outcome)
        report.embedded += outcome.embedded
    return report
