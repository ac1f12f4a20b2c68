"""A formation plan applied by the rules of atomic/add and atomic/update (``domain/formation/apply``),
in this process over moto: a supersede stands only beside an add or update that wrote — also when a
retry replays the plan after its first try wrote the update and died before the supersede."""

from __future__ import annotations

from typing import Any

import pytest
from in_process import fresh_scope, writer
from memory_hub.clock import ordered_id
from memory_hub.domain import assets, atomic, conversation
from memory_hub.domain.formation import apply
from memory_hub.domain.scope import Scope
from memory_hub.storage import records
from memory_hub.storage.audit import EventContext


def _formed(scope: Scope, content: str, sources: list[str]) -> str:
    asset = assets.of_scope(scope)
    assert asset is not None
    draft = atomic.Draft(scope, content, "persona", "", [], {}, sources, formed=True, id=ordered_id("atom-"))
    written = atomic.write_formed(asset, draft, apply.SYSTEM_FORMATION)
    assert written is not None
    return written.id


def _plan(scope: Scope) -> tuple[list[dict[str, Any]], str, str]:
    said = ["I moved to Paris", "I live in Berlin"]
    moved, lives = conversation.add(scope, [{"role": "user", "content": c} for c in said], writer(scope)).accepted_ids
    kept, gone = _formed(scope, "lives in Berlin", [lives]), _formed(scope, "lived in Rome", [lives])
    plan = [
        {"op": "supersede", "record": gone, "version": 1},
        {"op": "update", "record": kept, "version": 1, "content": "lives in Paris", "sources": [moved]},
    ]
    return plan, kept, gone


def _context(scope: Scope) -> EventContext:
    return EventContext(scope.team_id, apply.SYSTEM_FORMATION, "req-formation", scope.agent_id, scope.memory_id)


def _record(scope: Scope, record_id: str) -> Any:
    asset = assets.of_scope(scope)
    assert asset is not None
    return records.get(assets.where_of(asset), scope.user_id, record_id)


def test_a_supersede_beside_an_update_is_applied_after_it(aws):
    scope = fresh_scope()
    plan, kept, gone = _plan(scope)
    done = apply.apply(assets.of_scope(scope), scope, plan, _context(scope))  # type: ignore[arg-type]
    assert (done.updated, done.superseded) == ([kept], [gone])
    assert _record(scope, gone) is None and _record(scope, kept).content == "lives in Paris"


def test_a_replay_after_the_update_was_written_still_supersedes(aws, monkeypatch):
    scope = fresh_scope()
    plan, kept, gone = _plan(scope)
    real = apply._supersede

    def timed_out(*args: Any, **kwargs: Any) -> None:
        raise TimeoutError("the Lambda ran out of time")

    monkeypatch.setattr(apply, "_supersede", timed_out)
    with pytest.raises(TimeoutError):
        apply.apply(assets.of_scope(scope), scope, plan, _context(scope))  # type: ignore[arg-type]
    monkeypatch.setattr(apply, "_supersede", real)
    done = apply.apply(assets.of_scope(scope), scope, plan, _context(scope))  # the redelivered message's replay
    assert (done.replayed, done.superseded, done.updated) == ([kept], [gone], [])
    assert _record(scope, gone) is None and int(_record(scope, kept).version) == 2  # updated once


def test_an_update_whose_new_source_is_erased_before_it_cites_it_goes_with_it(aws, monkeypatch):
    """The source is checked, then erased (its erasure finds no record citing it yet), then cited
    and the record updated: the record would outlive its source, so the update's second check
    erases it — and the supersede it stood for is skipped."""
    scope = fresh_scope()
    plan, kept, gone = _plan(scope)
    moved = plan[1]["sources"][0]
    real_cite = apply.provenance.cite

    def erased_first(*args: Any, **kwargs: Any) -> None:
        assert conversation.delete(scope, [moved], None, writer(scope), "req-erase").deleted_ids == [moved]
        monkeypatch.setattr(apply.provenance, "cite", real_cite)
        real_cite(*args, **kwargs)

    monkeypatch.setattr(apply.provenance, "cite", erased_first)
    done = apply.apply(assets.of_scope(scope), scope, plan, _context(scope))  # type: ignore[arg-type]
    assert (done.updated, done.superseded, done.skipped) == ([], [], 2)
    assert _record(scope, kept) is None  # never outlives its source
    assert _record(scope, gone).content == "lived in Rome"  # nothing replaced it
    assert any(e.target == kept for e in done.events)  # its erasure is audited with the run


def test_a_replay_of_an_update_that_died_before_its_second_check_makes_it(aws, monkeypatch):
    """The first try wrote the update citing a source erased in between, then died before checking
    again: the replay finds the record past the offered version and checks before calling it done."""
    scope = fresh_scope()
    plan, kept, _ = _plan(scope)
    moved = plan[1]["sources"][0]
    real_cite, real_outlived = apply.provenance.cite, apply._outlived

    def erased_first(*args: Any, **kwargs: Any) -> None:
        conversation.delete(scope, [moved], None, writer(scope), "req-erase")
        monkeypatch.setattr(apply.provenance, "cite", real_cite)
        real_cite(*args, **kwargs)

    def died(*args: Any, **kwargs: Any) -> bool:
        raise TimeoutError("the Lambda ran out of time")

    monkeypatch.setattr(apply.provenance, "cite", erased_first)
    monkeypatch.setattr(apply, "_outlived", died)
    with pytest.raises(TimeoutError):
        apply.apply(assets.of_scope(scope), scope, plan, _context(scope))  # type: ignore[arg-type]
    assert int(_record(scope, kept).version) == 2  # written, citing the erased source
    monkeypatch.setattr(apply, "_outlived", real_outlived)
    done = apply.apply(assets.of_scope(scope), scope, plan, _context(scope))  # type: ignore[arg-type]
    assert done.replayed == [] and _record(scope, kept) is None
