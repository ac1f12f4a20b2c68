"""When runs happen: what ``conversation/add`` queues, and the ``formation/status`` and
``formation/run`` routes.

A message added while formation is on for the asset is marked as waiting (beside its postings,
before it is stored). After the add answers — never holding it up, never failing it — one delayed
queue message is sent for the batch's idle timer (``FormationIdleSeconds``; it acts only if
nothing newer came), and an immediate one when the batch now holds ``FormationBatch`` messages.
A batch is one (user, task, session): no task is a value of its own."""

from __future__ import annotations

from typing import cast

from ...clock import format_ms, id_ms, iso, now_ms
from ...observability import count_event, logger
from ...settings import get_settings
from ...storage import formation as stored
from ...storage import formation_queue, messages, records
from ...storage.concurrency import parallel
from ...storage.counters import Where
from ...storage.views import Asset, FormationState, Unformed
from .. import assets, formed
from ..errors import Conflict
from ..principal import Authorize
from ..results import FormationError, FormationLayers, FormationRun, FormationStatus
from ..results import FormationState as State
from ..scope import Scope

QUEUED_FOR_MS = 15 * 60_000  # a queued run not started within this is asked for again
OFF = "formation: off"


def marks(asset: Asset, where: Where, scope: Scope, message_ids: list[str]) -> list[Unformed]:
    """The waiting marks of newly added messages (none while formation is off for the asset)."""
    if not formed.enabled(asset) or scope.session_id is None:
        return []
    return stored.unformed_rows(where, scope.user_id, scope.session_id, scope.task_id, message_ids)


def after_add(asset: Asset, where: Where, scope: Scope, message_ids: list[str]) -> None:
    """Queue the batch's idle timer, and a run now if the batch is full. A failure is logged and
    counted, never the add's: the next add queues again, and ``formation/run`` runs what waits."""
    if not message_ids or not formed.enabled(asset) or scope.session_id is None:
        return
    settings = get_settings()
    try:
        idle = formed.run_request(where, scope.user_id, scope.session_id, scope.task_id, "idle", last=message_ids[-1])
        formation_queue.send(idle, delay_s=settings.formation_idle_s)
        waiting = stored.waiting(where, scope.user_id, scope.session_id, scope.task_id, settings.formation_batch)
        if len(waiting) >= settings.formation_batch:
            formation_queue.send(formed.run_request(where, scope.user_id, scope.session_id, scope.task_id, "batch"))
    except Exception:  # scheduling never fails an add
        logger.exception("could not queue formation after an add")
        count_event("FormationQueueFailures")


def _state_of(item: FormationState | None, waiting: dict[tuple[str, str], list[str]], now: int) -> State:
    if item is not None and item.paused:
        return "paused"
    if item is not None and item.lease_until is not None and int(item.lease_until) > now:
        return "running"
    if item is not None and item.state == "queued" and now - int(item.queued_at or 0) < QUEUED_FOR_MS:
        return "queued"
    batch = get_settings().formation_batch
    if any(len(ids) >= batch and now - id_ms(ids[-1]) < QUEUED_FOR_MS for ids in waiting.values()):
        return "queued"  # a full batch's run was queued by the add that filled it
    return "idle"


def status(scope: Scope, authorize: Authorize) -> FormationStatus:
    def read(where: Where) -> list[object]:
        return parallel(
            lambda: stored.state(where, scope.user_id),
            lambda: stored.waiting_all(where, scope.user_id, scope.session_id),
            lambda: records.count_formed(where, scope.user_id),
        )

    asset, found = assets.read_at_epoch(scope, authorize, read)
    on = formed.enabled(asset)
    shown = FormationStatus(
        enabled=on,
        layers=cast(FormationLayers, formed.layers_of(asset)),
        model=get_settings().formation_model if on else None,
        state="idle",
        pending_messages=0,
        last_run_at=None,
        last_formed_message_id=None,
        records_formed=0,
        dropped=0,
        last_error=None,
    )
    if asset is None or found is None:
        return shown
    item, waiting, formed_count = cast(tuple[FormationState | None, dict[tuple[str, str], list[str]], int], found)
    shown.state = _state_of(item, waiting, now_ms())
    shown.pending_messages = sum(len(ids) for ids in waiting.values())
    shown.records_formed = formed_count
    if item is None:
        return shown
    shown.last_run_at = iso(item.last_run_at)
    shown.dropped = int(item.dropped or 0)
    if item.last_error:
        shown.last_error = FormationError.model_validate(item.last_error)
    if item.last_formed:
        where = assets.where_of(asset)
        alive = messages.get_many(where, scope.user_id, [item.last_formed])
        shown.last_formed_message_id = item.last_formed if alive else None
    return shown


def run(scope: Scope, backfill: bool, authorize: Authorize) -> FormationRun:
    """Ask for a run now: resume a paused user, queue what waits (and with ``backfill`` the
    messages never formed: added while formation was off, or imported)."""

    def read(where: Where) -> list[object]:
        return parallel(
            lambda: stored.state(where, scope.user_id),
            lambda: stored.waiting_all(where, scope.user_id, scope.session_id),
        )

    asset, found = assets.read_at_epoch(scope, authorize, read)
    if not formed.enabled(asset):
        raise Conflict(OFF)
    if asset is None or found is None:  # formation on for a pair without an asset: nothing to form
        return FormationRun(state="idle", pending_messages=0)
    item, waiting = cast(tuple[FormationState | None, dict[tuple[str, str], list[str]]], found)
    where = assets.where_of(asset)
    now = now_ms()
    pending = sum(len(ids) for ids in waiting.values())
    current = _state_of(item, waiting, now)
    if current in ("queued", "running"):  # a run is coming or going on: nothing changes
        return FormationRun(state=current, pending_messages=pending)
    if current == "idle" and pending == 0 and not (backfill and _never_formed(where, scope)):
        return FormationRun(state="idle", pending_messages=0)  # nothing to form: no run, no model call
    stored.queue(where, scope.user_id, now)
    kind = "backfill" if backfill else "run"
    formation_queue.send(formed.run_request(where, scope.user_id, scope.session_id, scope.task_id, kind))
    return FormationRun(state="queued", pending_messages=pending)


def _never_formed(where: Where, scope: Scope) -> bool:
    """Whether a backfill would find anything: a message of the user (of the session and task when
    named) that no run formed. Read newest first, a page at a time, up to the first such message."""
    done = stored.formed_ids(where, scope.user_id)
    found = messages.newest(where, scope.user_id, scope.session_id, scope.task_id, None, None, None)
    return any(message.id not in done for message in found)


def error_of(kind: str, at: int) -> dict[str, str]:
    """``last_error`` as stored: the time, the kind and the kind's fixed message."""
    return {"at": format_ms(at), "kind": kind, "message": MESSAGES.get(kind, MESSAGES["other"])}


MESSAGES = {
    "model_unavailable": "the formation model is unavailable",
    "access_denied": "the formation model refused the call (check FormationModel and the model's access)",
    "bad_answer": "the model gave no valid save_memories answer",
    "timeout": "the formation model did not answer in time",
    "other": "formation failed",
}
