"""Import: a memory-tdai tree (ours, or one TencentDB wrote) uploaded through a presigned URL, then
ingested into one (team, agent) memory. The whole tree is checked before anything is written; items
keep their ids where this service could have issued them and they are free, their times, sessions,
versions; L2 files keep their META as stored. An item already there with the same id and content
is skipped (importing the same tree twice changes nothing); an L1 line whose natural key another
record holds reinforces that record, as ``atomic/add`` would (and an undone import takes it back)."""

from __future__ import annotations

from ...clock import format_ms, now_ms, ordered_id
from ...memory_ids import memory_id_of
from ...observability import logger
from ...storage import blobs, bucket, jobs, messages, records
from ...storage.audit import EventContext, NewEvent, event_items
from ...storage.concurrency import for_each, in_batches
from ...storage.counters import Where
from ...storage.errors import Cancelled
from ...storage.views import Asset, Job, Record
from .. import assets, meaning, provenance
from ..atomic import natural_key, searchable
from ..errors import Conflict, Invalid
from ..principal import Principal
from ..results_admin import ImportCreated, ImportJobState
from ..search import term_counts
from . import landing, planning, tree
from .common import URL_LIFETIME_S, continue_later, describe, job_of, stalled
from .rollback import Journal, undo
from .staging import STOPPED, Heartbeat, commit, finish, stage
from .staging import recover as recover  # the scheduled cleanup's entry (domain/cleanup.py)

SYNC_BYTES = 512 * 1024  # a larger upload is ingested by an asynchronous invocation
SYNC_ITEMS = 2_000  # so is a tree of more items and files than this (it may compress very well)
MAX_UPLOAD_BYTES = 64 * 1024 * 1024  # compressed; unpacked, tree.MAX_TREE_BYTES
CHECK_CHUNK = 100  # cited messages looked up per call when the records' sources are checked again

USED = "import_id: its upload was used already (an upload URL is good for one import); create another import"
ERASED_MEANWHILE = (
    "a message the tree's records cite was erased while the import ran; nothing of it was kept; try again"
)


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
        jobs.settle(job, "failed", error=f"the upload is larger than {MAX_UPLOAD_BYTES // 2**20} MiB")
        return ImportJobState.model_validate(describe(job))
    if upload.size > SYNC_BYTES:
        continue_later(job)
        return ImportJobState.model_validate(describe(job))
    ran_here = jobs.claim(job, "created")
    if ran_here:
        run(job, within_request=True)
    return status(principal, import_id, ran_here=ran_here)


def status(principal: Principal, import_id: str, *, ran_here: bool = False) -> ImportJobState:
    """The job as it stands; an import that failed or stopped midway (a killed process) is undone
    here first if its journal is still there (see ``undo``). ``ran_here``: the ingest ran in this
    invocation, which removed what it leaves before it returned."""
    job = job_of(principal, import_id, "import")
    stopped = stalled(job, now_ms())
    if (job.state == "failed" or stopped) and undo(job) and stopped:
        jobs.settle(job, "failed", error=STOPPED)
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


Staged = tuple[Asset, Where, list[meaning.Piece], dict[str, int], dict[str, int]]


def write(parsed: tree.Tree, job: Job) -> Staged:
    """Plan, note the plan in the journal, then write, staged (``staging``): nothing is written
    before the journal names it, and nothing written shows before the commit. The asset and
    epoch written into, the vectors to make once committed, what was written and skipped."""
    existing = assets.of_pair(job.team_id, job.agent_id)
    journal = Journal(asset_created=existing is None)
    journal.save(job)  # before the asset: an import that dies right after creating it drops it again
    asset = assets.ensure(existing, job.team_id, job.agent_id, job.owner)
    journal.epoch = int(asset.epoch)
    written = {"l0": 0, "l1": 0, "l2": 0, "l3": 0}
    skipped = {"l0": 0, "l1": 0, "l2": 0, "l3": 0}
    where = Where(asset.team_id, asset.agent_id, int(asset.epoch), asset.memory_id)
    cited: planning.Cited = {}
    l0 = planning.messages_to_add(where, parsed, skipped, cited)
    l1 = [
        (item, atom_id, planning.sources_of(item, cited))
        for item, atom_id in planning.records_to_add(where, parsed, skipped)
    ]
    _note_items(journal, l0, l1)
    journal.save(job)
    _stage(asset, job, where, l0, l1)
    pieces: list[meaning.Piece] = []
    for (user, session, task), group in l0:
        for start in range(0, len(group), messages.PER_ADD):
            part = group[start : start + messages.PER_ADD]
            messages.add(where, user, session, task, part, now_ms(), staged=job.sk)
        written["l0"] += len(group)
        pieces += meaning.new_messages(user, session, task, group)
    pieces += _write_records(where, l1, journal, job, written, skipped)
    _check_sources(where, l1)
    landing.stage(asset, parsed, journal, job, {"written": written, "skipped": skipped})  # they land after the commit
    journal.save(job)
    return asset, where, pieces, written, skipped


def _stage(asset: Asset, job: Job, where: Where, l0: list[planning.Group], l1: list[Planned]) -> None:
    """The import's id joins the memory's running imports, with room for its notes on every
    counter it will move (its L0 and L1 counters, the sessions of its messages)."""
    layers = {(messages.LAYER, user) for (user, _, _), _ in l0} | {(records.LAYER, item.user_id) for item, _, _ in l1}
    sessions = {(user, session) for (user, session, _), _ in l0}
    stage(asset, job, where, layers, sessions)


Planned = tuple[tree.Record, str, list[str]]  # a record line, its id, its sources (ids of the target)


def _note_items(journal: Journal, l0: list[planning.Group], l1: list[Planned]) -> None:
    """Into the journal: the messages and records the import adds, and the messages that were
    there already that those records cite."""
    for (user, _, _), group in l0:
        journal.l0.setdefault(user, []).extend(m.id for m in group)
    new = {(user, m.id) for (user, _, _), group in l0 for m in group}
    for item, atom_id, sources in l1:
        journal.l1.setdefault(item.user_id, []).append(atom_id)
        there = [s for s in sources if (item.user_id, s) not in new]
        if there:
            journal.cites.setdefault(item.user_id, []).extend(there)
    journal.cites = {user: list(dict.fromkeys(ids)) for user, ids in journal.cites.items()}


def _write_records(
    where: Where, l1: list[Planned], journal: Journal, job: Job, written: dict[str, int], skipped: dict[str, int]
) -> list[meaning.Piece]:
    """Store the records (each new one's vectors to make); a line whose natural key a record holds
    reinforces it (see ``_reinforce``)."""
    pieces: list[meaning.Piece] = []
    folded: list[Planned] = []  # lines whose (task, type, background, content) is held
    for item, atom_id, sources in l1:
        record = _record(where, item, atom_id, sources, job.sk)
        if record is not None:
            written["l1"] += 1
            pieces.append(meaning.piece(record))
        else:
            folded.append((item, atom_id, sources))
    reinforced = _reinforce(where, folded, journal, job)
    written["l1"] += reinforced
    skipped["l1"] += len(folded) - reinforced
    return pieces


def _check_sources(where: Where, l1: list[Planned]) -> None:
    """After the records are written, their sources once more (a record never outlives its
    sources): a message they cite that was erased meanwhile — its erasure may have read the
    citations before they were written — fails the import, and the undo takes all of it back."""
    cited: dict[str, set[str]] = {}
    for item, _, sources in l1:
        cited.setdefault(item.user_id, set()).update(sources)
    for user, ids in cited.items():

        def found(chunk: list[str], user: str = user) -> int:
            return len(messages.get_many(where, user, chunk))

        if sum(for_each(found, in_batches(sorted(ids), CHECK_CHUNK))) < len(ids):
            raise Conflict(ERASED_MEANWHILE)


def _record(where: Where, item: tree.Record, atom_id: str, sources: list[str], staged: str) -> Record | None:
    """Store one record, its citation entries first; None when its natural key is taken (see
    ``_reinforce``)."""
    key = natural_key(item.task_id, item.type, item.background, item.content)
    counts = term_counts(searchable(item.content, item.background))
    record = records.new(
        where,
        id=atom_id,
        user_id=item.user_id,
        session_id=item.session_id,
        task_id=item.task_id,
        content=item.content,
        type=item.type,
        background=item.background,
        tags=item.tags,
        meta=item.metadata,
        version=item.version,
        reinforced_count=item.reinforced_count,
        created_at=item.created_at,
        updated_at=item.updated_at,
        natural_key=key,
        terms=sum(counts.values()),
        sources=sources or None,
        cited=set(sources) or None,
        formed=True if item.formed else None,
        import_id=staged,
    )
    provenance.cite(where, item.user_id, atom_id, sources)
    try:
        records.create(where, record, counts)
    except Cancelled as exc:
        if "guard" not in exc.failed:
            raise
        provenance.uncite(where, item.user_id, atom_id, sources)
        return None
    return record


def _reinforce(where: Where, folded: list[Planned], journal: Journal, job: Job) -> int:
    """Lines whose natural key a record holds reinforce it (natural-key dedup, as ``atomic/add``):
    one update per record, which remembers the lines' ids — importing the same tree again skips
    them — and joins their sources (citation entries first). A record this import created (staged,
    and going with the import anyway) is reinforced now; the records that were there before are
    visible, so their reinforcement waits for the commit: they are named in the journal with the
    lines, the sources new to them and all the sources joined, and ``staging.finish`` applies them
    right after the commit. How many lines reinforce (the others were folded in before, or their
    record was deleted or changed meanwhile)."""
    by_holder: dict[tuple[str, str], tuple[Record, list[str], list[str]]] = {}
    for item, atom_id, sources in folded:
        key = natural_key(item.task_id, item.type, item.background, item.content)
        holder = records.holder(where, item.user_id, key)
        if holder is None or atom_id in (holder.absorbed or ()):
            continue
        _, lines, joined = by_holder.setdefault((item.user_id, holder.id), (holder, [], []))
        if len(lines) < records.MAX_ABSORBED - len(holder.absorbed or ()):
            lines.append(atom_id)  # beyond: the record remembers no more lines, and takes none
            joined += sources
    own = {(user, i) for user, ids in journal.l1.items() for i in ids}
    stamp = now_ms()
    plan = [
        (user, holder, lines, list(dict.fromkeys(joined)))
        for (user, _), (holder, lines, joined) in by_holder.items()
        if lines
    ]
    added = {(user, h.id): [s for s in joined if s not in (h.cited or ())] for user, h, _, joined in plan}
    named = [
        [user, h.id, int(h.reinforced_count), int(h.updated_at), len(lines), stamp, lines, added[(user, h.id)], joined]
        for user, h, lines, joined in plan
        if (user, h.id) not in own
    ]
    if named:
        journal.reinforced += named
        journal.save(job)
    done = sum(len(lines) for u, h, lines, _ in plan if (u, h.id) not in own)
    for user, holder, lines, joined in plan:
        if (user, holder.id) not in own:
            continue  # after the commit (``staging.finish``)
        provenance.cite(where, user, holder.id, added[(user, holder.id)])
        try:
            records.reinforce(where, holder, stamp, absorbed=lines, sources=joined or None)
        except Cancelled as exc:
            provenance.uncite(where, user, holder.id, added[(user, holder.id)])
            if "epoch" in exc.failed:
                raise  # cleared meanwhile: the import fails, and what it wrote is erased already
            continue
        done += len(lines)
    return done
