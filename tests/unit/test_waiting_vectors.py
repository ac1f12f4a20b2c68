"""Batched vector writes keep each new vector waiting in DynamoDB beside its item until the queue's
consumer puts it (``storage/waiting_vectors.py``, ``domain/meaning.py``; moto in process with the
local stack's S3 Vectors patch): a search finds the item by meaning from the next request, the
consumer puts what waited without asking the model again and deletes it, and every erasure takes
a waiting vector with its item."""

from __future__ import annotations

import base64
import math
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from in_process import fresh_scope, writer
from memory_hub.domain import assets, atomic, clear, conversation, meaning, user_memory, vector_upkeep
from memory_hub.domain.principal import Principal
from memory_hub.domain.scope import Scope
from memory_hub.settings import get_settings
from memory_hub.storage import aws as aws_clients
from memory_hub.storage import embeddings, layout, vectors, waiting_vectors
from memory_hub.storage.counters import Where
from memory_hub.storage.models import WaitingVector

BUCKETS = ",".join(f"memory-hub-vectorbucket{i}" for i in range(4))
ADMIN = Principal("unit-admin", "admin", ("*",))
REQUEST = "req-unit-waiting-vectors-01"
WORDS = ("apple", "boat", "cloud")


def _model(model_id: str, dimensions: int, texts: list[str], deadline_s: float) -> list[Any]:
    """A model of three words, each a dimension, and a little of everything (never a zero vector)."""
    return [[(1.0 if w in t else 0.0) + 0.05 for w in WORDS] for t in texts]


@pytest.fixture
def batched(aws, monkeypatch):
    """Meaning on with batched writes, 3-dimensional vectors and the stack's four buckets; the
    queue's messages are kept (``sent``) and the model's calls counted (``asked``)."""
    env = {"EMBEDDINGS": "Enabled", "EMBEDDING_DIMENSIONS": "3", "VECTOR_BUCKETS": BUCKETS, "VECTOR_WRITES": "Batched"}
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    get_settings.cache_clear()
    asked: list[str] = []

    def model(model_id: str, dimensions: int, texts: list[str], deadline_s: float) -> list[Any]:
        asked.extend(texts)
        return _model(model_id, dimensions, texts, deadline_s)

    sent: list[dict[str, Any]] = []
    monkeypatch.setattr(embeddings, "embed_many", model)
    monkeypatch.setattr(meaning.embed_queue, "send", lambda body, to_drain=False: sent.append(body) or True)
    meaning._QUERIES.clear()
    yield sent, asked
    for name in env:
        monkeypatch.delenv(name)
    get_settings.cache_clear()


def _where(scope: Scope) -> Where:
    asset = assets.of_scope(scope)
    assert asset is not None
    return Where.of(asset)


def _stored(scope: Scope) -> list[str]:
    """The keys in S3 Vectors of the scope's user."""
    where = _where(scope)
    index = vectors.index_of(
        where.vector_bucket, scope.team_id, scope.agent_id, where.epoch, 3, scope.user_id, where.groups
    )
    return sorted(key for key, _ in vectors.keys(index))


def _waiting(scope: Scope, layer: str = "L0") -> list[str]:
    return sorted(waiting_vectors.keys_of(_where(scope).item_pk(layer, scope.user_id)))


def _add(scope: Scope, text: str) -> str:
    return conversation.add(scope, [{"role": "user", "content": text}], writer(scope)).accepted_ids[0]


def _found(scope: Scope, text: str, layer: str = "L0") -> list[str]:
    meant = meaning.semantic(_where(scope), layer, scope.user_id, text, 10)
    assert meant is not None
    return [key for key, _ in meant.order]


def _consume(sent: list[dict[str, Any]]) -> list[str]:
    bodies = [(f"message-{n}", body) for n, body in enumerate(sent)]
    sent.clear()
    return vector_upkeep.consume(bodies, lambda: 60.0)


def test_a_batched_add_is_found_by_meaning_before_its_vector_is_put(batched):
    sent, _ = batched
    scope = fresh_scope()
    apple, boat = _add(scope, "an apple pie"), _add(scope, "a boat trip")
    assert _stored(scope) == [] and _waiting(scope) == sorted([apple, boat])
    assert _found(scope, "apple")[0] == apple and _found(scope, "boat")[0] == boat
    hits = conversation.search(scope, "apple", 10, None, None, writer(scope), mode="semantic")
    assert hits.messages[0].id == apple
    assert all(body.get("waiting") is True for body in sent) and len(sent) == 2


def test_the_consumer_puts_what_waited_without_asking_the_model_and_deletes_it(batched):
    sent, asked = batched
    scope = fresh_scope()
    apple = _add(scope, "an apple pie")
    asked.clear()
    assert _consume(sent) == []
    assert asked == []  # the vector that waited was put as it was
    assert _stored(scope) == [apple] and _waiting(scope) == []
    assert _found(scope, "apple") == [apple]  # from S3 Vectors now


def test_a_vector_that_waited_for_another_text_is_embedded_again(batched):
    sent, asked = batched
    scope = fresh_scope()
    apple = _add(scope, "an apple pie")
    pk = _where(scope).item_pk("L0", scope.user_id)
    row = WaitingVector.get(pk, layout.waiting_vector_sk(apple), consistent_read=True)
    row.update(actions=[WaitingVector.text_digest.set("another text")])
    asked.clear()
    assert _consume(sent) == []
    assert asked == ["an apple pie"] and _stored(scope) == [apple] and _waiting(scope) == []


def _put_data(scope: Scope, key: str) -> list[float]:
    """What S3 Vectors holds for ``key`` of the scope's user."""
    where = _where(scope)
    index = vectors.index_of(
        where.vector_bucket, scope.team_id, scope.agent_id, where.epoch, 3, scope.user_id, where.groups
    )
    answer = aws_clients.client("s3vectors").get_vectors(
        vectorBucketName=index.bucket, indexName=index.name, keys=[key], returnData=True
    )
    return [float(x) for x in answer["vectors"][0]["data"]["float32"]]


def test_the_consumer_puts_the_sealed_eight_bit_copy_not_the_rows_four_bits(batched):
    sent, asked = batched
    scope = fresh_scope()
    apple = _add(scope, "an apple pie")
    [body] = sent
    vector = _model("", 3, ["an apple pie"], 1.0)[0]
    plain, scale = waiting_vectors.quantize(vector)
    sealed, carried_scale, _ = body["vectors"][apple]
    assert base64.b64decode(sealed) != plain and carried_scale == scale  # no readable copy in the message
    asked.clear()
    assert _consume(sent) == [] and asked == []
    put = _put_data(scope, apple)
    assert all(abs(a - b) <= scale / 2 + 1e-6 for a, b in zip(vector, put, strict=True))  # 8 bits, not 4
    assert (
        max(abs(a - b) for a, b in zip(vector, waiting_vectors.unpack(*waiting_vectors.pack(vector), 3), strict=True))
        > scale
    )
    assert _waiting(scope) == []


@pytest.mark.parametrize("damage", ["another row's key", "not base64", "malformed"])
def test_a_copy_not_sealed_for_the_row_is_not_opened(batched, damage):
    sent, asked = batched
    scope = fresh_scope()
    apple = _add(scope, "an apple pie")
    [body] = sent
    copy = body["vectors"][apple]
    if damage == "another row's key":
        copy[2] = "0" * 12
    elif damage == "not base64":
        copy[0] = "%%%"
    else:
        body["vectors"][apple] = {"not": "a copy"}
    asked.clear()
    assert _consume(sent) == []
    assert asked == ["an apple pie"] and _stored(scope) == [apple] and _waiting(scope) == []


def test_an_erased_items_copy_left_in_a_queue_opens_to_nothing(batched):
    """The key that opens a message's copy is in the row only, which the erasure deletes."""
    sent, asked = batched
    scope = fresh_scope()
    apple = _add(scope, "an apple pie")
    pk = _where(scope).item_pk("L0", scope.user_id)
    [row] = waiting_vectors.get_many([(pk, apple)]).values()
    [body] = sent
    assert waiting_vectors.opened(row, [body["vectors"][apple]]) is not None  # while the row is there
    conversation.delete(scope, [apple], None, writer(scope), REQUEST)
    assert waiting_vectors.get_many([(pk, apple)]) == {}
    asked.clear()
    assert _consume(sent) == [] and asked == [] and _stored(scope) == []


def _before(scope: Scope, key: str, vector: list[float], text: str) -> None:
    """A waiting row as a release of before wrote it: 8 bits a component and the whole metadata."""
    where = _where(scope)
    data, scale = waiting_vectors.quantize(vector)
    metadata = vectors.metadata(
        layer="L0",
        user_id=scope.user_id,
        session_id=scope.session_id,
        task_id=None,
        type_=None,
        at_ms=1,
        model=meaning.model(),
    )
    pk, sk = where.item_pk("L0", scope.user_id), layout.waiting_vector_sk(key)
    WaitingVector(pk, sk, vector=data, scale=scale, meta=metadata, text_digest=waiting_vectors.text_digest(text)).save()


def test_a_row_of_before_is_read_by_searches_and_put_by_a_message_of_before(batched):
    sent, asked = batched
    scope = fresh_scope()
    apple = _add(scope, "an apple pie")
    [body] = sent
    del body["vectors"]  # a message of before names the item only
    vector = _model("", 3, ["an apple pie"], 1.0)[0]
    _before(scope, apple, vector, "an apple pie")
    assert _found(scope, "apple")[0] == apple  # searches read it as before
    asked.clear()
    assert _consume(sent) == [] and asked == []  # its 8 bits are put as they are
    assert _stored(scope) == [apple] and _waiting(scope) == []


def test_a_rows_four_bit_copy_is_never_put(batched):
    sent, asked = batched
    scope = fresh_scope()
    apple = _add(scope, "an apple pie")
    [body] = sent
    del body["vectors"]  # no copy carried: only the row's 4 bits, the search's
    asked.clear()
    assert _consume(sent) == []
    assert asked == ["an apple pie"]  # embedded again, not the 4-bit copy put
    assert _stored(scope) == [apple] and _waiting(scope) == []


def test_an_erasure_deletes_the_waiting_vector_before_it_answers(batched):
    scope = fresh_scope()
    apple, boat = _add(scope, "an apple pie"), _add(scope, "a boat trip")
    assert conversation.delete(scope, [apple], None, writer(scope), REQUEST).deleted_ids == [apple]
    assert _waiting(scope) == [boat]
    assert apple not in _found(scope, "apple")


def test_a_clear_leaves_no_waiting_vector_of_the_old_epoch(batched):
    scope = fresh_scope()
    _add(scope, "an apple pie")
    old = _where(scope)
    asset = assets.of_scope(scope)
    clear.clear(ADMIN, [asset], REQUEST, lambda: 60_000)
    assert waiting_vectors.keys_of(old.item_pk("L0", scope.user_id)) == []
    assert _waiting(scope) == []


def test_a_write_whose_item_was_erased_meanwhile_deletes_its_waiting_vector(batched):
    scope = fresh_scope()
    _add(scope, "a first message")  # the memory exists
    where = _where(scope)
    gone = meaning.Piece("msg-0000000000000-gone", "L0", scope.user_id, "s", None, None, 1, "an apple")
    outcome = meaning.embed_after_write(where, [gone])
    assert (outcome.waiting, outcome.reaped) == (0, 1)
    assert "msg-0000000000000-gone" not in _waiting(scope)


def test_an_updated_record_waits_with_its_new_text_and_its_old_vector_goes(batched):
    sent, _ = batched
    scope = fresh_scope()
    added = atomic.add(scope, "likes apple pie", "preference", "", [], {}, writer(scope))
    assert _consume(sent) == [] and _stored(scope) == [added.id]
    atomic.update(scope, added.id, {"content": "sails a boat"}, None, writer(scope), REQUEST)
    assert _stored(scope) == [] and _waiting(scope, "L1") == [added.id]
    assert _found(scope, "boat", "L1") == [added.id]
    meant = meaning.semantic(_where(scope), "L1", scope.user_id, "apple", 10)
    assert meant is not None and dict(meant.order)[added.id] < 0.5  # the new text's vector, not the old one's
    assert _consume(sent) == [] and _stored(scope) == [added.id] and _waiting(scope, "L1") == []


def test_a_write_that_fills_a_put_alone_puts_its_vectors_at_once(batched, monkeypatch):
    """A write giving one index a PutVectors's billed minimum by itself (an import, a long add)
    has nothing to share: its vectors are put before it answers, and none waits or is queued."""
    sent, _ = batched
    monkeypatch.setattr(vectors, "PUT_BILLED_MIN", 3 * (4 * 3 + vectors.VECTOR_OVERHEAD))  # three vectors
    scope = fresh_scope()
    say = [{"role": "user", "content": f"an apple number {n}"} for n in range(3)]
    ids = conversation.add(scope, say, writer(scope)).accepted_ids
    assert _stored(scope) == sorted(ids) and _waiting(scope) == [] and sent == []
    fewer = conversation.add(scope, say[:2], writer(scope)).accepted_ids
    assert _waiting(scope) == sorted(fewer) and [body["ids"] for body in sent] == [fewer]


def _overtaking(monkeypatch: Any, scope: Scope, record_id: str, content: str, then: Any = None) -> list[str]:
    """Make the next ``vectors.put`` wait for an update of the record to ``content`` (and ``then``,
    called after it): the list holds the record's id once that happened."""
    real_put = vectors.put
    overtaken: list[str] = []

    def put_after_an_update(index: Any, dimensions: int, chunk: Any) -> None:
        if not overtaken:
            overtaken.append(record_id)
            atomic.update(scope, record_id, {"content": content}, None, writer(scope), REQUEST)
            if then is not None:
                then()
        return real_put(index, dimensions, chunk)

    monkeypatch.setattr(vectors, "put", put_after_an_update)
    return overtaken


def test_an_update_that_overtakes_the_consumers_put_leaves_no_vector_of_the_old_text(batched, monkeypatch):
    """The consumer read the record and what waited (the old text); an update lands before its
    put. The vector put for the old text is deleted again, the update's waiting vector stays, and
    the update's own message puts the new one."""
    sent, _ = batched
    scope = fresh_scope()
    added = atomic.add(scope, "likes apple pie", "preference", "", [], {}, writer(scope))
    first = list(sent)
    sent.clear()
    overtaken = _overtaking(monkeypatch, scope, added.id, "sails a boat")
    assert vector_upkeep.consume([("message-0", first[0])], lambda: 60.0) == ["message-0"]  # it comes again
    assert overtaken == [added.id]
    assert _stored(scope) == [] and _waiting(scope, "L1") == [added.id]  # the new text's, waiting
    meant = meaning.semantic(_where(scope), "L1", scope.user_id, "apple", 10)
    assert meant is not None and dict(meant.order)[added.id] < 0.5
    assert _consume(sent) == [] and _stored(scope) == [added.id] and _waiting(scope, "L1") == []
    assert _found(scope, "boat", "L1") == [added.id]


def test_a_put_of_an_old_text_that_replaced_the_new_ones_vector_is_made_again(batched, monkeypatch):
    """The harder order: the update's own message is taken, and its vector put, before the
    consumer's put of the old text, which replaces it. That vector is deleted again and the first
    message comes again: delivered again, it puts the new text's vector."""
    sent, _ = batched
    scope = fresh_scope()
    added = atomic.add(scope, "likes apple pie", "preference", "", [], {}, writer(scope))
    first = list(sent)
    sent.clear()
    overtaken = _overtaking(monkeypatch, scope, added.id, "sails a boat", then=lambda: _consume(sent))
    assert vector_upkeep.consume([("message-0", first[0])], lambda: 60.0) == ["message-0"]
    assert overtaken == [added.id] and _waiting(scope, "L1") == []
    assert _stored(scope) == []  # the old text's vector replaced the new one's, and went: none is wrong
    assert vector_upkeep.consume([("message-0", first[0])], lambda: 60.0) == []
    assert _stored(scope) == [added.id] and _found(scope, "boat", "L1") == [added.id]
    meant = meaning.semantic(_where(scope), "L1", scope.user_id, "apple", 10)
    assert meant is not None and dict(meant.order)[added.id] < 0.5


def test_two_immediate_updates_racing_leave_the_vector_of_the_text_that_stays(batched, monkeypatch):
    """With ``Immediate`` writes, an update's put can land after a later update's put (whose text
    stays): the vector of the text that went is deleted again and the record queued, and its
    message puts the vector of the text it holds."""
    sent, _ = batched
    monkeypatch.setenv("VECTOR_WRITES", "Immediate")
    get_settings.cache_clear()
    scope = fresh_scope()
    added = atomic.add(scope, "likes apple pie", "preference", "", [], {}, writer(scope))
    assert _stored(scope) == [added.id] and sent == []
    overtaken = _overtaking(monkeypatch, scope, added.id, "a cloud in the sky")  # the second update's put lands first
    atomic.update(scope, added.id, {"content": "sails a boat"}, None, writer(scope), REQUEST)
    assert overtaken == [added.id]
    assert _stored(scope) == [] and [body["ids"] for body in sent] == [[added.id]]
    assert _consume(sent) == [] and _stored(scope) == [added.id]
    assert _found(scope, "cloud", "L1") == [added.id]
    meant = meaning.semantic(_where(scope), "L1", scope.user_id, "boat", 10)
    assert meant is not None and dict(meant.order)[added.id] < 0.5  # not the text that went


def test_an_erasure_deletes_a_waiting_vector_whatever_vector_writes_says_now(batched, monkeypatch):
    scope = fresh_scope()
    apple = _add(scope, "an apple pie")
    monkeypatch.setenv("VECTOR_WRITES", "Immediate")  # switched since the add
    get_settings.cache_clear()
    conversation.delete(scope, [apple], None, writer(scope), REQUEST)
    assert _waiting(scope) == []


def test_a_users_erasure_deletes_every_vector_waiting_in_their_partitions(batched):
    scope = fresh_scope()
    _add(scope, "an apple pie")
    where = _where(scope)
    orphan = (where.item_pk("L1", scope.user_id), "atom-0000000000000-orphan", [1.0, 0.0, 0.0], {}, "x")
    waiting_vectors.put([orphan])  # left by an erasure that failed to delete it
    admin = Principal("key-admin", "admin", (scope.team_id,))
    user_memory.delete(
        admin, assets.Named(scope.memory_id, scope.team_id, scope.agent_id), scope.user_id, None, REQUEST
    )
    assert _waiting(scope) == [] and _waiting(scope, "L1") == []


def test_a_partition_never_holds_more_waiting_vectors_than_a_search_reads(batched, monkeypatch):
    sent, _ = batched
    monkeypatch.setattr(waiting_vectors, "READ_LIMIT", 2)
    scope = fresh_scope()
    first = [_add(scope, f"an apple number {n}") for n in range(2)]
    third = _add(scope, "an apple number 2")  # two wait already: this one is put at once
    assert _waiting(scope) == sorted(first) and _stored(scope) == [third]
    assert [body["ids"] for body in sent] == [[first[0]], [first[1]]]


def test_an_update_in_a_crowded_partition_puts_its_new_vector_and_keeps_it(batched, monkeypatch):
    scope = fresh_scope()
    added = atomic.add(scope, "likes apple pie", "preference", "", [], {}, writer(scope))  # waits
    monkeypatch.setattr(waiting_vectors, "READ_LIMIT", 1)  # now its partition holds all a search reads
    atomic.update(scope, added.id, {"content": "sails a boat"}, None, writer(scope), REQUEST)
    assert _stored(scope) == [added.id] and _waiting(scope, "L1") == []
    assert _found(scope, "boat", "L1") == [added.id]
    meant = meaning.semantic(_where(scope), "L1", scope.user_id, "apple", 10)
    assert meant is not None and dict(meant.order)[added.id] < 0.5  # the stored vector is the new text's


def test_a_waiting_vector_expires_by_itself_should_its_consumer_never_come(batched):
    scope = fresh_scope()
    apple = _add(scope, "an apple pie")
    row = WaitingVector.get(_where(scope).item_pk("L0", scope.user_id), layout.waiting_vector_sk(apple))
    assert 0 < int(row.expires) - time.time() <= waiting_vectors.KEPT_S


def test_a_text_the_model_refuses_for_good_is_not_queued(batched, monkeypatch):
    sent, _ = batched
    monkeypatch.setattr(embeddings, "embed_many", lambda m, d, texts, s: [embeddings.FINAL] * len(texts))
    scope = fresh_scope()
    _add(scope, "an apple pie")
    assert sent == [] and _waiting(scope) == []


def test_a_search_reads_the_newest_waiting_vectors_only(batched, monkeypatch):
    scope = fresh_scope()
    ids = [_add(scope, f"an apple number {n}") for n in range(5)]
    pk = _where(scope).item_pk("L0", scope.user_id)
    assert [w.key for w in waiting_vectors.of_user(pk, limit=3)] == ids[::-1][:3]


def test_meaning_turned_off_deletes_what_waits_when_its_message_comes(batched, monkeypatch):
    sent, _ = batched
    scope = fresh_scope()
    _add(scope, "an apple pie")
    monkeypatch.setenv("EMBEDDINGS", "Disabled")
    get_settings.cache_clear()
    assert _consume(sent) == [] and _waiting(scope) == [] and _stored(scope) == []


def test_immediate_writes_keep_nothing_waiting(batched, monkeypatch):
    monkeypatch.setenv("VECTOR_WRITES", "Immediate")
    get_settings.cache_clear()
    scope = fresh_scope()
    apple = _add(scope, "an apple pie")
    assert _waiting(scope) == [] and _stored(scope) == [apple]


unit = st.lists(st.floats(-1.0, 1.0, allow_nan=False), min_size=1, max_size=64).filter(
    lambda v: any(abs(x) > 1e-6 for x in v)
)


@given(unit)
def test_a_waiting_vector_is_within_half_a_step_of_each_component(vector):
    data, scale = waiting_vectors.quantize(vector)
    restored = waiting_vectors.restore(data, scale)
    assert len(data) == len(vector)
    assert all(abs(a - b) <= scale / 2 + 1e-12 for a, b in zip(vector, restored, strict=True))


@pytest.mark.parametrize(
    ("copy", "least"),
    [
        (lambda v: waiting_vectors.restore(*waiting_vectors.quantize(v)), 0.9999),  # the consumer's, 8 bits
        (lambda v: waiting_vectors.unpack(*waiting_vectors.pack(v), len(v)), 0.99),  # the search's, 4 bits
    ],
    ids=["eight bits", "four bits"],
)
def test_an_embedding_keeps_its_direction(copy, least):
    """A spread unit vector of 1,024 components (as Titan's are): 8 bits lose nothing a ranking
    sees; 4 bits move a search's score by a few thousandths while the vector waits."""
    import random

    rng = random.Random(7)
    for _ in range(20):
        raw = [rng.gauss(0.0, 1.0) for _ in range(1024)]
        norm = math.sqrt(sum(x * x for x in raw))
        vector = [x / norm for x in raw]
        assert waiting_vectors.cosine(vector, copy(vector)) > least


def _raced(monkeypatch) -> list[tuple[dict[str, Any], bool]]:
    """A partition read whole by two, and a write whose count before it ran before another
    writer's rows landed (it saw one waiting); what is queued, and whether to the drain."""
    monkeypatch.setattr(waiting_vectors, "READ_LIMIT", 2)
    counted = waiting_vectors.count
    monkeypatch.setattr(
        waiting_vectors, "count", lambda pk, limit=None, consistent=True: 1 if limit is None else counted(pk, limit)
    )
    routed: list[tuple[dict[str, Any], bool]] = []
    monkeypatch.setattr(
        meaning.embed_queue, "send", lambda body, to_drain=False: routed.append((body, to_drain)) or True
    )
    return routed


def test_a_write_that_raced_past_the_count_puts_its_own_vector_so_none_goes_unread(batched, monkeypatch):
    routed = _raced(monkeypatch)
    scope = fresh_scope()
    first = [_add(scope, f"an apple number {n}") for n in range(2)]
    third = _add(scope, "an apple number 2")
    assert _waiting(scope) == sorted(first) and _stored(scope) == [third]
    assert [(body["ids"], drain) for body, drain in routed] == [([first[0]], True), ([first[1]], True)]
    assert sorted(_found(scope, "apple")) == sorted([*first, third])  # a search reads two waiting


def test_a_raced_write_whose_own_put_fails_is_retried_within_minutes_not_by_the_drain(batched, monkeypatch):
    routed = _raced(monkeypatch)
    scope = fresh_scope()
    first = [_add(scope, f"an apple number {n}") for n in range(2)]
    put, failing = vectors.put, [True]

    def flaky(*args: Any, **kwargs: Any) -> Any:
        if failing[0]:
            raise RuntimeError("S3 Vectors throttled")
        return put(*args, **kwargs)

    monkeypatch.setattr(vectors, "put", flaky)
    third = _add(scope, "an apple number 2")
    assert _waiting(scope) == sorted([*first, third]) and _stored(scope) == []
    body, drain = routed[-1]
    assert body["ids"] == [third] and body["waiting"] is True and drain is False
    failing[0] = False
    assert vector_upkeep.consume([("retry", body)], lambda: 60.0) == []  # EmbedQueue's consumer
    assert _waiting(scope) == sorted(first) and _stored(scope) == [third]


@pytest.mark.parametrize("writers", [2, 3, 5])
def test_writers_that_all_count_before_any_writes_leave_no_vector_unread(batched, monkeypatch, writers):
    monkeypatch.setattr(waiting_vectors, "READ_LIMIT", 2)
    scope = fresh_scope()
    held = _add(scope, "an apple number 0")
    counted, everyone = waiting_vectors.count, threading.Barrier(writers)

    def count(pk: str, limit: int | None = None, consistent: bool = True) -> int:
        n = counted(pk, limit, consistent=consistent)
        if limit is None:  # the count before the write: every writer counts before any writes
            everyone.wait(timeout=30)
        return n

    monkeypatch.setattr(waiting_vectors, "count", count)
    with ThreadPoolExecutor(writers) as pool:
        added = list(pool.map(lambda n: _add(scope, f"an apple number {n + 1}"), range(writers)))
    everything = sorted([held, *added])
    waiting, stored = _waiting(scope), _stored(scope)
    assert len(waiting) <= 2 and sorted(set(waiting) | set(stored)) == everything
    assert sorted(_found(scope, "apple")) == everything


@given(unit)
def test_the_searchs_copy_keeps_each_component_within_half_a_step_unless_past_three_rms(vector):
    data, step = waiting_vectors.pack(vector)
    restored = waiting_vectors.unpack(data, step, len(vector))
    assert len(data) == (len(vector) + 1) // 2 and len(restored) == len(vector)
    reach = 8 * step  # ±3 root mean squares
    for a, b in zip(vector, restored, strict=True):
        assert abs(a - b) <= step / 2 + 1e-12 or (abs(a) >= reach - 1e-12 and abs(b) == 7.5 * step)


def test_a_waiting_row_is_one_write_unit_at_every_valid_id(aws):
    """The row a batched write puts (and its consumer deletes) stays under 1 KB at 1,024 dimensions,
    the longest team and agent ids, any user and session, and a model name of Bedrock's length; it
    reads back to the metadata S3 Vectors would get."""
    from memory_hub.clock import message_id
    from memory_hub_local.aws.capacity import item_size

    longest = "x" * 64
    where = Where(longest, longest, 2**63, "memory", groups=128)
    user = "u" * 1024
    metadata = vectors.metadata(
        layer="L0",
        user_id=user,
        session_id="s" * 1024,
        task_id="t" * 1024,
        type_=None,
        at_ms=253_402_300_799_999,
        model="amazon.titan-embed-text-v2:0/1024",
    )
    key, pk = message_id(253_402_300_799_999), where.item_pk("L0", user)
    [copy] = waiting_vectors.put([(pk, key, [0.03] * 1024, metadata, "d" * 16)]).values()
    stored = aws_clients.client("dynamodb").get_item(
        TableName=get_settings().items_table,
        Key={"pk": {"S": pk}, "sk": {"S": layout.waiting_vector_sk(key)}},
        ConsistentRead=True,
    )["Item"]
    assert item_size(stored) <= 1024
    back = waiting_vectors.get_many([(pk, key)])[key]
    assert back.metadata == metadata and type(back.metadata["at"]) is int and not back.exact
    opened = waiting_vectors.opened(back, [copy])
    assert opened is not None and opened.exact and opened.metadata == metadata
    assert max(abs(x - 0.03) for x in opened.vector) < 1e-6
