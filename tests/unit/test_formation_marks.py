"""Formation's waiting marks (storage/formation.py, moto in process): an erasure takes only the
marks of erased messages, whatever else waits around them, reading a bounded span of the batch's
marks — the rest by key — never a whole backlog; a run finds a batch past marks with no message
and drops those that will never have one."""

from __future__ import annotations

import uuid
from dataclasses import replace
from types import SimpleNamespace

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from in_process import fresh_scope, writer
from memory_hub.clock import TIME_OFFSET_MS, now_ms
from memory_hub.domain import assets, conversation
from memory_hub.domain.formation import run
from memory_hub.storage import formation
from memory_hub.storage.counters import Where
from memory_hub.storage.models import ItemKey

SESSION, OTHER = "s", "t"


def _marked(n: int, session: str = SESSION) -> tuple[Where, list[str]]:
    """A user with ``n`` messages waiting in ``session`` (ids in order) and two in another."""
    suffix = uuid.uuid4().hex[:10]
    where = Where(f"team{suffix}", f"agent{suffix}", 1)
    ids = [f"msg-{i:05d}" for i in range(n)]
    formation.mark(formation.unformed_rows(where, "u", session, None, ids))
    formation.mark(formation.unformed_rows(where, "u", OTHER, None, ["msg-00000", "msg-99999"]))
    return where, ids


def _waiting(where: Where, session: str = SESSION, user_id: str = "u") -> list[str]:
    return formation.waiting(where, user_id, session, None, None)


def _messages(ids: list[str], session: str = SESSION) -> list[SimpleNamespace]:
    return [SimpleNamespace(id=i, session_id=session, task_id=None) for i in ids]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data(), n=st.integers(1, 120))
def test_only_the_erased_messages_marks_go(aws, data, n):
    where, ids = _marked(n)
    erased = data.draw(st.lists(st.sampled_from(ids), unique=True, max_size=n))
    never_marked = data.draw(st.lists(st.sampled_from([f"msg-{i:05d}x" for i in range(n)]), unique=True, max_size=5))
    formation.unmark_messages(where, "u", _messages(erased + never_marked))
    assert _waiting(where) == [i for i in ids if i not in erased]
    assert _waiting(where, OTHER) == ["msg-00000", "msg-99999"]  # another session's, same ids: kept


def test_a_message_outside_any_session_has_no_mark_to_look_for(aws):
    where, ids = _marked(3)
    formation.unmark_messages(where, "u", [SimpleNamespace(id=ids[0], session_id=None, task_id=None)])
    assert _waiting(where) == ids


def test_erased_ids_far_apart_in_a_backlog_read_a_bounded_span(aws, monkeypatch):
    where, ids = _marked(300)
    read: list[int] = []
    query = ItemKey.query

    def counted(*args, **kwargs):
        rows = list(query(*args, **kwargs))
        read.append(len(rows))
        return iter(rows)

    monkeypatch.setattr(ItemKey, "query", counted)
    formation.unmark_messages(where, "u", _messages([ids[0], ids[150], ids[-1]]))
    assert read == [2 * 3 + formation.SPAN_READ]  # not the 300 between them: the rest read by key
    monkeypatch.undo()
    assert _waiting(where) == [i for i in ids if i not in (ids[0], ids[150], ids[-1])]


def _issued(minutes_ago: float, n: int = 0) -> str:
    """A message id as this service issues them, issued ``minutes_ago`` (its own time that moment)."""
    ms = now_ms() - int(minutes_ago * 60_000)
    return f"msg-{ms:012x}{n:06x}{'0' * 8}{ms + TIME_OFFSET_MS:013x}"


def test_a_run_finds_a_batch_past_marks_with_no_message_and_drops_the_orphans(aws):
    """A mark with no message (its add died between its marks and its messages) is passed over for
    the batch's next; once issued longer ago than an add can run, it is dropped — a batch of only
    such marks too, and a run of them longer than one look-up reads — while one issued a moment
    ago (its add may still be writing) stays."""
    scope = fresh_scope(session_id="h")
    kept = conversation.add(scope, [{"role": "user", "content": "kept"}], writer(scope)).accepted_ids
    where = assets.where_of(assets.of_scope(scope))
    old, recent = _issued(20), _issued(1)
    formation.mark(formation.unformed_rows(where, scope.user_id, "h", None, [old, recent, *kept]))
    formation.mark(formation.unformed_rows(where, scope.user_id, "z", None, [_issued(30, 1)]))
    dead_add = [_issued(40, n) for n in range(run.HEAD_CHUNK + 5)]  # an add of 30 that died, then one that came
    formation.mark(formation.unformed_rows(where, scope.user_id, "x", None, dead_add))
    came = conversation.add(replace(scope, session_id="x"), [{"role": "user", "content": "came"}], writer(scope))
    formation.mark(formation.unformed_rows(where, scope.user_id, "x", None, came.accepted_ids))
    alone = _issued(0.5, 2)  # a batch of one mark, its add maybe still writing: looked past, kept
    formation.mark(formation.unformed_rows(where, scope.user_id, "y", None, [alone]))
    request = SimpleNamespace(kind="run", session_id=None, task_id=None)
    found = run._batches(SimpleNamespace(request=request, where=where, user_id=scope.user_id))  # type: ignore[arg-type]
    assert sorted(found) == [("h", None), ("x", None)]
    assert _waiting(where, "h", scope.user_id) == sorted([recent, *kept])
    assert _waiting(where, "z", scope.user_id) == []
    assert _waiting(where, "y", scope.user_id) == [alone]
    assert _waiting(where, "x", scope.user_id) == came.accepted_ids


def test_a_batch_drops_only_the_absent_marks_of_orphans(aws):
    """What a batch leaves out as not there: an orphan's mark goes, a young one's stays (its add
    may still be writing), and so does the mark of a message that is there after all."""
    scope = fresh_scope(session_id="h")
    said = conversation.add(scope, [{"role": "user", "content": "there"}], writer(scope)).accepted_ids
    where = assets.where_of(assets.of_scope(scope))
    old, young = _issued(20), _issued(2)
    formation.mark(formation.unformed_rows(where, scope.user_id, "h", None, [old, young, *said]))
    fake = SimpleNamespace(where=where, user_id=scope.user_id)
    assert run._drop_orphans(fake, "h", None, [old, young, *said]) == 1  # type: ignore[arg-type]
    assert _waiting(where, "h", scope.user_id) == sorted([young, *said])
