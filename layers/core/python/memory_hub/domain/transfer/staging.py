"""An import is staged until it commits: nothing of it is visible before, all of it after.

Its items are written under its id (``import_id`` on each message and record, its counts noted on
the counters under that id) while the id is in its memory's set of running imports
(``Asset.importing``). Every read takes that set from the asset it reads anyway and leaves those
items and counts out (``storage.counters.Where.staged``), so reads cost no extra request. The
commit is one conditional transaction: the id leaves the set, the job becomes ``done`` and the
``import`` audit event is recorded — from that instant counts, queries, searches and exports show
the whole import. What must wait for the commit because it changes items that were visible before
(the reinforcement of records already there, by natural key; the import's files, staged under its
own prefix: ``landing``) and what must never happen to staged items (their vectors) comes right
after it; a crash in between is finished from the journal
by the next status poll or the scheduled cleanup (``finish``), never undone.

While it runs the import refreshes its job's ``updated_at`` (``Heartbeat``), so a job silent for
``STALLED_MS`` has lost its process and is rolled back — by a status poll, the scheduled cleanup,
the next start of the local stack — and its id leaves the set only once its items are gone."""

from __future__ import annotations

import threading
from dataclasses import replace
from types import TracebackType

from ...clock import now_ms
from ...observability import logger
from ...storage import assets as stored_assets
from ...storage import counters, jobs, records
from ...storage.concurrency import in_batches
from ...storage.counters import Where
from ...storage.errors import Cancelled
from ...storage.views import Asset, AuditEvent, Job, Record
from .. import provenance, vector_erasure
from ..errors import Conflict
from . import landing
from .common import HEARTBEAT_S, STALLED_MS, stalled
from .rollback import Journal, forget, undo

CHECK_CHUNK = 100  # records (and their guards) read per call when a commit's records are folded
BUSY = "too many imports are running into this memory; try again when one has ended"


class Heartbeat:
    """While an import runs, its job's ``updated_at`` moves every ``HEARTBEAT_S``, from a thread of
    its own (a long S3 copy or a slow transaction does not stop it). A process that dies stops it,
    which is how a crash is told from a slow import within minutes."""

    def __init__(self, job: Job) -> None:
        self._job = job
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, daemon=True, name=f"heartbeat {job.sk}")

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, trace: TracebackType | None
    ) -> None:
        self._stop.set()
        self._thread.join()

    def _beat(self) -> None:
        while not self._stop.wait(HEARTBEAT_S):
            try:
                if not jobs.touch(self._job):
                    return  # the job moved on (settled, or given up as stalled): nothing to keep alive
            except Exception:  # noqa: BLE001 - a missed beat is retried at the next; the import goes on
                logger.warning("an import's heartbeat failed; the next one tries again")


def stage(asset: Asset, job: Job, where: Where, layers: set[tuple[str, str]]) -> None:
    """Before the first write (and after the journal names it): the counters the import will move
    get room for its notes, and its id joins the memory's running imports. Conflict when the
    memory was cleared meanwhile or too many imports run into it."""
    counters.prepare_staging(where, layers)
    if not stored_assets.begin_import(asset, job.sk, where.epoch):
        raise Conflict(BUSY)


def commit(asset: Asset, job: Job, result: dict[str, object], events: list[AuditEvent]) -> None:
    """The one write that makes the whole import visible (see the module's docstring). Conflict
    when its id is no longer running: it was given up as stalled and is being undone."""
    try:
        stored_assets.commit_import(asset, job, result, events)
    except Cancelled as exc:
        raise Conflict("the import was given up as stopped before it could commit; nothing of it was kept") from exc


def finish(job: Job) -> set[str]:
    """After the commit: the records that were there before and that the import's lines reinforce
    (natural-key dedup) take their reinforcements now — never before the commit, as they change
    what was visible —, records of the import a client's add displaced are folded into the client's
    (``fold``), the import's files land at their keys (``landing.land``), then the journal goes.
    Idempotent (a record remembers the lines that reinforced it, a staged file goes once it has
    landed): a crash after the commit is finished by the next status poll or cleanup. The ids of
    the records folded (no vector is to be made of them)."""
    journal = Journal.load(job)
    if journal is None:
        return set()
    gone: set[str] = set()
    if journal.epoch is not None:
        asset = stored_assets.get_pair(job.team_id, job.agent_id)  # its vector bucket, for ``fold``'s erasures
        found = Where.of(asset) if asset is not None else Where(job.team_id, job.agent_id, 0)
        where = replace(found, epoch=int(journal.epoch), memory_id=job.memory_id, staged=frozenset())
        reinforce_after_commit(where, journal)
        gone = fold(where, journal, job.sk)
        landing.land(job, journal)
    forget(job)
    return gone


def fold(where: Where, journal: Journal, import_id: str) -> set[str]:
    """A client's ``atomic/add`` of a natural key a record of this import held while it ran took
    the key's guard over (as if that record were not there yet). Once committed the import's record
    becomes what its line would have been had the client's come first: a reinforcement of the
    client's record (its line id remembered, its sources joined), and it goes. A record of the import
    left with no guard (the client's record since deleted) takes the guard back. The ids folded."""
    folded: set[str] = set()
    for user, ids in journal.l1.items():
        for chunk in in_batches(ids, CHECK_CHUNK):
            held = [r for r in records.get_many(where, user, chunk).values() if r.import_id == import_id]
            holders = records.guard_holders(where, user, held) if held else {}
            for record in held:
                holder_id = holders[record.id]
                if holder_id == record.id or (holder_id is None and records.claim_guard(record)):
                    continue
                if _fold_one(where, user, record):
                    folded.add(record.id)
    return folded


def _fold_one(where: Where, user: str, record: Record) -> bool:
    holder = records.holder(where, user, record.natural_key)
    if holder is None or holder.id == record.id:
        return False  # changed meanwhile: it stays as it is
    if record.id not in (holder.absorbed or ()):
        added = [s for s in (record.sources or []) if s not in (holder.cited or ())]
        provenance.cite(where, user, holder.id, added)
        try:
            records.reinforce(where, holder, now_ms(), absorbed=[record.id], sources=list(record.sources or []) or None)
        except Cancelled:
            provenance.uncite(where, user, holder.id, added)
            return False  # cleared, or the client's record changed meanwhile: both stay
    records.delete(where, [record], lambda part: [])
    vector_erasure.erase(where, [(user, record.id)])
    return True


def reinforce_after_commit(where: Where, journal: Journal) -> int:
    """Apply the journal's reinforcements of records that were there (each skipped when its record
    is gone, or already holds its lines): how many lines reinforced."""
    done = 0
    for user, atom_id, _count, _updated_at, _times, stamp, lines, added, *rest in journal.reinforced:
        joined: list[str] = rest[0] if rest else added
        record = records.get(where, user, atom_id)
        if record is None or set(lines) <= set(record.absorbed or ()):
            continue
        provenance.cite(where, user, atom_id, added)
        try:
            records.reinforce(where, record, stamp, absorbed=lines, sources=joined or None)
        except Cancelled:
            provenance.uncite(where, user, atom_id, added)
            continue  # cleared, or changed meanwhile: that change stands
        done += len(lines)
    return done


STOPPED = "the import stopped before it ended; nothing of it was kept"


def recover(now: int, *, all_running: bool = False) -> int:
    """For the scheduled cleanup (and the local stack's start): every import that failed or stopped
    before its commit (its process killed, a timeout: no heartbeat for ``STALLED_MS``) is undone by
    its journal — its items were never visible — and every import that committed but died before
    ``finish`` is finished. ``all_running``: every import still queued or running is taken as
    stopped (no process is left that could be running it). How many were undone."""
    undone = 0
    for job in jobs.unfinished("import", now if all_running else now - STALLED_MS):
        if job.state != "failed" and not (all_running or stalled(job, now)):
            continue
        if undo(job, drop_asset=False):
            undone += 1
        if job.state != "failed":
            jobs.settle(job, "failed", error=STOPPED)
    for job in jobs.started("import"):
        if job.state == "done":
            finish(job)
    return undone
