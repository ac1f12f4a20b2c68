"""What formation keeps that an erasure must reach: messages waiting to be formed, a run's stored
answer, and formed files (a user's scenes and persona under ``formed/<user digest>/``) with the
records they were formed from.

Erasure never asks the model anything: it removes. A formed file drawn from an erased record is
removed before the erasure answers (counted in ``files_deleted``); its entry keeps the records that
remain and is marked stale, and a later run forms the file again from them."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..clock import format_ms, now_ms
from ..observability import logger
from ..settings import get_settings
from ..storage import blobs, bucket, formation_queue, scenes
from ..storage import formation as stored
from ..storage.audit import EventContext, NewEvent, event_items
from ..storage.counters import Where
from ..storage.errors import Cancelled
from ..storage.retry import attempts
from ..storage.views import Asset, AuditEvent, Message, Record

SYSTEM_FORMATION = "system:formation"
FORMED_FOLDER = bucket.FORMED_FOLDER  # an L2 path only formation writes under
LAYERS = ("off", "records", "all")
DEFAULT_LAYERS = "records"


def layers_of(asset: Asset | None) -> str:
    """The asset's formation setting (``records`` when unset or without an asset)."""
    value = getattr(asset, "formation", None) if asset is not None else None
    return value if value in LAYERS else DEFAULT_LAYERS


def enabled(asset: Asset | None) -> bool:
    """Formation runs for this memory: the deployment has it on and the asset is not ``off``."""
    return get_settings().formation and layers_of(asset) != "off"


def forget_messages(where: Where, user_id: str, erased: list[Message]) -> None:
    """Erased messages leave formation: their waiting marks go, and so does a stored answer that
    holds any of them (it holds the text formed from them)."""
    if not erased:
        return
    stored.unmark_messages(where, user_id, erased)
    held = stored.pending(where, user_id)
    if held is not None and set(held.message_ids or []) & {m.id for m in erased}:
        stored.drop_pending(where, user_id, held.run_id)


def _by_user(records: Iterable[Record]) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for record in records:
        found.setdefault(record.user_id, []).append(record.id)
    return found


def after_records_erased(
    asset: Asset, where: Where, removed: list[Record], context: EventContext
) -> tuple[int, list[AuditEvent]]:
    """Remove every formed file drawn from one of ``removed`` (records just erased): (files
    removed, their audit events). Each file's entry keeps the records that remain, marked stale,
    and a run is queued to form it again."""
    total, recorded = 0, list[AuditEvent]()
    for user_id, atom_ids in _by_user(removed).items():
        drawn = stored.files_of_records(where, user_id, atom_ids)
        if not drawn:
            continue
        for file_id, gone in drawn.items():
            item = stored.file(where, user_id, file_id)
            if item is not None:
                count, events = remove_file(asset, item.path, context)
                total, recorded = total + count, recorded + events
                left = set(item.records or ()) - set(gone)
                stored.mark_stale(item, left)
            stored.forget_lineage(where, user_id, ((a, file_id) for a in gone))
        again(asset, where, user_id)
    return total, recorded


def remove_file(asset: Asset, path: str, context: EventContext) -> tuple[int, list[AuditEvent]]:
    """Remove one formed file (its index entry becomes a tombstone, its object goes): (1, its audit
    event), or (0, []) when it is not there."""
    epoch = int(asset.epoch)
    for _ in attempts("formed file"):
        entry = scenes.current(scenes.get(asset.team_id, asset.agent_id, path), epoch)
        if entry is None or entry.removed:
            return 0, []
        events = event_items([NewEvent("delete", "L2", path, 1)], context)
        try:
            scenes.remove(asset.memory_id, epoch, [entry], format_ms(now_ms()), events)
        except Cancelled as exc:
            if "epoch" in exc.failed:
                return 0, []  # cleared meanwhile: the clear erased it
            continue  # written again meanwhile: remove what is there now
        blobs.delete_many([bucket.scene_key(asset.team_id, asset.agent_id, path)], [entry.etag])
        return 1, events
    raise AssertionError("unreachable")


def again(asset: Asset, where: Where, user_id: str) -> None:
    """Note that the user's formed files are to be formed again, and queue a run for it (a failure
    to queue is logged: the next run of that user does it)."""
    stored.files_due(where, user_id)
    if not enabled(asset):
        return
    try:
        formation_queue.send(run_request(where, user_id, None, None, "files"))
    except Exception:
        logger.exception("could not queue formed files to be formed again")


def run_request(
    where: Where, user_id: str, session_id: str | None, task_id: str | None, kind: str, **extra: Any
) -> dict[str, Any]:
    """A formation queue message: ids only (the memory's pair and epoch, the user, the batch)."""
    body: dict[str, Any] = {
        "team_id": where.team_id,
        "agent_id": where.agent_id,
        "epoch": where.epoch,
        "user_id": user_id,
        "session_id": session_id,
        "task_id": task_id,
        "kind": kind,
    }
    body.update(extra)
    return body


def drop_user(asset: Asset, where: Where, user_id: str, context: EventContext) -> tuple[int, list[AuditEvent]]:
    """A user's memory is erased whole: their formed folder's files, then every formation item of
    theirs (state, waiting marks, stored answers, runs, files' entries)."""
    folder = bucket.formed_folder(user_id)
    epoch = int(asset.epoch)
    live: list[Any] = []
    recorded: list[AuditEvent] = []
    for _ in attempts("formed folder"):
        live = [
            e for e in scenes.under(asset.team_id, asset.agent_id, folder) if int(e.epoch) == epoch and not e.removed
        ]
        if not live:
            break
        recorded = event_items([NewEvent("delete", "L2", folder, len(live))], context)
        try:
            scenes.remove(asset.memory_id, epoch, live, format_ms(now_ms()), recorded)
            break
        except Cancelled as exc:
            if "epoch" in exc.failed:
                live, recorded = [], []  # cleared meanwhile: the clear erased them
                break
    if live:
        blobs.delete_many(
            [bucket.scene_key(asset.team_id, asset.agent_id, e.path) for e in live], [e.etag for e in live]
        )
    stored.drop_user(where, user_id)
    return len(live), recorded
