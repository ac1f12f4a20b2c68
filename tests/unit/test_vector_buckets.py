"""Which vector bucket a memory's indexes live in (``vectors``' layout), in this process over moto
with the local stack's S3 Vectors patch: a new memory is pinned on its asset to the bucket the
digest rule gives it among the stack's buckets, so a stack that gains buckets moves no memory; a
memory of before (no pin) stays where the rule put it over the first four. Every path that reaches
the vectors — a write, a search, an erasure, the queue's consumer, a clear's purge, an import's
finish — goes to the pinned bucket."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from in_process import fresh_scope, writer
from memory_hub.domain import assets, clear, conversation, meaning, vector_upkeep
from memory_hub.domain.principal import Principal
from memory_hub.domain.scope import Scope
from memory_hub.domain.transfer import staging
from memory_hub.settings import get_settings
from memory_hub.storage import aws as aws_clients
from memory_hub.storage import embeddings, purge, vectors
from memory_hub.storage.counters import Where
from memory_hub.storage.models import Asset
from memory_hub.storage.views import Asset as ViewedAsset
from test_layout import team_ids

FOUR = [f"memory-hub-vectorbucket{i}" for i in range(4)]  # the template's, as the local stack names them
SIX = [*FOUR, "memory-hub-vectorbucket4", "memory-hub-vectorbucket5"]
EIGHT = [*SIX, "memory-hub-vectorbucket6", "memory-hub-vectorbucket7"]
ADMIN = Principal("unit-admin", "admin", ("*",))


def _embedded(model_id, dimensions, texts, deadline_s):
    """A model of three words: each a dimension (the third one for any text)."""
    return [[1.0 if "apple" in t else 0.0, 1.0 if "boat" in t else 0.0, 0.1] for t in texts]


def _buckets(monkeypatch, names: list[str]) -> None:
    monkeypatch.setenv("VECTOR_BUCKETS", ",".join(names))
    get_settings.cache_clear()


@pytest.fixture
def meaning_on(aws, monkeypatch):
    """Meaning on, 3-dimensional vectors, the stack's four vector buckets and two more (made here)."""
    client = aws_clients.client("s3vectors")
    for name in EIGHT[len(FOUR) :]:
        if name not in {b["vectorBucketName"] for b in client.list_vector_buckets()["vectorBuckets"]}:
            client.create_vector_bucket(vectorBucketName=name)
    env = {"EMBEDDINGS": "Enabled", "EMBEDDING_DIMENSIONS": "3", "VECTOR_GROUPS": "1"}
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    _buckets(monkeypatch, FOUR)
    monkeypatch.setattr(embeddings, "embed_many", _embedded)
    meaning._QUERIES.clear()
    yield monkeypatch
    for name in [*env, "VECTOR_BUCKETS"]:
        monkeypatch.delenv(name)
    get_settings.cache_clear()


def _moved_by_more_buckets() -> Scope:
    """A fresh memory that the digest rule places elsewhere over six buckets than over four."""
    for _ in range(200):
        scope = fresh_scope("user-0", "s1")
        if vectors.bucket_of(scope.team_id, scope.agent_id, SIX) != vectors.bucket_of(
            scope.team_id, scope.agent_id, FOUR
        ):
            return scope
    raise AssertionError("the rule never moved a memory")


def _add(scope: Scope, text: str) -> str:
    return conversation.add(scope, [{"role": "user", "content": text}], writer(scope)).accepted_ids[0]


def _where(scope: Scope) -> Where:
    asset = assets.of_scope(scope)
    assert asset is not None
    return Where.of(asset)


def _held(scope: Scope) -> dict[str, list[str]]:
    """The memory's index names, by the bucket that holds them (buckets holding none left out)."""
    found = {name: vectors.indexes(name, vectors.prefix(scope.team_id, scope.agent_id)) for name in EIGHT}
    return {name: held for name, held in found.items() if held}


def _keys(bucket: str, scope: Scope) -> list[str]:
    where = _where(scope)
    index = vectors.index_of(bucket, scope.team_id, scope.agent_id, where.epoch, 3, scope.user_id, where.groups)
    return sorted(key for key, _ in vectors.keys(index))


def _unpin(scope: Scope) -> None:
    """Make the memory one of before: its asset without a pinned bucket."""
    asset = assets.of_scope(scope)
    assert asset is not None
    Asset(asset.pk, asset.sk).update(actions=[Asset.vector_bucket.remove()])


def test_a_new_memory_is_pinned_to_the_rules_bucket_among_all_of_the_stacks(meaning_on):
    _buckets(meaning_on, SIX)
    scope = _moved_by_more_buckets()
    home = vectors.bucket_of(scope.team_id, scope.agent_id, SIX)
    mine = _add(scope, "an apple pie")
    asset = assets.of_scope(scope)
    assert asset is not None and asset.vector_bucket == home
    assert list(_held(scope)) == [home] and _keys(home, scope) == [mine]
    found = conversation.search(scope, "apple", 10, None, None, writer(scope))
    assert [m.id for m in found.messages] == [mine]
    assert conversation.delete(scope, [mine], None, writer(scope), "req-unit-buckets-0001").deleted_ids == [mine]
    assert _keys(home, scope) == []


def test_a_memory_keeps_its_bucket_when_the_stack_gains_buckets(meaning_on):
    _buckets(meaning_on, SIX)
    scope = _moved_by_more_buckets()  # pinned among six, elsewhere than the rule of before says
    first = _add(scope, "an apple pie")
    home = vectors.bucket_of(scope.team_id, scope.agent_id, SIX)
    _buckets(meaning_on, EIGHT)  # two buckets more; the rule of before points elsewhere still
    later = _add(scope, "an apple tart")
    assert list(_held(scope)) == [home] and _keys(home, scope) == sorted([first, later])
    found = conversation.search(scope, "apple", 10, None, None, writer(scope))
    assert sorted(m.id for m in found.messages) == sorted([first, later])


def test_a_memory_of_before_lives_in_the_first_four_buckets_by_the_rule(meaning_on):
    scope = _moved_by_more_buckets()
    _add(scope, "a boat")
    _unpin(scope)
    _buckets(meaning_on, SIX)
    later = _add(scope, "an apple")
    legacy = vectors.bucket_of(scope.team_id, scope.agent_id, FOUR)
    assert _where(scope).bucket == "" and _where(scope).vector_bucket == legacy
    assert list(_held(scope)) == [legacy] and later in _keys(legacy, scope)


def _pinned_memory(monkeypatch) -> tuple[Scope, ViewedAsset]:
    """Six buckets, and a memory the rule pins elsewhere than among four, with one message."""
    _buckets(monkeypatch, SIX)
    scope = _moved_by_more_buckets()
    _add(scope, "an apple pie")
    asset = assets.of_scope(scope)
    assert asset is not None
    return scope, asset


def test_a_clear_drops_the_old_epochs_indexes_in_the_pinned_bucket(meaning_on):
    scope, asset = _pinned_memory(meaning_on)
    home, before = asset.vector_bucket, _held(scope)
    assert home is not None and list(before) == [home]
    assert clear.clear(ADMIN, [asset], "req-unit-buckets-0002", lambda: 60_000).all_cleared
    assert _held(scope) == {}  # the old epoch's index is gone; nothing was written since


def test_a_purge_record_keeps_the_pinned_bucket(meaning_on):
    scope, asset = _pinned_memory(meaning_on)
    target = purge.Target.of(asset, int(asset.epoch), 1)
    assert target.bucket == asset.vector_bucket and target.where.vector_bucket == asset.vector_bucket
    assert purge._target(purge._record(target)) == target  # a continuation or the cleanup reads it back
    of_before = purge._target(purge._record(purge.Target(asset.memory_id, scope.team_id, scope.agent_id, 1, 1)))
    assert of_before.bucket == "" and of_before.where.vector_bucket == vectors.bucket_of(
        scope.team_id, scope.agent_id, FOUR
    )


def test_a_queued_embedding_lands_in_the_bucket_its_message_names(meaning_on):
    _buckets(meaning_on, SIX)
    scope = _moved_by_more_buckets()
    _add(scope, "an apple")
    home = vectors.bucket_of(scope.team_id, scope.agent_id, SIX)
    sent: list[dict] = []
    meaning_on.setattr(meaning.embed_queue, "send", lambda body, to_drain=False: sent.append(body) or True)
    meaning_on.setattr(
        embeddings, "embed_many", lambda model_id, dimensions, texts, deadline_s: [embeddings.RETRY] * len(texts)
    )
    later = _add(scope, "a boat")  # the model is busy: queued
    [body] = sent
    assert body["bucket"] == home and body["ids"] == [later]
    meaning_on.setattr(embeddings, "embed_many", _embedded)
    assert vector_upkeep.consume([("message-1", body)], lambda: 60.0) == []
    assert later in _keys(home, scope)
    del body["bucket"]  # a message queued before memories were pinned: the rule over the first four
    assert vector_upkeep.consume([("message-2", body)], lambda: 60.0) == []
    assert later in _keys(vectors.bucket_of(scope.team_id, scope.agent_id, FOUR), scope)


def test_an_imports_finish_erases_in_the_pinned_bucket(meaning_on):
    _buckets(meaning_on, SIX)
    scope = _moved_by_more_buckets()
    _add(scope, "an apple")
    seen: list[Where] = []
    job = SimpleNamespace(team_id=scope.team_id, agent_id=scope.agent_id, memory_id="mem-x", sk="imp-x")
    meaning_on.setattr(staging.Journal, "load", staticmethod(lambda job: SimpleNamespace(epoch=7)))
    meaning_on.setattr(staging, "reinforce_after_commit", lambda where, journal: seen.append(where) or 0)
    meaning_on.setattr(staging, "fold", lambda where, journal, import_id: seen.append(where) or set())
    meaning_on.setattr(staging.landing, "land", lambda job, journal: None)
    meaning_on.setattr(staging, "forget", lambda job: None)
    staging.finish(job)  # type: ignore[arg-type]
    home = vectors.bucket_of(scope.team_id, scope.agent_id, SIX)
    assert [(w.epoch, w.memory_id, w.vector_bucket) for w in seen] == [(7, "mem-x", home)] * 2


@settings(max_examples=200, deadline=None)
@given(team=team_ids, agent=team_ids, more=st.integers(0, 60), pin=st.sampled_from(["", "a-pinned-bucket"]))
def test_a_memory_is_where_its_pin_says_else_where_the_rule_put_it_among_four(team, agent, more, pin):
    """Any pair, any number of buckets added: a pinned memory is in its pinned bucket; an unpinned
    one where the rule puts it over the first four, whatever came after them."""
    stack = [*FOUR, *(f"bucket-{i}" for i in range(more))]
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("VECTOR_BUCKETS", ",".join(stack))
        get_settings.cache_clear()
        where = Where(team, agent, 1, bucket=pin)
        assert where.vector_bucket == (pin or vectors.bucket_of(team, agent, FOUR))
    get_settings.cache_clear()


def test_the_cleanup_drops_what_a_release_of_before_put_where_its_rule_said(meaning_on):
    """A function of before (mid-deploy, or after a rollback) puts a pinned memory's vectors in the
    bucket the rule over four gives it: the cleanup's backfill drops that index and keeps the
    memory's own, and finds every item there."""
    scope, asset = _pinned_memory(meaning_on)
    where = Where.of(asset)
    legacy = vectors.bucket_of(scope.team_id, scope.agent_id, FOUR)
    stray = vectors.index_of(legacy, scope.team_id, scope.agent_id, where.epoch, 3, scope.user_id, where.groups)
    vectors.put(stray, 3, [vectors.Vector("msg-x", [1.0, 0.0, 0.1], {"layer": "L0", "model": meaning.model()})])
    assert sorted(_held(scope)) == sorted([asset.vector_bucket, legacy])
    report = vector_upkeep.backfill(where, lambda: False)
    assert report.indexes_dropped == 1 and list(_held(scope)) == [asset.vector_bucket]
    assert len(_keys(str(asset.vector_bucket), scope)) == 1  # the memory's own vector, where it lives
    _unpin(scope)  # a memory of before lives in that bucket: nothing of it is a stray
    _add(scope, "an apple tart")
    of_before = Where.of(assets.of_scope(scope))  # type: ignore[arg-type]
    assert vector_upkeep.backfill(of_before, lambda: False).indexes_dropped == 0
    assert legacy in _held(scope)
