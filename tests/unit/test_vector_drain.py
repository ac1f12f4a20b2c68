"""The scheduled drain of batched writes' waiting vectors (``VectorDrainMinutes``: they are queued to
VectorQueue, which ``EmbedFunction`` receives itself, ``domain/vector_upkeep.drain``), against moto's
SQS in process: it takes the queue whole, puts the vectors that waited of one memory's group of
users with one ``PutVectors`` however many writes queued them, deletes the messages it did and
leaves those to try again for a later drain, in rounds, and drops a message that is not a JSON
object; what a write could not embed still goes to EmbedQueue (its event source: within minutes)."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

import pytest
from in_process import fresh_scope, writer
from memory_hub.domain import assets, conversation, meaning, vector_upkeep
from memory_hub.domain.scope import Scope
from memory_hub.settings import get_settings
from memory_hub.storage import aws as aws_clients
from memory_hub.storage import embed_queue, embeddings, vectors, waiting_vectors
from memory_hub.storage.counters import Where

BUCKETS = ",".join(f"memory-hub-vectorbucket{i}" for i in range(4))
WORDS = ("apple", "boat", "cloud")


def _model(model_id: str, dimensions: int, texts: list[str], deadline_s: float) -> list[Any]:
    return [[(1.0 if w in t else 0.0) + 0.05 for w in WORDS] for t in texts]


@pytest.fixture
def queue(aws, monkeypatch) -> Any:
    """Meaning on, batched writes drained from a VectorQueue of the test's own beside an EmbedQueue
    (moto's state outlives a test), 3-dimensional vectors, one group of users a memory; the
    drained queue's URL (the other's in ``EMBED_QUEUE_URL``)."""
    sqs = aws_clients.client("sqs")
    url = sqs.create_queue(QueueName=f"vectors-{uuid.uuid4().hex}")["QueueUrl"]
    retries = sqs.create_queue(QueueName=f"embed-{uuid.uuid4().hex}")["QueueUrl"]
    env = {
        "EMBEDDINGS": "Enabled",
        "EMBEDDING_DIMENSIONS": "3",
        "VECTOR_BUCKETS": BUCKETS,
        "VECTOR_WRITES": "Batched",
        "VECTOR_GROUPS": "1",
        "EMBED_QUEUE_URL": retries,
        "VECTOR_QUEUE_URL": url,
    }
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    get_settings.cache_clear()
    monkeypatch.setattr(embeddings, "embed_many", _model)
    monkeypatch.setattr(embed_queue, "RECEIVE_WAIT_S", 0)  # moto answers what it holds: no need to wait here
    meaning._QUERIES.clear()
    yield url
    for name in env:
        monkeypatch.delenv(name)
    get_settings.cache_clear()


@pytest.fixture
def puts(monkeypatch) -> list[tuple[str, int]]:
    """Every ``vectors.put`` made: (index name, vectors)."""
    made: list[tuple[str, int]] = []
    real = vectors.put

    def spy(index: vectors.Index, dimensions: int, given: Any) -> None:
        made.append((index.name, len(given)))
        real(index, dimensions, given)

    monkeypatch.setattr(vectors, "put", spy)
    return made


def _where(scope: Scope) -> Where:
    asset = assets.of_scope(scope)
    assert asset is not None
    return Where.of(asset)


def _add(scope: Scope, text: str) -> str:
    return conversation.add(scope, [{"role": "user", "content": text}], writer(scope)).accepted_ids[0]


def _stored(scope: Scope) -> list[str]:
    where = _where(scope)
    index = vectors.index_of(
        where.vector_bucket, scope.team_id, scope.agent_id, where.epoch, 3, scope.user_id, where.groups
    )
    return sorted(key for key, _ in vectors.keys(index))


def _waiting(scope: Scope) -> list[str]:
    return sorted(waiting_vectors.keys_of(_where(scope).item_pk("L0", scope.user_id)))


def _held(url: str) -> tuple[int, int]:
    """(messages visible, messages received and not yet deleted)."""
    got = aws_clients.client("sqs").get_queue_attributes(
        QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
    )["Attributes"]
    return int(got["ApproximateNumberOfMessages"]), int(got["ApproximateNumberOfMessagesNotVisible"])


def test_a_drain_puts_a_memorys_waiting_vectors_with_one_put_and_empties_the_queue(queue, puts):
    scope, other = fresh_scope(), fresh_scope()
    ids = [_add(scope, text) for text in ("an apple a day", "a boat on the lake", "a cloud at noon")]
    theirs = _add(other, "apples and boats")
    assert _held(queue) == (4, 0) and puts == [], "each write queued its vectors and put none"
    assert _waiting(scope) == sorted(ids)

    drained = vector_upkeep.drain(lambda: 300.0)

    assert (drained.messages, drained.again, drained.rounds) == (4, 0, 1)
    assert _stored(scope) == sorted(ids) and _stored(other) == [theirs]
    assert sorted(n for _, n in puts) == [1, 3], "one PutVectors a memory's group, whatever the writes"
    assert _waiting(scope) == [] and _waiting(other) == [], "what waited goes once it is put"
    assert _held(queue) == (0, 0), "every message it did is deleted"
    assert vector_upkeep.drain(lambda: 300.0) == vector_upkeep.Drained(), "an empty queue: nothing to do"


def test_a_message_to_try_again_stays_in_the_queue_for_a_later_drain(queue, monkeypatch):
    scope = fresh_scope()
    first, second = _add(scope, "an apple"), _add(scope, "a boat")
    real = vector_upkeep.consume
    failing: list[str] = []

    def consume(bodies: Any, remaining_s: Any) -> list[str]:
        again = real(bodies, remaining_s)
        failing[:] = [m for m, body in bodies if second in body["ids"]]
        return again + failing

    monkeypatch.setattr(vector_upkeep, "consume", consume)
    drained = vector_upkeep.drain(lambda: 300.0)
    assert (drained.messages, drained.again) == (2, 1)
    assert _held(queue) == (0, 1), "its message is not deleted: it comes back after the visibility timeout"
    assert first in _stored(scope)


def test_a_drain_goes_on_round_after_round_until_the_queue_is_empty(queue, monkeypatch, puts):
    monkeypatch.setattr(vector_upkeep, "DRAIN_ROUND", 3)
    scope = fresh_scope()
    ids = [_add(scope, f"apple number {n}") for n in range(7)]
    drained = vector_upkeep.drain(lambda: 300.0)
    assert (drained.messages, drained.rounds, drained.again) == (7, 3, 0)
    assert _stored(scope) == sorted(ids) and _held(queue) == (0, 0)
    assert [n for _, n in puts] == [3, 3, 1], "a round's vectors together"


def test_a_drain_with_too_little_time_left_receives_nothing(queue):
    scope = fresh_scope()
    _add(scope, "an apple")
    assert vector_upkeep.drain(lambda: vector_upkeep.ROUND_MIN_S - 0.1) == vector_upkeep.Drained()
    assert _held(queue) == (1, 0), "left for the next drain, never received"


def test_a_message_that_is_not_a_json_object_is_dropped(queue):
    for body in ("not json", "[1, 2]"):
        aws_clients.client("sqs").send_message(QueueUrl=queue, MessageBody=body)
    drained = vector_upkeep.drain(lambda: 300.0)
    assert (drained.messages, drained.again) == (2, 0)
    assert _held(queue) == (0, 0)


def test_the_handler_drains_on_the_schedules_event_and_consumes_a_batch_otherwise(queue, monkeypatch):
    import importlib.util
    from pathlib import Path

    spec = importlib.util.spec_from_file_location(
        "embed_app", Path(__file__).resolve().parents[2] / "functions/embed/app.py"
    )
    assert spec is not None and spec.loader is not None
    app = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(app)

    class Context:
        @staticmethod
        def get_remaining_time_in_millis() -> int:
            return 600_000

    scope = fresh_scope()
    added = _add(scope, "a cloud")
    assert app.lambda_handler({"drain": True}, Context()) == {"messages": 1, "again": 0, "rounds": 1}
    assert _stored(scope) == [added] and _held(queue) == (0, 0)
    batch = {"Records": [{"messageId": "m1", "body": "not json"}]}
    assert app.lambda_handler(batch, Context()) == {"batchItemFailures": []}
    # an event source's batch keeps the 60 s consumer's time whatever the timeout (600 s with a drain)
    given: list[float] = []
    monkeypatch.setattr(vector_upkeep, "consume", lambda bodies, remaining_s: given.append(remaining_s()) or [])
    app.lambda_handler({"Records": [{"messageId": "m2", "body": "{}"}]}, Context())
    assert 0 < given[0] <= app.BATCH_BUDGET_S < 60


def test_a_round_keeps_a_groups_messages_together_so_a_chunk_edge_splits_one_put_at_most(queue, monkeypatch, puts):
    """Messages of two groups of users queued alternately, two ids a chunk: in their queued order
    every chunk would reach both groups (four puts); a group's messages side by side take two."""
    monkeypatch.setenv("VECTOR_GROUPS", "2")
    get_settings.cache_clear()
    monkeypatch.setattr(vector_upkeep, "CONSUME_CHUNK", 2)
    users = {vectors.group_of(f"user-{n}", 2): f"user-{n}" for n in range(20)}
    team = fresh_scope()
    a, b = (Scope(team.team_id, team.agent_id, users[g], "s") for g in (0, 1))
    ids = [_add(scope, f"apple {n}") for n in range(2) for scope in (a, b)]
    drained = vector_upkeep.drain(lambda: 300.0)
    assert (drained.messages, drained.again) == (4, 0)
    where = _where(a)
    index = [
        vectors.index_of(where.vector_bucket, a.team_id, a.agent_id, where.epoch, 3, u, 2)
        for u in (a.user_id, b.user_id)
    ]
    assert sorted(puts) == sorted((i.name, 2) for i in index)
    assert _stored(a) == sorted(ids[0::2]) and _stored(b) == sorted(ids[1::2])


def test_a_steady_trickle_of_writes_never_holds_a_round_open(queue, monkeypatch):
    """A receive that always brings a message (a writer never pausing): the round ends when its
    gathering time is up, and no round follows a short one."""
    monkeypatch.setattr(vector_upkeep, "GATHER_S", 0.2)
    sent = iter(range(10**6))

    def receive(most: int) -> list[embed_queue.Received]:
        time.sleep(0.01)  # one message a long poll brings as soon as it comes
        return [embed_queue.Received(f"m{next(sent)}", "handle", "[]")]

    monkeypatch.setattr(embed_queue, "receive", receive)
    deleted: list[str] = []
    monkeypatch.setattr(embed_queue, "delete", lambda done: deleted.extend(m.message_id for m in done) or len(done))
    drained = vector_upkeep.drain(lambda: 300.0)
    assert drained.rounds == 1 and 0 < drained.messages < vector_upkeep.DRAIN_ROUND
    assert len(deleted) == drained.messages, "every message it received was done (here: dropped)"


def test_what_a_write_could_not_embed_goes_to_the_queue_retried_within_minutes(queue, monkeypatch):
    """The drain's queue carries waiting vectors only: an item the request could not embed (the
    model throttled) is queued to EmbedQueue, whose event source embeds it within minutes, not at
    the next drain; in one write, the other item waits for the drain."""

    def model(model_id: str, dimensions: int, texts: list[str], deadline_s: float) -> list[Any]:
        return [embeddings.RETRY if "boat" in t else v for t, v in zip(texts, _model("", 3, texts, 0), strict=True)]

    monkeypatch.setattr(embeddings, "embed_many", model)
    scope = fresh_scope()
    waits, failed = conversation.add(
        scope, [{"role": "user", "content": "an apple"}, {"role": "user", "content": "a boat"}], writer(scope)
    ).accepted_ids
    retries = get_settings().embed_queue_url
    assert retries and retries != queue
    assert _held(queue) == (1, 0) and _held(retries) == (1, 0)
    [message] = aws_clients.client("sqs").receive_message(QueueUrl=retries)["Messages"]
    assert json.loads(message["Body"])["ids"] == [failed]
    assert _waiting(scope) == [waits]
    assert vector_upkeep.drain(lambda: 300.0).messages == 1, "the drain takes its own queue only"
    assert _stored(scope) == [waits] and _held(retries) == (0, 1)


def test_a_write_that_failed_after_keeping_vectors_waiting_has_them_put_within_minutes(queue, monkeypatch, puts):
    """The write kept its vectors waiting, then failed (reading its items back): its message goes
    to EmbedQueue, flagged as waiting, so the consumer puts what waited and deletes it — not the
    model again, and nothing left waiting for the drain or for the TTL."""
    real = meaning.live_items
    monkeypatch.setattr(meaning, "live_items", lambda *args: (_ for _ in ()).throw(RuntimeError("read failed")))
    scope = fresh_scope()
    added = _add(scope, "an apple")
    monkeypatch.setattr(meaning, "live_items", real)
    monkeypatch.setattr(vector_upkeep, "live_items", real)
    retries = get_settings().embed_queue_url
    assert _held(queue) == (0, 0) and _held(retries) == (1, 0) and _waiting(scope) == [added]
    [message] = aws_clients.client("sqs").receive_message(QueueUrl=retries)["Messages"]
    body = json.loads(message["Body"])
    assert body["ids"] == [added] and body["waiting"] is True
    asked: list[str] = []
    monkeypatch.setattr(embeddings, "embed_many", lambda m, d, texts, s: asked.extend(texts) or _model(m, d, texts, s))
    assert vector_upkeep.consume([("m", body)], lambda: 60.0) == []
    assert asked == [] and _stored(scope) == [added] and _waiting(scope) == []
