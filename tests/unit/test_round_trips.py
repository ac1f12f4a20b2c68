"""Round trips the domain saves, in this process over moto (the unit tier's ``aws``).

Reads: a read route's first data read starts beside the asset's lookup, at the content epoch this
environment last saw for the pair (``assets.read_at_epoch``), and is made again at the asset's epoch
when that guess is wrong. Erasures: a delete by id erases the search postings beside the vectors and
exports; a user's erasure deletes their messages beside their records."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from in_process import fresh_scope, writer
from memory_hub.domain import assets, atomic, clear, conversation, erasure, scenario, user_memory
from memory_hub.domain.errors import Forbidden, NotFound
from memory_hub.domain.principal import Principal
from memory_hub.domain.scope import Scope
from memory_hub.storage import messages, postings, records

REQUEST = "req-unit-round-trips-0001"


def _fresh() -> Scope:
    return fresh_scope("u1", "s1")


def _add(scope: Scope, *contents: str) -> None:
    conversation.add(scope, [{"role": "user", "content": text} for text in contents], writer(scope))


def _contents(scope: Scope) -> list[str]:
    return sorted(m.content for m in conversation.query(scope, 50, 0, None, None, writer(scope)).messages)


def _side_by_side(monkeypatch, first: tuple[object, str], then: tuple[object, str]) -> threading.Event:
    """Make ``then`` (an owner and the name of one of its functions) wait until ``first`` has
    started: a call that runs them one after the other fails instead of waiting for ever. The event
    is returned for a test that calls them again (``clear()`` it)."""
    started = threading.Event()
    real_first, real_then = getattr(*first), getattr(*then)

    def first_started(*args, **kwargs):
        started.set()
        return real_first(*args, **kwargs)

    def then_waits(*args, **kwargs):
        assert started.wait(10), f"{then[1]} waited for {first[1]} to end"
        return real_then(*args, **kwargs)

    monkeypatch.setattr(*first, first_started)
    monkeypatch.setattr(*then, then_waits)
    return started


def test_a_warm_read_does_not_wait_for_the_asset(aws, monkeypatch):
    scope = _fresh()
    _add(scope, "one", "two")
    assert _contents(scope) == ["one", "two"]  # this environment has now seen the pair's epoch
    _side_by_side(monkeypatch, (messages, "count"), (assets, "of_scope"))
    assert conversation.count(scope, None, None, writer(scope)).total == 2


def test_after_a_clear_a_read_sees_only_the_new_epoch_while_the_old_one_is_still_stored(aws):
    scope = _fresh()
    _add(scope, "before the clear")
    atomic.add(scope, "an old fact", "fact", "", [], {}, writer(scope))
    assert _contents(scope) == ["before the clear"]
    assert atomic.count(scope, None, None, None, writer(scope)).total == 1
    admin = Principal("key-admin", "admin", (scope.team_id,))
    checked = clear.checked(admin, clear.named(clear.memory_ids([scope.memory_id]), None))
    (item,) = clear.clear(admin, checked, REQUEST, lambda: 0).items  # no time to purge: the old epoch stays
    assert item.cleared is True and item.purge_pending is True
    _add(scope, "after the clear")

    auth = writer(scope)
    assert _contents(scope) == ["after the clear"]
    assert conversation.count(scope, None, None, auth).total == 1
    assert conversation.search(scope, "before", 10, None, None, auth).messages == []
    assert atomic.query(scope, None, 10, 0, None, None, auth).wire() == {"items": [], "total": 0}
    assert atomic.count(scope, None, None, None, auth).total == 0
    assert atomic.search(scope, "fact", None, 10, None, None, auth).items == []


def test_after_a_clear_deletes_updates_and_listings_act_on_the_new_epoch_only(aws):
    scope = _fresh()
    auth = writer(scope)
    old_message = conversation.add(scope, [{"role": "user", "content": "old"}], auth).accepted_ids[0]
    old_record = atomic.add(scope, "an old fact", "fact", "", [], {}, auth).id
    scenario.write(scope, "notes/old.md", "old file", None, None, auth, REQUEST)
    # each read below once, so this environment remembers the epoch before the clear
    assert conversation.count(scope, None, None, auth).total == 1
    assert atomic.count(scope, None, None, None, auth).total == 1
    assert scenario.count(scope, "", auth).count == 1
    assert [e.path for e in scenario.ls(scope, "", 10, None, auth).entries] == ["notes/old.md"]
    admin = Principal("key-admin", "admin", (scope.team_id,))
    checked = clear.checked(admin, clear.named(clear.memory_ids([scope.memory_id]), None))
    (item,) = clear.clear(admin, checked, REQUEST, lambda: 0).items
    assert item.purge_pending is True  # the old epoch's items are still stored

    assert scenario.ls(scope, "", 10, None, auth).entries == []
    assert scenario.count(scope, "", auth).count == 0
    with pytest.raises(NotFound):
        atomic.update(scope, old_record, {"content": "changed"}, None, auth, REQUEST)
    gone = atomic.delete(scope, [old_record], None, auth, REQUEST)
    assert (gone.deleted_count, gone.not_found_ids) == (0, [old_record])
    gone_messages = conversation.delete(scope, [old_message], ["s1"], auth, REQUEST)
    assert (gone_messages.deleted_count, gone_messages.not_found_ids) == (0, [old_message, "s1"])


def test_a_guessed_epoch_never_answers_for_another_pair(aws):
    """Whatever this environment remembers, the answer is read at the asset's own epoch."""
    mine, theirs = _fresh(), _fresh()
    _add(mine, "mine")
    _add(theirs, "theirs")
    other = assets.of_scope(theirs)
    assert other is not None
    assets._remember((mine.team_id, mine.agent_id), assets.where_of(other))
    assert _contents(mine) == ["mine"]
    assets._remember((mine.team_id, mine.agent_id), assets.where_of(other))
    assert [m.content for m in conversation.search(mine, "theirs mine", 10, None, None, writer(mine)).messages] == [
        "mine"
    ]


def test_a_guessed_read_that_fails_is_made_again(aws, monkeypatch):
    scope = _fresh()
    _add(scope, "kept")
    assert _contents(scope) == ["kept"]
    real_count, failures = messages.count, []

    def count(*args, **kwargs):
        if not failures:
            failures.append(1)
            raise RuntimeError("throttled")
        return real_count(*args, **kwargs)

    monkeypatch.setattr(messages, "count", count)
    assert conversation.count(scope, None, None, writer(scope)).total == 1
    assert failures == [1]


def test_nothing_is_answered_to_a_caller_the_key_check_refuses(aws):
    scope = _fresh()
    _add(scope, "private")
    assert _contents(scope) == ["private"]

    def refuse() -> Principal:
        raise Forbidden("team_id: outside this key's teams")

    with pytest.raises(Forbidden):
        conversation.query(scope, 10, 0, None, None, refuse)
    with pytest.raises(Forbidden):
        atomic.search(scope, "private", None, 10, None, None, refuse)


def test_a_pair_without_memory_reads_nothing_and_is_not_remembered(aws):
    scope = _fresh()
    assert conversation.query(scope, 10, 0, None, None, writer(scope)).wire() == {"messages": [], "total": 0}
    assert (scope.team_id, scope.agent_id) not in assets._seen


def test_it_remembers_a_bounded_number_of_pairs(aws, monkeypatch):
    monkeypatch.setattr(assets, "SEEN_PAIRS", 3)
    scopes = [_fresh() for _ in range(5)]
    for scope in scopes:
        _add(scope, "x")
        assert _contents(scope) == ["x"]
    assert len(assets._seen) <= 3
    assert (scopes[-1].team_id, scopes[-1].agent_id) in assets._seen
    assert (scopes[0].team_id, scopes[0].agent_id) not in assets._seen


def test_a_delete_erases_postings_vectors_and_exports_at_the_same_time(aws, monkeypatch):
    scope = _fresh()
    auth = writer(scope)
    message = conversation.add(scope, [{"role": "user", "content": "forget me"}], auth).accepted_ids[0]
    record = atomic.add(scope, "forget this fact", "fact", "", [], {}, auth).id
    forgetting = _side_by_side(monkeypatch, (erasure, "forget_erased"), (postings, "erase_of"))
    assert conversation.delete(scope, [message], None, auth, REQUEST).deleted_ids == [message]
    forgetting.clear()
    assert atomic.delete(scope, [record], None, auth, REQUEST).deleted_ids == [record]
    assert conversation.search(scope, "forget", 10, None, None, auth).messages == []
    assert atomic.search(scope, "forget", None, 10, None, None, auth).items == []


def test_erasing_a_user_erases_their_messages_and_records_side_by_side(aws, monkeypatch):
    scope = _fresh()
    auth = writer(scope)
    conversation.add(scope, [{"role": "user", "content": "a message"}], auth)
    atomic.add(scope, "a record", "fact", "", [], {}, auth)
    _side_by_side(monkeypatch, (records, "delete"), (messages, "delete"))
    admin = Principal("key-admin", "admin", (scope.team_id,))
    named = assets.Named(scope.memory_id, scope.team_id, scope.agent_id)
    erased = user_memory.delete(admin, named, scope.user_id, None, REQUEST)
    assert (erased.l0_deleted, erased.l1_deleted) == (1, 1)
    assert conversation.count(scope, None, None, auth).total == 0
    assert atomic.count(scope, None, None, None, auth).total == 0


def test_a_rare_action_is_found_in_a_few_reads_whatever_the_limit(aws, monkeypatch):
    """An action filter applies after DynamoDB reads a page: pages as small as ``limit`` made a
    query for a rare action read the account one event per call."""
    from memory_hub.storage import audit as stored
    from pynamodb.connection.base import Connection

    scope = _fresh()
    context = stored.EventContext(scope.team_id, "key-unit", REQUEST, scope.agent_id, scope.memory_id)
    stored.put(stored.event_items([stored.NewEvent("export", "asset", "x", 1)], context))
    for _ in range(3):
        stored.put(stored.event_items([stored.NewEvent("scenario_write", "L2", "f.md", 1)] * 100, context))
    calls = []
    real_query = Connection.query

    def counted(self, *args, **kwargs):
        calls.append(kwargs.get("limit"))
        return real_query(self, *args, **kwargs)

    monkeypatch.setattr(Connection, "query", counted)
    found = stored.of_pair(scope.team_id, scope.agent_id, None, "export", 1)
    assert [e.action for e in found] == ["export"]
    assert len(calls) <= 2, calls  # one page of up to 1,000 events, not 301 pages of 1
    calls.clear()
    assert len(stored.of_pair(scope.team_id, scope.agent_id, None, None, 5)) == 5
    assert calls == [5]  # unfiltered: a page is exactly what is answered


def test_a_users_erasure_cut_short_leaves_items_a_retry_finishes_never_bare_index_entries(aws, monkeypatch):
    """Index entries go before their items: a delete stopped half-way (a timeout) leaves messages
    that a retry finds and erases, never postings of messages already gone (nothing would find them
    again: a retry answered 0 and they stayed)."""
    scope = _fresh()
    auth = writer(scope)
    for day in range(0, 120, 40):  # more messages than one transaction deletes
        _add(scope, *[f"walked the dog along the river, day {i}" for i in range(day, day + 40)])
    atomic.add(scope, "Has a dog", "fact", "", [], {}, auth)
    admin = Principal("key-admin", "admin", (scope.team_id,))
    named = assets.Named(scope.memory_id, scope.team_id, scope.agent_id)
    where = assets.where_of(assets.of_scope(scope))
    partitions = [where.item_pk("L0", scope.user_id), where.item_pk("L1", scope.user_id)]

    def bare() -> list[str]:
        """Postings whose item is gone."""
        held = {m.id for m in messages.of_user(where, scope.user_id)} | {
            r.id for r in records.of_user(where, scope.user_id)
        }
        return [p.sk for pk in partitions for p in postings.of_partition(pk) if postings.item_in_key(p) not in held]

    class CutAfterOne(messages.Transaction):
        commits = 0

        def commit(self, *args, **kwargs):
            if CutAfterOne.commits == 1:
                raise TimeoutError("the function ran out of time")
            CutAfterOne.commits += 1
            return super().commit(*args, **kwargs)

    monkeypatch.setattr(messages, "Transaction", CutAfterOne)
    with pytest.raises(TimeoutError):
        user_memory.delete(admin, named, scope.user_id, None, REQUEST)
    assert 0 < conversation.count(scope, None, None, auth).total < 120  # cut half-way ...
    assert bare() == []  # ... with no index entry of a message already gone
    monkeypatch.undo()
    user_memory.delete(admin, named, scope.user_id, None, REQUEST)
    assert conversation.count(scope, None, None, auth).total == 0
    assert atomic.count(scope, None, None, None, auth).total == 0
    assert [p for pk in partitions for p in postings.of_partition(pk)] == []


def test_a_users_erasure_cut_by_its_time_budget_erases_the_removed_items_vectors_before_the_503(aws, monkeypatch):
    """A retry lists the user's items again and no longer sees those the cut request removed — in
    the layer cut and in the one that finished beside it: their vectors (and what waits in the
    partitions) go before it answers, or nothing would erase them."""
    from memory_hub.domain import erasure, vector_erasure
    from memory_hub.storage.concurrency import Deadline
    from memory_hub.storage.errors import Unfinished

    scope = _fresh()
    for day in range(0, 120, 40):  # more messages than one transaction deletes
        _add(scope, *[f"fed the cat by the window, day {i}" for i in range(day, day + 40)])
    record = atomic.add(scope, "Has a cat", "fact", "", [], {}, writer(scope)).id  # its layer finishes
    admin = Principal("key-admin", "admin", (scope.team_id,))
    named = assets.Named(scope.memory_id, scope.team_id, scope.agent_id)
    erased: list[tuple[str, str]] = []
    dropped: list[str] = []
    monkeypatch.setattr(vector_erasure, "erase", lambda where, owned: erased.extend(owned))
    monkeypatch.setattr(vector_erasure, "drop_waiting", lambda where, user_id: dropped.append(user_id))
    monkeypatch.setattr(erasure, "budget", lambda: Deadline.after(0.0))  # past it after the first transaction
    with pytest.raises(Unfinished) as cut:
        user_memory.delete(admin, named, scope.user_id, None, REQUEST)
    removed = {m.id for m in cut.value.removed}
    assert 0 < len(removed) < 120 and conversation.count(scope, None, None, writer(scope)).total == 120 - len(removed)
    assert atomic.count(scope, None, None, None, writer(scope)).total == 0
    assert {item for _, item in erased} == removed | {record} and dropped == [scope.user_id]


def test_a_users_erasure_failing_in_one_layer_erases_the_vectors_of_what_the_other_removed(aws, monkeypatch):
    from memory_hub.domain import vector_erasure

    scope = _fresh()
    _add(scope, "fed the cat by the window", "fed the cat by the door")
    atomic.add(scope, "Has a cat", "fact", "", [], {}, writer(scope))
    admin = Principal("key-admin", "admin", (scope.team_id,))
    named = assets.Named(scope.memory_id, scope.team_id, scope.agent_id)
    erased: list[tuple[str, str]] = []
    monkeypatch.setattr(vector_erasure, "erase", lambda where, owned: erased.extend(owned))

    def failing(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("DynamoDB answered 500 past its retries")

    monkeypatch.setattr(records, "delete_unindexed", failing)
    with pytest.raises(RuntimeError):
        user_memory.delete(admin, named, scope.user_id, None, REQUEST)
    assert conversation.count(scope, None, None, writer(scope)).total == 0  # the messages went ...
    assert len(erased) == 2  # ... and their vectors with them


@pytest.mark.parametrize("route", ["conversation/delete", "user-memory/delete"])
def test_an_erasure_dying_after_its_messages_transaction_has_already_taken_the_records_citing_them(
    aws, monkeypatch, route
):
    """Its retry no longer finds the messages, so what cites them must be gone before they go: the
    records citing a message are erased before the transaction that deletes it."""
    scope = _fresh()
    auth = writer(scope)
    added = conversation.add(scope, [{"role": "user", "content": c} for c in ("I moved to Paris", "hi")], auth)
    said, kept = added.accepted_ids
    cited = atomic.add(scope, "lives in Paris", "fact", "", [], {}, auth, source_message_ids=[said]).id
    other = atomic.add(scope, "says hi", "fact", "", [], {}, auth, source_message_ids=[kept]).id

    def died(*args: Any, **kwargs: Any) -> None:
        raise TimeoutError("the Lambda was stopped")

    monkeypatch.setattr(messages, "_finish", died)  # right after the messages' transaction
    with pytest.raises(TimeoutError):
        if route == "conversation/delete":
            conversation.delete(scope, [said], None, auth, REQUEST)
        else:
            admin = Principal("key-admin", "admin", (scope.team_id,))
            named = assets.Named(scope.memory_id, scope.team_id, scope.agent_id)
            user_memory.delete(admin, named, scope.user_id, said, REQUEST)
    where = assets.where_of(assets.of_scope(scope))
    assert messages.get_many(where, scope.user_id, [said, kept]).keys() == {kept}
    assert records.get(where, scope.user_id, cited) is None  # never outlives its source
    assert records.get(where, scope.user_id, other) is not None  # exactly what cited it, nothing else
