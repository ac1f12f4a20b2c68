"""Asset-level clear (§9) and memory delete (§4): wipe every layer, keep (or then drop) the asset.

Per memory, in this order:
  1. one transaction moves the asset to a new content epoch (last_cleared_at, updated_at) and
     writes a purge record — from here on nothing of the old content is visible to any read, and
     every L0/L1 write still carrying the old epoch fails its epoch check and retries in the new one;
  2. the old epoch is erased physically (purge.py) within the request's time budget;
  3. if that budget runs out, the answer says ``purge_pending: true`` and an asynchronous
     invocation (or else the scheduled cleanup, which reads the purge records) finishes the job and
     records a ``purge_complete`` audit event.
A failure before step 1 leaves the asset untouched (``cleared: false``); after it, the memory is
already invisible, so it counts as cleared and the rest is pending.
"""

from __future__ import annotations

import json
import os
from typing import Any, Callable

from pynamodb.exceptions import TransactWriteError

from . import assets, audit, items, purge
from .audit import Event
from .clock import format_ms, now_ms
from .dal.aws import gather
from .dal.models import Asset
from .errors import ApiError, BadRequest
from .observability import logger

SYNC_BUDGET_S = 24.0  # API Gateway answers at 29 s: leave room for the answer and audit writes
PURGE_EVENT_KEY = "memory_hub_purge"


def clean_memory_ids(raw: list[str]) -> list[str]:
    ids = list(dict.fromkeys(value.strip() for value in raw if value.strip()))
    if not ids:
        raise BadRequest("memory_ids: give at least one non-blank id")
    return ids


def _retire(asset: Asset, *, drop: bool) -> purge.Target:
    """Step 1: a new epoch (or no asset at all) and a purge record, in one transaction."""
    while True:
        old = int(asset.epoch)
        bumped = now_ms()
        target = purge.Target(asset.memory_id, asset.team_id, asset.agent_id, old, bumped)
        stamp = format_ms(bumped)

        def build(transaction: Any) -> None:
            if drop:
                transaction.delete(asset, condition=Asset.epoch == old)
            else:
                transaction.update(asset, actions=[Asset.epoch.set(assets.new_epoch(old)),
                                                   Asset.last_cleared_at.set(stamp), Asset.updated_at.set(stamp)],
                                   condition=Asset.epoch == old)
            transaction.save(purge.record(target))

        try:
            items.transact(build)
            return target
        except TransactWriteError as exc:
            if 0 not in items.failed_conditions(exc):
                raise
        fresh = assets.get(asset.memory_id)  # another clear won the race: retire the epoch it left
        if fresh is None or (fresh.team_id, fresh.agent_id) != (asset.team_id, asset.agent_id):
            raise ApiError("the memory changed during the clear; retry", retryable=True)
        asset = fresh


def _events(target: purge.Target, result: purge.Result, action: str) -> list[Event]:
    return [Event(action, "L0", target.memory_id, result.l0), Event(action, "L1", target.memory_id, result.l1),
            Event(action, "L2", target.memory_id, result.l2), Event(action, "L3", target.memory_id, result.l3)]


def _finish(target: purge.Target, result: purge.Result, actor: str, request_id: str | None) -> bool:
    """After a purge pass: drop the record when done, else hand the rest on. True when pending."""
    if result.done:
        purge.forget(target)
        return False
    continue_later(target, actor, request_id)
    return True


def erase(asset: Asset, *, drop: bool, actor: str, request_id: str, deadline: purge.Deadline,
          action: str) -> dict[str, Any]:
    target = _retire(asset, drop=drop)
    # From here on the memory is already invisible and the purge record keeps the rest durable, so
    # nothing below may fail the item: "cleared: false" promises an untouched memory.
    try:
        result = purge.run(target, deadline)
    except Exception:
        logger.exception("purge interrupted", extra={"memory_id": target.memory_id})
        result = purge.Result()
    try:
        pending = _finish(target, result, actor, request_id)
    except Exception:  # the record stays: the cleanup finishes (or just confirms) the purge
        logger.exception("purge record not settled", extra={"memory_id": target.memory_id})
        pending = not result.done
    try:
        audit_ids = audit.record(_events(target, result, action), memory_id=target.memory_id,
                                 team_id=target.team_id, actor=actor, request_id=request_id)
    except Exception:
        logger.exception("clear audit events not recorded", extra={"memory_id": target.memory_id})
        audit_ids = []
    answer = {"memory_id": target.memory_id, **result.counts(), "audit_ids": audit_ids}
    if pending:
        answer["purge_pending"] = True
    return answer


def clear(principal: Any, memory_ids: list[str], request_id: str, remaining_ms: Callable[[], int]) -> dict:
    ids = clean_memory_ids(memory_ids)
    fetched = gather(*[lambda m=m: assets.get(m) for m in ids])  # one round trip for all of them
    checked = [assets.authorized(principal, m, asset) for m, asset in zip(ids, fetched)]  # all, in order
    deadline = purge.Deadline.after(min(SYNC_BUDGET_S, remaining_ms() / 1000 - 4))
    answers = []
    for asset in checked:
        try:
            answer = erase(asset, drop=False, actor=principal.key_id, request_id=request_id, deadline=deadline,
                           action="clear")
            answers.append({"memory_id": asset.memory_id, "cleared": True, **{k: v for k, v in answer.items()
                                                                              if k != "memory_id"}})
        except Exception as exc:
            logger.exception("clear failed", extra={"memory_id": asset.memory_id})
            answers.append({"memory_id": asset.memory_id, "cleared": False, **purge.Result().counts(),
                            "audit_ids": [], "reason": exc.message if isinstance(exc, ApiError) else
                            "storage error before anything was cleared", "retryable": True})
    return {"items": answers, "all_cleared": all(a["cleared"] for a in answers)}


def delete_memory(principal: Any, memory_id: str, request_id: str, remaining_ms: Callable[[], int]) -> dict:
    asset = assets.authorized(principal, memory_id)
    deadline = purge.Deadline.after(min(SYNC_BUDGET_S, remaining_ms() / 1000 - 4))
    answer = erase(asset, drop=True, actor=principal.key_id, request_id=request_id, deadline=deadline,
                   action="memory_delete")
    audit_ids = answer.pop("audit_ids")
    try:  # the asset is gone already: a lost audit write must not turn that into a 500
        audit_ids += audit.record([Event("memory_delete", "asset", memory_id, 1)], memory_id=memory_id,
                                  team_id=asset.team_id, actor=principal.key_id, request_id=request_id)
    except Exception:
        logger.exception("memory_delete audit event not recorded", extra={"memory_id": memory_id})
    return {"deleted": True, **answer, "audit_ids": audit_ids}


# --- continuation -----------------------------------------------------------------------------

def continue_later(target: purge.Target, actor: str, request_id: str | None) -> None:
    """Ask for an asynchronous run of the rest. If even that fails, the purge record stays and the
    scheduled cleanup finishes the job."""
    event = {PURGE_EVENT_KEY: {"memory_id": target.memory_id, "team_id": target.team_id,
                               "agent_id": target.agent_id, "epoch": target.epoch, "bumped_ms": target.bumped_ms,
                               "actor": actor, "request_id": request_id}}
    try:
        invoke_async(event)
    except Exception:
        logger.exception("could not start the purge continuation; the cleanup will finish it")


def _lambda_invoke(event: dict[str, Any]) -> None:
    from .dal.aws import client

    name = os.environ.get("AWS_LAMBDA_FUNCTION_NAME", "ClearFunction")
    client("lambda").invoke(FunctionName=name, InvocationType="Event", Payload=json.dumps(event).encode())


# The local stack points this at its own function pool (no Lambda service there).
invoke_async: Callable[[dict[str, Any]], None] = _lambda_invoke


def run_continuation(event: dict[str, Any], remaining_ms: Callable[[], int]) -> dict[str, Any]:
    """A purge handed on by a clear: go on until done, re-invoking itself when time runs short."""
    spec = event[PURGE_EVENT_KEY]
    target = purge.Target(spec["memory_id"], spec["team_id"], spec["agent_id"], int(spec["epoch"]),
                          int(spec.get("bumped_ms") or 0))
    return complete(target, purge.Deadline.after(max(1.0, remaining_ms() / 1000 - 5)),
                    actor=spec.get("actor") or audit.SYSTEM_CLEANUP, request_id=spec.get("request_id"))


def complete(target: purge.Target, deadline: purge.Deadline, actor: str, request_id: str | None) -> dict:
    """One more pass over a pending purge; records ``purge_complete`` when nothing is left."""
    result = purge.run(target, deadline)
    if result.done:
        purge.forget(target)
        audit.record([Event("clear", "asset", "purge_complete", result.l0 + result.l1 + result.files)],
                     memory_id=target.memory_id, team_id=target.team_id, actor=actor, request_id=request_id)
    elif actor != audit.SYSTEM_CLEANUP:
        continue_later(target, actor, request_id)
    return {"done": result.done, "memory_id": target.memory_id, **result.counts()}
