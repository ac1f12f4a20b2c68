"""AssetsTable keys: an asset per (team, agent) inside its memory_id's partition; assets stored by
the earlier design (one item per memory_id) are moved to their pair's key on first use."""

from __future__ import annotations

import uuid

from memory_hub.storage import assets
from memory_hub.storage.models import Asset


def _legacy(team_id: str, agent_id: str, epoch: int = 7) -> Asset:
    memory_id = f"chat_memory-{team_id}-{agent_id}"
    item = Asset(
        memory_id,
        assets.LEGACY_SK,
        memory_id=memory_id,
        team_id=team_id,
        agent_id=agent_id,
        owner="k",
        created_at="2026-01-01T00:00:00.000Z",
        updated_at="2026-01-01T00:00:00.000Z",
        epoch=epoch,
    )
    item.save()
    return item


def test_a_legacy_asset_is_moved_to_its_pair_key_once(aws):
    team = "t" + uuid.uuid4().hex[:8]
    _legacy(team, "x-support")
    found = assets.get_pair(team, "x-support")
    assert found is not None and found.sk == f"A#{team}:x-support" and int(found.epoch) == 7
    stored = {a.sk: a.moved_to for a in Asset.query(f"chat_memory-{team}-x-support", consistent_read=True)}
    assert stored == {f"A#{team}:x-support": None, "asset": f"A#{team}:x-support"}
    # the other pair that spells the id has none, and moving again changes nothing
    assert assets.get_pair(f"{team}-x", "support") is None
    assert [a.team_id for a in assets.spelling(f"chat_memory-{team}-x-support")] == [team]


def test_read_only_functions_use_a_legacy_asset_in_place(aws, monkeypatch):
    monkeypatch.setattr(assets, "_may_migrate", [True])
    assets.read_only()
    team = "t" + uuid.uuid4().hex[:8]
    _legacy(team, "a")
    found = assets.get_pair(team, "a")
    assert found is not None and found.sk == assets.LEGACY_SK
