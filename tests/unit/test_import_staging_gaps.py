"""What a running import stages beyond its messages and records, in this process over moto: its
scene files and persona stay under its own prefix until it commits and land right after (a crash
before the commit leaves no file, one after it is finished by the recovery); a session delete
reaches the messages it staged; an ``atomic/add`` of a staged record's content makes a record of
its own, which the import's record folds into once it commits; a non-UTF-8 file is reported once."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from in_process import fresh_scope, jsonl, writer
from memory_hub import memory_ids
from memory_hub.clock import now_ms, ordered_id
from memory_hub.domain import assets, atomic, conversation, persona, scenario
from memory_hub.domain.principal import Authorize
from memory_hub.domain.scope import Scope
from memory_hub.domain.transfer import applying, staging, tree
from memory_hub.storage import blobs, bucket, jobs, records
from memory_hub.storage.models import Job, own
from test_import_staging import IMPORTED, REINFORCED, _tree

ZEBRA = "a zebra was seen"  # the content of the record the import's tree holds


def _files_tree() -> tree.Tree:
    """A new scene file, a scene file over the memory's own, a persona over the memory's own."""
    files = {
        "scene_blocks/imported.md": b"an imported scene\n",
        "scene_blocks/live.md": b"the imported version of the live scene\n",
        "persona.md": b"the imported persona",
    }
    return tree.read(files, tree.Selection())


def _seed_files(scope: Scope, auth: Authorize) -> None:
    scenario.write(scope, "live.md", "the live scene", None, None, auth, "req")
    persona.write(scope, "the live persona", auth, "req")


def _files_seen(scope: Scope, auth: Authorize) -> dict[str, Any]:
    listed = scenario.ls(scope, "", 100, None, auth)
    return {
        "ls": [(e.path, e.version) for e in listed.entries],
        "total": listed.total,
        "count": scenario.count(scope, "", auth).total,
        "imported.md": scenario.read(scope, "imported.md", auth).content,
        "live.md": (scenario.read(scope, "live.md", auth).content or "").split("\n\n", 1)[-1],
        "persona": (persona.read(scope, auth).content, persona.read(scope, auth).version),
        "persona count": persona.count(scope, auth).total,
    }


def _running(scope: Scope, parsed: tree.Tree) -> Job:
    memory_id = memory_ids.memory_id_of(scope.team_id, scope.agent_id)
    job = jobs.new(ordered_id("imp-"), "import", memory_id, scope.team_id, scope.agent_id, "key-x", {})
    assert jobs.claim(job, "created")
    applying.write(parsed, job)
    return job


def _commit(scope: Scope, job: Job) -> set[str]:
    asset = assets.of_pair(scope.team_id, scope.agent_id)
    assert asset is not None
    staging.commit(asset, job, {"counts": {}}, [])
    return staging.finish(job)


def _leftovers(scope: Scope) -> list[str]:
    """Objects at the memory's keys that no read looks at: the imports' journals and staged files."""
    return blobs.keys_under(bucket.import_prefix(scope.team_id, scope.agent_id))


def test_an_imports_files_and_persona_show_only_once_it_commits(aws):
    scope = fresh_scope()
    auth = writer(scope)
    _seed_files(scope, auth)
    before = _files_seen(scope, auth)
    assert before["ls"] == [("live.md", 1)] and before["persona"] == ("the live persona", 1)
    job = _running(scope, _files_tree())
    assert _files_seen(scope, auth) == before  # ls, count, read, core/read: as before
    assert blobs.head(bucket.scene_key(scope.team_id, scope.agent_id, "imported.md")) is None

    _commit(scope, job)
    after = _files_seen(scope, auth)
    assert after["ls"] == [("imported.md", 1), ("live.md", 2)] and after["total"] == after["count"] == 2
    assert after["imported.md"].endswith("an imported scene\n")
    assert after["live.md"] == "the imported version of the live scene\n"
    assert after["persona"] == ("the imported persona", 2) and after["persona count"] == 1
    assert blobs.keys_under(bucket.backup_prefix(scope.team_id, scope.agent_id))  # the live persona, backed up
    assert _leftovers(scope) == []  # staged copies and journal gone


def test_an_import_that_stops_before_its_commit_leaves_no_file(aws):
    scope = fresh_scope()
    auth = writer(scope)
    _seed_files(scope, auth)
    before = _files_seen(scope, auth)
    job = _running(scope, _files_tree())
    own(Job, job).update(actions=[Job.updated_at.set(now_ms() - 10 * 60_000)])  # no heartbeat since: its process died
    assert staging.recover(now_ms()) >= 1
    assert _files_seen(scope, auth) == before
    assert _leftovers(scope) == []
    assert blobs.head(bucket.scene_key(scope.team_id, scope.agent_id, "imported.md")) is None


def test_an_import_that_stops_right_after_its_commit_gets_its_files_from_the_recovery(aws):
    scope = fresh_scope()
    auth = writer(scope)
    _seed_files(scope, auth)
    job = _running(scope, _files_tree())
    asset = assets.of_pair(scope.team_id, scope.agent_id)
    assert asset is not None
    staging.commit(asset, job, {"counts": {}}, [])  # then the process dies: nothing landed yet
    assert _files_seen(scope, auth)["ls"] == [("live.md", 1)]
    staging.recover(now_ms())
    after = _files_seen(scope, auth)
    assert after["ls"] == [("imported.md", 1), ("live.md", 2)]
    assert after["persona"] == ("the imported persona", 2)
    assert _leftovers(scope) == []
    staging.recover(now_ms())  # nothing left to finish: a second pass changes nothing
    assert _files_seen(scope, auth) == after


def test_a_session_delete_during_an_import_reaches_the_messages_it_staged(aws):
    scope = fresh_scope()
    auth = writer(scope)
    conversation.add(scope, [{"role": "user", "content": "hello there"}], auth)
    job = _running(scope, _tree())  # IMPORTED messages, half of them in session s1
    whole = Scope(scope.team_id, scope.agent_id, "u", None)
    in_s1 = Scope(scope.team_id, scope.agent_id, "u", "s1")
    conversation.delete(whole, None, ["s1"], auth, "req")
    assert conversation.count(whole, None, None, auth).total == 1  # the notes moved with the count
    _commit(scope, job)
    assert conversation.count(in_s1, None, None, auth).total == 0
    assert conversation.count(whole, None, None, auth).total == 1 + IMPORTED // 2
    assert len(conversation.query(whole, 100, 0, None, None, auth).messages) == 1 + IMPORTED // 2


def _records(scope: Scope, auth: Authorize) -> list[tuple[str, int, str]]:
    whole = Scope(scope.team_id, scope.agent_id, "u", None)
    return sorted(
        (r.content, r.reinforced_count, r.id) for r in atomic.query(whole, None, 100, 0, None, None, auth).items
    )


def test_an_add_of_a_staged_records_content_makes_its_own_record_which_the_import_folds_into(aws):
    scope = fresh_scope()
    auth = writer(scope)
    atomic.add(scope, REINFORCED, "episodic", "", [], {}, auth)
    job = _running(scope, _tree())
    added = atomic.add(scope, ZEBRA, "episodic", "", [], {}, auth)
    assert (added.created, added.version, added.reinforced_count) == (True, 1, 1)  # as if the import's were not there
    whole = Scope(scope.team_id, scope.agent_id, "u", None)
    assert atomic.count(whole, None, None, None, auth).total == 2
    folded = _commit(scope, job)
    assert len(folded) == 1  # the import's record: a reinforcement of the client's now, no vector made
    assert [(c, n) for c, n, _ in _records(scope, auth)] == [(ZEBRA, 2), (REINFORCED, 2)]
    assert [i for c, _, i in _records(scope, auth) if c == ZEBRA] == [added.id]
    assert atomic.count(whole, None, None, None, auth).total == 2
    again = atomic.add(scope, ZEBRA, "episodic", "", [], {}, auth)  # natural-key dedup holds after the commit
    assert (again.id, again.created, again.reinforced_count) == (added.id, False, 3)


def test_a_failed_import_leaves_the_clients_record_and_its_natural_key(aws):
    scope = fresh_scope()
    auth = writer(scope)
    job = _running(scope, _tree())
    added = atomic.add(scope, ZEBRA, "episodic", "", [], {}, auth)
    own(Job, job).update(actions=[Job.updated_at.set(now_ms() - 10 * 60_000)])
    assert staging.recover(now_ms()) >= 1
    assert [(c, n, i) for c, n, i in _records(scope, auth)] == [(ZEBRA, 1, added.id)]
    again = atomic.add(scope, ZEBRA, "episodic", "", [], {}, auth)
    assert (again.id, again.created, again.reinforced_count) == (added.id, False, 2)
    asset = assets.of_pair(scope.team_id, scope.agent_id)
    assert asset is not None and len(records.of_user(assets.where_of(asset), "u")) == 1


@pytest.mark.parametrize("name", ["conversations/2026-01-05.jsonl", "records/2026-01-05.jsonl"])
def test_a_jsonl_file_that_is_not_utf8_is_reported_once(name):
    files = {name: b'{"id": "x", "content": "caf\xe9"}\n', "scene_blocks/" + uuid.uuid4().hex + ".md": b"fine"}
    with pytest.raises(tree.Malformed) as raised:
        tree.read(files, tree.Selection())
    assert raised.value.problems == [f"{name}:1: not UTF-8"]


def test_a_scene_file_that_is_not_utf8_is_reported_once():
    with pytest.raises(tree.Malformed) as raised:
        tree.read({"scene_blocks/a.md": b"\xff", "conversations/2026-01-05.jsonl": jsonl([])}, tree.Selection())
    assert raised.value.problems == ["scene_blocks/a.md:1: not UTF-8"]
