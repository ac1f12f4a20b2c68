"""A memory's vectors split by groups of users (``vectors``' layout), in this process over moto with
the local stack's S3 Vectors patch: a user's vectors go to the index of the user's group, a search
reads that index only, an erasure deletes from it only, the cleanup covers every group, and a
memory keeps the groups it was created with (one, for a memory of before)."""

from __future__ import annotations

import pytest
from in_process import fresh_scope, meaning_on, writer
from memory_hub.domain import assets, conversation, meaning, vector_upkeep
from memory_hub.domain.scope import Scope
from memory_hub.settings import get_settings
from memory_hub.storage import embeddings, vectors
from memory_hub.storage.counters import Where

REQUEST = "req-unit-vector-groups-0001"
BUCKETS = ",".join(f"memory-hub-vectorbucket{i}" for i in range(4))


def _embedded(model_id, dimensions, texts, deadline_s):
    """A model of three words: each a dimension (the third one for any text)."""
    return [[1.0 if "apple" in t else 0.0, 1.0 if "boat" in t else 0.0, 0.1] for t in texts]


@pytest.fixture
def grouped(aws, monkeypatch):
    """Meaning on, 3-dimensional vectors, the stack's four vector buckets and 16 groups a memory."""
    env = {"EMBEDDINGS": "Enabled", "EMBEDDING_DIMENSIONS": "3", "VECTOR_BUCKETS": BUCKETS, "VECTOR_GROUPS": "16"}
    with meaning_on(monkeypatch, env, _embedded) as patched:
        yield patched


def _two_users_in_two_groups(groups: int = 16) -> tuple[str, str]:
    first = "user-0"
    other = next(
        f"user-{i}" for i in range(1, 100) if vectors.group_of(f"user-{i}", groups) != vectors.group_of(first, groups)
    )
    return first, other


def _as(scope: Scope, user_id: str) -> Scope:
    return Scope(scope.team_id, scope.agent_id, user_id, scope.session_id)


def _add(scope: Scope, text: str) -> str:
    return conversation.add(scope, [{"role": "user", "content": text}], writer(scope)).accepted_ids[0]


def _names(scope: Scope) -> list[str]:
    asset = assets.of_scope(scope)
    assert asset is not None
    return sorted(vectors.indexes(Where.of(asset).vector_bucket, vectors.prefix(scope.team_id, scope.agent_id)))


def _index(scope: Scope, user_id: str) -> vectors.Index:
    asset = assets.of_scope(scope)
    assert asset is not None
    where = Where.of(asset)
    return vectors.index_of(where.vector_bucket, scope.team_id, scope.agent_id, where.epoch, 3, user_id, where.groups)


def _keys(index: vectors.Index) -> list[str]:
    return sorted(key for key, _ in vectors.keys(index))


def _spy(monkeypatch, name: str) -> list[vectors.Index]:
    """The indexes ``vectors.<name>`` is called on, in order (the call itself goes through)."""
    seen: list[vectors.Index] = []
    real = getattr(vectors, name)

    def spied(index, *args, **kwargs):
        seen.append(index)
        return real(index, *args, **kwargs)

    monkeypatch.setattr(vectors, name, spied)
    return seen


def test_each_users_vectors_go_to_their_groups_index_and_a_search_reads_that_index_only(grouped):
    one, other = _two_users_in_two_groups()
    scope = fresh_scope(one, "s1")
    mine = _add(scope, "an apple pie")
    theirs = _add(_as(scope, other), "an apple tart")
    assert _names(scope) == sorted([_index(scope, one).name, _index(scope, other).name])
    assert _index(scope, one).name.endswith(f"-{vectors.group_of(one, 16)}of16")
    assert (_keys(_index(scope, one)), _keys(_index(scope, other))) == ([mine], [theirs])
    queried = _spy(grouped, "query")
    found = conversation.search(scope, "apple", 10, None, None, writer(scope))
    assert [m.id for m in found.messages] == [mine]
    assert queried and set(queried) == {_index(scope, one)}  # the turns and the records: the user's group's index


def test_an_erasure_deletes_from_the_index_that_holds_its_user_only(grouped):
    one, other = _two_users_in_two_groups()
    scope = fresh_scope(one, "s1")
    mine = _add(scope, "a boat trip")
    theirs = _add(_as(scope, other), "a boat race")
    deleted_from = _spy(grouped, "delete")
    assert conversation.delete(scope, [mine], None, writer(scope), REQUEST).deleted_ids == [mine]
    assert deleted_from == [_index(scope, one)]
    assert (_keys(_index(scope, one)), _keys(_index(scope, other))) == ([], [theirs])


def test_a_memory_keeps_the_groups_it_was_created_with(grouped):
    scope = fresh_scope("user-0", "s1")
    _add(scope, "an apple")
    grouped.setenv("VECTOR_GROUPS", "4")
    get_settings.cache_clear()
    later = _add(_as(scope, "user-1"), "a boat")
    asset = assets.of_scope(scope)
    assert asset is not None and asset.vector_groups == 16
    assert _index(scope, "user-1").name.endswith("of16") and _keys(_index(scope, "user-1")) == [later]
    newer = fresh_scope("user-0", "s1")
    _add(newer, "an apple")
    assert [name.rsplit("of", 1)[-1] for name in _names(newer)] == ["4"]


def test_a_memory_of_one_group_keeps_the_names_of_before(grouped):
    grouped.setenv("VECTOR_GROUPS", "1")
    get_settings.cache_clear()
    scope = fresh_scope("user-0", "s1")
    _add(scope, "an apple")
    _add(_as(scope, "user-1"), "a boat")
    asset = assets.of_scope(scope)
    assert asset is not None and asset.vector_groups is None
    [name] = _names(scope)
    assert name == vectors.index_name(scope.team_id, scope.agent_id, int(asset.epoch), 3)


def test_the_cleanup_sweeps_every_group_and_drops_an_index_of_another_layout(grouped):
    one, other = _two_users_in_two_groups()
    scope = fresh_scope(one, "s1")
    mine = _add(scope, "an apple pie")
    theirs = _add(_as(scope, other), "a boat race")
    asset = assets.of_scope(scope)
    assert asset is not None
    where = Where.of(asset)
    stray = vectors.Vector("msg-gone", [0.0, 1.0, 0.1], {"layer": "L0", "user": "x", "model": meaning.model()})
    vectors.put(_index(scope, other), 3, [stray])  # a vector whose item is gone
    elsewhere = vectors.Index(
        _index(scope, one).bucket, vectors.index_name(scope.team_id, scope.agent_id, where.epoch, 3, 1, 4)
    )
    vectors.create_index(elsewhere, 3)  # the same epoch and size, another number of groups
    report = vector_upkeep.backfill(where, lambda: False)
    assert (report.swept, report.indexes_dropped, report.embedded) == (1, 1, 0)
    assert (_keys(_index(scope, one)), _keys(_index(scope, other))) == ([mine], [theirs])
    assert elsewhere.name not in _names(scope)
    assert vector_upkeep.backfill(where, lambda: False).swept == 0  # as many vectors as items now: nothing read


def test_a_queued_embedding_lands_in_its_users_group_index(grouped):
    one, other = _two_users_in_two_groups()
    scope = fresh_scope(one, "s1")
    _add(scope, "an apple")
    sent: list[dict] = []
    grouped.setattr(meaning.embed_queue, "send", lambda body, to_drain=False: sent.append(body) or True)
    grouped.setattr(
        embeddings, "embed_many", lambda model_id, dimensions, texts, deadline_s: [embeddings.RETRY] * len(texts)
    )
    later = _add(_as(scope, other), "a boat")  # the model is busy: queued
    [body] = sent
    assert body["groups"] == 16 and body["ids"] == [later]
    grouped.setattr(embeddings, "embed_many", _embedded)
    assert vector_upkeep.consume([("message-1", body)], lambda: 60.0) == []
    assert _keys(_index(scope, other)) == [later]
    del body["groups"]  # a message queued before memories had groups: one group
    assert vector_upkeep.consume([("message-2", body)], lambda: 60.0) == []
    assert any(name.endswith("-3") for name in _names(scope))  # a name without a group suffix
