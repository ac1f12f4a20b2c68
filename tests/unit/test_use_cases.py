"""The domain's use cases in this process, over moto in process (the ``aws`` fixture of the unit
tier): L2 scenario files, the L3 persona, L0 conversation, L1 atomic records, the asset-level clear
and the isolation of one (team, agent) pair from another. Each test uses fresh team/agent ids, so
tests share the session's tables and bucket without seeing each other's items. Called the way the
handlers in functions/*/app.py call them: a Scope, an ``authorize`` that yields the caller's
Principal, and a request id."""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest
from in_process import fresh_scope, writer
from memory_hub.domain import assets, atomic, clear, conversation, persona, results, scenario
from memory_hub.domain.errors import Conflict, Invalid
from memory_hub.domain.principal import Principal
from memory_hub.domain.scope import Scope
from memory_hub.settings import get_settings
from memory_hub.storage import aws as storage_aws
from memory_hub.storage import blobs, bucket, layout

REQUEST = "req-unit-use-cases-0001"


def _fresh(user_id: str = "u1", session_id: str | None = None) -> Scope:
    return fresh_scope(user_id, session_id)


def _in_session(scope: Scope, session_id: str | None) -> Scope:
    return Scope(scope.team_id, scope.agent_id, scope.user_id, session_id, scope.task_id)


def _add_messages(scope: Scope, *contents: str) -> list[str]:
    batch = [{"role": "user", "content": text} for text in contents]
    answer = conversation.add(scope, batch, writer(scope))
    assert answer.total_count == len(contents) and answer.accepted_versions == ["v1"] * len(contents)
    return answer.accepted_ids


def _add_record(scope: Scope, content: str, type_: str = "fact", background: str = "") -> dict[str, Any]:
    return atomic.add(scope, content, type_, background, ["t"], {"k": "v"}, writer(scope))


def _search(scope: Scope, text: str) -> list[str]:
    answer = conversation.search(scope, text, 10, None, None, writer(scope))
    assert answer.mode_used == "keyword"  # meaning is off in the unit tier
    return [m.content for m in answer.messages]


def _every_layer(scope: Scope) -> dict[str, int]:
    """What each use case counts for the scope (its session unset: every session)."""
    auth = writer(scope)
    return {
        "l0": conversation.count(scope, None, None, auth).total,
        "l1": atomic.count(scope, None, None, None, auth).total,
        "l2": scenario.count(scope, "", auth).count,
        "l3": persona.count(scope, auth).total,
    }


# ---------------------------------------------------------------- L2 scenario


def test_scenario_write_versions_read_ls_rm_and_count(aws):
    scope = _fresh()
    auth = writer(scope)
    assert assets.of_scope(scope) is None  # the first write creates the asset

    first = scenario.write(scope, "notes/b.md", "first body", "about b", None, auth, REQUEST)
    assert (first.version, first.created) == (1, True)
    assert assets.of_scope(scope) is not None
    second = scenario.write(scope, "notes/b.md", "second body", None, 1, auth, REQUEST)
    assert (second.version, second.created) == (2, False)
    assert second.created_at == first.created_at

    read = scenario.read(scope, "notes/b.md", auth)
    assert read.version == 2 and read.summary == "about b"  # the summary is kept when none is given
    assert read.content.startswith("-----META-START-----\nversion: 2\n")
    assert read.content.endswith("\n-----META-END-----\n\nsecond body")
    assert "first body" not in read.content
    assert (read.created_at, read.updated_at) == (first.created_at, second.updated_at)

    scenario.write(scope, "a.md", "top", None, None, auth, REQUEST)
    scenario.write(scope, "notes/a.md", "a", "about a", None, auth, REQUEST)
    listed = scenario.ls(scope, "", 10, None, auth)
    assert [e.path for e in listed.entries] == ["a.md", "notes/a.md", "notes/b.md"]
    assert listed.total == 3 and listed.next_token is None
    assert {e.path: e.version for e in listed.entries} == {"a.md": 1, "notes/a.md": 1, "notes/b.md": 2}
    under = scenario.ls(scope, "notes/", 1, None, auth)
    assert [e.path for e in under.entries] == ["notes/a.md"] and under.total == 2
    rest = scenario.ls(scope, "notes/", 1, under.next_token, auth)
    assert [e.path for e in rest.entries] == ["notes/b.md"]
    assert scenario.count(scope, "", auth).count == 3
    assert scenario.count(scope, "notes/", auth).count == 2

    removed = scenario.rm(scope, "notes/b.md", auth, REQUEST)
    assert removed.success is True and removed.deleted == 1 and len(removed.audit_ids) == 1
    gone = scenario.read(scope, "notes/b.md", auth)
    assert gone.content is None and gone.version is None
    assert [e.path for e in scenario.ls(scope, "", 10, None, auth).entries] == ["a.md", "notes/a.md"]
    assert scenario.count(scope, "", auth).count == 2
    assert scenario.rm(scope, "notes/b.md", auth, REQUEST).deleted == 0  # nothing left to remove
    # back at version 0: expected_version 0 is what it is at, and the next write is version 1 again
    again = scenario.write(scope, "notes/b.md", "reborn", None, 0, auth, REQUEST)
    assert (again.version, again.created) == (1, True)


def test_a_scenario_page_that_would_pass_a_lambda_answer_stops_short_and_continues(aws, monkeypatch):
    """A page of long summaries stops where the function's answer would pass its budget (6 MB on
    AWS; a small one here), and its next_token gives the rest; total still counts every file."""
    scope = _fresh()
    auth = writer(scope)
    paths = [f"notes/{n:02}.md" for n in range(7)]
    for path in paths:
        scenario.write(scope, path, "x", "\u4e2d" * 1024, None, auth, REQUEST)
    entry = scenario.ls(scope, "", 1, None, auth).entries[0]
    monkeypatch.setattr(results, "ANSWER_BUDGET", 2 * 3 * results.wire_bytes(entry))  # three entries, twice each
    seen: list[str] = []
    token = None
    for _ in paths:
        page = scenario.ls(scope, "", 1000, token, auth)
        assert page.total == 7 and page.entries == page.scenes and len(page.entries) <= 3
        seen += [e.path for e in page.entries]
        token = page.next_token
        if token is None:
            break
    assert seen == paths


def test_scenario_write_at_a_stale_version_is_a_conflict_naming_the_current_one(aws):
    scope = _fresh()
    auth = writer(scope)
    for body in ("one", "two", "three"):
        scenario.write(scope, "plan.md", body, None, None, auth, REQUEST)
    with pytest.raises(Conflict) as caught:
        scenario.write(scope, "plan.md", "lost update", None, 2, auth, REQUEST)
    assert caught.value.data == {"current_version": 3}
    assert "3" in caught.value.message
    read = scenario.read(scope, "plan.md", auth)
    assert read.version == 3 and read.content.endswith("\nthree")  # nothing was written
    # a file that does not exist is at version 0, in a memory that does not exist too
    nowhere = _fresh()
    with pytest.raises(Conflict) as missing:
        scenario.write(nowhere, "plan.md", "x", None, 1, writer(nowhere), REQUEST)
    assert missing.value.data == {"current_version": 0}
    assert assets.of_scope(nowhere) is None  # refused before creating the asset
    with pytest.raises(Conflict) as absent:
        scenario.write(scope, "other.md", "x", None, 4, auth, REQUEST)
    assert absent.value.data == {"current_version": 0}
    assert scenario.count(scope, "", auth).count == 1


def test_scenario_rm_of_a_folder_removes_what_is_under_it_only(aws):
    scope = _fresh()
    auth = writer(scope)
    for path in ("keep.md", "old/x.md", "old/y.md", "older.md"):
        scenario.write(scope, path, path, None, None, auth, REQUEST)
    assert scenario.rm(scope, "old/", auth, REQUEST).deleted == 2
    assert [e.path for e in scenario.ls(scope, "", 10, None, auth).entries] == ["keep.md", "older.md"]
    assert scenario.read(scope, "old/x.md", auth).content is None


# ---------------------------------------------------------------- L3 persona


def test_persona_write_read_count_and_a_backup_of_the_replaced_version(aws):
    scope = _fresh()
    auth = writer(scope)
    assert persona.read(scope, auth).content is None
    assert persona.count(scope, auth).total == 0

    first = persona.write(scope, "# Persona\nLikes tea.", auth, REQUEST)
    assert first.version == 1
    read = persona.read(scope, auth)
    assert read.content == "# Persona\nLikes tea." and read.version == 1  # exactly as written, no META
    assert persona.count(scope, auth).total == 1
    backups = bucket.backup_prefix(scope.team_id, scope.agent_id)
    assert blobs.keys_under(backups) == []  # nothing was replaced yet

    second = persona.write(scope, "# Persona\nLikes coffee.", auth, REQUEST)
    assert second.version == 2 and second.created_at == first.created_at
    read = persona.read(scope, auth)
    assert read.content == "# Persona\nLikes coffee." and read.version == 2
    assert persona.count(scope, auth).total == 1
    (kept,) = blobs.keys_under(backups)
    assert kept.endswith("_1.md")  # named after the version it holds
    backup = blobs.get(kept)
    assert backup is not None and backup.text == "# Persona\nLikes tea."


def test_persona_keeps_only_the_three_newest_backups(aws):
    scope = _fresh()
    auth = writer(scope)
    for n in range(1, 7):
        assert persona.write(scope, f"version {n}", auth, REQUEST).version == n
    kept = sorted(blobs.keys_under(bucket.backup_prefix(scope.team_id, scope.agent_id)))
    assert [key.rsplit("_", 1)[1] for key in kept] == ["3.md", "4.md", "5.md"]
    assert persona.read(scope, auth).content == "version 6"


# ---------------------------------------------------------------- L0 conversation


def test_conversation_add_query_newest_first_by_session_and_count(aws):
    scope = _fresh(session_id="s1")
    auth = writer(scope)
    with pytest.raises(Invalid):
        conversation.add(_in_session(scope, None), [{"role": "user", "content": "x"}], auth)
    first = _add_messages(scope, "hello there", "how are you")
    other = _add_messages(_in_session(scope, "s2"), "a different session")
    assert len(set(first + other)) == 3 and all(i.startswith("msg-") for i in first + other)

    everyone = _in_session(scope, None)
    listed = conversation.query(everyone, 10, 0, None, None, auth)
    assert [m.content for m in listed.messages] == ["a different session", "how are you", "hello there"]
    assert listed.total == 3
    assert {m.session_id for m in listed.messages} == {"s1", "s2"}
    assert all(m.user_id == "u1" and m.role == "user" for m in listed.messages)

    in_s1 = conversation.query(scope, 10, 0, None, None, auth)
    assert [m.id for m in in_s1.messages] == first[::-1] and in_s1.total == 2
    page = conversation.query(everyone, 1, 1, None, None, auth)
    assert [m.content for m in page.messages] == ["how are you"] and page.total == 3

    assert conversation.count(everyone, None, None, auth).total == 3
    assert conversation.count(scope, None, None, auth).total == 2
    assert conversation.count(_in_session(scope, "s2"), None, None, auth).total == 1
    assert conversation.count(_in_session(scope, "s3"), None, None, auth).total == 0
    # another user of the same memory has none of them
    assert conversation.count(Scope(scope.team_id, scope.agent_id, "u2"), None, None, auth).total == 0


def test_conversation_search_by_words_stems_and_ignores_stop_words(aws):
    scope = _fresh(session_id="s1")
    _add_messages(scope, "I run every morning", "The car needs an oil change")
    _add_messages(_in_session(scope, "s2"), "We ran out of milk")

    everyone = _in_session(scope, None)
    assert _search(everyone, "running") == ["I run every morning"]  # "running" and "run" are one stem
    assert _search(everyone, "changing oils") == ["The car needs an oil change"]
    assert _search(everyone, "the of an") == []  # stop words only: no terms, nothing found
    assert _search(everyone, "bicycle") == []
    assert _search(_in_session(scope, "s2"), "milk") == ["We ran out of milk"]
    assert _search(scope, "milk") == []  # the session narrows the search
    found = conversation.search(everyone, "oil", 10, None, None, writer(scope)).messages
    assert found[0].score > 0 and found[0].session_id == "s1"
    # by words alone the best scores what the best item by words scores in hybrid: one scale for every mode
    assert found[0].score == pytest.approx((2 / 61) / 1.5, abs=1e-6)


def test_conversation_delete_by_id_removes_exactly_those_ids(aws):
    scope = _fresh(session_id="s1")
    auth = writer(scope)
    ids = _add_messages(scope, "one", "two", "three", "four")
    unknown = "msg-" + "0" * 26
    answer = conversation.delete(scope, [ids[1], ids[3], unknown], None, auth, REQUEST)
    assert answer.deleted_count == 2
    assert answer.deleted_ids == [ids[1], ids[3]]
    assert answer.not_found_ids == [unknown]
    assert len(answer.audit_ids) == 2
    left = conversation.query(scope, 10, 0, None, None, auth).messages
    assert [m.id for m in left] == [ids[2], ids[0]]
    assert conversation.count(scope, None, None, auth).total == 2
    assert _search(scope, "two") == [] and _search(scope, "three") == ["three"]
    again = conversation.delete(scope, [ids[1]], None, auth, REQUEST)
    assert again.deleted_count == 0 and again.not_found_ids == [ids[1]]
    with pytest.raises(Invalid):
        conversation.delete(scope, ["  "], None, auth, REQUEST)


def test_conversation_delete_by_session_removes_that_session_only(aws):
    scope = _fresh(session_id="s1")
    auth = writer(scope)
    _add_messages(scope, "one", "two")
    kept = _add_messages(_in_session(scope, "s2"), "three")
    answer = conversation.delete(scope, None, ["s1"], auth, REQUEST)
    assert answer.deleted_count == 2 and answer.deleted_session_ids == ["s1"]
    left = conversation.query(_in_session(scope, None), 10, 0, None, None, auth).messages
    assert [m.id for m in left] == kept


# ---------------------------------------------------------------- L1 atomic


def test_atomic_add_then_the_same_content_reinforces_the_same_record(aws):
    scope = _fresh()
    auth = writer(scope)
    first = _add_record(scope, "Prefers aisle seats", background="travel")
    assert first.version == 1 and first.created is True and first.reinforced_count == 1
    assert first.id.startswith("atom-")

    again = _add_record(scope, "Prefers aisle seats", background="travel")
    assert again.wire() == {"id": first.id, "version": 1, "created": False, "reinforced_count": 2}
    assert atomic.count(scope, None, None, None, auth).total == 1
    (item,) = atomic.query(scope, None, 10, 0, None, None, auth).items
    assert item.id == first.id and item.reinforced_count == 2 and item.version == 1
    assert (item.content, item.background, item.tags, item.metadata) == (
        "Prefers aisle seats",
        "travel",
        ["t"],
        {"k": "v"},
    )

    other_type = _add_record(scope, "Prefers aisle seats", type_="preference", background="travel")
    other_background = _add_record(scope, "Prefers aisle seats", background="work")
    assert other_type.created and other_background.created
    assert len({first.id, other_type.id, other_background.id}) == 3
    assert atomic.count(scope, None, None, None, auth).total == 3
    assert atomic.count(scope, "preference", None, None, auth).total == 1


def test_atomic_update_checks_the_version_and_reindexes(aws):
    scope = _fresh()
    auth = writer(scope)
    atom_id = _add_record(scope, "Lives in Paris").id
    updated = atomic.update(scope, atom_id, {"content": "Lives in Berlin"}, 1, auth, REQUEST)
    assert updated.id == atom_id and updated.version == "v2"

    with pytest.raises(Conflict) as caught:
        atomic.update(scope, atom_id, {"content": "Lives in Rome"}, 1, auth, REQUEST)
    assert caught.value.data == {"current_version": 2}
    (item,) = atomic.query(scope, None, 10, 0, None, None, auth).items
    assert (item.content, item.version) == ("Lives in Berlin", 2)  # the stale update changed nothing

    def found(text: str) -> list[str]:
        return [i.id for i in atomic.search(scope, text, None, 10, None, None, auth).items]

    assert found("berlin") == [atom_id] and found("paris") == []
    # without an expected version the update applies to whatever version is current
    assert atomic.update(scope, atom_id, {"tags": ["moved"]}, None, auth, REQUEST).version == "v3"
    (item,) = atomic.query(scope, None, 10, 0, None, None, auth).items
    assert (item.tags, item.version, item.content) == (["moved"], 3, "Lives in Berlin")


def test_atomic_delete_by_ids(aws):
    scope = _fresh()
    auth = writer(scope)
    ids = [_add_record(scope, f"fact number {n}").id for n in range(3)]
    with pytest.raises(Conflict) as caught:
        atomic.delete(scope, [ids[0]], {ids[0]: 5}, auth, REQUEST)
    assert caught.value.data == {"conflicts": [{"id": ids[0], "expected": 5, "actual": 1}]}
    assert atomic.count(scope, None, None, None, auth).total == 3  # nothing was deleted

    unknown = "atom-" + "0" * 26
    answer = atomic.delete(scope, [ids[0], ids[2], unknown], {ids[2]: 1}, auth, REQUEST)
    assert answer.deleted_count == 2 and answer.deleted_ids == [ids[0], ids[2]]
    assert answer.not_found_ids == [unknown] and len(answer.audit_ids) == 2
    assert [i.id for i in atomic.query(scope, None, 10, 0, None, None, auth).items] == [ids[1]]
    assert atomic.count(scope, None, None, None, auth).total == 1
    # the same content may be added again once its record is gone: a new record
    again = _add_record(scope, "fact number 0")
    assert again.created is True and again.id != ids[0]


# ---------------------------------------------------------------- clear


def _fill_every_layer(scope: Scope) -> None:
    auth = writer(scope)
    _add_messages(scope, "remember the milk", "and the eggs")
    _add_record(scope, "Allergic to peanuts")
    scenario.write(scope, "notes/shopping.md", "milk, eggs", None, None, auth, REQUEST)
    persona.write(scope, "first persona", auth, REQUEST)
    persona.write(scope, "second persona", auth, REQUEST)


def test_clear_empties_every_layer_and_keeps_the_asset(aws):
    scope = _fresh(session_id="s1")
    everyone = _in_session(scope, None)
    auth = writer(scope)
    _fill_every_layer(scope)
    before = assets.of_scope(scope)
    assert before is not None
    assert _every_layer(everyone) == {"l0": 2, "l1": 1, "l2": 1, "l3": 1}
    assert assets.counts(before).wire() == {"l0": 2, "l1": 1, "l2": 1, "l3": 1}

    admin = Principal("key-admin", "admin", (scope.team_id,))
    checked = clear.checked(admin, clear.named(clear.memory_ids([scope.memory_id]), None))
    answer = clear.clear(admin, checked, REQUEST, lambda: 60_000)
    (item,) = answer.items
    assert answer.all_cleared is True and item.cleared is True
    assert item.purge_pending is None and "purge_pending" not in item.wire()  # absent, not null
    assert (item.memory_id, item.team_id, item.agent_id) == (scope.memory_id, scope.team_id, scope.agent_id)
    assert (item.l0_deleted, item.l1_deleted) == (2, 1)

    assert _every_layer(everyone) == {"l0": 0, "l1": 0, "l2": 0, "l3": 0}
    assert conversation.query(everyone, 10, 0, None, None, auth).messages == []
    assert _search(everyone, "milk") == []
    assert atomic.query(everyone, None, 10, 0, None, None, auth).items == []
    assert scenario.ls(everyone, "", 10, None, auth).entries == []
    assert scenario.read(everyone, "notes/shopping.md", auth).content is None
    assert persona.read(everyone, auth).content is None

    after = assets.of_scope(scope)
    assert after is not None and after.memory_id == before.memory_id == scope.memory_id
    assert int(after.epoch) > int(before.epoch) and after.last_cleared_at is not None
    assert assets.counts(after).wire() == {"l0": 0, "l1": 0, "l2": 0, "l3": 0}
    # the purge erased the objects too, persona backups included
    assert blobs.keys_under(bucket.prefix(scope.team_id, scope.agent_id)) == []
    # the memory is usable again: a write starts over at version 1
    assert scenario.write(scope, "notes/shopping.md", "bread", None, None, auth, REQUEST).version == 1
    assert persona.write(scope, "third persona", auth, REQUEST).version == 1
    assert _add_record(scope, "Allergic to peanuts").reinforced_count == 1
    assert _every_layer(everyone) == {"l0": 0, "l1": 1, "l2": 1, "l3": 1}


def _stored_keys(pk: str) -> list[str]:
    """The sort keys of one ItemsTable partition, read directly (storage, not a use case)."""
    table = get_settings().items_table
    found = storage_aws.dynamodb().query(
        TableName=table,
        ConsistentRead=True,
        KeyConditionExpression="pk = :p",
        ExpressionAttributeValues={":p": {"S": pk}},
    )
    return [row["sk"]["S"] for row in found["Items"]]


def test_clear_leaves_nothing_of_the_old_epoch_in_storage(aws):
    """What the API tier cannot see: the old epoch's partitions (items, natural-key guards, search
    postings, counters) and the purge record are gone from the table once the clear answers."""
    scope = _fresh(session_id="s1")
    _fill_every_layer(scope)
    before = assets.of_scope(scope)
    assert before is not None
    epoch = int(before.epoch)
    partitions = [
        layout.item_pk("L0", scope.team_id, scope.agent_id, epoch, scope.user_id),
        layout.item_pk("L1", scope.team_id, scope.agent_id, epoch, scope.user_id),
        layout.counter_pk(scope.team_id, scope.agent_id, epoch),
    ]
    l0, l1, counters = (_stored_keys(pk) for pk in partitions)
    # a message's postings are keyed by term (``t␟``), a record's by item (``p␟``)
    assert any(sk.startswith(f"t{layout.SEP}") for sk in l0) and any(sk.startswith(f"p{layout.SEP}") for sk in l1)
    assert any(sk.startswith(f"nk{layout.SEP}") for sk in l1) and counters

    admin = Principal("key-admin", "admin", (scope.team_id,))
    checked = clear.checked(admin, clear.named(clear.memory_ids([scope.memory_id]), None))
    assert clear.clear(admin, checked, REQUEST, lambda: 60_000).all_cleared is True

    assert [_stored_keys(pk) for pk in partitions] == [[], [], []]
    purge = layout.purge_sk(scope.team_id, scope.agent_id, epoch)
    assert purge not in _stored_keys(layout.PURGE_PK)


# ---------------------------------------------------------------- tenancy


def _sees_nothing(scope: Scope) -> None:
    auth = writer(scope)
    assert _every_layer(scope) == {"l0": 0, "l1": 0, "l2": 0, "l3": 0}
    assert conversation.query(scope, 10, 0, None, None, auth).wire() == {"messages": [], "total": 0}
    assert conversation.search(scope, "milk", 10, None, None, auth).messages == []
    assert atomic.query(scope, None, 10, 0, None, None, auth).wire() == {"items": [], "total": 0}
    assert atomic.search(scope, "peanuts", None, 10, None, None, auth).items == []
    assert scenario.ls(scope, "", 10, None, auth).entries == []
    assert scenario.read(scope, "notes/shopping.md", auth).content is None
    assert persona.read(scope, auth).content is None


def _owner_unchanged(scope: Scope) -> None:
    assert _every_layer(scope) == {"l0": 2, "l1": 1, "l2": 1, "l3": 1}
    assert scenario.read(scope, "notes/shopping.md", writer(scope)).content.endswith("\nmilk, eggs")
    assert persona.read(scope, writer(scope)).content == "second persona"


def test_another_team_and_agent_see_none_of_a_pairs_items(aws):
    owner = _fresh()
    _fill_every_layer(_in_session(owner, "s1"))
    for team_id, agent_id in [
        (f"other{owner.team_id}", f"other{owner.agent_id}"),  # another team and agent
        (owner.team_id, f"other{owner.agent_id}"),  # the same team, another agent
        (f"other{owner.team_id}", owner.agent_id),  # another team, the same agent id
    ]:
        _sees_nothing(Scope(team_id, agent_id, owner.user_id))

    # the other pair writes the same paths and ids of its own: neither sees the other's
    stranger = Scope(f"other{owner.team_id}", f"other{owner.agent_id}", owner.user_id, "s1")
    auth = writer(stranger)
    scenario.write(stranger, "notes/shopping.md", "nails", None, None, auth, REQUEST)
    persona.write(stranger, "stranger persona", auth, REQUEST)
    assert _add_record(stranger, "Allergic to peanuts").created is True  # no reinforcing across pairs
    _owner_unchanged(owner)
    assert _every_layer(_in_session(stranger, None)) == {"l0": 0, "l1": 1, "l2": 1, "l3": 1}
    assert persona.read(stranger, auth).content == "stranger persona"


def test_two_pairs_that_spell_the_same_memory_id_are_two_memories(aws):
    suffix = uuid.uuid4().hex[:10]
    owner = Scope(f"a{suffix}-b", "c", "u1")
    twin = Scope(f"a{suffix}", "b-c", "u1")
    assert owner.memory_id == twin.memory_id
    _fill_every_layer(_in_session(owner, "s1"))
    _sees_nothing(twin)
    assert assets.of_scope(twin) is None  # reads never create an asset

    scenario.write(twin, "notes/shopping.md", "twin's list", None, None, writer(twin), REQUEST)
    twin_asset, owner_asset = assets.of_scope(twin), assets.of_scope(owner)
    assert twin_asset is not None and owner_asset is not None
    assert (twin_asset.team_id, owner_asset.team_id) == (twin.team_id, owner.team_id)
    _owner_unchanged(owner)

    # clearing one of them leaves the other whole
    admin = Principal("key-admin", "admin", (owner.team_id,))
    checked = clear.checked(admin, clear.named([owner.memory_id], [(owner.memory_id, owner.team_id, "c")]))
    assert [(a.team_id, a.agent_id) for a in checked] == [(owner.team_id, "c")]
    assert clear.clear(admin, checked, REQUEST, lambda: 60_000).all_cleared is True
    assert _every_layer(owner) == {"l0": 0, "l1": 0, "l2": 0, "l3": 0}
    assert scenario.read(twin, "notes/shopping.md", writer(twin)).content.endswith("\ntwin's list")


def test_imported_lines_folded_into_a_record_are_remembered_taken_back_and_forgotten_with_its_key(aws):
    """What an import's natural-key dedup does to the record it reinforces (storage.records)."""
    from memory_hub.storage import records

    scope = _fresh()
    auth = writer(scope)
    atom_id = _add_record(scope, "Likes tea").id
    where = assets.where_of(assets.of_scope(scope))
    held = records.get(where, scope.user_id, atom_id)
    assert held is not None and held.absorbed is None
    before = (int(held.reinforced_count), int(held.updated_at))
    assert records.reinforce(where, held, before[1] + 5, absorbed=["atom-line-1", "atom-line-2"]) == 3
    held = records.get(where, scope.user_id, atom_id)
    assert held.absorbed == {"atom-line-1", "atom-line-2"} and int(held.reinforced_count) == 3
    # an undo made after another change leaves both
    assert not records.unreinforce(where, held, before, 2, before[1] + 4, ["atom-line-1", "atom-line-2"])
    assert records.unreinforce(where, held, before, 2, before[1] + 5, ["atom-line-1", "atom-line-2"])
    held = records.get(where, scope.user_id, atom_id)
    assert (int(held.reinforced_count), int(held.updated_at), held.absorbed) == (*before, None)

    records.reinforce(where, held, before[1] + 6, absorbed=["atom-line-3"])
    atomic.update(scope, atom_id, {"tags": ["kept"]}, None, auth, REQUEST)  # the same natural key
    assert records.get(where, scope.user_id, atom_id).absorbed == {"atom-line-3"}
    atomic.update(scope, atom_id, {"content": "Likes coffee"}, None, auth, REQUEST)  # another one
    assert records.get(where, scope.user_id, atom_id).absorbed is None
    (item,) = atomic.query(scope, None, 10, 0, None, None, auth).items
    assert "absorbed" not in item.wire() and "ab" not in item.wire()


def test_a_record_reinforced_after_the_cleanup_read_it_is_not_deleted_as_expired(aws):
    """The retention cleanup deletes what it read as old only if it is still as read: a reinforcing
    add moves ``updated_at`` (not the version), so the record is young again and stays."""
    from memory_hub.storage import records

    scope = _fresh()
    kept_id = _add_record(scope, "Likes tea").id
    gone_id = _add_record(scope, "Likes coffee").id
    where = assets.where_of(assets.of_scope(scope))
    read = [records.get(where, scope.user_id, i) for i in (kept_id, gone_id)]  # as the cleanup read them
    time.sleep(0.002)  # a later millisecond: the reinforcement's updated_at is not the read one
    _add_record(scope, "Likes tea")  # reinforced meanwhile
    events = lambda chunk: []  # noqa: E731
    removed, _ = records.expire(where, read, events)
    assert [r.id for r in removed] == [gone_id]
    assert records.get(where, scope.user_id, kept_id) is not None
    # without the updated_at check (a delete by id at the version a person saw) it would have gone
    assert records.delete(where, [read[0]], events, at_version={kept_id})[0][0].id == kept_id
