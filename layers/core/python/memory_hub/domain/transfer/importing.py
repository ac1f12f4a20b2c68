"""Import: a memory-tdai tree (ours, or one TencentDB wrote) uploaded through a presigned URL, then
ingested into one (team, agent) memory. The whole tree is checked before anything is written; items
keep their ids where this service could have issued them and they are free, their times, sessions,
versions; L2 files keep their META as stored. An item already there with the same id and content
is skipped (importing the same tree twice changes nothing); an L1 line whose natural key another
record holds reinforces that record, as ``atomic/add`` would (and an undone import takes it back)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ...clock import format_ms, now_ms, ordered_id
from ...observability import logger
from ...storage import assets as stored_assets
from ...storage import audit as stored_audit
from ...storage import blobs, jobs, layout, messages, purge, records, scenes
from ...storage.audit import EventContext, NewEvent, event_items
from ...storage.concurrency import parallel
from ...storage.counters import Where
from ...storage.errors import Cancelled, PreconditionFailed
from ...storage.models import Asset, Job, Record
from .. import assets, meaning, meta, persona
from ..atomic import natural_key, searchable
from ..errors import Conflict, Invalid
from ..files import Draft, compare_and_swap, number, visible
from ..principal import Principal
from ..results_admin import ImportCreated, ImportJobState
from ..scope import Scope
from ..search import term_counts
from . import planning, tree
from .common import STALLED_MS, URL_LIFETIME_S, continue_later, describe, job_of

SYNC_BYTES = 512 * 1024  # a larger upload is ingested by an asynchronous invocation
SYNC_ITEMS = 2_000  # so is a tree of more items and files than this (it may compress very well)
MAX_UPLOAD_BYTES = 64 * 1024 * 1024  # compressed; unpacked, tree.MAX_TREE_BYTES

USED = "import_id: its upload was used already (an upload URL is good for one import); create another import"
UNDO_BUDGET_S = 120.0
# Deleting the asset an undone import created needs dynamodb:DeleteItem on AssetsTable, which the
# TransferFunction's role does not hold yet: until it does, such an import is undone item by item
# and leaves the (empty) asset.
DROP_CREATED_ASSETS = True  # a failed import into a memory it created deletes that memory whole


def _upload_key(job: Job) -> str:
    return layout.import_upload_key(job.team_id, job.agent_id, job.sk)


def journal_key(job: Job) -> str:
    """Where an import notes, before it writes anything, what it is about to write."""
    return f"{layout.import_prefix(job.team_id, job.agent_id)}{job.sk}.journal.json"


def _saved_key(job: Job, name: str) -> str:
    """Where an import keeps a copy of a live file it is about to overwrite."""
    return f"{layout.import_prefix(job.team_id, job.agent_id)}{job.sk}.saved/{layout.digest(name)}"


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
    memory_id = layout.memory_id_of(team_id, agent_id)
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
    stalled = job.state in ("queued", "running") and now_ms() - int(job.updated_at) > STALLED_MS
    if (job.state == "failed" or stalled) and undo(job) and stalled:
        jobs.settle(job, "failed", error="the import stopped before it ended; nothing of it was kept")
    # The ingest settles the job before it removes its journal and upload (a crash in between must
    # not read as "nothing kept"): once a poll is told it ended, neither is there any more.
    if not ran_here and job.state == "done":
        _forget(job)
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
            written, skipped = write(parsed, job)
        except BaseException:
            undo(job)  # what was written goes again (a failure of the undo leaves it to the cleanup)
            raise
        context = EventContext(job.team_id, job.owner, job.spec.get("request_id"), job.agent_id, job.memory_id)
        stored_audit.put(event_items([NewEvent("import", "asset", job.memory_id, sum(written.values()))], context))
        jobs.settle(job, "done", result={"counts": written, "skipped": skipped})
        _forget(job)
        if parsed.backups or written["l3"]:
            persona.prune_backups(job.team_id, job.agent_id)  # the newest 3 stay
    except Conflict as exc:
        jobs.settle(job, "failed", error=exc.message)
    except Exception:
        logger.exception("import failed")
        jobs.settle(job, "failed", error="the import failed; nothing of it was kept; try again")
    finally:
        if not handed_on:
            blobs.delete(key)


# ---------------------------------------------------------------- the journal


@dataclass
class Journal:
    """What an import is about to write, stored before it writes it: enough to take it all back."""

    asset_created: bool
    epoch: int | None = None
    l0: dict[str, list[str]] = field(default_factory=dict)  # user → ids of messages it adds
    l1: dict[str, list[str]] = field(default_factory=dict)  # user → ids of records it adds
    scenes_new: list[str] = field(default_factory=list)  # paths it creates
    scenes_over: dict[str, str] = field(default_factory=dict)  # path → copy of the live file it overwrites
    persona: str | None = None  # "new", or the copy of the live persona it overwrites
    backups_before: list[str] = field(default_factory=list)
    # records that were there and that it reinforces:
    # [user, id, count before, updated_at before, times, its stamp, the line ids]
    reinforced: list[list[Any]] = field(default_factory=list)

    def save(self, job: Job) -> None:
        blobs.put_bytes(journal_key(job), json.dumps(self.__dict__).encode(), "application/json")

    @classmethod
    def load(cls, job: Job) -> Journal | None:
        data = blobs.get_bytes(journal_key(job))
        return None if data is None else cls(**json.loads(data))


def _forget(job: Job) -> None:
    """The import is done (or undone): its journal and saved copies go."""
    prefix = f"{layout.import_prefix(job.team_id, job.agent_id)}{job.sk}."
    blobs.delete_many(blobs.keys_under(prefix))


def undo(job: Job, *, drop_asset: bool = True) -> bool:
    """Take back what the import of ``job`` wrote, by its journal (idempotent: a replay after a
    partial undo finishes it). A memory the import created is deleted whole (its epoch retired and
    purged, as a memory delete does); in a memory that was there, the messages and records it
    added are deleted, the files it created removed, the files and persona it overwrote put back
    byte for byte with their versions (as if the import never ran) and the backups it made deleted. A clear since
    the import began has erased its content already. False when there was no journal.

    Without ``drop_asset`` (the scheduled cleanup's role may not delete assets) a memory the import
    created is emptied and its journal kept: the import's status route, run by this function, drops
    the asset on the next poll."""
    journal = Journal.load(job)
    if journal is None:
        return False
    asset = assets.of_pair(job.team_id, job.agent_id)
    if asset is not None and (asset.team_id, asset.agent_id) == (job.team_id, job.agent_id):
        if journal.asset_created and drop_asset and DROP_CREATED_ASSETS:
            _drop(asset, job)
        elif journal.epoch is not None and int(asset.epoch) == journal.epoch:
            _take_back(asset, journal, job)
        if journal.asset_created and not drop_asset and DROP_CREATED_ASSETS:
            return True
    _forget(job)
    return True


def _drop(asset: Asset, job: Job) -> None:
    stamp = now_ms()
    target = purge.Target(
        asset.memory_id, asset.team_id, asset.agent_id, int(asset.epoch), stamp, job.owner, job.spec.get("request_id")
    )
    try:
        stored_assets.retire_epoch(
            asset, new_epoch=None, stamp=format_ms(stamp), purge_record=purge.record(target), events=[]
        )
    except Cancelled:
        return  # a clear or a delete moved it on: what the import wrote is being erased already
    if purge.run(target, purge.Deadline.after(UNDO_BUDGET_S)).done:
        purge.finish(target, [])  # else the purge record stays and the scheduled cleanup finishes it


def _take_back(asset: Asset, journal: Journal, job: Job) -> None:
    scope = Scope(job.team_id, job.agent_id, "")
    epoch = int(asset.epoch)
    where = Where(asset.team_id, asset.agent_id, epoch, asset.memory_id)
    for user, ids in journal.l0.items():
        found = messages.get_many(where, user, ids)
        if found:
            messages.delete(where, list(found.values()), lambda part: [])
    for user, ids in journal.l1.items():
        held = records.get_many(where, user, ids)
        if held:
            records.delete(where, list(held.values()), lambda part: [])
    for user, atom_id, count, updated_at, times, stamp, lines in journal.reinforced:
        reinforced = records.get(where, user, atom_id)
        if reinforced is not None:
            records.unreinforce(where, reinforced, (count, updated_at), times, stamp, lines)
    meaning.erase(where, [i for ids in [*journal.l0.values(), *journal.l1.values()] for i in ids])
    for path in journal.scenes_new:
        entry = scenes.current(scenes.get(scope.team_id, scope.agent_id, path), epoch)
        if entry is not None:
            scenes.remove(asset.memory_id, epoch, [entry], format_ms(now_ms()), [])
        blobs.delete(layout.scene_key(scope.team_id, scope.agent_id, path))
    for path, saved in journal.scenes_over.items():
        _put_back(scope, asset, saved, path)
    if journal.persona == "new":
        blobs.delete(layout.persona_key(scope.team_id, scope.agent_id))
    elif journal.persona is not None:
        _put_back(scope, asset, journal.persona)
    before = set(journal.backups_before)
    made = [k for k in blobs.keys_under(layout.backup_prefix(scope.team_id, scope.agent_id)) if k not in before]
    blobs.delete_many(made)


def recover(now: int) -> int:
    """For the scheduled cleanup: undo every import that failed or stopped (its process killed, a
    timeout) with its journal still there; how many were undone."""
    undone = 0
    for job in jobs.unfinished("import", now - STALLED_MS):
        if undo(job, drop_asset=False):
            undone += 1
        if job.state != "failed":
            jobs.settle(job, "failed", error="the import stopped before it ended; nothing of it was kept")
    return undone


def write(parsed: tree.Tree, job: Job) -> tuple[dict[str, int], dict[str, int]]:
    """Plan, note the plan in the journal, then write: nothing is written before the journal
    names it."""
    scope = Scope(job.team_id, job.agent_id, "")
    existing = assets.of_pair(job.team_id, job.agent_id)
    journal = Journal(asset_created=existing is None)
    journal.save(job)  # before the asset: an import that dies right after creating it drops it again
    asset = assets.ensure(existing, job.team_id, job.agent_id, job.owner)
    journal.epoch = int(asset.epoch)
    written = {"l0": 0, "l1": 0, "l2": 0, "l3": 0}
    skipped = {"l0": 0, "l1": 0, "l2": 0, "l3": 0}
    where = Where(asset.team_id, asset.agent_id, int(asset.epoch), asset.memory_id)
    l0 = planning.messages_to_add(where, parsed, skipped)
    l1 = planning.records_to_add(where, parsed, skipped)
    for (user, _, _), group in l0:
        journal.l0.setdefault(user, []).extend(m.id for m in group)
    for item, atom_id in l1:
        journal.l1.setdefault(item.user_id, []).append(atom_id)
    copies: list[tuple[str, str, str]] = []  # (live key, copy key, etag)
    epoch = int(asset.epoch)
    for path in parsed.files:
        key = layout.scene_key(scope.team_id, scope.agent_id, path)
        live = visible(blobs.head(key), epoch)
        if live is None:
            journal.scenes_new.append(path)
        else:
            journal.scenes_over[path] = _saved_key(job, path)
            copies.append((key, journal.scenes_over[path], live.etag))
    if parsed.persona is not None:
        key = layout.persona_key(scope.team_id, scope.agent_id)
        live = visible(blobs.head(key), epoch)
        journal.persona = "new" if live is None else _saved_key(job, "persona.md")
        if live is not None:
            copies.append((key, journal.persona, live.etag))
    journal.backups_before = blobs.keys_under(layout.backup_prefix(scope.team_id, scope.agent_id))
    journal.save(job)
    for key, copy, etag in copies:
        if not blobs.copy(key, copy, if_match=etag):
            raise Conflict("the memory's files changed while the import began; try again")
    pieces: list[meaning.Piece] = []
    for (user, session, task), group in l0:
        for start in range(0, len(group), messages.PER_ADD):
            messages.add(where, user, session, task, group[start : start + messages.PER_ADD], now_ms())
        written["l0"] += len(group)
        pieces += meaning.new_messages(user, session, task, group)
    folded: list[tuple[tree.Record, str]] = []  # lines whose (task, type, background, content) is held
    for item, atom_id in l1:
        record = _record(where, item, atom_id)
        if record is not None:
            written["l1"] += 1
            pieces.append(meaning.piece(record))
        else:
            folded.append((item, atom_id))
    reinforced = _reinforce(where, folded, journal, job)
    written["l1"] += reinforced
    skipped["l1"] += len(folded) - reinforced
    for path, text in parsed.files.items():
        written_or_skipped = written if _scene(scope, asset, path, text) else skipped
        written_or_skipped["l2"] += 1
    if parsed.persona is not None:
        (written if _persona(scope, asset, parsed.persona, parsed.persona_meta) else skipped)["l3"] += 1
    for name, text in parsed.backups.items():
        key = layout.backup_prefix(scope.team_id, scope.agent_id) + name
        try:
            blobs.put(key, text, {"epoch": str(int(asset.epoch))}, if_match=None)
        except PreconditionFailed:
            pass  # that backup is there already
    meaning.embed_after_write(where, pieces)  # never raises; what does not fit its budget is queued
    return written, skipped


def _record(where: Where, item: tree.Record, atom_id: str) -> Record | None:
    """Store one record; None when its natural key is taken (see ``_reinforce``)."""
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
    )
    try:
        records.create(where, record, counts)
    except Cancelled as exc:
        if "guard" not in exc.failed:
            raise
        return None
    return record


def _reinforce(where: Where, folded: list[tuple[tree.Record, str]], journal: Journal, job: Job) -> int:
    """Lines whose natural key a record holds reinforce it (natural-key dedup, as ``atomic/add``):
    one update per record, which remembers the lines' ids — importing the same tree again skips
    them. The records that were there before the import are named in the journal, saved once before
    any is reinforced, so an undo takes it back; one this import created goes with the import
    anyway. How many lines reinforced (the others were folded in before, or their record was
    deleted or changed meanwhile)."""
    by_holder: dict[tuple[str, str], tuple[Record, list[str]]] = {}
    for item, atom_id in folded:
        key = natural_key(item.task_id, item.type, item.background, item.content)
        holder = records.holder(where, item.user_id, key)
        if holder is None or atom_id in (holder.absorbed or ()):
            continue
        _, lines = by_holder.setdefault((item.user_id, holder.id), (holder, []))
        if len(lines) < records.MAX_ABSORBED - len(holder.absorbed or ()):
            lines.append(atom_id)  # beyond: the record remembers no more lines, and takes none
    own = {(user, i) for user, ids in journal.l1.items() for i in ids}
    stamp = now_ms()
    plan = [(user, holder, lines) for (user, _), (holder, lines) in by_holder.items() if lines]
    named = [
        [user, h.id, int(h.reinforced_count), int(h.updated_at), len(lines), stamp, lines]
        for user, h, lines in plan
        if (user, h.id) not in own
    ]
    if named:
        journal.reinforced += named
        journal.save(job)
    done = 0
    for _, holder, lines in plan:
        try:
            records.reinforce(where, holder, stamp, absorbed=lines)
        except Cancelled as exc:
            if "epoch" in exc.failed:
                raise  # cleared meanwhile: the import fails, and what it wrote is erased already
            continue
        done += len(lines)
    return done


def _scene(scope: Scope, asset: Asset, path: str, text: str) -> bool:
    """Store a file as exported (its META kept); False when the same content is there already.
    Over a different live file it comes as the next version (versions never go back)."""
    key = layout.scene_key(scope.team_id, scope.agent_id, path)
    keys, body = meta.split(text)
    epoch = int(asset.epoch)

    def prepare() -> Draft:
        entry, blob = parallel(lambda: scenes.get(scope.team_id, scope.agent_id, path), lambda: blobs.get(key))
        live = visible(blob, epoch)
        if live is not None and live.text is not None and _same_scene(live.text, keys, body):
            return Draft(text, {}, blob, unchanged=True)
        indexed = scenes.current(entry, epoch)
        gen = max(number(live, "gen"), int(indexed.gen) if indexed else 0) + 1
        version, stored = int(keys["version"]), text
        if live is not None and version <= number(live, "version"):
            version = number(live, "version") + 1
            previous = {k: v for k, v in keys.items() if k not in meta.OWN_KEYS}
            stored = meta.render(
                version=version,
                created_at=keys["created_at"],
                updated_at=keys["updated_at"],
                summary=keys.get("summary") or None,
                previous=previous,
                content=body,
            )
        metadata = {"epoch": str(epoch), "gen": str(gen), "version": str(version)}
        return Draft(stored, metadata, blob, {"gen": gen, "version": version})

    return not compare_and_swap(key, "import scene", prepare, _scene_index(scope, asset, path)).unchanged


def _scene_index(scope: Scope, asset: Asset, path: str) -> Callable[[Draft, str], bool]:
    """How a file the import stores (or puts back) enters the scene index: its version and times
    as its META block says."""

    def commit(draft: Draft, etag: str) -> bool:
        keys, _ = meta.split(draft.text)
        try:
            scenes.commit_write(
                asset.memory_id,
                scope.team_id,
                scope.agent_id,
                int(asset.epoch),
                path,
                gen=draft.facts["gen"],
                version=draft.facts["version"],
                summary=keys.get("summary") or None,
                created_at=keys["created_at"],
                updated_at=keys["updated_at"],
                size=len(draft.text.encode("utf-8")),
                etag=etag,
                event=None,
            )
        except Cancelled as exc:
            if "epoch" in exc.failed:
                raise  # cleared during the import: the import fails (and this file is put back)
        return True

    return commit


def _put_back(scope: Scope, asset: Asset, saved: str, path: str | None = None) -> None:
    """Undo: the scene file at ``path`` (the persona when None) as it was before the import — its
    saved copy byte for byte, with its version (a failed import leaves no trace, not even a spent
    version number). Only a file's generation moves on, so the index takes the restored entry over
    the import's."""
    copy = blobs.get(saved)
    if copy is None or copy.text is None:
        return
    text, epoch = copy.text, int(asset.epoch)
    if path is None:
        key = layout.persona_key(scope.team_id, scope.agent_id)
    else:
        key = layout.scene_key(scope.team_id, scope.agent_id, path)

    def prepare() -> Draft:
        blob = blobs.get(key)
        live = visible(blob, epoch)
        if live is not None and live.text == text and live.metadata.get("version") == copy.metadata.get("version"):
            return Draft(text, {}, blob, unchanged=True)
        metadata = {**copy.metadata, "epoch": str(epoch)}
        if path is None:
            return Draft(text, metadata, blob)
        entry = scenes.current(scenes.get(scope.team_id, scope.agent_id, path), epoch)
        gen = max(number(live, "gen"), number(copy, "gen"), int(entry.gen) if entry else 0) + 1
        metadata["gen"] = str(gen)
        return Draft(text, metadata, blob, {"gen": gen, "version": number(copy, "version")})

    index = (lambda draft, etag: True) if path is None else _scene_index(scope, asset, path)
    compare_and_swap(key, "put back", prepare, index)


def _same_scene(stored: str, keys: dict[str, str], body: str) -> bool:
    """The live file already holds what the tree gives: the same content and summary (times a
    tree without them got at import do not count)."""
    live_keys, live_body = meta.split(stored)
    return live_body == body and (live_keys.get("summary") or None) == (keys.get("summary") or None)


def _persona(scope: Scope, asset: Asset, text: str, persona_meta: dict[str, Any]) -> bool:
    """Store the persona as exported; False when the same text is there already. Over a different
    live persona it comes as the next version, the live one backed up first
    (versions never go back)."""
    key = layout.persona_key(scope.team_id, scope.agent_id)
    epoch = int(asset.epoch)
    given = persona_meta.get("version")

    def prepare() -> Draft:
        blob = blobs.get(key)
        live = visible(blob, epoch)
        if live is not None and live.text == text:
            return Draft(text, {}, blob, unchanged=True)
        stamp = format_ms(now_ms())
        version = given if isinstance(given, int) and given >= 1 else 1
        created = str(persona_meta.get("created_at") or stamp)
        if live is not None:
            persona.backup(scope, live, number(live, "version"))
            version = max(version, number(live, "version") + 1)
            created = live.metadata.get("created-at", created)
        metadata = {
            "epoch": str(epoch),
            "version": str(version),
            "created-at": created,
            "updated-at": str(persona_meta.get("updated_at") or stamp),
        }
        return Draft(text, metadata, blob)

    return not compare_and_swap(key, "import persona", prepare, lambda draft, etag: True).unchanged
