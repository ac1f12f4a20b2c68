"""Asset-level clear and memory delete: wipe every layer, keep (or then drop) the asset.

Per memory:
  1. one transaction moves the asset to a new content epoch (or deletes it), notes the old epoch in
     a purge record and records the per-layer audit events — the instant the clear takes effect:
     from here on no read sees the old content, and every write still aimed at the old epoch fails
     its epoch check and lands whole in the new one;
  2. the old epoch is erased physically (``storage.purge``) within the request's time budget;
  3. what does not fit the budget is handed to an asynchronous invocation (and, failing that, to the
     scheduled cleanup, which reads the purge records): the answer says ``purge_pending`` and a
     ``purge_complete`` audit event marks the end.
A failure before step 1 leaves the memory untouched (``cleared: false``); after it the memory is
already empty to every reader, so it counts as cleared.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..clock import format_ms, now_ms
from ..observability import logger
from ..settings import get_settings
from ..storage import invoke, purge
from ..storage.audit import EventContext, NewEvent, event_items
from ..storage.errors import Busy as StorageBusy
from ..storage.errors import Cancelled
from ..storage.retry import attempts
from ..storage.views import Asset, AuditEvent
from . import assets
from .audit import SYSTEM_CLEANUP
from .errors import Busy, Invalid
from .principal import Principal
from .results_admin import Cleared, ClearItem, Erased, MemoryDeleted
from .rules import clean_ids, trim

PURGE_EVENT_KEY = "memory_hub_purge"
LAYERS = ("L0", "L1", "L2", "L3")
ANSWER_MARGIN_S = 4.0  # room left in the request for the answer after the purge stops


def memory_ids(raw: list[str]) -> list[str]:
    ids = clean_ids(raw)
    if not ids:
        raise Invalid("memory_ids: give at least one non-blank id")
    return ids


def named(ids: list[str], targets: list[tuple[str, str, str]] | None) -> list[assets.Named]:
    """What a clear names, in request order: each id as is, or the pairs its targets give it
    (``(memory_id, team_id, agent_id)``; several targets of one id clear each of its pairs)."""
    pairs: dict[str, list[tuple[str, str]]] = {}
    for memory_id, team_id, agent_id in targets or []:
        chosen = pairs.setdefault(trim(memory_id), [])
        if (team_id, agent_id) not in chosen:
            chosen.append((team_id, agent_id))
    return [
        assets.Named(memory_id, team_id, agent_id) if memory_id in pairs else assets.Named(memory_id)
        for memory_id in ids
        for team_id, agent_id in pairs.get(memory_id, [("", "")])
    ]


def checked(principal: Principal, names: list[assets.Named]) -> list[Asset]:
    """Every named memory, read at once and checked in order before anything is cleared
    (the first failing id answers, 403 or 404, and nothing is cleared)."""
    return assets.resolve_all(principal, names)


def budget(remaining_ms: Callable[[], int]) -> purge.Deadline:
    return purge.Deadline.after(min(get_settings().clear_budget_s, remaining_ms() / 1000 - ANSWER_MARGIN_S))


def _counts(result: purge.Result) -> dict[str, int]:
    return {
        "l0_deleted": result.l0,
        "l1_deleted": result.l1,
        "l2_deleted": result.l2,
        "l3_deleted": result.l3,
        "profile_deleted": result.l2 + result.l3,
        "files_deleted": result.files,
    }


def _retire(
    asset: Asset, *, drop: bool, action: str, actor: str, request_id: str
) -> tuple[purge.Target, list[AuditEvent]]:
    """Step 1, retried if a racing clear moved the epoch first (then this one clears the next)."""
    for _ in attempts("clear"):
        before = assets.counts(asset)
        stamp_ms = now_ms()
        target = purge.Target.of(asset, int(asset.epoch), stamp_ms, actor, request_id)
        context = EventContext(asset.team_id, actor, request_id, asset.agent_id, asset.memory_id)
        wanted = [NewEvent(action, layer, asset.memory_id, getattr(before, layer.lower())) for layer in LAYERS]
        if drop:
            wanted.append(NewEvent("memory_delete", "asset", asset.memory_id, 1))
        events = event_items(wanted, context)
        try:
            purge.retire(
                asset,
                target,
                new_epoch=None if drop else assets.new_epoch(int(asset.epoch)),
                stamp=format_ms(stamp_ms),
                events=events,
            )
            return target, events
        except Cancelled:
            fresh = assets.of_pair(asset.team_id, asset.agent_id)
            if fresh is None:
                raise Busy("memory_id: the memory changed during the clear; retry") from None
            asset = fresh
    raise AssertionError("unreachable")


def erase(asset: Asset, *, drop: bool, action: str, actor: str, request_id: str, deadline: purge.Deadline) -> Erased:
    target, events = _retire(asset, drop=drop, action=action, actor=actor, request_id=request_id)
    # From here on the memory is empty to every reader and the purge record keeps the rest durable,
    # so nothing below may fail the answer: "cleared: false" promises an untouched memory.
    try:
        result = purge.run(target, deadline)
    except Exception:
        logger.exception("purge interrupted; it is handed on")
        result = purge.Result()
    pending = not result.done
    try:
        if result.done:
            purge.finish(target, [])
        else:
            continue_later(target)
    except Exception:  # the record stays: the scheduled cleanup finishes (or just confirms) the purge
        logger.exception("purge record not settled")
    return Erased(
        memory_id=target.memory_id,
        team_id=target.team_id,
        agent_id=target.agent_id,
        **_counts(result),
        audit_ids=[e.event_id for e in events],
        purge_pending=True if pending else None,
    )


def clear(
    principal: Principal, checked_assets: list[Asset], request_id: str, remaining_ms: Callable[[], int]
) -> Cleared:
    deadline = budget(remaining_ms)
    answers: list[ClearItem] = []
    for asset in checked_assets:
        try:
            answer = erase(
                asset, drop=False, action="clear", actor=principal.key_id, request_id=request_id, deadline=deadline
            )
            answers.append(ClearItem(cleared=True, **answer.wire()))
        except Exception as exc:
            logger.exception("clear failed before it took effect")
            answers.append(
                ClearItem(
                    memory_id=asset.memory_id,
                    team_id=asset.team_id,
                    agent_id=asset.agent_id,
                    cleared=False,
                    l0_deleted=0,
                    l1_deleted=0,
                    l2_deleted=0,
                    l3_deleted=0,
                    profile_deleted=0,
                    files_deleted=0,
                    audit_ids=[],
                    reason=failure_reason(exc),
                    retryable=True,
                )
            )
    return Cleared(items=answers, all_cleared=all(a.cleared for a in answers))


def failure_reason(exc: Exception) -> str:
    """Why a clear did not take effect. Running out of retries against concurrent changes (the
    domain's Busy, or storage's when its retry loop gave up) is said as such — the client may
    retry; anything else is a storage error before anything was cleared."""
    if isinstance(exc, Busy):
        return exc.message
    if isinstance(exc, StorageBusy):
        return str(exc)
    return "storage error before anything was cleared"


def delete_memory(
    principal: Principal, name: assets.Named, request_id: str, remaining_ms: Callable[[], int]
) -> MemoryDeleted:
    asset = assets.resolve(principal, name)
    answer = erase(
        asset,
        drop=True,
        action="memory_delete",
        actor=principal.key_id,
        request_id=request_id,
        deadline=budget(remaining_ms),
    )
    return MemoryDeleted(deleted=True, **answer.wire())


# --- the purge after the answer ------------------------------------------------------------------


def continue_later(target: purge.Target) -> None:
    """Ask for an asynchronous run of the rest. Should even that fail, the purge record stays and
    the scheduled cleanup finishes the job."""
    event = {PURGE_EVENT_KEY: {"team_id": target.team_id, "agent_id": target.agent_id, "epoch": target.epoch}}
    try:
        invoke.this_function_later(event)
    except Exception:
        logger.exception("could not start the purge continuation; the cleanup will finish it")


def _retired(target: purge.Target) -> bool:
    """A purge acts only on an epoch the asset has left behind (or on a deleted memory)."""
    asset = assets.of_pair(target.team_id, target.agent_id)
    return asset is None or int(asset.epoch) > target.epoch


def run_continuation(event: dict[str, Any], remaining_ms: Callable[[], int]) -> dict[str, Any]:
    """A purge handed on by a clear. The event only names the purge record; the record — which
    only a clear writes — is what is acted on, and only for an epoch older than the asset's."""
    spec = event.get(PURGE_EVENT_KEY)
    if not isinstance(spec, dict):
        return {"done": True, "ignored": "not a purge continuation"}
    try:
        target = purge.get(str(spec["team_id"]), str(spec["agent_id"]), int(spec["epoch"]))
    except (KeyError, TypeError, ValueError):
        return {"done": True, "ignored": "malformed purge continuation"}
    if target is None:
        return {"done": True, "ignored": "no such pending purge"}
    deadline = purge.Deadline.after(max(1.0, remaining_ms() / 1000 - 5))
    return complete(target, deadline, hand_on=True)


def complete(
    target: purge.Target, deadline: purge.Deadline, *, hand_on: bool, actor: str | None = None
) -> dict[str, Any]:
    """One more pass over a pending purge; records ``purge_complete`` when nothing is left — by
    ``actor`` (the cleanup), else by the key that cleared."""
    if not _retired(target):
        # Only a clear's epoch bump writes a purge record, for the epoch it retires: one naming
        # the current epoch was not written by a clear. It is dropped and nothing is erased.
        purge.finish(target, [])
        return {"done": True, "memory_id": target.memory_id, "ignored": "the epoch is still current"}
    result = purge.run(target, deadline)
    if result.done:
        context = EventContext(
            target.team_id,
            actor or target.actor or SYSTEM_CLEANUP,
            target.request_id,
            target.agent_id,
            target.memory_id,
        )
        purge.finish(
            target,
            event_items([NewEvent("clear", "asset", "purge_complete", result.l0 + result.l1 + result.files)], context),
        )
    elif hand_on:
        continue_later(target)
    return {"done": result.done, "memory_id": target.memory_id, **_counts(result)}
