"""Meaning: an embedding per L0 message (its ``content``) and L1 record (its ``background`` and
``content``), kept as a vector keyed by the item's id in the memory's own vector index of its
user's group (``vectors``: a memory's users are spread over ``Where.groups`` indexes).

- Writing never depends on meaning: ``embed_after_write`` embeds within the request's time budget
  and queues the rest (by id). With batched vector writes (``VectorWrites: Batched``) the vectors
  it made wait in DynamoDB beside their items (``waiting_vectors``), where a search finds them from
  the next request, and everything is queued: the queue's consumer puts the vectors of one memory
  together (``consume``: one ``PutVectors`` for many writes, each billed at least 128 KB) and
  deletes what waited. Bedrock throttling or failing
  never fails or loses a write — the item is found by words at once, its embedding is retried from
  the queue and, failing that, backfilled by the scheduled cleanup, oldest first. A 4xx other than
  throttling is final: logged (without content) and counted, never retried.
- A vector written after its item was erased is removed again: every writer of vectors reads its
  items back after the put and deletes the vectors of those that are gone. One put for a text its
  item no longer holds (an update committed meanwhile, and its own vector may have been put before
  this one, which then replaced it) is deleted the same way and its item embedded again from its
  text of then: queued, or its queued message delivered again.
- Every erasure removes the vectors of what it erased before it answers (``vector_erasure``:
  waiting ones too); a clear's or a memory delete's purge (``purge``) drops its old epoch's indexes
  whole and takes the waiting ones with the epoch's partitions.
- Vectors record the model id and vector size; a search uses only vectors of the current model,
  and the cleanup re-embeds the others (also after embeddings go from Disabled to Enabled).
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from concurrent.futures import Future, wait
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from ..analysis import term_counts
from ..observability import count_event, logger
from ..settings import get_settings
from ..storage import embed_queue, embeddings, messages, records, vectors, waiting_vectors
from ..storage.concurrency import for_each, parallel, submit
from ..storage.counters import Where
from ..storage.messages import LAYER as L0
from ..storage.messages import NewMessage
from ..storage.records import LAYER as L1
from ..storage.views import Message, Record
from . import vector_erasure
from .retrieval import Meant, Place

QUERY_BUDGET_S = 3.0


def enabled() -> bool:
    settings = get_settings()
    return bool(settings.embeddings and settings.vector_buckets)


def model() -> str:
    settings = get_settings()
    return embeddings.describe(settings.embedding_model, settings.embedding_dimensions)


def text_of(item: Message | Record) -> str:
    """The text that is embedded: L0 ``content``; L1 ``background`` and ``content``."""
    return record_text(item.content, item.background or "") if records.is_record(item) else item.content


def record_text(content: str, background: str) -> str:  # a record's embedded text
    return f"{background}\n{content}" if background else content


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


def index_for(where: Where, user_id: str) -> vectors.Index:
    """The index of the user's vectors of the current size."""
    dims = get_settings().embedding_dimensions
    return vectors.index_of(
        where.vector_bucket, where.team_id, where.agent_id, where.epoch, dims, user_id, where.groups, where.words
    )


def _vector(item: Piece, data: list[float], described: str, words: bool = False) -> vectors.Vector:
    """An item's vector; ``words``: a memory whose words go with their vectors (they carry its terms)."""
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
            terms=term_counts(item.text) if words else None,
        ),
    )


@dataclass
class Outcome:
    """What happened to the items of one call: counts, and the ids whose put an update overtook."""

    embedded: int = 0
    queued: int = 0
    refused: int = 0
    reaped: int = 0
    waiting: int = 0  # vectors left waiting for the consumer's put (batched writes)
    overtaken: list[str] = field(default_factory=list)  # put for a text their items no longer hold: deleted
    # the ids whose vectors wait for the drain: kept (not erased meanwhile), in a partition a search
    # reads whole (one over READ_LIMIT, whose spilt put failed, is retried from EmbedQueue instead)
    waited: list[str] = field(default_factory=list)
    carried: dict[str, list[Any]] = field(default_factory=dict)  # their consumer's sealed copies (``waiting_vectors``)
    unput: dict[str, list[float]] = field(default_factory=dict)  # vectors whose put failed, by item id


def _groups(items: Iterable[Piece]) -> dict[tuple[str, str], list[Piece]]:
    grouped: dict[tuple[str, str], list[Piece]] = {}
    for item in items:
        grouped.setdefault((item.layer, item.user_id), []).append(item)
    return grouped


def live_items(where: Where, layer: str, user_id: str, ids: list[str]) -> dict[str, Message | Record]:
    found: dict[str, Any] = (messages if layer == L0 else records).get_many(where, user_id, ids)
    return found


Ahead = Future[list[embeddings.Outcome]]


def embed_ahead(items: Sequence[Piece], budget_s: float | None = None) -> Ahead | None:
    """Start the model calls for items about to be written, so that they run beside the write
    (the items' ids and texts are known before it); ``embed_after_write`` takes the result. None
    when meaning is off. Whoever starts it settles it (``settle``) if the write fails."""
    if not items or not enabled():
        return None
    settings = get_settings()
    budget = settings.embed_budget_s if budget_s is None else budget_s
    texts = [i.text for i in items]
    return submit(embeddings.embed_many, settings.embedding_model, settings.embedding_dimensions, texts, budget)


def embedded(items: Sequence[Piece], ahead: Ahead | None) -> frozenset[str]:
    """The ids of items about to be written whose embedding ``ahead`` got (waiting for it): words in
    vectors, those have no postings (their vectors are put or wait after the write)."""
    if ahead is None:
        return frozenset()
    try:
        results = ahead.result()
    except Exception:
        logger.exception("embedding ahead of a write failed; its items get postings")
        return frozenset()
    return frozenset(i.id for i, r in zip(items, results, strict=True) if isinstance(r, list))


def text_ahead(where: Where, layer: str, text: str) -> Ahead | None:
    """Words in vectors: one item's embedding started ahead of its write (``vector_ahead`` waits for
    it; ``embed_after_write`` or ``after_update`` takes it); else None."""
    return embed_ahead([Piece("", layer, "", None, None, None, 0, text)]) if where.words else None


def vector_ahead(ahead: Ahead | None) -> bool:
    """Whether the one embedding ``text_ahead`` started got a vector (waiting for it)."""
    return bool(embedded([Piece("", L1, "", None, None, None, 0, "")], ahead))


def settle(ahead: Ahead | None) -> None:
    """Wait for model calls started ahead of a write that failed: no call outlives its request."""
    if ahead is not None:
        wait([ahead])


def _results(items: Sequence[Piece], budget_s: float, outcome: Outcome, ahead: Ahead | None) -> list[Any]:
    """The model's outcome for each item (or what ``ahead`` got): a vector, RETRY or FINAL (counted
    and logged here: never retried)."""
    settings = get_settings()
    results = (
        ahead.result()
        if ahead is not None
        else embeddings.embed_many(
            settings.embedding_model, settings.embedding_dimensions, [i.text for i in items], budget_s
        )
    )
    refused = sum(1 for r in results if r == embeddings.FINAL)
    if refused:
        outcome.refused += refused
        logger.warning("embedding refused by the model (final, not retried)", extra={"items": refused})
        count_event("EmbeddingsRefused", refused)
    return list(results)


def embed_and_store(
    where: Where,
    items: Sequence[Piece],
    budget_s: float,
    outcome: Outcome,
    ahead: Ahead | None = None,
    waited: dict[str, list[float]] | None = None,
) -> list[str]:
    """Embed (or take what ``ahead`` embedded, or the vectors that ``waited``: by item id) and
    store vectors for ``items``: the ids worth retrying later. A vector whose item holds another
    text by the time it is put (an update overtook it) is deleted again and its id is among those
    to retry (``outcome.overtaken`` too): the update's own vector may have been put before this one,
    which replaced it, so only embedding the item again from its text of then leaves the right one."""
    described = model()
    kept = waited or {}
    asked = [i for i in items if i.id not in kept]
    results = dict(zip((i.id for i in asked), _results(asked, budget_s, outcome, ahead), strict=True)) if asked else {}
    results |= kept
    ready = [_vector(i, results[i.id], described, where.words) for i in items if isinstance(results[i.id], list)]
    retry = [i.id for i in items if results[i.id] == embeddings.RETRY]
    users = {i.id: i.user_id for i in items}
    by_index: dict[vectors.Index, list[vectors.Vector]] = {}
    for vector in ready:  # a user's vectors go to the index of the user's group
        by_index.setdefault(index_for(where, users[vector.key]), []).append(vector)

    def put(index: vectors.Index, chunk: list[vectors.Vector]) -> tuple[list[str], list[str], int]:
        """(the keys whose put failed, those an update overtook, the vectors reaped) of one index's put."""
        try:
            vectors.put(index, get_settings().embedding_dimensions, chunk)
        except Exception:
            logger.exception("vectors not written; queued for later")
            return [v.key for v in chunk], [], 0
        return [], *_reap(where, index, items, [v.key for v in chunk])

    puts = parallel(*[lambda i=index, c=chunk: put(i, c) for index, chunk in by_index.items()]) if by_index else []
    for (failed, overtaken, reaped), chunk in zip(puts, by_index.values(), strict=True):
        retry += failed + overtaken
        outcome.unput |= {v.key: v.data for v in chunk if v.key in failed}
        outcome.embedded += 0 if failed else len(chunk) - len(overtaken)
        outcome.reaped += reaped
        outcome.overtaken += overtaken
    return retry


def _reap(where: Where, index: vectors.Index, items: Sequence[Piece], keys: list[str]) -> tuple[list[str], int]:
    """Delete the vectors just written whose items are gone meanwhile (an erasure overtook us) or
    hold another text by now (an update overtook us): (the ids overtaken by an update, how many
    were gone). One read of the items, which the check for gone ones needs anyway."""
    gone: list[str] = []
    changed: list[str] = []
    wanted = set(keys)
    for (layer, user_id), group in _groups(i for i in items if i.id in wanted).items():
        live = live_items(where, layer, user_id, [i.id for i in group])
        gone += [i.id for i in group if i.id not in live]
        changed += [i.id for i in group if i.id in live and text_of(live[i.id]) != i.text]
    if gone or changed:
        vectors.delete(index, gone + changed)
    return changed, len(gone)


def _batched(where: Where, items: Sequence[Piece], budget_s: float, outcome: Outcome, ahead: Ahead | None) -> list[str]:
    """Batched writes: embed ``items`` (or take what ``ahead`` embedded). The vectors of an index
    this write alone gives a ``PutVectors``'s billed minimum (an import, a long add: 30 at 1,024
    dimensions) are put at once, as ``Immediate`` puts them — nothing to share — and so are those
    of a partition whose waiting vectors would pass what a search reads (``READ_LIMIT``: counted
    beside the model calls, eventually consistent — ``_wait`` counts again, strongly), so every
    waiting vector is read; the others wait for the queue's
    consumer (``_wait``), as do those whose put failed. The ids to queue: all but those put and
    those the model refused for good."""
    partitions = sorted({where.item_pk(i.layer, i.user_id) for i in items})
    results, waiting = parallel(
        lambda: _results(items, budget_s, outcome, ahead),
        # a guess (eventually consistent, half the read units): the count after the write decides
        lambda: dict(
            zip(partitions, for_each(partial(waiting_vectors.count, consistent=False), partitions), strict=True)
        ),
    )
    made = {i.id: r for i, r in zip(items, results, strict=True) if isinstance(r, list)}
    by_index: dict[str, list[Piece]] = {}
    by_partition: dict[str, int] = {}
    for item in items:
        if item.id in made:
            by_index.setdefault(index_for(where, item.user_id).name, []).append(item)
            pk = where.item_pk(item.layer, item.user_id)
            by_partition[pk] = by_partition.get(pk, 0) + 1
    dimensions = get_settings().embedding_dimensions
    crowded = {pk for pk, n in by_partition.items() if waiting[pk] + n > waiting_vectors.READ_LIMIT}
    full = [
        i
        for group in by_index.values()
        for i in group
        if vectors.fills_a_put(len(group), dimensions) or where.item_pk(i.layer, i.user_id) in crowded
    ]
    now = {i.id for i in full}
    failed = embed_and_store(where, full, budget_s, outcome, waited={i: made[i] for i in now}) if full else []
    stale = set(outcome.overtaken)  # its text changed meanwhile: the consumer embeds the new one
    waits = [(i, made[i.id]) for i in items if i.id in made and (i.id not in now or i.id in failed)]
    spilt = _wait(where, [(i, vector) for i, vector in waits if i.id not in stale], outcome, budget_s)
    final = {i.id for i, r in zip(items, results, strict=True) if r == embeddings.FINAL}  # never retried
    return [i.id for i in items if (i.id not in now or i.id in failed) and i.id not in final | spilt]


def _wait(where: Where, made: list[tuple[Piece, list[float]]], outcome: Outcome, budget_s: float) -> set[str]:
    """Keep the vectors ``made`` waiting beside their items for the queue's consumer — found by
    meaning from the next request. An item erased meanwhile (its erasure looked before this write)
    has its waiting vector deleted again. Each partition is counted again after the write (beside
    that read of the items): one that holds more than a search reads (``READ_LIMIT``), because
    writes raced past the count before them, has this write's vectors put at once and their rows
    deleted — the writer that counts last sees every row written before, so a partition stays over
    only while such a put has failed (those ids go to EmbedQueue, not to the drain). The ids put so
    (not to queue)."""
    if not made:
        return set()
    described = model()
    digest = waiting_vectors.text_digest
    pk = {i.id: where.item_pk(i.layer, i.user_id) for i, _ in made}
    rows = ((pk[i.id], i.id, r, _vector(i, r, described).metadata, digest(i.text)) for i, r in made)
    # the consumer's sealed copies, for whichever message names them (should this write fail from here on)
    outcome.carried |= waiting_vectors.put(rows)
    groups = list(_groups(i for i, _ in made).items())
    partitions = sorted(set(pk.values()))
    lives, counts = parallel(
        lambda: for_each(lambda g: live_items(where, g[0][0], g[0][1], [i.id for i in g[1]]), groups),
        lambda: for_each(lambda p: waiting_vectors.count(p, waiting_vectors.READ_LIMIT + 1), partitions),
    )
    live = {key for found in lives for key in found}
    gone = [(pk[i.id], i.id) for i, _ in made if i.id not in live]
    if gone:
        waiting_vectors.delete(gone)
    over = {p for p, n in zip(partitions, counts, strict=True) if n > waiting_vectors.READ_LIMIT}
    spill = [(i, r) for i, r in made if pk[i.id] in over and i.id in live]
    waited = {i.id: r for i, r in spill}
    failed = embed_and_store(where, [i for i, _ in spill], budget_s, outcome, waited=waited) if spill else []
    put = {i.id for i, _ in spill if i.id not in failed}
    if put:
        waiting_vectors.delete_unchanged((pk[i.id], i.id, digest(i.text)) for i, _ in spill if i.id in put)
    outcome.waiting += len(made) - len(gone) - len(put)
    # a put that failed here is retried within minutes (EmbedQueue), not left to the drain
    outcome.waited += [i.id for i, _ in made if i.id in live and pk[i.id] not in over]
    outcome.reaped += len(gone)
    return put


def _queue(
    where: Where,
    layer: str,
    user_id: str,
    ids: list[str],
    *,
    waiting: bool = False,
    drain: bool = False,
    carried: dict[str, list[Any]] | None = None,
) -> bool:
    """Queue the ids for the consumer (``waiting``: their vectors may be waiting in DynamoDB: the
    consumer puts those and deletes them, whatever ``VectorWrites`` says by then). ``drain``: their
    vectors surely wait, so they may wait for the drain's queue (with ``VectorDrainMinutes``);
    the others are embedded within minutes. ``carried``: the consumer's copies of their vectors, by
    id, sealed with their rows' keys (``waiting_vectors``), which the messages carry."""
    copies = {i: carried[i] for i in ids if i in carried} if carried else {}
    dimensions = get_settings().embedding_dimensions
    per_message = waiting_vectors.per_message(dimensions) if copies else embed_queue.MAX_IDS
    try:
        for start in range(0, len(ids), per_message):
            part = ids[start : start + per_message]
            body: dict[str, Any] = {
                "team_id": where.team_id,
                "agent_id": where.agent_id,
                "epoch": int(where.epoch),
                "memory_id": where.memory_id,
                "groups": where.groups,
                "bucket": where.bucket,
                "layer": layer,
                "user_id": user_id,
                "ids": part,
            }
            if waiting:
                body["waiting"] = True
            if where.words:
                body["words"] = True
            if copies:
                body["vectors"] = {i: copies[i] for i in part if i in copies}
            if not embed_queue.send(body, to_drain=drain):
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
    batched = get_settings().vectors_batched
    if batched:
        try:
            retry = _batched(where, items, budget, outcome, ahead)
        except Exception:
            logger.exception("vectors not kept waiting; the queue's consumer embeds them")
            retry = [i.id for i in items]  # the queue's consumer puts them with others of the memory
    else:
        try:
            retry = embed_and_store(where, items, budget, outcome, ahead)
            if where.words and outcome.unput:  # their words are in them: what was not put waits, found at once
                put = _wait(where, [(i, outcome.unput[i.id]) for i in items if i.id in outcome.unput], outcome, budget)
                retry = [i for i in retry if i not in put]
        except Exception:
            logger.exception("embedding after a write failed; queued")
            retry = [i.id for i in items]
    if retry:
        wanted, waited, carried = set(retry), set(outcome.waited), outcome.carried
        for (layer, user_id), group in _groups(i for i in items if i.id in wanted).items():
            # what surely waits, for the batch's put (or the drain's); the rest (not embedded, or a
            # failure after some vectors were kept waiting) to be embedded or put within minutes
            for waits in (True, False):
                ids = [i.id for i in group if (i.id in waited) == waits]
                sent = ids and _queue(where, layer, user_id, ids, waiting=batched | waits, drain=waits, carried=carried)
                outcome.queued += len(ids) if sent else 0
    return outcome


def text_changed(before: Record | None, content: str, background: str) -> bool:
    """Whether an update changes the embedded text of a record."""
    return before is None or text_of(before) != (f"{background}\n{content}" if background else content)


def after_update(where: Where, after: Record | None, ahead: tuple[str, Ahead | None] = ("", None)) -> None:
    """An L1 update that changed the embedded text: re-embed; should that fail, the old vector is
    removed now (the old text is never found by meaning) and the new one queued. A record deleted
    meanwhile has nothing to embed (its delete erased its vector). ``ahead``: (a text, its embedding
    started ahead of the update) — taken if the record holds that text still."""
    text, started = ahead
    if after is None:
        settle(started)
        return
    if started is not None and text != text_of(after):
        settle(started)
        started = None  # a racing update changed it again: embedded anew
    if not enabled():
        vector_erasure.erase(where, [(after.user_id, after.id)])
        return
    outcome = Outcome()
    if get_settings().vectors_batched:  # the new vector waits (replacing one that waited), the old one goes now
        try:
            _batched(where, [piece(after)], get_settings().embed_budget_s, outcome, started)
        except Exception:
            logger.exception("re-embedding an updated record failed")
        mine = [(after.user_id, after.id)]
        if outcome.embedded:  # put at once (its partition held all a search reads): what waited is old
            vector_erasure.forget_waiting(where, mine)
            return
        if outcome.waiting:
            vector_erasure.erase_stored(where, mine)
        else:
            vector_erasure.erase(where, mine)  # a vector waiting still holds the old text
        waits = after.id in outcome.waited
        _queue(where, L1, after.user_id, [after.id], waiting=True, drain=waits, carried=outcome.carried)
        return
    else:
        try:
            retry = embed_and_store(where, [piece(after)], get_settings().embed_budget_s, outcome, started)
        except Exception:
            logger.exception("re-embedding an updated record failed")
            retry = [after.id]
    if outcome.embedded:
        return
    vector_erasure.erase(where, [(after.user_id, after.id)])
    if retry:
        _queue(where, L1, after.user_id, [after.id])


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
    current model — and, with batched writes, beside it the user's vectors of the layer still
    waiting for their put (one ``Query``), held to the same filter and scored alike, a waiting one
    in place of a stored one of the same item (it is newer); with ``with_places``, also each
    item's session and time (from the vectors' metadata: the same calls).
    None when the query cannot be embedded or the vector query fails: the caller answers by words."""
    if not enabled():
        return None
    settings = get_settings()
    started = time.monotonic()
    vector = query_vector(settings.embedding_model, settings.embedding_dimensions, text)
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

    def stored() -> list[vectors.Match] | None:
        try:
            return vectors.query(index_for(where, user_id), vector, top_k, where_filter, with_metadata=with_places)
        except Exception:
            logger.exception("vector query failed; answering by words")
            count_event("VectorQueryFailures", 1)
            return None

    batched = settings.vectors_batched
    hits, waiting = parallel(stored, lambda: waiting_of(where, layer, user_id)) if batched else (stored(), [])
    if hits is None:
        return None
    near = {hit.key: (1.0 - hit.distance, hit.metadata) for hit in hits}
    for held in waiting:  # newer than a stored vector of the same item (an updated record's)
        if vectors.passes(held.metadata, where_filter):
            near[held.key] = (waiting_vectors.cosine(held.vector, vector), held.metadata)
    ranked = sorted(near.items(), key=lambda kv: -kv[1][0])[:top_k]
    logger.debug(
        "semantic half",
        extra={"hits": len(hits), "waiting": len(waiting), "ms": int((time.monotonic() - started) * 1000)},
    )
    return Meant([(key, score) for key, (score, _) in ranked], places_of(ranked) if with_places else {})


def waiting_of(where: Where, layer: str, user_id: str) -> list[waiting_vectors.Waiting]:
    """The user's vectors of ``layer`` still waiting for their put (batched writes). A failure
    answers none: the stored vectors and the words still answer."""
    try:
        return waiting_vectors.of_user(where.item_pk(layer, user_id))
    except Exception:
        logger.exception("waiting vectors not read; searching the stored ones")
        count_event("WaitingVectorReadFailures", 1)
        return []


_QUERIES: OrderedDict[tuple[str, int, str], list[float]] = OrderedDict()
_QUERIES_KEPT = 64
_queries_lock = threading.Lock()


def query_vector(model_id: str, dimensions: int, text: str) -> Any:
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


def places_of(found: Sequence[tuple[str, tuple[float, dict[str, Any]]]]) -> dict[str, Place]:
    """Where each found message was said, from its vector's metadata (none for an item without a
    session)."""
    places: dict[str, Place] = {}
    for key, (_, metadata) in found:
        session, at = metadata.get("session"), metadata.get("at")
        if isinstance(session, str) and session != vectors.NONE and isinstance(at, int | float):
            places[key] = (session, int(at))
    return places
