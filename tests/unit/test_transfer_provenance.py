"""Provenance in the transfer package: how a record line's sources and ``formed`` are read, mapped to
the target's message ids and written back (pure functions), and — in this process over moto (the
unit tier's ``aws``) — the two races the API tier cannot make deterministic: a cited message erased
while the import writes the record citing it (the import fails, and its undo leaves nothing), and an
undo that stopped after deleting the import's messages, replayed (it still erases the records that
cite them)."""

from __future__ import annotations

import uuid
from types import SimpleNamespace
from typing import Any

import pytest
from in_process import fresh_scope, jsonl, writer
from memory_hub.clock import ordered_id
from memory_hub.domain import assets, atomic, conversation
from memory_hub.domain.errors import Conflict, Invalid
from memory_hub.domain.scope import Scope
from memory_hub.domain.transfer import applying, lines, planning, rollback, tree, writing
from memory_hub.storage import citations, jobs, messages, records
from memory_hub.storage.counters import Where

CREATED = "2026-01-05T10:00:00.000Z"
OUR_ATOM = "atom-" + "0" * 26


def _line(**fields: Any) -> dict[str, Any]:
    return {"id": OUR_ATOM, "content": "c", "userId": "u", "createdAt": CREATED, **fields}


def _read(line: dict[str, Any]) -> tuple[tree.Record | None, list[str]]:
    problems: list[str] = []
    return lines.record("records/x.jsonl:1", line, tree.Selection(), problems), problems


# ---- reading ---------------------------------------------------------------------------------------


def test_a_record_line_reads_its_own_sources_and_drops_the_metadata_copy():
    metadata = {"k": 1, "tdai": {"source_message_ids": ["old"], "priority": 70}}
    record, problems = _read(_line(source_message_ids=["a", "b", "a"], metadata=metadata, formed=True))
    assert problems == [] and record is not None
    assert (record.sources, record.formed) == (["a", "b", "a"], True)  # mapped and deduplicated later
    assert record.metadata == {"k": 1, "tdai": {"priority": 70}}  # never kept under metadata.tdai again


def test_a_line_without_its_own_sources_reads_the_copy_an_older_import_kept():
    for given in ({}, {"source_message_ids": None}):
        record, problems = _read(_line(metadata={"tdai": {"source_message_ids": ["x", 3, "y"]}}, **given))
        assert problems == [] and record is not None
        assert (record.sources, record.formed, record.metadata) == (["x", "y"], False, {})
    record, _ = _read(_line(metadata={"tdai": {"source_message_ids": "not a list"}}))
    assert record is not None and record.sources == []  # an older import took it unchecked: never refused


def test_a_foreign_record_keeps_its_source_id_also_when_nothing_else_is_kept():
    record, problems = _read(_line(id="m_1796101100101_729c3408", source_message_ids=["msg-2bbd30095e65"]))
    assert problems == [] and record is not None
    assert record.metadata == {"tdai": {"source_id": "m_1796101100101_729c3408"}}


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ({"source_message_ids": "msg-1"}, "source_message_ids must be a list of message ids"),
        ({"source_message_ids": ["msg-1", 2]}, "source_message_ids must be a list of message ids"),
        ({"source_message_ids": {"0": "msg-1"}}, "source_message_ids must be a list of message ids"),
        ({"formed": "yes"}, "formed must be true or false"),
        ({"formed": 1}, "formed must be true or false"),
    ],
)
def test_sources_or_formed_of_another_shape_are_a_problem_of_the_line(fields, problem):
    record, problems = _read(_line(**fields))
    assert record is None and problems == [f"records/x.jsonl:1: {problem}"]


# ---- mapping ---------------------------------------------------------------------------------------


def _item(sources: list[str], user: str = "u", task: str | None = None) -> tree.Record:
    return tree.Record(None, user, None, task, "c", "episodic", "", [], {}, 1, 1, 0, 0, sources=sources)


def test_sources_are_mapped_to_the_targets_ids_and_what_the_tree_does_not_hold_is_dropped():
    cited: planning.Cited = {
        ("u", "a"): (None, "msg-A"),
        ("u", "t"): ("t1", "msg-T"),
        ("v", "b"): (None, "msg-B"),
    }
    assert planning.sources_of(_item(["x", "b", "a", "t", "a"]), cited) == ["msg-A", "msg-T"]
    assert planning.sources_of(_item(["a", "t"], task="t1"), cited) == ["msg-T"]  # a task's record: its task's
    assert planning.sources_of(_item(["a", "b"], user="v"), cited) == ["msg-B"]
    assert planning.sources_of(_item([]), cited) == []


def test_of_many_sources_the_newest_100_are_kept():
    cited: planning.Cited = {("u", f"s{i}"): (None, f"msg-{i}") for i in range(150)}
    given = [f"s{i}" for i in range(150)] + ["s0", "s1"]
    assert planning.sources_of(_item(given), cited) == [f"msg-{i}" for i in range(50, 150)]


# ---- writing ---------------------------------------------------------------------------------------


def _stored(**fields: Any) -> SimpleNamespace:
    values: dict[str, Any] = {
        "id": OUR_ATOM,
        "content": "c",
        "type": "episodic",
        "background": "",
        "meta": {},
        "created_at": 1767607200000,
        "updated_at": 1767607200000,
        "session_id": None,
        "user_id": "u",
        "task_id": None,
        "tags": [],
        "version": 1,
        "reinforced_count": 1,
        "sources": None,
        "cited": None,
        "formed": None,
    }
    return SimpleNamespace(**{**values, **fields})


def test_a_record_line_writes_the_records_sources_once_and_formed():
    legacy = {"tdai": {"source_message_ids": ["old"], "source_id": "x"}}
    line = writing.l1_line(_stored(sources=["m1", "m2"], cited={"m1", "m2", "m0"}, meta=legacy, formed=True))
    assert (line["source_message_ids"], line["formed"]) == (["m1", "m2"], True)
    assert line["metadata"] == {"tdai": {"source_id": "x"}}
    assert list(line)[-1] == "formed"
    before = writing.l1_line(_stored(meta=legacy))  # imported before sources were a field
    assert (before["source_message_ids"], before["formed"]) == (["old"], False)
    assert before["metadata"] == {"tdai": {"source_id": "x"}}
    emptied = writing.l1_line(_stored(sources=[], cited={"m1"}, meta=legacy))  # an update emptied them
    assert emptied["source_message_ids"] == []
    assert writing.l1_line(_stored())["source_message_ids"] == []


@pytest.mark.parametrize(
    "kept,fields",
    [
        ({"priority": 70, "timestamps": ["2026-01-01T00:00:00.000Z"]}, (70, ["2026-01-01T00:00:00.000Z"])),
        ({"priority": "zzz", "timestamps": 5}, (50, [CREATED])),  # a client's values of other types
        ({"priority": True, "timestamps": ["a", 1]}, (50, [CREATED])),
    ],
)
def test_tencentdb_fields_are_written_with_their_types_and_anything_else_round_trips(kept, fields):
    """``priority`` and ``timestamps`` are written as TencentDB's fields only with its types (a
    number; a list of strings); values of other types stay under metadata.tdai, where reading the
    line back keeps them (the neutral fields beside them are not taken over them)."""
    line = writing.l1_line(_stored(meta={"tdai": dict(kept)}))
    assert (line["priority"], line["timestamps"]) == fields
    odd = {k: v for k, v in kept.items() if line[k] != v}
    assert line["metadata"] == ({"tdai": odd} if odd else {})
    record, problems = _read(line)
    assert problems == [] and record is not None
    assert {k: v for k, v in (record.metadata.get("tdai") or {}).items() if k in kept} == kept


# ---- in process, over moto ---------------------------------------------------------------------------


def _message_line(message_id: str, content: str) -> dict[str, Any]:
    return {"id": message_id, "sessionId": "s", "userId": "u", "role": "user", "content": content, "timestamp": 1}


def _job(scope: Scope) -> Any:
    memory_id = assets.of_pair(scope.team_id, scope.agent_id).memory_id  # type: ignore[union-attr]
    return jobs.new(ordered_id("imp-"), "import", memory_id, scope.team_id, scope.agent_id, "key-x", {})


def _where(scope: Scope) -> Where:
    return assets.where_of(assets.of_pair(scope.team_id, scope.agent_id))  # type: ignore[arg-type]


def _tree(messages_: list[dict[str, Any]], records_: list[dict[str, Any]]) -> tree.Tree:
    files = {"conversations/2026-01-05.jsonl": jsonl(messages_), "records/2026-01-05.jsonl": jsonl(records_)}
    return tree.read(files, tree.Selection())


def test_a_cited_message_erased_while_the_import_writes_fails_it_and_the_undo_leaves_nothing(aws, monkeypatch):
    scope = fresh_scope()
    auth = writer(scope)
    [there] = conversation.add(scope, [{"role": "user", "content": "there before"}], auth).accepted_ids
    brought = f"msg-{uuid.uuid4().hex[:26]}"
    parsed = _tree(
        [_message_line(there, "there before"), _message_line(brought, "brought")],
        [_line(id=f"atom-{uuid.uuid4().hex[:26]}", content="cites both", source_message_ids=[brought, there])],
    )
    job = _job(scope)
    create = records.create

    def erased_meanwhile(where: Where, record: Any, counts: Any) -> None:
        # its citation entries are written; the erasure reads them before the record exists
        answer = conversation.delete(scope, [there], None, auth, "req-erase")
        assert (answer.deleted_count, answer.records_deleted) == (1, 0)
        create(where, record, counts)

    monkeypatch.setattr(records, "create", erased_meanwhile)
    with pytest.raises(Conflict):
        applying.write(parsed, job)
    monkeypatch.undo()
    where = _where(scope)
    assert [r.content for r in records.of_user(where, "u")] == ["cites both"]  # until the undo
    assert rollback.undo(job)
    assert records.of_user(where, "u") == [] and messages.of_user(where, "u") == []
    assert citations.citing(where, "u", [there, brought]) == {}
    assert not rollback.undo(job)  # its journal is gone


def test_an_undo_replayed_after_it_deleted_the_messages_still_erases_the_records_citing_them(aws):
    scope = fresh_scope()
    auth = writer(scope)
    conversation.add(scope, [{"role": "user", "content": "the memory was there"}], auth)
    brought = f"msg-{uuid.uuid4().hex[:26]}"
    parsed = _tree(
        [_message_line(brought, "brought")],
        [_line(id=f"atom-{uuid.uuid4().hex[:26]}", content="imported", source_message_ids=[brought])],
    )
    job = _job(scope)
    *_, written, _ = applying.write(parsed, job)
    assert (written["l0"], written["l1"]) == (1, 1)
    with pytest.raises(Invalid):  # the import is staged: its messages are not there to cite yet
        atomic.add(scope, "a client's", "fact", "", [], {}, auth, source_message_ids=[brought])
    where = _where(scope).everything()
    # an undo that stopped right after deleting the import's messages (before the records citing them)
    messages.delete(where, list(messages.get_many(where, "u", [brought]).values()), lambda part: [])
    assert [r.content for r in records.of_user(where, "u")] == ["imported"]

    assert rollback.undo(job)
    assert records.of_user(where, "u") == []
    assert citations.citing(where, "u", [brought]) == {}
    assert [m.content for m in messages.of_user(where, "u")] == ["the memory was there"]
