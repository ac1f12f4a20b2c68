"""storage/transactions.py over moto in process: named cancellations, retried conflicts, the 100 cap.

PynamoDB's TransactWrite sends the actions grouped by kind (``REQUEST_ORDER``), not in the order they
were added: the reasons injected below are in request order, as DynamoDB gives them."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from aws_faults import Calls, error, hook
from botocore.exceptions import ClientError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from memory_hub.settings import get_settings
from memory_hub.storage import aws as clients
from memory_hub.storage.errors import Cancelled
from memory_hub.storage.models import Counter, Guard, OneClient
from memory_hub.storage.transactions import MAX_ACTIONS, REQUEST_ORDER, Transaction
from pynamodb.connection import Connection
from pynamodb.exceptions import AttributeNullError

EVENT = "before-call.dynamodb.TransactWriteItems"
KINDS = ("check", "put", "update", "delete")


def _fresh_pk() -> str:
    return f"UNIT#{uuid.uuid4().hex}"


def _seed(pk: str) -> None:
    Guard(pk, "checked", atom_id="a").save()
    Guard(pk, "taken", atom_id="old").save()
    Counter(pk, "counter", item_count=1).save()
    Guard(pk, "doomed", atom_id="x").save()


def _add(transaction: Transaction, kind: str, pk: str, fail: bool) -> None:
    """One action of each kind on its own item; ``fail`` makes its condition false."""
    if kind == "check":
        transaction.check("check", Guard, pk, "checked", condition=Guard.atom_id == ("nope" if fail else "a"))
    elif kind == "put":
        target = "taken" if fail else "fresh"  # the condition refuses an item that exists
        transaction.put("put", Guard(pk, target, atom_id="new"), condition=Guard.sk.does_not_exist())
    elif kind == "update":
        transaction.update(
            "update",
            Counter(pk, "counter"),
            [Counter.item_count.add(1)],
            condition=Counter.item_count == (99 if fail else 1),
        )
    else:
        transaction.delete("delete", Guard(pk, "doomed"), condition=Guard.atom_id == ("nope" if fail else "x"))


def _state(pk: str) -> dict[str, object]:
    def guard(sk: str) -> str | None:
        try:
            return Guard.get(pk, sk, consistent_read=True).atom_id
        except Guard.DoesNotExist:
            return None

    return {
        "taken": guard("taken"),
        "fresh": guard("fresh"),
        "doomed": guard("doomed"),
        "counter": int(Counter.get(pk, "counter", consistent_read=True).item_count),
    }


UNCHANGED = {"taken": "old", "fresh": None, "doomed": "x", "counter": 1}


# every example makes its own items (fresh pk); the conftest's autouse socket guard is function-scoped
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(order=st.permutations(KINDS), failing=st.sets(st.sampled_from(KINDS)))
def test_cancellation_names_the_failed_actions_whatever_their_kind_and_order(aws, order, failing):
    pk = _fresh_pk()
    _seed(pk)
    transaction = Transaction()
    for kind in order:
        _add(transaction, kind, pk, kind in failing)
    assert len(transaction) == 4
    if not failing:
        transaction.commit()
        assert _state(pk) == {"taken": "old", "fresh": "new", "doomed": None, "counter": 2}
        return
    with pytest.raises(Cancelled) as caught:
        transaction.commit()
    assert caught.value.failed == [kind for kind in order if kind in failing]
    assert str(caught.value) == "transaction cancelled: " + ", ".join(caught.value.failed)
    assert _state(pk) == UNCHANGED  # all or nothing


def test_names_repeat_when_several_actions_share_one(aws):
    pk = _fresh_pk()
    _seed(pk)
    transaction = Transaction()
    new = Guard.sk.does_not_exist()
    transaction.check("epoch", Guard, pk, "checked", condition=Guard.atom_id == "a")  # holds
    transaction.put("message", Guard(pk, "m1", atom_id="m"), condition=new)  # holds
    transaction.put("message", Guard(pk, "taken", atom_id="m"), condition=new)  # fails
    transaction.put("message", Guard(pk, "m2", atom_id="m"), condition=new)  # holds
    transaction.check("message", Guard, pk, "doomed", condition=Guard.atom_id == "?")  # fails
    with pytest.raises(Cancelled) as caught:
        transaction.commit()
    assert caught.value.failed == ["message", "message"]


def test_an_action_pynamodb_refuses_leaves_no_name_behind(aws):
    """An item that cannot be serialized is refused when added; the names of the actions after it
    still line up with the request."""
    pk = _fresh_pk()
    _seed(pk)
    transaction = Transaction()
    with pytest.raises(AttributeNullError):
        transaction.put("incomplete", Guard(pk, "no-atom"))  # atom_id is required
    assert (len(transaction), transaction.room()) == (0, MAX_ACTIONS)
    transaction.put("claim", Guard(pk, "taken", atom_id="new"), condition=Guard.sk.does_not_exist())
    with pytest.raises(Cancelled) as caught:
        transaction.commit()
    assert caught.value.failed == ["claim"]


# ---------------------------------------------------------------- retries


def _cancelled(*codes: str):
    return error(
        400,
        "TransactionCanceledException",
        "Transaction cancelled",
        CancellationReasons=[{"Code": code} for code in codes],
    )


@pytest.mark.parametrize("reason", ["TransactionConflict", "ThrottlingError", "ProvisionedThroughputExceeded"])
def test_a_transaction_cancelled_by_a_conflict_is_retried_then_succeeds(aws, reason):
    pk = _fresh_pk()
    _seed(pk)
    transaction = Transaction()
    _add(transaction, "check", pk, False)
    _add(transaction, "update", pk, False)
    calls = Calls(_cancelled("None", reason), _cancelled(reason, "None"))  # two conflicts, then through to moto
    with hook(clients.dynamodb(), EVENT, calls):
        transaction.commit()
    assert len(calls) == 3
    assert _state(pk)["counter"] == 2  # applied exactly once


def test_transaction_in_progress_is_retried(aws):
    pk = _fresh_pk()
    _seed(pk)
    transaction = Transaction()
    _add(transaction, "update", pk, False)
    calls = Calls(error(400, "TransactionInProgressException"))
    with hook(clients.dynamodb(), EVENT, calls):
        transaction.commit()
    assert len(calls) == 2
    assert _state(pk)["counter"] == 2


def test_a_failed_condition_wins_over_a_conflict_and_is_not_retried(aws):
    pk = _fresh_pk()
    _seed(pk)
    transaction = Transaction()
    _add(transaction, "update", pk, False)
    _add(transaction, "delete", pk, False)
    # in request order: the delete, then the update
    calls = Calls(_cancelled("ConditionalCheckFailed", "TransactionConflict"))
    with hook(clients.dynamodb(), EVENT, calls), pytest.raises(Cancelled) as caught:
        transaction.commit()
    assert caught.value.failed == ["delete"]
    assert len(calls) == 1
    assert _state(pk) == UNCHANGED


def test_other_cancellations_and_errors_are_raised_not_retried(aws):
    pk = _fresh_pk()
    _seed(pk)
    transaction = Transaction()
    _add(transaction, "update", pk, False)
    for injected, code in [
        (_cancelled("ValidationError"), "TransactionCanceledException"),
        (error(400, "ValidationException"), "ValidationException"),
        (error(400, "AccessDeniedException"), "AccessDeniedException"),
    ]:
        calls = Calls(injected)
        with hook(clients.dynamodb(), EVENT, calls), pytest.raises(ClientError) as caught:
            transaction.commit()
        assert not isinstance(caught.value, Cancelled)
        assert clients.error_code(caught.value) == code
        assert len(calls) == 1
    assert _state(pk) == UNCHANGED


# ---------------------------------------------------------------- the 100-action cap


def test_more_than_100_actions_is_refused_before_any_call(aws):
    pk = _fresh_pk()
    transaction = Transaction()
    calls = Calls()
    with hook(clients.dynamodb(), EVENT, calls):
        for i in range(MAX_ACTIONS):
            transaction.put(f"put{i}", Guard(pk, f"item{i:03d}", atom_id="x"))
        assert transaction.room() == 0
        with pytest.raises(ValueError, match="at most 100 actions"):
            transaction.put("one too many", Guard(pk, "extra", atom_id="x"))
        with pytest.raises(ValueError):
            transaction.check("check too", Guard, pk, "extra", condition=Guard.sk.does_not_exist())
        assert len(calls) == 0
        assert len(transaction) == MAX_ACTIONS
        transaction.commit()  # the 100 it holds still go, in one call
    assert len(calls) == 1
    assert Guard.count(pk) == MAX_ACTIONS


def test_room_and_empty_commit(aws):
    transaction = Transaction()
    assert transaction.room() == MAX_ACTIONS
    calls = Calls()
    with hook(clients.dynamodb(), EVENT, calls):
        transaction.commit()
    assert len(calls) == 0
    transaction.check("c", Guard, _fresh_pk(), "x", condition=Guard.sk.does_not_exist())
    assert (len(transaction), transaction.room()) == (1, MAX_ACTIONS - 1)


def test_the_request_groups_actions_by_kind_and_carries_only_what_dynamodb_takes(aws):
    """Added update, delete, put, check: sent in REQUEST_ORDER (what the names are mapped by),
    each with its table and no ReturnValues (TransactWriteItems refuses it)."""
    pk = _fresh_pk()
    _seed(pk)
    transaction = Transaction()
    for kind in reversed(KINDS):
        _add(transaction, kind, pk, False)
    calls = Calls()
    with hook(clients.dynamodb(), "provide-client-params.dynamodb.TransactWriteItems", calls):
        transaction.commit()
    (sent,) = calls.params
    kinds = [next(iter(action)) for action in sent["TransactItems"]]
    assert kinds == list(REQUEST_ORDER) == ["ConditionCheck", "Delete", "Put", "Update"]
    for action in sent["TransactItems"]:
        ((kind, body),) = action.items()
        assert "ReturnValues" not in body
        assert body["TableName"] == get_settings().items_table
    assert _state(pk) == {"taken": "old", "fresh": "new", "doomed": None, "counter": 2}


def test_a_cancelled_transaction_names_its_failed_actions_in_the_order_they_were_added(aws):
    """Added in the reverse of the request's order, two of four conditions failing (moto decides)."""
    pk = _fresh_pk()
    _seed(pk)
    transaction = Transaction()
    transaction.update("bump", Counter(pk, "counter"), [Counter.item_count.add(1)], condition=Counter.item_count == 1)
    transaction.put("claim", Guard(pk, "taken", atom_id="new"), condition=Guard.sk.does_not_exist())  # fails
    transaction.delete("drop", Guard(pk, "doomed"), condition=Guard.atom_id == "x")
    transaction.check("epoch", Guard, pk, "checked", condition=Guard.atom_id == "stale")  # fails
    with pytest.raises(Cancelled) as caught:
        transaction.commit()
    assert caught.value.failed == ["claim", "epoch"]
    assert _state(pk) == UNCHANGED


def test_a_conflict_is_retried_and_the_retry_reports_a_failed_condition_by_name(aws):
    """First attempt: cancelled by a concurrent transaction (injected); the second reaches moto,
    where the condition is false by then: Cancelled names it, after exactly two calls."""
    pk = _fresh_pk()
    _seed(pk)
    transaction = Transaction()
    transaction.update("bump", Counter(pk, "counter"), [Counter.item_count.add(1)], condition=Counter.item_count == 1)
    transaction.check("guard", Guard, pk, "checked", condition=Guard.atom_id == "a")
    Guard(pk, "checked", atom_id="changed").save()  # what the concurrent writer did
    calls = Calls(_cancelled("None", "TransactionConflict"))  # request order: the check, then the update
    with hook(clients.dynamodb(), EVENT, calls), pytest.raises(Cancelled) as caught:
        transaction.commit()
    assert caught.value.failed == ["guard"]
    assert len(calls) == 2
    assert _state(pk)["counter"] == 1


def test_models_and_transactions_make_only_their_own_calls_on_the_one_client(aws):
    """Models (bound afresh, as at a cold start) and transactions speak through ``aws.dynamodb()``:
    a save, a get and a commit are one PutItem, one GetItem and one TransactWriteItems on that
    client, nothing else (no DescribeTable, no client of their own)."""
    pk = _fresh_pk()
    Guard._connection = None
    Counter._connection = None
    seen: list[str] = []

    def record(model: Any, **_: Any) -> None:
        seen.append(model.name)

    with hook(clients.dynamodb(), "before-call.dynamodb", record):
        Guard(pk, "g", atom_id="a").save()
        assert Guard.get(pk, "g", consistent_read=True).atom_id == "a"
        transaction = Transaction()
        transaction.put("counter", Counter(pk, "counter", item_count=1), condition=Counter.sk.does_not_exist())
        transaction.check("guard", Guard, pk, "g", condition=Guard.atom_id == "a")
        transaction.commit()
    assert seen == ["PutItem", "GetItem", "TransactWriteItems"]
    assert _state_counter(pk) == 1


def _state_counter(pk: str) -> int:
    return int(Counter.get(pk, "counter", consistent_read=True).item_count)


def test_a_connection_pynamodb_made_without_the_one_client_is_never_used(aws):
    """What another thread could see mid-binding (PynamoDB's own connection, before the swap) is
    bound again, not used: the model ends on the one client."""
    table = Guard._get_connection()
    plain = Connection(region="us-east-1")
    plain.add_meta_table(table.get_meta_table())
    table.connection = plain
    assert isinstance(Guard._get_connection().connection, OneClient)
    assert Guard._get_connection().connection.client is clients.dynamodb()
