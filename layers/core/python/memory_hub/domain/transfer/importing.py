"""Import: a memory-tdai tree (ours, or one TencentDB wrote) uploaded through a presigned URL, then
ingested into one (team, agent) memory. The whole tree is checked before anything is written; items
keep their ids where this service could have issued them and they are free, their times, sessions,
versions; L2 files keep their META as stored. An item already there with the same id and content
is skipped (importing the same tree twice changes nothing); an L1 line whose natural key another
record holds reinforces that record, as ``atomic/add`` would (and an undone import takes it back).

The job's life is here (create, begin, status, run); its plan is ``planning``, its writing
``applying``, its commit ``staging`` and its undo ``rollback``."""

from __future__ import annotations

from ...clock import format_ms, now_ms, ordered_id
from ...memory_ids import memory_id_of
from ...observability import logger
from ...storage import blobs, bucket, jobs
from ...storage.audit import EventContext, NewEvent, event_items
from ...storage.views import Job
from .. import meaning
from ..errors import Conflict, Invalid
from ..principal import Principal
from ..results_admin import ImportCreated, ImportJobState
from . import tree
from .applying import write
from .common import URL_LIFETIME_S, continue_later, describe, job_of, stalled
from .rollback import undo
from .staging import STOPPED, Heartbeat, commit, finish
from .staging import recover as recover  # the scheduled cleanup's entry (domain/cleanup.py)

SYNC_BYTES = 512 * 1024  # a larger upload is ingested by an asynchronous invocation
SYNC_ITEMS = 2_000  # so is a tree of more items and files than this (it may compress very well)
MAX_UPLOAD_BYTES = 64 * 1024 * 1024  # compressed; unpacked, tree.MAX_TREE_BYTES

USED = "import_id: its upload was used already (an upload URL is good for one import); create another import"


def _upload_key(job: Job) -> str:
    return bucket.import_upload_key(job.team_id, job.agent_id, job.sk)


def create(
    principal: Principal,
    team_id: str,
    agent_id: str,
    user_id: str | None,
    from_team: str | None,
    from_agent: str | None,
    request_id: str,
) -> ImportCreated:
    principal.require_team(team_id)
    memory_id = memory_id_of(team_id, agent_id)
    spec = {"user_id": user_id, "from_team": from_team, "from_agent": from_agent, "request_id": request_id}
    job = jobs.new(ordered_id("imp-"), "import", memory_id, team_id, agent_id, principal.key_id, spec)
    url = blobs.presigned("put_object", _upload_key(job), URL_LIFETIME_S, ContentType="application/gzip")
    return ImportCreated(
        import_id=job.sk,
        upload_url=url,
        method="PUT",
        headers={"Content-Type": "application/gzip"},
        expires_at=format_ms(now_ms() + URL_LIFETIME_S * 1000),
        state="created",
    )


def begin(principal: Principal, import_id: str) -> ImportJobState:
    job = job_of(principal, import_id, "import")
    if job.state != "created":
        raise Conflict(USED)
    upload = blobs.head(_upload_key(job))
    if upload is None:
        raise Invalid("import_id: nothing was uploaded to its upload_url yet")
    if upload.size > MAX_UPLOAD_BYTES:
        blobs.delete(_upload_key(job))
        failed = jobs.settle(job, "failed", error=f"the upload is larger than {MAX_UPLOAD_BYTES // 2**20} MiB")
        return ImportJobState.model_validate(describe(failed))
    if upload.size > SYNC_BYTES:
        return ImportJobState.model_validate(describe(continue_later(job)))
    claimed = jobs.claim(job, "created")
    if claimed is not None:
        run(claimed, within_request=True)
    return status(principal, import_id, ran_here=claimed is not None)


def status(principal: Principal, import_id: str, *, ran_here: bool = False) -> ImportJobState:
    """The job as it stands; an import that failed or stopped midway (a killed process) is undone
    here first if its journal is still there (see ``undo``). ``ran_here``: the ingest ran in this
    invocation, which removed what it leaves before it returned."""
    job = job_of(principal, import_id, "import")
    stopped = stalled(job, now_ms())
    if (job.state == "failed" or stopped) and undo(job) and stopped:
        job = jobs.settle(job, "failed", error=STOPPED)
    # The ingest commits the job before it finishes and removes its journal and upload (a crash in
    # between must not read as "nothing kept"): once a poll is told it ended, neither is there.
    if not ran_here and job.state == "done":
        finish(job)
    elif not ran_here and job.state == "failed":
        blobs.delete(_upload_key(job))  # its journal stays until an undo has run (the cleanup's too)
    return ImportJobState.model_validate(describe(job))


def run(job: Job, *, within_request: bool = False) -> None:
    """Ingest the upload (the job is claimed: running); delete it when the ingest ends, whatever
    its outcome. Within a request, a tree of more than SYNC_ITEMS items (a small upload may unpack
    to many lines) is handed on to an asynchronous invocation before anything is written. The job
    tells how it went. All or nothing: the whole tree is checked before anything is written, and
    what an import writes is noted first in its journal, so a failure undoes it (here, or — when the
    process died — the scheduled cleanup, see ``undo``)."""
    key = _upload_key(job)
    handed_on = False
    try:
        data = blobs.get_bytes(key)
        if data is None:
            jobs.settle(job, "failed", error="nothing was uploaded")
            return
        try:
            files = tree.untar(data)
            del data  # the archive is unpacked: only the tree stays in memory
            selection = tree.Selection(job.spec.get("user_id"), job.spec.get("from_team"), job.spec.get("from_agent"))
            parsed = tree.read(files, selection)
            del files
        except tree.Malformed as exc:
            jobs.settle(job, "failed", result={"problems": exc.problems[:100]}, error="the tree is malformed")
            return
        if within_request and parsed.size() > SYNC_ITEMS:
            continue_later(job)
            handed_on = True
            return
        try:
            with Heartbeat(job):
                asset, where, pieces, written, skipped = write(parsed, job)
                context = EventContext(job.team_id, job.owner, job.spec.get("request_id"), job.agent_id, job.memory_id)
                event = NewEvent("import", "asset", job.memory_id, sum(written.values()))
                commit(asset, job, {"counts": written, "skipped": skipped}, event_items([event], context))
        except BaseException:
            undo(job)  # what was written goes again (a failure of the undo leaves it to the cleanup)
            raise
        folded: set[str] = set()
        try:
            folded = finish(job)  # what waits for the commit: its files, the reinforcement of records that were there
        except Exception:  # committed: never reported as failed (a failed import is undone)
            logger.exception("an import's files or reinforcements failed after its commit; the next poll does them")
        meaning.embed_after_write(where, [p for p in pieces if p.id not in folded])  # never raises
    except Conflict as exc:
        jobs.settle(job, "failed", error=exc.message)
    except Exception:
        logger.exception("import failed")
        jobs.settle(job, "failed", error="the import failed; nothing of it was kept; try again")
    finally:
        if not handed_on:
            blobs.delete(key)
