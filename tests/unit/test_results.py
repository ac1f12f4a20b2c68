"""The domain's answer types serialize to the wire shapes the API documents: a field declared
``absent`` is left out when None, a nullable field is sent as null, values pass through as they
are (numbers, nested metadata and its nulls), and a stored answer read back (an Idempotency-Key
retry) serializes to the same JSON."""

from __future__ import annotations

import json
from types import UnionType
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from memory_hub.domain import results, results_admin
from memory_hub.domain.results import Answer, MessageHit, MessageHits, Persona, RecordHit, ScenarioEntry, ScenarioList
from memory_hub.domain.results_admin import Cleared, ClearItem, ExportJob, LayerCounts
from memory_hub.edge.pipeline import dumps

STAMP = "2026-11-29T10:00:00.000Z"


def _entry(path: str) -> ScenarioEntry:
    return ScenarioEntry(
        path=path, summary=None, version=1, size=10, created_at=STAMP, updated_at=STAMP, team_id="t", agent_id="a"
    )


def test_an_absent_field_is_left_out_and_a_nullable_one_is_null() -> None:
    page = ScenarioList(entries=[_entry("a.md")], scenes=[_entry("a.md")], total=1).wire()
    assert "next_token" not in page
    assert page["entries"][0]["summary"] is None and "summary" in page["entries"][0]
    more = ScenarioList(entries=[], scenes=[], total=3, next_token="tok").wire()
    assert more["next_token"] == "tok"
    empty = Persona(content=None, version=None, created_at=None, updated_at=None, team_id="t", agent_id="a")
    assert json.loads(dumps(empty.wire())) == {
        "content": None,
        "version": None,
        "created_at": None,
        "updated_at": None,
        "team_id": "t",
        "agent_id": "a",
    }


def test_values_pass_through_unchanged() -> None:
    score = (2 / 61) / 1.5
    hits = MessageHits(
        messages=[MessageHit(id="msg-1", session_id="s", role="user", content="héllo", timestamp=STAMP, score=score)],
        mode_used="keyword",
    )
    text = dumps(hits.wire())
    assert json.dumps(score) in text and "héllo" in text  # the float as Python writes it, UTF-8 as is
    hit = RecordHit(
        id="atom-1",
        type="fact",
        content="c",
        background="",
        tags=["x"],
        metadata={"nested": {"gone": None}, "n": 1},
        version=1,
        reinforced_count=1,
        team_id="t",
        agent_id="a",
        user_id="u",
        task_id=None,
        session_id=None,
        source_message_ids=["msg-1"],
        formed=False,
        created_at=STAMP,
        updated_at=STAMP,
        score=0.5,
    )
    assert hit.wire()["metadata"] == {"nested": {"gone": None}, "n": 1}  # metadata's own nulls are kept
    assert list(hit.wire())[-1] == "score"


def test_a_stored_answer_read_back_serializes_the_same() -> None:
    counts = dict(l0_deleted=1, l1_deleted=0, l2_deleted=0, l3_deleted=0, profile_deleted=0, files_deleted=2)
    answer = Cleared(
        items=[
            ClearItem(memory_id="m", team_id="t", agent_id="a", cleared=True, **counts, audit_ids=["e"]),
            ClearItem(
                memory_id="n",
                team_id="t",
                agent_id="b",
                cleared=False,
                **{k: 0 for k in counts},
                audit_ids=[],
                reason="busy",
                retryable=True,
            ),
        ],
        all_cleared=False,
    )
    stored = json.loads(dumps(answer.wire()))
    assert "purge_pending" not in stored["items"][0] and "reason" not in stored["items"][0]
    assert stored["items"][1]["retryable"] is True
    assert dumps(Cleared.model_validate(stored).wire()) == dumps(answer.wire())


def test_a_job_answers_only_what_it_has() -> None:
    running = ExportJob(export_id="exp-1", state="running", memory_id="m").wire()
    assert running == {"export_id": "exp-1", "state": "running", "memory_id": "m"}
    done = ExportJob.model_validate(
        {"export_id": "exp-1", "state": "done", "memory_id": "m", "counts": {"l0": 1, "l1": 2, "l2": 0, "l3": 0}}
    )
    assert done.counts == LayerCounts(l0=1, l1=2, l2=0, l3=0)
    assert done.wire()["counts"] == {"l0": 1, "l1": 2, "l2": 0, "l3": 0}


def _answer_types() -> list[type[Answer]]:
    found: list[type[Answer]] = []
    for module in (results, results_admin):
        found += [v for v in vars(module).values() if isinstance(v, type) and issubclass(v, Answer) and v is not Answer]
    return sorted(set(found), key=lambda t: t.__name__)


def _values(annotation: Any) -> st.SearchStrategy[Any]:
    """Any value of a field's type (answers built in turn)."""
    origin, args = get_origin(annotation), get_args(annotation)
    if isinstance(annotation, type) and issubclass(annotation, Answer):
        return _answers(annotation)
    if origin is Annotated:
        return _values(args[0])
    if origin is Literal:
        return st.sampled_from(args)
    if origin in (Union, UnionType):
        return st.one_of([_values(a) for a in args])
    if origin is list:
        return st.lists(_values(args[0]), max_size=3)
    if origin is dict:
        keys = st.text(max_size=3) if args[0] is str else _values(args[0])
        plain = (
            st.none()
            | st.booleans()
            | st.integers()
            | st.floats(allow_nan=False, allow_infinity=False)
            | st.text(max_size=3)
        )
        return st.dictionaries(keys, plain if args[1] is Any else _values(args[1]), max_size=3)
    simple = {str: st.text(max_size=5), int: st.integers(), bool: st.booleans(), type(None): st.none()}
    return simple[annotation] if annotation in simple else st.floats(allow_nan=False, allow_infinity=False)


def _answers(kind: type[Answer]) -> st.SearchStrategy[Answer]:
    fields = {name: _values(field.annotation) for name, field in kind.model_fields.items()}
    return st.fixed_dictionaries(fields).map(lambda values: kind(**values))


@pytest.mark.parametrize("kind", _answer_types(), ids=lambda t: t.__name__)
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_the_fast_wire_is_exactly_model_dump_less_the_absent_nulls(kind: type[Answer], data: st.DataObject) -> None:
    answer = data.draw(_answers(kind))
    dumped = answer.model_dump()  # pydantic's own (exclude_if leaves the absent Nones out)
    assert answer.wire() == dumped
    assert dumps(answer.wire()) == dumps(dumped)  # same keys in the same order, same JSON


@given(st.text(), st.text(max_size=64))
def test_wire_bytes_are_what_an_answer_adds_to_the_functions_response(summary, path):
    """Its JSON in UTF-8 inside the proxy response's body string, as Lambda's runtime writes it."""
    entry = _entry(path).model_copy(update={"summary": summary})
    as_body = json.dumps(json.dumps(entry.wire(), ensure_ascii=False, separators=(",", ":")), ensure_ascii=False)
    assert results.wire_bytes(entry) == len(as_body.encode("utf-8", "surrogatepass")) - 2  # its quotes


def test_fitting_keeps_at_least_one_and_stops_before_the_budget() -> None:
    entries = [_entry("a" * 100) for _ in range(5)]
    each = results.wire_bytes(entries[0])
    assert results.fitting(entries, budget=3 * each) == 3
    assert results.fitting(entries, copies=2, budget=3 * each) == 1
    assert results.fitting(entries, budget=1) == 1  # one alone always goes: a page is never empty
    assert results.fitting([], budget=1) == 0
