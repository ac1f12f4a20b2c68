"""The cost section's cases that write or erase with typical text: their labels (the rows of the
cost table) and what each request needs before it, untimed (``cost.route_cost`` runs them)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .cases import Case, Scope
from .client import BenchError, Target

ONE_MESSAGE_ADD = "/v3/conversation/add (1 message, 200 B)"
ONE_MESSAGE_DELETE = "/v3/conversation/delete (1 message, 200 B)"
ONE_RECORD_ADD = "/v3/atomic/add (1 record, 86 B)"
ONE_RECORD_DELETE = "/v3/atomic/delete (1 record, 86 B)"
ONE_RECORD_UPDATE = "/v3/atomic/update (1 record, 86 B)"
SESSION_MESSAGES = 50  # a session erased whole: what an erasure costs a stored message past its fixed part
SESSION_DELETE = f"/v3/conversation/delete (a session of {SESSION_MESSAGES} messages, 200 B each)"
HELD_MESSAGES = 1_000  # a memory cleared whole, a user erased whole: what each costs a stored message
HELD_ADD = 100  # messages an add of the held memory writes
MEMORY_CLEAR = f"/v3/chat-memory/clear (a memory of {HELD_MESSAGES:,} messages, 200 B each)"
USER_DELETE = f"/v3/user-memory/delete (a user of {HELD_MESSAGES:,} messages, 200 B each)"


def one_message_add(target: Target, scope: Scope, text: str) -> Case:
    """The workload's unit of writing: one 200-byte message (``text``) added to a conversation."""
    target.post("/v3/conversation/add", scope.body(session_id="c0", messages=[{"role": "user", "content": text}]))
    return Case(
        "/v3/conversation/add",
        lambda i: scope.body(session_id=f"c{i % 5}", messages=[{"role": "user", "content": text}]),
    )


def session_delete(target: Target, scope: Scope, turn: str) -> Case:
    """``conversation/delete`` of a whole session of ``SESSION_MESSAGES`` typical turns (added in
    one request before each, untimed): an erasure's units a stored message, its fixed part (the
    audit event, the user's counter) shared."""
    sessions: list[str] = []

    def a_session(i: int) -> None:
        session = f"erased-{i}-{len(sessions)}"
        turns = [{"role": "user", "content": turn}] * SESSION_MESSAGES
        target.post("/v3/conversation/add", scope.body(session_id=session, messages=turns))
        sessions.append(session)

    return Case("/v3/conversation/delete", lambda i: scope.body(session_ids=[sessions.pop()]), before=a_session)


def held_erasures(target: Target, turn: str, settle: Callable[[], None] = lambda: None) -> list[tuple[str, Case]]:
    """A memory cleared and a user erased, each holding ``HELD_MESSAGES`` typical turns (added
    before each request, untimed, then ``settle``: what the adds left running ends before the
    request is measured): an erasure's units a stored message where it erases many."""
    held: list[Scope] = []

    def a_memory(i: int) -> None:
        scope = Scope.fresh("held")
        turns = [{"role": "user", "content": turn}] * HELD_ADD
        for _ in range(HELD_MESSAGES // HELD_ADD):
            target.post("/v3/conversation/add", scope.body(session_id="held", messages=turns))
        held.append(scope)
        settle()

    def whole_user(i: int) -> dict[str, Any]:
        scope = held.pop()
        return {"memory_id": scope.memory_id, "user_id": scope.user}

    return [
        (MEMORY_CLEAR, Case("/v3/chat-memory/clear", lambda i: {"memory_ids": [held.pop().memory_id]}, a_memory)),
        (USER_DELETE, Case("/v3/user-memory/delete", whole_user, a_memory)),
    ]


def typical_cases(target: Target, scope: Scope, turn: str, records: list[str]) -> dict[str, tuple[str, Case]]:
    """The workload's rows that write or erase one item, with typical text in place of its few
    words (``datasets.typical_turn_and_records``): a one-message ``conversation/delete`` of the
    one-message add's turn; an ``atomic/add``, an ``atomic/delete`` and an ``atomic/update`` (to
    another) of typical records, a new one each time (one of a held record's text would reinforce
    it) — an item's word index is a posting per distinct term, so its units follow its text."""
    messages: list[str] = []
    held: list[str] = []
    unused = iter(records)

    def a_record() -> str:
        text = next(unused, None)
        if text is None:
            raise BenchError(f"the cost section wrote all {len(records)} typical records: fewer requests a route")
        return text

    def a_message(i: int) -> None:
        added = scope.body(session_id="del", messages=[{"role": "user", "content": turn}])
        messages.append(target.post("/v3/conversation/add", added)[1]["accepted_ids"][0])

    def a_held_record(i: int) -> None:
        held.append(target.post("/v3/atomic/add", scope.body(content=a_record(), type="episodic"))[1]["id"])

    cases = [
        Case("/v3/conversation/delete", lambda i: scope.body(message_ids=[messages.pop()]), before=a_message),
        Case("/v3/atomic/add", lambda i: scope.body(content=a_record(), type="episodic")),
        Case("/v3/atomic/delete", lambda i: scope.body(ids=[held.pop()]), before=a_held_record),
        Case("/v3/atomic/update", lambda i: scope.body(id=held.pop(), content=a_record()), before=a_held_record),
    ]
    labels = (ONE_MESSAGE_DELETE, ONE_RECORD_ADD, ONE_RECORD_DELETE, ONE_RECORD_UPDATE)
    return {case.route: (label, case) for label, case in zip(labels, cases, strict=True)}
