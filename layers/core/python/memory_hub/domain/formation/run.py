"""One formation run for one user (the FormationFunction, from the formation queue).

1. Take the user's lease (runs of one user never overlap; another user's run alongside).
2. A stored answer of an earlier attempt is replayed first: applied again (nothing twice) and
   committed — the model is not asked again.
3. Take the batch again from storage: the oldest waiting messages of one (session, task), at most
   ``FormationBatch`` (an erased message is not there to send). With them: up to 5 earlier
   messages of the session as context, and up to 10 of the user's similar formed records under
   aliases.
4. Ask the model (Converse, ``save_memories`` required). Throttling: queued again with backoff,
   uncounted. Any other failure: the messages stay waiting and the run is queued again with
   backoff (seconds, up to 2 minutes); the third failure in a row pauses the user's formation
   with the error in ``formation/status``. An answer cut off by the output limit splits the batch.
5. Validate every entry, store the validated answer with the ids it will use, apply it, then
   commit: the messages are formed (their marks go) and the run is audited.
6. With the asset's ``formation: all``: the user's scenes and persona follow the records changed.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ...clock import format_ms, id_ms, id_time, now_ms, ordered_id
from ...observability import count_event, logger
from ...settings import get_settings
from ...storage import formation as stored
from ...storage import formation_queue, messages
from ...storage.audit import EventContext
from ...storage.concurrency import parallel
from ...storage.counters import Where
from ...storage.errors import Cancelled
from ...storage.language_model import THROTTLED, ModelError, converse
from ...storage.views import Asset, FormationState, Message, PendingRun
from .. import assets, atomic, formed
from ..principal import Principal, already
from ..scope import Scope
from . import apply, files, interface
from .schedule import error_of

LEASE_MS = 330_000  # longer than one invocation (300 s): a lease outlives no crash by much
ROOM_S = 150.0  # what one more batch may take (a model call waits up to 120 s)
BUSY_DELAY_S = 15
MAX_OUTPUT_TOKENS = 4096
MAX_FAILURES = 3
HEAD_CHUNK, HEAD_READS = 25, 40  # a batch is looked up by its first marks, this many at a time, at most so often
# A mark whose message is not there — not even an import's still running — issued longer ago than
# any add can run (a function's longest life), will never have one: its add died between its marks
# and its messages (or the message was erased as the mark was written). Younger ones wait.
ORPHAN_AFTER_MS = 15 * 60_000
WAITING = 0  # ``_form``: nothing of the batch is there yet (an add still writing, an import running)
SYSTEM = Principal(formed.SYSTEM_FORMATION, "writer", ("*",))


@dataclass(frozen=True)
class Request:
    """A formation queue message: which user's batch, and why (``idle``, ``batch``, ``run``,
    ``backfill``, ``retry``, ``files``)."""

    team_id: str
    agent_id: str
    epoch: int
    user_id: str
    session_id: str | None
    task_id: str | None
    kind: str
    last: str | None = None
    attempt: int = 0

    @classmethod
    def of(cls, body: dict[str, Any]) -> Request | None:
        try:
            return cls(
                str(body["team_id"]),
                str(body["agent_id"]),
                int(body["epoch"]),
                str(body["user_id"]),
                body.get("session_id"),
                body.get("task_id"),
                str(body.get("kind") or "run"),
                body.get("last"),
                int(body.get("attempt") or 0),
            )
        except (KeyError, TypeError, ValueError):
            return None

    def body(self, **changes: Any) -> dict[str, Any]:
        fields = {k: getattr(self, k) for k in self.__dataclass_fields__}
        fields.update(changes)
        return fields


class Stop(Exception):
    """The run ends here (lost its lease, a clear came, or it was queued again)."""


@dataclass
class Run:
    asset: Asset
    where: Where
    request: Request
    owner: str
    remaining_s: Callable[[], float]

    @property
    def user_id(self) -> str:
        return self.request.user_id

    def context(self) -> EventContext:
        a = self.asset
        return EventContext(a.team_id, formed.SYSTEM_FORMATION, None, a.agent_id, a.memory_id)


def handle(body: dict[str, Any], remaining_s: Callable[[], float]) -> None:
    """One queue message. Raises nothing for what it can settle itself: a failure of the model is
    recorded and queued again; only an unexpected error leaves the message to the queue."""
    request = Request.of(body)
    if request is None:
        logger.warning("formation message without its ids dropped")
        return
    asset = assets.of_pair(request.team_id, request.agent_id)
    if asset is None or int(asset.epoch) != request.epoch or not formed.enabled(asset):
        return  # deleted, cleared since (its state went with it) or formation is off
    where = assets.where_of(asset)
    owner = f"run-{os.getpid()}-{ordered_id('x-')}"
    now = now_ms()
    try:
        taken = stored.acquire(where, request.user_id, owner, now, now + LEASE_MS)
    except Cancelled:
        return  # cleared meanwhile
    if taken is None:  # another run of this user is going on: ask again a little later
        formation_queue.send(request.body(), delay_s=BUSY_DELAY_S)
        return
    run = Run(asset, where, request, owner, remaining_s)
    try:
        if not taken.paused:
            _work(run, taken)
    except Stop:
        pass
    finally:
        stored.release(where, request.user_id, owner)


def _work(run: Run, taken: FormationState) -> None:
    request = run.request
    if request.kind == "backfill":
        _backfill(run)
    held = stored.pending(run.where, run.user_id)
    if held is not None:
        _replay(run, held)
    if taken.files_due and formed.layers_of(run.asset) == "all":
        files.reform(run.asset, run.where, run.user_id, run.context())
    for session_id, task_id in _batches(run):
        _form_batches(run, session_id, task_id)
    stored.run_over(run.where, run.user_id, run.owner)


def _batches(run: Run) -> list[tuple[str, str | None]]:
    """The (session, task) batches this request is about, each with its real ids (read from one
    of its messages: the marks hold digests only): a batch is looked up by its first marks whose
    message is there, ``HEAD_CHUNK`` at a time; marks on the way that are orphans go."""
    request = run.request
    if request.kind in ("idle", "batch", "retry") and request.session_id is not None:
        return [(request.session_id, request.task_id)]
    batches: dict[tuple[str, str | None], None] = {}
    left = [(key, ids) for key, ids in stored.waiting_all(run.where, run.user_id, request.session_id).items() if ids]
    for _ in range(HEAD_READS):
        if not left:
            break
        heads = [i for _, ids in left for i in ids[:HEAD_CHUNK]]
        seen = messages.get_many(run.where.everything(), run.user_id, heads)
        now, dead, rest = now_ms(), list[tuple[tuple[str, str], str]](), []
        for key, ids in left:
            chunk = ids[:HEAD_CHUNK]
            dead += [(key, i) for i in chunk if i not in seen and _orphaned(i, now)]
            there = next((seen[i] for i in chunk if i in seen), None)
            if there is not None:
                batches[(there.session_id, there.task_id)] = None
            elif len(ids) > HEAD_CHUNK:
                rest.append((key, ids[HEAD_CHUNK:]))
        stored.unmark_waiting(run.where, run.user_id, dead)
        left = rest
    return list(batches)


def _orphaned(message_id: str, now: int) -> bool:
    """Whether a waiting message that is not there was issued (by ``message_id``, which ids carry
    its issue time and then the message's own) more than ``ORPHAN_AFTER_MS`` ago. An id of another
    form (issued before, or derived by an import from the message's time) is never judged."""
    return id_time(message_id) is not None and now - id_ms(message_id) > ORPHAN_AFTER_MS


def _drop_orphans(run: Run, session_id: str, task_id: str | None, absent: list[str]) -> int:
    """Of a batch's marks whose message was not found, delete those of orphans (read again with a
    running import's items, which are there though hidden): how many went."""
    if not absent:
        return 0
    there = messages.get_many(run.where.everything(), run.user_id, absent)
    now = now_ms()
    dead = [i for i in absent if i not in there and _orphaned(i, now)]
    if dead:
        stored.unmark(stored.unformed_rows(run.where, run.user_id, session_id, task_id, dead))
    return len(dead)


def _due(run: Run, session_id: str, task_id: str | None, waiting: list[str]) -> bool:
    """Whether this batch runs now: a full batch always; a partial one when asked for, or once the
    batch has been quiet for the idle time (an ``idle`` message of an older add leaves it to the
    timer of the newest)."""
    settings = get_settings()
    if len(waiting) >= settings.formation_batch:
        return True
    if run.request.kind in ("run", "backfill", "retry", "files"):
        return True
    if run.request.kind == "idle":
        newest = stored.newest_waiting(run.where, run.user_id, session_id, task_id)
        return newest is not None and now_ms() - id_ms(newest) >= settings.formation_idle_s * 1000 - 1000
    return False


def _form_batches(run: Run, session_id: str, task_id: str | None) -> None:
    """Form the due batches of one (session, task), oldest first. A batch whose answer was cut off
    is split in two and both halves are formed in this run (``owed``: the rest of a split batch,
    due whatever its size)."""
    full = get_settings().formation_batch
    size, owed = full, list[str]()
    while True:
        if run.remaining_s() < ROOM_S:  # not enough time for another model call: go on later
            formation_queue.send(run.request.body(kind="run", session_id=session_id, task_id=task_id))
            raise Stop
        waiting = stored.waiting(run.where, run.user_id, session_id, task_id, size)
        if not waiting or not (waiting[0] in owed or _due(run, session_id, task_id, waiting)):
            return
        smaller = _form(run, session_id, task_id, waiting)
        if smaller == WAITING:  # its head is not there yet: the adds and imports writing it run again
            return
        if smaller is not None:  # cut off: the batch is owed whole, a smaller part first
            owed = owed or waiting
            size = smaller
            continue
        owed = [i for i in owed if i not in waiting]
        size = len(owed) if owed else full


def _form(run: Run, session_id: str, task_id: str | None, ids: list[str]) -> int | None:
    """Form one batch: None when done, a smaller batch size to try (the answer was cut off), or
    ``WAITING`` when none of its messages is there yet. A mark whose message is not there is left
    out of the batch and kept, unless it is an orphan's."""
    found = messages.get_many(run.where, run.user_id, ids)
    dropped = _drop_orphans(run, session_id, task_id, [i for i in ids if i not in found])
    batch = [found[i] for i in ids if i in found]
    if not batch:
        return None if dropped else WAITING  # marks went: read the batch again
    # a run is named by its first message (a young mark left out before it does not move the name)
    already_done = stored.formed_run(run.where, run.user_id, batch[0].id)
    if already_done is not None:  # committed before a crash took the marks' removal with it
        stored.unmark(stored.unformed_rows(run.where, run.user_id, session_id, task_id, already_done))
        return None
    scope = Scope(run.asset.team_id, run.asset.agent_id, run.user_id, session_id, task_id)
    shown, offered, offered_ids = _inputs(run, scope, batch)
    reply = _ask(run, interface.prompt(shown, [o for o, _ in offered]))
    if reply.cut_off:
        if len(batch) > 1:
            return max(1, len(batch) // 2)  # split: the first half now, the rest after it
        _failed(run, "bad_answer")
    checked = interface.check(reply.calls, shown, [o for o, _ in offered])
    if checked is None:
        _failed(run, "bad_answer")
        return None
    plan = _plan(checked, offered_ids)
    count_event("FormationInputTokens", reply.input_tokens)
    count_event("FormationOutputTokens", reply.output_tokens)
    ids_formed = [m.id for m in batch]
    answer = {"entries": plan, "dropped": checked.dropped}
    if not stored.store_pending(
        run.where, run.user_id, run.owner, ids_formed[0], ids_formed, session_id, task_id, answer
    ):
        _lost()
    held = stored.pending(run.where, run.user_id)
    if held is not None:
        _replay(run, held)
    return None


def _inputs(
    run: Run, scope: Scope, batch: list[Message]
) -> tuple[list[interface.Shown], list[tuple[interface.Offered, tuple[str, int]]], dict[int, tuple[str, int]]]:
    """What the model sees: the batch with up to 5 earlier messages of its session as context, and
    the user's similar formed records under aliases 1…n (their ids and versions kept here)."""
    first = batch[0]
    earlier, similar = parallel(
        lambda: _context(run, scope, first, {m.id for m in batch}),
        lambda: _similar(scope, batch),
    )
    shown = [_shown(m, True) for m in earlier] + [_shown(m, False) for m in batch]
    offered = [
        (interface.Offered(alias, record.type, record.content), (record.id, int(record.version)))
        for alias, record in enumerate(similar, start=1)
    ]
    return shown, offered, {o.alias: ref for o, ref in offered}


def _shown(message: Message, context: bool) -> interface.Shown:
    return interface.Shown(message.id, message.role, message.content, format_ms(int(message.timestamp)), context)


def _context(run: Run, scope: Scope, first: Message, batch: set[str]) -> list[Message]:
    found = messages.newest(
        run.where,
        run.user_id,
        scope.session_id,
        scope.task_id,
        None,
        int(first.timestamp),
        interface.MAX_CONTEXT + len(batch),
    )
    earlier = [m for m in found if m.id not in batch and m.id < first.id][: interface.MAX_CONTEXT]
    return list(reversed(earlier))


def _similar(scope: Scope, batch: list[Message]) -> list[Any]:
    """The user's formed records most like the batch (words and meaning, as a search would)."""
    text = "\n".join(m.content for m in batch if m.role == "user") or "\n".join(m.content for m in batch)
    hits = atomic.search(scope, text[:2048], None, 50, None, None, already(SYSTEM))
    return [h for h in hits.items if h.formed][: interface.MAX_SIMILAR]


def _ask(run: Run, text: str) -> Any:
    try:
        return converse(get_settings().formation_model, interface.SYSTEM, text, interface.TOOL, MAX_OUTPUT_TOKENS)
    except ModelError as exc:
        _failed(run, exc.kind)
        raise Stop from None


def _plan(checked: interface.Checked, offered: dict[int, tuple[str, int]]) -> list[dict[str, Any]]:
    """The entries to write, each with the ids it will use (chosen now, so a replay finds them)."""
    plan: list[dict[str, Any]] = []
    for entry in checked.entries:
        if entry.op == "add":
            plan.append(
                {
                    "op": "add",
                    "id": ordered_id("atom-"),
                    "type": entry.type,
                    "content": entry.content,
                    "sources": entry.sources,
                }
            )
            continue
        record_id, version = offered[entry.alias or 0]
        item: dict[str, Any] = {"op": entry.op, "record": record_id, "version": version}
        if entry.op == "update":
            item.update(content=entry.content, sources=entry.sources)
        plan.append(item)
    return plan


def _replay(run: Run, held: PendingRun) -> None:
    """Apply a stored answer (again) and commit it: the messages it holds are formed."""
    scope = Scope(run.asset.team_id, run.asset.agent_id, run.user_id, held.session_id, held.task_id)
    context = run.context()
    done = apply.apply(run.asset, scope, list((held.plan or {}).get("entries") or []), context)
    now = now_ms()
    ids = list(held.message_ids or [])
    if not stored.commit(
        run.where, run.user_id, run.owner, held.run_id, held.session_id, held.task_id, ids, now, done.events
    ):
        _lost()
    dropped = int((held.plan or {}).get("dropped") or 0)
    stored.formed(run.where, run.user_id, run.owner, now, max(ids), dropped)
    count_event("FormationMessagesFormed", len(ids))
    if formed.layers_of(run.asset) == "all" and (done.touched or done.superseded):
        files.update(run.asset, run.where, run.user_id, done.touched, context)


def _failed(run: Run, kind: str) -> None:
    """A model call failed: queued again with backoff; the third failure in a row pauses."""
    request = run.request
    if kind == THROTTLED:
        delay = min(120, 5 * 2 ** min(request.attempt, 5))
        formation_queue.send(request.body(attempt=request.attempt + 1), delay_s=delay)
        count_event("FormationThrottled")
        raise Stop
    state = stored.state(run.where, run.user_id)
    failures = int(state.failures or 0) + 1 if state is not None else 1
    now = now_ms()
    if failures >= MAX_FAILURES:
        stored.pause(run.where, run.user_id, run.owner, failures, error_of(kind, now))
        logger.warning("formation paused after repeated failures", extra={"kind": kind})
    else:
        stored.failed(run.where, run.user_id, run.owner, failures, error_of(kind, now))
    count_event("FormationFailures")
    if failures < MAX_FAILURES:
        delay = min(120, 5 * 3 ** (failures - 1))
        formation_queue.send(request.body(kind="retry"), delay_s=delay)
    raise Stop


def _lost() -> None:
    """The lease was lost (a clear, a user's erasure, or a run that outlived its lease)."""
    raise Stop


def _backfill(run: Run) -> None:
    """Mark as waiting every message of the user (or of one session) never formed and not waiting:
    those added while formation was off, and imported ones."""
    request = run.request
    done = stored.formed_ids(run.where, run.user_id)
    waiting = {m for ids in stored.waiting_all(run.where, run.user_id, request.session_id).values() for m in ids}
    found = messages.newest(run.where, run.user_id, request.session_id, request.task_id, None, None, None)
    marked = [m for m in found if m.id not in done and m.id not in waiting]
    rows = [r for m in marked for r in stored.unformed_rows(run.where, run.user_id, m.session_id, m.task_id, [m.id])]
    stored.mark(rows)
    # read back: a message erased since it was read here has had its mark looked for already (an
    # erasure reads its messages' marks once they are gone), so its mark goes now
    there = messages.get_many(run.where.everything(), run.user_id, [m.id for m in marked]) if marked else {}
    stored.unmark_messages(run.where, run.user_id, [m for m in marked if m.id not in there])
