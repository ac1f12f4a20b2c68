"""Erasures that run their independent steps side by side: a delete by id, after its transaction,
erases the search postings beside the vectors and exports; a user's erasure deletes their messages
beside their records. In this process over moto."""

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


def test_erasing_a_user_erases_their_messages_and_records_side_by_side(aws, monkeypatch):
    from memory_hub.domain import assets, user_memory
    from memory_hub.storage import messages, records

    scope = _fresh()
    auth = _writer(scope)
    conversation.add(scope, [{"role": "user", "content": "a message"}], auth)
    atomic.add(scope, "a record", "fact", "", [], {}, auth)
    started = threading.Event()
    real_messages, real_records = messages.delete, records.delete

    def delete_messages(*args, **kwargs):
        assert started.wait(10), "the messages waited for the records"
        return real_messages(*args, **kwargs)

    def delete_records(*args, **kwargs):
        started.set()
        return real_records(*args, **kwargs)

    monkeypatch.setattr(messages, "delete", delete_messages)
    monkeypatch.setattr(records, "delete", delete_records)
    admin = Principal("key-admin", "admin", (scope.team_id,))
    named = assets.Named(scope.memory_id, scope.team_id, scope.agent_id)
    erased = user_memory.delete(admin, named, scope.user_id, None, REQUEST)
    assert (erased.l0_deleted, erased.l1_deleted) == (1, 1)
    assert conversation.count(scope, None, None, auth).total == 0
    assert atomic.count(scope, None, None, None, auth).total == 0
