"""Messages kept under their time (storage/messages.py, moto in process): an id issued now carries its
message's timestamp, the message's sort key is ``m␟<time>#<id>`` and the ``by-time`` index holds no
entry of it (one index write less an add and an erasure). Messages kept under their id — issued before
ids carried a time, or derived from an import's foreign ids — keep their ``by-time`` entry, and every
read by time merges both kinds: newest first, windows, limits, counts, look-ups and erasures by id."""

from __future__ import annotations

from dataclasses import replace
from itertools import pairwise
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from in_process import fresh_scope, writer
from memory_hub.analysis import term_counts
from memory_hub.clock import ISSUED_ID, MAX_SECONDS, MIN_SECONDS, format_ms, id_time, message_id, ordered_id
from memory_hub.domain import assets, conversation
from memory_hub.domain.transfer import planning, shapes
from memory_hub.settings import get_settings
from memory_hub.storage import layout, messages, purge
from memory_hub.storage.aws import client
from memory_hub.storage.counters import Where

TIMES = st.integers(MIN_SECONDS * 1000, MAX_SECONDS * 1000 + 999)
FAR = st.integers(0, 4_000_000_000_000)  # 1970 to 2096


@settings(max_examples=300)
@given(st.lists(TIMES, min_size=2, max_size=20))
def test_a_message_id_carries_its_time_and_still_sorts_by_when_it_was_issued(times):
    ids = [message_id(t) for t in times]
    assert [id_time(i) for i in ids] == times
    assert all(a < b for a, b in pairwise(ids))  # issue order, whatever the messages' times
    assert all(ISSUED_ID.fullmatch(i) for i in ids)


def test_only_a_message_id_of_its_full_form_carries_a_time():
    timed = message_id(0)
    assert id_time(ordered_id("msg-")) is None and id_time(ordered_id("atom-")) is None
    for other in [timed[:-1], timed + "0", "atom-" + timed[4:], timed.upper(), "msg-2bbd30095e65"]:
        assert id_time(other) is None and not ISSUED_ID.fullmatch(other)


def _memory() -> tuple[Where, tuple[str, int]]:
    """A new memory whose user ``u`` said one thing (in session ``s``): its (id, timestamp)."""
    scope = fresh_scope()
    [opening] = conversation.add(scope, [{"role": "user", "content": "opening"}], writer(scope)).accepted_ids
    return assets.where_of(assets.of_scope(scope)), (opening, id_time(opening) or 0)


def _put(where: Where, items: list[tuple[str, int]], task_id: str | None = None) -> None:
    """Messages of user ``u`` in session ``s`` (and task ``task_id``) with these (id, timestamp)."""
    new = [messages.NewMessage(i, "user", f"words {i}", at, term_counts(f"words {i}")) for i, at in items]
    if new:
        messages.add(where, "u", "s", task_id, new, 1)


def _raw(where: Where) -> list[dict[str, Any]]:
    pk = where.item_pk("L0", "u")
    answer = client("dynamodb").query(
        TableName=get_settings().items_table,
        KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues={":pk": {"S": pk}},
        ConsistentRead=True,
    )
    return [item for item in answer["Items"] if layout.is_message_sk(item["sk"]["S"])]


def _indexed(where: Where) -> set[str]:
    """The ids the ``by-time`` index holds."""
    answer = client("dynamodb").query(
        TableName=get_settings().items_table,
        IndexName="by-time",
        KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues={":pk": {"S": where.item_pk("L0", "u")}},
    )
    return {item["id"]["S"] for item in answer["Items"]}


def test_an_added_message_is_kept_under_its_time_with_no_by_time_entry(aws):
    scope = fresh_scope()
    stamps = ["2024-03-01T10:00:00Z", "1999-12-31T23:59:59.999Z"]
    added = conversation.add(
        scope, [{"role": "user", "content": "a", "timestamp": t} for t in stamps], writer(scope)
    ).accepted_ids
    where = assets.where_of(assets.of_scope(scope))
    assert [format_ms(id_time(i) or 0) for i in added] == ["2024-03-01T10:00:00.000Z", "1999-12-31T23:59:59.999Z"]
    stored = {item["id"]["S"]: item for item in _raw(where)}
    for i in added:
        assert stored[i]["sk"]["S"] == layout.message_sk(i) == f"m{layout.SEP}{layout.time_key(id_time(i) or 0, i)}"
        assert "lsi1" not in stored[i]
    assert _indexed(where) == set()
    gone = conversation.delete(scope, [added[0]], None, writer(scope), "req-1")
    assert gone.deleted_ids == [added[0]] and {item["id"]["S"] for item in _raw(where)} == {added[1]}


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    timed=st.lists(FAR, max_size=6),
    legacy=st.lists(FAR, max_size=6),
    window=st.tuples(st.none() | FAR, st.none() | FAR),
    limit=st.none() | st.integers(1, 8),
)
def test_reads_by_time_merge_messages_kept_by_time_and_by_id(aws, timed, legacy, window, limit):
    where, opening = _memory()
    items = [(message_id(t), t) for t in timed] + [(ordered_id("msg-"), t) for t in legacy]
    _put(where, items[0::2])
    _put(where, items[1::2], task_id="t")
    tasked = {i for i, _ in items[1::2]}
    assert _indexed(where) == {i for i, _ in items[len(timed) :]}  # only those kept by id
    start, end = window
    inside = [
        (i, t)
        for i, t in sorted([*items, opening], key=lambda p: layout.time_key(p[1], p[0]), reverse=True)
        if (start is None or t >= start) and (end is None or t <= end)
    ]
    found = [(m.id, int(m.timestamp)) for m in messages.newest(where, "u", None, None, start, end, limit)]
    assert found == inside[:limit]
    assert messages.count(where, "u", None, None, start, end) == len(inside)
    in_session = [(m.id, int(m.timestamp)) for m in messages.newest(where, "u", "s", None, start, end, limit)]
    assert in_session == inside[:limit]  # the session's index holds both kinds
    of_task = [(m.id, int(m.timestamp)) for m in messages.newest(where, "u", None, "t", start, end, limit)]
    assert of_task == [p for p in inside if p[0] in tasked][:limit]
    assert messages.count(where, "u", None, "t", start, end) == len([p for p in inside if p[0] in tasked])
    importing = replace(where, staged=frozenset({"imp-elsewhere"}))  # the filter and page of a running import
    assert [(m.id, int(m.timestamp)) for m in messages.newest(importing, "u", None, "t", start, end, limit)] == of_task
    assert set(messages.get_many(where, "u", [i for i, _ in items])) == {i for i, _ in items}
    assert [m.id for m in messages.of_user(where, "u")] == sorted([i for i, _ in [*items, opening]])


def test_erasures_and_purges_reach_both_kinds(aws):
    where, _ = _memory()
    timed, legacy = message_id(5), ordered_id("msg-")
    _put(where, [(timed, 5), (legacy, 7)])
    doomed = list(messages.get_many(where, "u", [timed, legacy]).values())
    removed, _ = messages.delete(where, doomed, lambda part: [])
    assert sorted(m.id for m in removed) == sorted([timed, legacy])
    assert messages.get_many(where, "u", [timed, legacy]) == {} and _indexed(where) == set()
    _put(where, [(message_id(9), 9), (ordered_id("msg-"), 11)])
    counted, _, done = purge.partition(where.item_pk("L0", "u"), purge.Deadline.after(60))
    assert (counted, done) == (3, True)  # both, and the opening message


def test_a_message_kept_by_time_refuses_another_time():
    with pytest.raises(ValueError, match="carries its message's time"):
        wrong = messages.NewMessage(message_id(5), "user", "x", 6, term_counts("x"))
        messages.add(Where("t", "a", 0, "mem"), "u", "s", None, [wrong], 1)


def _line(source: str, at: int, content: str = "same words") -> shapes.Message:
    return shapes.Message(source, "u", "s", None, "user", content, at, at)


def test_an_import_line_whose_id_carries_another_time_gets_a_stable_id_of_its_own(aws):
    where, _ = _memory()
    issued = message_id(1_000)

    def plan(line: shapes.Message) -> tuple[list[Any], dict[str, int], planning.Cited]:
        skipped, cited = {"l0": 0, "l1": 0}, {}
        return planning.messages_to_add(where, shapes.Tree(messages=[line]), skipped, cited), skipped, cited

    [(_, [new])], skipped, cited = plan(_line(issued, 2_000))
    assert new.id != issued and id_time(new.id) is None and skipped["l0"] == 0
    assert cited[("u", issued)] == (None, new.id)  # a record citing the line's id cites the message
    messages.add(where, "u", "s", None, [new], 1)
    again, skipped, cited = plan(_line(issued, 2_000))
    assert again == [] and skipped["l0"] == 1 and cited[("u", issued)] == (None, new.id)  # found again
    [(_, [kept])], _, _ = plan(_line(issued, 1_000, "other words"))
    assert kept.id == issued  # the line's own time: the id is kept


def test_an_id_of_the_timed_shape_that_names_nothing_is_reported_unknown(aws):
    """Any 39-hex ``msg-`` id is looked up under the time it carries, the largest 13 hex included
    (a time past year 9999): none names a message here, so a delete reports each as not found."""
    scope = fresh_scope()
    conversation.add(scope, [{"role": "user", "content": "kept"}], writer(scope))
    unknown = [message_id(0), "msg-" + "f" * 39, "msg-" + "0" * 39]
    answer = conversation.delete(scope, unknown, None, writer(scope), "req-unknown")
    assert (answer.deleted_count, answer.not_found_ids) == (0, unknown)
    assert conversation.count(scope, None, None, writer(scope)).total == 1
