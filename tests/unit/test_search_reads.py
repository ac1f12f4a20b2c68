"""How a conversation search reads its candidate messages (``messages.get_many(settled=True)``):
eventually consistent first, for half the read units, and strongly only what that read did not
find. moto answers every read strongly, so a lagging replica is played here by wrapping the
model's ``batch_get``: its eventually consistent reads answer from a snapshot taken earlier."""

from __future__ import annotations

from typing import Any

import pytest
from in_process import fresh_scope, writer
from memory_hub.domain import conversation
from memory_hub.domain.scope import Scope
from memory_hub.storage import aws as clients
from memory_hub.storage import messages
from memory_hub.storage.models import Message


def _everyone(scope: Scope) -> Scope:
    return Scope(scope.team_id, scope.agent_id, scope.user_id, None)


def _found(scope: Scope, text: str) -> list[str]:
    return [m.content for m in conversation.search(_everyone(scope), text, 10, None, None, writer(scope)).messages]


class _Lagging:
    """``Message.batch_get`` whose eventually consistent reads answer as the table stood at
    ``freeze()`` (nothing before it): what a replica behind the leader answers."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.real = Message.batch_get
        self.replica: dict[tuple[str, str], Any] | None = None
        self.reads: list[bool] = []
        monkeypatch.setattr(Message, "batch_get", self._batch_get)

    def freeze(self, keys: list[tuple[str, str]]) -> None:
        self.replica = {(m.pk, m.sk): m for m in self.real(keys, consistent_read=True)}

    def _batch_get(self, keys: Any, consistent_read: bool = False, **kwargs: Any) -> Any:
        keys = list(keys)
        self.reads.append(bool(consistent_read))
        if consistent_read or self.replica is None:
            return self.real(keys, consistent_read=consistent_read, **kwargs)
        return [self.replica[key] for key in keys if key in self.replica]


def test_a_search_reads_its_candidates_eventually_consistent_at_half_the_read_units(aws):
    scope = fresh_scope(session_id="s1")
    conversation.add(scope, [{"role": "user", "content": f"the lighthouse keeper's log, entry {i}"} for i in range(8)],
                     writer(scope))  # fmt: skip
    asked: list[Any] = []

    def note(params: dict[str, Any], model: Any, **_: Any) -> None:
        if model.name == "BatchGetItem":
            asked.extend(table.get("ConsistentRead", False) for table in params["RequestItems"].values())

    client = clients.dynamodb()
    client.meta.events.register("before-parameter-build.dynamodb", note)
    try:
        assert len(_found(scope, "lighthouse keeper")) == 8
    finally:
        client.meta.events.unregister("before-parameter-build.dynamodb", note)
    assert asked and not any(asked)  # every message was seen by the eventually consistent read


def test_a_message_the_replica_has_not_seen_yet_is_read_again_strongly_and_found(aws, monkeypatch):
    scope = fresh_scope(session_id="s1")
    lagging = _Lagging(monkeypatch)
    lagging.freeze([])  # the replica has seen nothing of this user yet
    conversation.add(scope, [{"role": "user", "content": "the lighthouse keeper logged a storm"}], writer(scope))
    assert _found(scope, "lighthouse storm") == ["the lighthouse keeper logged a storm"]
    assert False in lagging.reads and True in lagging.reads


def test_a_message_erased_is_not_found_though_the_replica_still_holds_it(aws, monkeypatch):
    """Every way a search comes to a message (its postings; its vector, waiting row and the records
    citing it, off here) is erased strongly before the erasure answers, so a stale copy of the
    message on a replica is never asked for."""
    scope = fresh_scope(session_id="s1")
    auth = writer(scope)
    kept, gone = conversation.add(
        scope,
        [{"role": "user", "content": "the lighthouse keeper logged a storm"},
         {"role": "user", "content": "the lighthouse keeper logged a shipwreck"}],
        auth,
    ).accepted_ids  # fmt: skip
    lagging = _Lagging(monkeypatch)
    pk = messages.get_many(_where(scope), scope.user_id, [kept, gone])[gone]
    lagging.freeze([(pk.pk, pk.sk)])  # the replica still holds the erased message
    assert conversation.delete(scope, [gone], None, auth, "req-search-reads").deleted_ids == [gone]
    assert _found(scope, "lighthouse keeper shipwreck") == ["the lighthouse keeper logged a storm"]


def _where(scope: Scope) -> Any:
    from memory_hub.domain import assets

    asset = assets.of_scope(scope)
    assert asset is not None
    return assets.where_of(asset)
