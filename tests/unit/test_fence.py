"""A memory's clear fence (storage/assets.py, moto in process): a small item beside the asset that
holds its epoch and running imports and moves with them in the same transactions, so every write's
epoch check reads it — not the asset, whose ACL and bindings can make it tens of KB, billed twice
in every transaction. An asset of before gets its fence at its next write."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from in_process import fresh_scope, writer
from memory_hub.analysis import term_counts
from memory_hub.domain import assets, clear, conversation
from memory_hub.domain.principal import Principal
from memory_hub.memory_ids import memory_id_of
from memory_hub.storage import assets as stored
from memory_hub.storage import messages
from memory_hub.storage.errors import Cancelled
from memory_hub.storage.models import Asset, Fence, Job, snapshot
from memory_hub.storage.transactions import Transaction
from memory_hub.storage.views import Job as JobView

ADMIN = Principal("unit-admin", "admin", ("*",))
SAY = [{"role": "user", "content": "a message about green tea"}]


def _fence(team_id: str, agent_id: str) -> Fence | None:
    try:
        return Fence.get(memory_id_of(team_id, agent_id), stored.fence_sk(team_id, agent_id), consistent_read=True)
    except Fence.DoesNotExist:
        return None


def _checked(monkeypatch: pytest.MonkeyPatch) -> list[tuple[type, str]]:
    """What every transaction's condition checks read: (model, sort key)."""
    seen: list[tuple[type, str]] = []
    check = Transaction.check

    def spy(self: Transaction, name: str, model: type, pk: str, sk: str, **kwargs: Any) -> None:
        seen.append((model, sk))
        check(self, name, model, pk, sk, **kwargs)

    monkeypatch.setattr(Transaction, "check", spy)
    return seen


def _legacy(scope: Any) -> Asset:
    """An asset as stored before fences: no ``fenced`` mark, no fence item."""
    conversation.add(scope, SAY, writer(scope))
    asset = Asset.get(scope.memory_id, stored.pair_sk(scope.team_id, scope.agent_id), consistent_read=True)
    asset.update(actions=[Asset.fenced.remove()])
    Fence(scope.memory_id, stored.fence_sk(scope.team_id, scope.agent_id)).delete()
    stored._fenced_pairs.clear()  # as a process that never saw it fenced
    return asset


def test_a_new_memorys_writes_check_its_fence_and_a_clear_moves_it(aws, monkeypatch):
    scope = fresh_scope()
    conversation.add(scope, SAY, writer(scope))
    asset = assets.of_scope(scope)
    assert asset.fenced is True and int(_fence(scope.team_id, scope.agent_id).epoch) == int(asset.epoch)
    checked = _checked(monkeypatch)
    conversation.add(scope, SAY, writer(scope))
    assert checked == [(Fence, stored.fence_sk(scope.team_id, scope.agent_id))]  # not the asset
    old = assets.where_of(asset)
    clear.clear(ADMIN, [asset], "req-0000000000000000", lambda: 60_000)
    moved = assets.of_scope(scope)
    assert int(moved.epoch) != int(asset.epoch) and int(_fence(scope.team_id, scope.agent_id).epoch) == int(moved.epoch)
    new = messages.NewMessage("msg-late", "user", "late", 1, term_counts("late"))
    with pytest.raises(Cancelled) as raised:  # a write that read the epoch before the clear
        messages.add(old, scope.user_id, "s", None, [new], 1)
    assert raised.value.failed == ["epoch"]
    assert messages.get_many(old.everything(), scope.user_id, ["msg-late"]) == {}


def test_a_memory_delete_takes_its_fence_and_a_new_memory_of_the_pair_has_its_own(aws):
    scope = fresh_scope()
    conversation.add(scope, SAY, writer(scope))
    first = assets.of_scope(scope)
    clear.delete_memory(ADMIN, assets.Named(first.memory_id, scope.team_id, scope.agent_id), "req-1", lambda: 60_000)
    assert _fence(scope.team_id, scope.agent_id) is None
    conversation.add(scope, SAY, writer(scope))
    second = assets.of_scope(scope)
    assert int(_fence(scope.team_id, scope.agent_id).epoch) == int(second.epoch) != int(first.epoch)


def test_an_asset_of_before_is_checked_on_itself_until_its_next_write_gives_it_a_fence(aws, monkeypatch):
    scope = fresh_scope()
    _legacy(scope)
    checked = _checked(monkeypatch)
    where = assets.where_of(assets.of_scope(scope))
    new = messages.NewMessage("msg-direct", "user", "direct", 1, term_counts("direct"))
    messages.add(where, scope.user_id, "s", None, [new], 1)  # a write that never ensured: the asset's check
    assert checked == [(Asset, stored.pair_sk(scope.team_id, scope.agent_id))]
    conversation.add(scope, SAY, writer(scope))  # through ensure: fenced first, then checked on the fence
    assert checked[-1] == (Fence, stored.fence_sk(scope.team_id, scope.agent_id))
    asset = assets.of_scope(scope)
    assert asset.fenced is True and int(_fence(scope.team_id, scope.agent_id).epoch) == int(asset.epoch)


def test_an_asset_of_before_with_an_import_running_keeps_its_checks_on_itself(aws):
    scope = fresh_scope()
    _legacy(scope)
    assert stored.begin_import(assets.of_scope(scope), "imp-1", int(assets.of_scope(scope).epoch))
    assert stored.fence(assets.of_scope(scope)).fenced is None  # its fence would miss the running import
    assert _fence(scope.team_id, scope.agent_id) is None
    stored.end_import(scope.team_id, scope.agent_id, "imp-1")
    assert stored.fence(assets.of_scope(scope)).fenced is True


def test_a_clear_of_an_asset_read_before_it_got_its_fence_is_cancelled_and_its_retry_moves_the_fence(aws):
    scope = fresh_scope()
    _legacy(scope)
    unfenced = assets.of_scope(scope)
    stored.fence(unfenced)  # a writer fenced it meanwhile
    answer = clear.clear(ADMIN, [unfenced], "req-0000000000000001", lambda: 60_000)
    assert answer.all_cleared
    moved = assets.of_scope(scope)
    assert int(moved.epoch) != int(unfenced.epoch)
    assert int(_fence(scope.team_id, scope.agent_id).epoch) == int(moved.epoch)


def test_a_pair_wrongly_remembered_as_fenced_fails_one_check_and_the_next_read_puts_it_right(aws):
    scope = fresh_scope()
    conversation.add(scope, SAY, writer(scope))
    _legacy(scope)  # as if deleted and created again by a release without fences
    stored._fenced_pairs[(scope.team_id, scope.agent_id)] = None
    where = assets.where_of(Asset.get(scope.memory_id, stored.pair_sk(scope.team_id, scope.agent_id)))
    new = messages.NewMessage("msg-x", "user", "x", 1, term_counts("x"))
    stored._fenced_pairs[(scope.team_id, scope.agent_id)] = None
    with pytest.raises(Cancelled):
        messages.add(where, scope.user_id, "s", None, [new], 1)
    where = assets.where_of(assets.of_scope(scope))  # the retry's read
    messages.add(where, scope.user_id, "s", None, [new], 1)
    assert set(messages.get_many(where, scope.user_id, ["msg-x"])) == {"msg-x"}


STEPS = st.lists(st.tuples(st.sampled_from(["begin", "commit", "end"]), st.sampled_from(["a", "b", "c"])), max_size=8)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=STEPS)
def test_the_fence_names_the_running_imports_the_asset_names_through_any_sequence(aws, steps):
    scope = fresh_scope()
    conversation.add(scope, SAY, writer(scope))
    for kind, name in steps:
        asset = assets.of_scope(scope)
        job_id = f"imp-{name}"
        if kind == "begin":
            stored.begin_import(asset, job_id, int(asset.epoch))
        elif kind == "end":
            stored.end_import(scope.team_id, scope.agent_id, job_id)
        elif job_id in (asset.importing or ()):
            job = Job("JOB", job_id, kind="import", state="running", memory_id=asset.memory_id, owner="o")
            job.team_id, job.agent_id, job.created_at, job.updated_at = scope.team_id, scope.agent_id, 1, 1
            job.save()
            stored.commit_import(asset, snapshot(JobView, job), {}, [])
        asset = assets.of_scope(scope)
        assert set(_fence(scope.team_id, scope.agent_id).importing or ()) == set(asset.importing or ())


def test_a_fence_left_behind_by_a_release_of_before_is_not_trusted_and_the_next_write_puts_it_right(aws):
    scope = fresh_scope()
    conversation.add(scope, SAY, writer(scope))
    asset = assets.of_scope(scope)
    stale = assets.where_of(asset)
    moved = int(asset.epoch) + 7  # a clear by a release that knew no fence: the asset alone moves
    Asset(scope.memory_id, stored.pair_sk(scope.team_id, scope.agent_id)).update(actions=[Asset.epoch.set(moved)])
    assert int(assets.of_scope(scope).epoch) == moved  # read with its fence, which disagrees
    new = messages.NewMessage("msg-stale", "user", "stale", 1, term_counts("stale"))
    with pytest.raises(Cancelled):  # checked on the asset: the fence still says the old epoch
        messages.add(stale, scope.user_id, "s", None, [new], 1)
    conversation.add(scope, SAY, writer(scope))
    assert int(_fence(scope.team_id, scope.agent_id).epoch) == moved
    assert (scope.team_id, scope.agent_id) in stored._fenced_pairs


def test_an_asset_moved_from_the_layout_keyed_by_memory_id_gets_a_trusted_fence(aws, monkeypatch):
    scope = fresh_scope()
    asset = _legacy(scope)
    key = stored.pair_sk(scope.team_id, scope.agent_id)
    asset.delete()
    moved = Asset(scope.memory_id, stored.LEGACY_SK, **{k: v for k, v in asset.attribute_values.items() if k != "sk"})
    moved.save()  # as the first design stored it: under its memory_id alone
    conversation.add(scope, SAY, writer(scope))  # moves it to its pair's key, then fences it
    checked = _checked(monkeypatch)
    conversation.add(scope, SAY, writer(scope))
    assert checked == [(Fence, stored.fence_sk(scope.team_id, scope.agent_id))]
    assert Asset.get(scope.memory_id, key, consistent_read=True).fenced is True


def test_an_import_starting_on_an_asset_fenced_since_it_was_read_is_noted_in_both(aws):
    scope = fresh_scope()
    _legacy(scope)
    unfenced = assets.of_scope(scope)
    stored.fence(unfenced)
    assert stored.begin_import(unfenced, "imp-late", int(unfenced.epoch))
    assert _fence(scope.team_id, scope.agent_id).importing == {"imp-late"} == assets.of_scope(scope).importing


def test_with_epoch_checks_on_the_asset_fences_are_kept_but_writes_check_the_asset(aws, monkeypatch):
    from memory_hub.settings import get_settings

    monkeypatch.setenv("EPOCH_CHECKS", "Asset")  # the first deploy of an upgrade from before fences
    get_settings.cache_clear()
    try:
        scope = fresh_scope()
        conversation.add(scope, SAY, writer(scope))
        checked = _checked(monkeypatch)
        conversation.add(scope, SAY, writer(scope))
        assert checked == [(Asset, stored.pair_sk(scope.team_id, scope.agent_id))]
        asset = assets.of_scope(scope)
        clear.clear(ADMIN, [asset], "req-0000000000000002", lambda: 60_000)
        assert int(_fence(scope.team_id, scope.agent_id).epoch) == int(assets.of_scope(scope).epoch)  # kept
        monkeypatch.setenv("EPOCH_CHECKS", "Fence")  # the second deploy
        get_settings.cache_clear()
        conversation.add(scope, SAY, writer(scope))
        assert checked[-1] == (Fence, stored.fence_sk(scope.team_id, scope.agent_id))
    finally:
        monkeypatch.delenv("EPOCH_CHECKS")
        get_settings.cache_clear()


def test_epoch_checks_take_only_the_templates_two_values():
    import os

    from memory_hub.settings import SettingsError, from_environment

    environ = dict(os.environ)  # the unit tier's stack settings
    environ.pop("EPOCH_CHECKS", None)
    assert from_environment(environ).epoch_checks == "Fence"
    assert from_environment(environ | {"EPOCH_CHECKS": "Asset"}).epoch_checks == "Asset"
    with pytest.raises(SettingsError, match="EPOCH_CHECKS"):
        from_environment(environ | {"EPOCH_CHECKS": "asset-ish"})
