"""User-memory delete (§10): erase one end user's L0/L1 in a memory, or exactly one item of theirs.

L2 and L3 belong to the agent and stay. Deletion goes by id only: there is no delete by content.
"""

from __future__ import annotations

from typing import Any

from . import assets, atomic, audit, conversation, items
from .audit import Event
from .dal.models import Item


def _all(pk: str, prefix: str) -> list[Item]:
    return list(Item.query(pk, Item.sk.startswith(prefix), consistent_read=True))


def delete(principal: Any, memory_id: str, user_id: str, content_id: str | None, request_id: str) -> dict:
    asset = assets.authorized(principal, memory_id)
    epoch = int(asset.epoch)
    l0_pk = items.l0_pk(asset.team_id, asset.agent_id, epoch, user_id)
    l1_pk = items.l1_pk(asset.team_id, asset.agent_id, epoch, user_id)
    target = audit.user_target(user_id)
    if content_id is None:
        removed_l0 = conversation.erase(asset.team_id, asset.agent_id, epoch, _all(l0_pk, "msg-"))
        removed_l1 = atomic.erase(asset.team_id, asset.agent_id, epoch, _all(l1_pk, "atom-"))
        audit_ids = audit.record([Event("user_memory_delete", "L0", target, len(removed_l0)),
                                  Event("user_memory_delete", "L1", target, len(removed_l1))],
                                 memory_id=memory_id, team_id=asset.team_id, actor=principal.key_id,
                                 request_id=request_id)
        return {"memory_id": memory_id, "user_id": user_id, "l0_deleted": len(removed_l0),
                "l1_deleted": len(removed_l1), "audit_ids": audit_ids}
    # only a message or record id names content: the partitions also hold natural-key guards
    # (``nk␟…``), which a caller-chosen id must never reach
    keys = [(pk, content_id) for pk, prefix in ((l0_pk, "msg-"), (l1_pk, "atom-"))
            if content_id.startswith(prefix)]
    found = items.batch_get(keys) if keys else {}
    removed: set[str] = set()
    layer = "L0"
    if (l0_pk, content_id) in found:
        removed = conversation.erase(asset.team_id, asset.agent_id, epoch, [found[(l0_pk, content_id)]])
    elif (l1_pk, content_id) in found:
        layer = "L1"
        removed = atomic.erase(asset.team_id, asset.agent_id, epoch, [found[(l1_pk, content_id)]])
    audit_ids = audit.record([Event("user_memory_delete", layer, target, len(removed))], memory_id=memory_id,
                             team_id=asset.team_id, actor=principal.key_id, request_id=request_id) if removed else []
    return {"memory_id": memory_id, "user_id": user_id, "deleted_count": len(removed),
            "deleted_ids": sorted(removed), "not_found_ids": [] if removed else [content_id],
            "audit_ids": audit_ids}
