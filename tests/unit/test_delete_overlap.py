"""A delete by id, after its transaction: the search postings and the erasure's vectors-and-exports
step run at the same time (one round trip instead of two). In this process over moto."""

from __future__ import annotations

import threading
import uuid

from memory_hub.domain import atomic, conversation, erasure
from memory_hub.domain.principal import Authorize, Principal, already
from memory_hub.domain.scope import Scope
from memory_hub.storage import postings

REQUEST = "req-unit-delete-overlap-01"


def _fresh() -> Scope:
    suffix = uuid.uuid4().hex[:10]
    return Scope(f"team{suffix}", f"agent{suffix}", "u1", "s1")


def _writer(scope: Scope) -> Authorize:
    return already(Principal(f"key-writer-{scope.team_id}", "writer", (scope.team_id,)))


def test_a_delete_erases_postings_vectors_and_exports_at_the_same_time(aws, monkeypatch):
    scope = _fresh()
    auth = _writer(scope)
    message = conversation.add(scope, [{"role": "user", "content": "forget me"}], auth).accepted_ids[0]
    record = atomic.add(scope, "forget this fact", "fact", "", [], {}, auth).id
    forgetting = threading.Event()
    real_erase, real_forget = postings.erase_of, erasure.forget_erased

    def erase_of(*args, **kwargs):
        assert forgetting.wait(10), "the postings waited for the vectors and exports"
        return real_erase(*args, **kwargs)

    def forget_erased(*args, **kwargs):
        forgetting.set()
        return real_forget(*args, **kwargs)

    monkeypatch.setattr(postings, "erase_of", erase_of)
    monkeypatch.setattr(erasure, "forget_erased", forget_erased)
    assert conversation.delete(scope, [message], None, auth, REQUEST).deleted_ids == [message]
    forgetting.clear()
    assert atomic.delete(scope, [record], None, auth, REQUEST).deleted_ids == [record]
    assert conversation.search(scope, "forget", 10, None, None, auth).messages == []
    assert atomic.search(scope, "forget", None, 10, None, None, auth).items == []
