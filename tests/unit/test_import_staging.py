"""An import is staged until it commits: in this process over moto (the unit tier's ``aws``), every
read of the domain — counts, queries, searches, the memory's totals, an export's tree — leaves out
what a running import wrote, shows all of it right after the commit, and a crashed import is undone
by the cleanup's recovery without its items ever showing. Plus the counters' arithmetic
(``counters.visible``) as a property: a count never shows what running imports staged."""

from __future__ import annotations

import uuid
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from in_process import fresh_scope, jsonl, writer
from memory_hub.clock import now_ms, ordered_id
from memory_hub.domain import assets, atomic, conversation
from memory_hub.domain.errors import NotFound
from memory_hub.domain.principal import Authorize, Principal
from memory_hub.domain.scope import Scope
from memory_hub.domain.transfer import applying, exporting, rollback, staging, tree
from memory_hub.memory_ids import memory_id_of
from memory_hub.storage import counters, jobs, messages, records
from memory_hub.storage.models import Counter, Job, own

IMPORTED = 30
REINFORCED = "the user likes green tea"


def _tree() -> tree.Tree:
    """IMPORTED messages about a zebra (in two sessions), a record about it, and a line whose
    natural key the memory's record holds (it reinforces that record)."""
    lines = [
        {
            "id": f"msg-{uuid.uuid4().hex[:26]}",
            "sessionId": f"s{i % 2}",
            "userId": "u",
            "role": "user",
            "content": f"the zebra number {i}",
            "timestamp": 1_767_600_000_000 + i,
        }
        for i in range(IMPORTED)
    ]
    record = {"id": f"atom-{uuid.uuid4().hex[:26]}", "content": "a zebra was seen", "userId": "u"}
    folded = {"id": f"atom-{uuid.uuid4().hex[:26]}", "content": REINFORCED, "userId": "u"}
    created = {"createdAt": "2026-01-05T10:00:00.000Z", "type": "episodic"}
    files = {
        "conversations/2026-01-05.jsonl": jsonl(lines),
        "records/2026-01-05.jsonl": jsonl([{**record, **created}, {**folded, **created}]),
    }
    return tree.read(files, tree.Selection())


def _seen(scope: Scope, auth: Authorize) -> dict[str, Any]:
    """Everything a client (or an export) can see of the memory."""
    asset = assets.of_pair(scope.team_id, scope.agent_id)
    assert asset is not None
    whole = Scope(scope.team_id, scope.agent_id, scope.user_id, None)
    query = conversation.query(whole, 100, 0, None, None, auth)
    records_ = atomic.query(whole, None, 100, 0, None, None, auth)
    _, counts = exporting.build(asset, None, False)
    return {
        "l0": conversation.count(whole, None, None, auth).total,
        "l0 in a session": conversation.count(Scope(scope.team_id, scope.agent_id, "u", "s1"), None, None, auth).total,
        "l0 since": conversation.count(whole, "2026-01-01T00:00:00Z", None, auth).total,
        "query": (len(query.messages), query.total),
        "searched l0": len(conversation.search(whole, "zebra", 10, None, None, auth, mode="keyword").messages),
        "l1": atomic.count(whole, None, None, None, auth).total,
        "records": sorted((r.content, r.reinforced_count) for r in records_.items),
        "searched l1": len(atomic.search(whole, "zebra", None, 10, None, None, auth, mode="keyword").items),
        "totals": assets.counts(asset).model_dump(),
        "exported": (counts["l0"], counts["l1"]),
    }


def _memory_with_a_running_import() -> tuple[Scope, Authorize, Job, dict[str, Any]]:
    scope = fresh_scope()
    auth = writer(scope)
    conversation.add(scope, [{"role": "user", "content": "hello there"}], auth)
    atomic.add(scope, REINFORCED, "episodic", "", [], {}, auth)
    before = _seen(scope, auth)
    memory_id = assets.of_pair(scope.team_id, scope.agent_id).memory_id  # type: ignore[union-attr]
    job = jobs.new(ordered_id("imp-"), "import", memory_id, scope.team_id, scope.agent_id, "key-x", {})
    assert jobs.claim(job, "created")
    staged = applying.write(_tree(), job)
    assert staged[3]["l0"] == IMPORTED
    return scope, auth, job, before


def test_nothing_of_a_running_import_shows_and_all_of_it_does_once_it_commits(aws):
    scope, auth, job, before = _memory_with_a_running_import()
    assert before["l0"] == 1 and before["records"] == [(REINFORCED, 1)]
    assert _seen(scope, auth) == before  # counts, queries, searches, totals, exports: as before

    asset = assets.of_pair(scope.team_id, scope.agent_id)
    assert asset is not None and asset.importing == {job.sk}
    staging.commit(asset, job, {"counts": {}}, [])
    staging.finish(job)  # the reinforcement of the record that was there comes after the commit
    after = _seen(scope, auth)
    assert after["l0"] == after["query"][1] == after["exported"][0] == 1 + IMPORTED
    assert (after["l0 in a session"], after["searched l0"], after["searched l1"]) == (IMPORTED // 2, 10, 1)
    assert after["records"] == [(REINFORCED, 2), ("a zebra was seen", 1)] or after["records"] == sorted(
        [(REINFORCED, 2), ("a zebra was seen", 1)]
    )
    assert after["totals"]["l0"] == 1 + IMPORTED and after["totals"]["l1"] == 2
    assert not assets.of_pair(scope.team_id, scope.agent_id).importing  # type: ignore[union-attr]
    assert jobs.get(job.sk).state == "done"  # type: ignore[union-attr]


def test_a_crashed_import_is_undone_by_the_recovery_and_never_shows(aws):
    scope, auth, job, before = _memory_with_a_running_import()
    assert _seen(scope, auth) == before
    own(Job, job).update(actions=[Job.updated_at.set(now_ms() - 10 * 60_000)])  # no heartbeat since: its process died
    assert staging.recover(now_ms()) >= 1
    assert _seen(scope, auth) == before
    asset = assets.of_pair(scope.team_id, scope.agent_id)
    assert asset is not None and not asset.importing
    where = assets.where_of(asset)
    assert len(messages.of_user(where, "u")) == 1 and len(records.of_user(where, "u")) == 1
    assert jobs.get(job.sk).state == "failed"  # type: ignore[union-attr]


def test_the_recovery_leaves_a_running_import_with_a_heartbeat_alone_unless_told_none_can_run(aws):
    scope, auth, job, before = _memory_with_a_running_import()
    staging.recover(now_ms())
    assert jobs.get(job.sk).state == "running"  # type: ignore[union-attr]
    assert assets.of_pair(scope.team_id, scope.agent_id).importing == {job.sk}  # type: ignore[union-attr]
    staging.recover(now_ms(), all_running=True)  # the local stack's start: no process is left to run it
    assert jobs.get(job.sk).state == "failed"  # type: ignore[union-attr]
    assert _seen(scope, auth) == before


@given(
    items=st.integers(0, 10_000),
    notes=st.dictionaries(st.sampled_from(["imp-a", "imp-b", "imp-c"]), st.integers(0, 5_000)),
    running=st.frozensets(st.sampled_from(["imp-a", "imp-b", "imp-x"])),
)
def test_a_count_leaves_out_exactly_what_running_imports_staged(items, notes, running):
    counter = Counter("pk", "sk", item_count=items + sum(notes.values()), token_count=0)
    counter.staged = {**notes, **{f"{k}{counters.TOKENS}": 0 for k in notes}}
    expected = items + sum(n for k, n in notes.items() if k not in running)
    assert counters.visible(counter, running)[0] == expected
    assert counters.visible(counter, frozenset())[0] == items + sum(notes.values())


# ---------------------------------------------------------------- a memory the import creates

ADMIN = Principal("unit-admin", "admin", ("*",))


def _import_into_a_new_pair() -> tuple[Scope, Job]:
    scope = fresh_scope()
    memory_id = memory_id_of(scope.team_id, scope.agent_id)
    job = jobs.new(ordered_id("imp-"), "import", memory_id, scope.team_id, scope.agent_id, "key-x", {})
    assert jobs.claim(job, "created")
    applying.write(_tree(), job)
    return scope, job


def _shown(scope: Scope) -> bool:
    """Whether the memory shows to an admin: memory/get (and every memory_id route) and memory/list
    agree."""
    memory_id = memory_id_of(scope.team_id, scope.agent_id)
    try:
        assets.describe(ADMIN, assets.Named(memory_id))
        got = True
    except NotFound:
        got = False
    listed = [a.memory_id for a in assets.list_assets(ADMIN, scope.team_id, 100, None).items]
    assert got == (memory_id in listed)
    return got


def test_a_memory_an_import_creates_shows_only_once_it_commits(aws):
    scope, job = _import_into_a_new_pair()
    asset = assets.of_pair(scope.team_id, scope.agent_id)
    assert asset is not None and asset.hidden_by == job.sk and not _shown(scope)
    staging.commit(asset, job, {"counts": {}}, [])
    assert _shown(scope) and assets.of_pair(scope.team_id, scope.agent_id).owner == "key-x"  # type: ignore[union-attr]


def test_a_crashed_import_leaves_no_memory_it_created_to_be_seen(aws):
    scope, job = _import_into_a_new_pair()
    own(Job, job).update(actions=[Job.updated_at.set(now_ms() - 10 * 60_000)])  # its process died
    assert staging.recover(now_ms()) >= 1  # the cleanup (which may not delete assets) empties it
    assert not _shown(scope)
    assert rollback.undo(job)  # the import's status route: the asset goes
    assert assets.of_pair(scope.team_id, scope.agent_id) is None


def test_a_clients_write_during_the_import_makes_the_memory_the_clients(aws):
    scope, job = _import_into_a_new_pair()
    auth = writer(scope)
    conversation.add(scope, [{"role": "user", "content": "the client's own words"}], auth)
    asset = assets.of_pair(scope.team_id, scope.agent_id)
    assert _shown(scope) and asset is not None and asset.owner == f"key-writer-{scope.team_id}"
    own(Job, job).update(actions=[Job.updated_at.set(now_ms() - 10 * 60_000)])
    staging.recover(now_ms())
    assert rollback.undo(job) is False  # the recovery took back what it wrote and forgot it
    assert _shown(scope)  # the client's memory stays, with the client's message only
    where = assets.where_of(assets.of_pair(scope.team_id, scope.agent_id))  # type: ignore[arg-type]
    assert [m.content for m in messages.of_user(where, scope.user_id)] == ["the client's own words"]  # the tree's "u"


def test_an_undo_overtaken_by_a_clients_claim_leaves_the_memory_and_takes_back_the_import(aws, monkeypatch):
    """The undo read the memory hidden by its import; a client's write claims it before the drop:
    the drop is refused (it deletes only a memory still hidden by that import), and the import's
    items are taken back instead, the client's write kept."""
    scope, job = _import_into_a_new_pair()
    real = assets.of_pair

    def read_then_a_client_writes(team_id: str, agent_id: str) -> Any:
        seen = real(team_id, agent_id)
        monkeypatch.setattr(assets, "of_pair", real)
        conversation.add(scope, [{"role": "user", "content": "the client's own words"}], writer(scope))
        return seen

    monkeypatch.setattr(assets, "of_pair", read_then_a_client_writes)
    assert rollback.undo(job)
    asset = real(scope.team_id, scope.agent_id)
    assert asset is not None and asset.hidden_by is None and _shown(scope)
    assert [m.content for m in messages.of_user(assets.where_of(asset), scope.user_id)] == ["the client's own words"]


def test_a_write_that_lost_the_create_race_to_an_import_claims_the_memory(aws):
    scope, _ = _import_into_a_new_pair()
    asset = assets.ensure(None, scope.team_id, scope.agent_id, "key-client")  # its read found no memory
    assert asset.hidden_by is None and asset.owner == "key-client" and _shown(scope)


def test_a_write_after_the_import_dropped_its_memory_creates_one(aws):
    scope, job = _import_into_a_new_pair()
    hidden = assets.of_pair(scope.team_id, scope.agent_id)  # read before the drop
    assert rollback.undo(job) and assets.of_pair(scope.team_id, scope.agent_id) is None
    asset = assets.ensure(hidden, scope.team_id, scope.agent_id, "key-client")
    assert asset.hidden_by is None and assets.of_pair(scope.team_id, scope.agent_id) is not None and _shown(scope)
