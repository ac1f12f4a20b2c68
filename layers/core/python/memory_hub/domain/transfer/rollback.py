"""An import's write-ahead journal, and the undo it makes possible.

Before its first write an import notes under ``.imports/`` what it is about to write: the ids of
the messages and records it adds, the records it reinforces (with the sources it joins to them),
the staged copies of the files it lands after its commit (``landing``), whether it created the
asset. On any failure — in process, at the next status poll, or by
the scheduled cleanup when its process died — ``undo`` takes it all back from the journal. Its
items stay invisible all the while (``staging``): its id leaves the memory's running imports only
once they are gone."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ...clock import format_ms, now_ms
from ...storage import assets as stored_assets
from ...storage import blobs, bucket, citations, counters, messages, purge, records, scenes
from ...storage.audit import EventContext
from ...storage.counters import Where
from ...storage.errors import Cancelled
from ...storage.views import Asset, Job
from .. import assets, erasure, meta, vector_erasure
from ..files import Draft, compare_and_swap, number, visible
from ..scope import Scope

UNDO_BUDGET_S = 120.0
# Deleting the asset an undone import created needs dynamodb:DeleteItem on AssetsTable: the
# TransferFunction's role holds it (template.yaml, AssetEpochGuard), the CleanupFunction's does not,
# so the cleanup's undo empties such a memory and leaves it to the import's next status poll.
DROP_CREATED_ASSETS = True  # a failed import into a memory it created deletes that memory whole


def journal_key(job: Job) -> str:
    """Where an import notes, before it writes anything, what it is about to write."""
    return bucket.journal_key(job.team_id, job.agent_id, job.sk)


def saved_key(job: Job, name: str) -> str:
    """Where an import keeps a copy of a live file it is about to overwrite."""
    return bucket.saved_key(job.team_id, job.agent_id, job.sk, name)


@dataclass
class Journal:
    """What an import is about to write, stored before it writes it: enough to take it all back."""

    asset_created: bool
    epoch: int | None = None
    l0: dict[str, list[str]] = field(default_factory=dict)  # user → ids of messages it adds
    l1: dict[str, list[str]] = field(default_factory=dict)  # user → ids of records it adds
    # the files it lands right after its commit (``landing``): path → its staged copy, the
    # persona's staged copy and the version and times it comes with, backup name → staged copy
    files: dict[str, str] = field(default_factory=dict)
    persona_staged: str | None = None
    persona_meta: dict[str, Any] = field(default_factory=dict)
    backups: dict[str, str] = field(default_factory=dict)
    # Journals written before files were staged (an import running across an upgrade) wrote the
    # files at their keys before the commit: the paths it created, the copies of what it overwrote,
    # the backups there before (None: it wrote none before its commit).
    persona: str | None = None  # "new", or the copy of the live persona it overwrites
    backups_before: list[str] | None = None
    # records that were there and that it reinforces:
    # [user, id, count before, updated_at before, times, its stamp, the line ids, the sources it
    # joins that the record had never cited]
    reinforced: list[list[Any]] = field(default_factory=list)
    # user → messages that were there already and that the records it adds cite (their citation
    # entries are written before the records: an import that dies in between leaves them)
    cites: dict[str, list[str]] = field(default_factory=dict)
    scenes_new: list[str] = field(default_factory=list)  # (older journals) paths it created
    scenes_over: dict[str, str] = field(default_factory=dict)  # (older journals) path → copy of what it overwrote

    def save(self, job: Job) -> None:
        blobs.put_bytes(journal_key(job), json.dumps(self.__dict__).encode(), "application/json")

    @classmethod
    def load(cls, job: Job) -> Journal | None:
        data = blobs.get_bytes(journal_key(job))
        return None if data is None else cls(**json.loads(data))


def forget(job: Job) -> None:
    """The import is done (or undone): its journal and saved copies go."""
    blobs.delete_many(blobs.keys_under(bucket.import_files_prefix(job.team_id, job.agent_id, job.sk)))


def undo(job: Job, *, drop_asset: bool = True) -> bool:
    """Take back what the import of ``job`` wrote, by its journal (idempotent: a replay after a
    partial undo finishes it). A memory the import created is deleted whole (its epoch retired and
    purged, as a memory delete does); in a memory that was there, the reinforcements it made are
    taken back first (with the sources it joined), then the records and messages it added are
    deleted — and every other record citing one of those messages with them (a record never
    outlives its sources) —, and its staged files go with the journal (none was ever at its key;
    a journal from before files were staged has its files removed or put back byte for byte).
    A clear since the import began has erased its content already. False when there was
    no journal.

    Without ``drop_asset`` (the scheduled cleanup's role may not delete assets) a memory the import
    created is emptied and its journal kept: the import's status route, run by this function, drops
    the asset on the next poll."""
    journal = Journal.load(job)
    if journal is None:
        return False
    asset = assets.of_pair(job.team_id, job.agent_id)
    if asset is not None and (asset.team_id, asset.agent_id) == (job.team_id, job.agent_id):
        # a memory it created is dropped while it is still hidden: a client's write since made it theirs
        created = journal.asset_created and asset.hidden_by == job.sk
        dropping = created and drop_asset and DROP_CREATED_ASSETS
        if not (dropping and _drop(asset, job)):
            if dropping:  # a client's write claimed it between the read and the drop: it stays theirs
                asset = assets.of_pair(job.team_id, job.agent_id) or asset
            if journal.epoch is not None and int(asset.epoch) == journal.epoch:
                _take_back(asset, journal, job)
        stored_assets.end_import(job.team_id, job.agent_id, job.sk)  # its items are gone: nothing to hide
        if created and not drop_asset and DROP_CREATED_ASSETS:
            return True  # emptied and still hidden: the import's status route drops it
    forget(job)
    return True


def _drop(asset: Asset, job: Job) -> bool:
    """Delete the memory the import created while it is still hidden by it: False when a clear or a
    delete moved it on meanwhile, or a client's write claimed it."""
    stamp = now_ms()
    target = purge.Target.of(asset, int(asset.epoch), stamp, job.owner, job.spec.get("request_id"))
    try:
        purge.retire(asset, target, new_epoch=None, stamp=format_ms(stamp), events=[], hidden_by=job.sk)
    except Cancelled:
        return False  # moved on (what the import wrote is being erased already), or claimed
    if purge.run(target, purge.Deadline.after(UNDO_BUDGET_S)).done:
        purge.finish(target, [])  # else the purge record stays and the scheduled cleanup finishes it
    return True


def _take_back(asset: Asset, journal: Journal, job: Job) -> None:
    """Undo in a memory that was there: reinforcements first (so that only records the import
    created go with its messages), then its records, its citation entries, its messages and the
    records citing them, then its files."""
    where = Where.of(asset)
    context = EventContext(job.team_id, job.owner, job.spec.get("request_id"), job.agent_id, job.memory_id)
    _unreinforce(where, journal)
    for user, ids in journal.l1.items():
        held = records.get_many(where, user, ids)
        if held:
            counters.prepare_staging(where, [(records.LAYER, user)])  # a user's erasure may have dropped it
            # their citation entries go with them; so do their notes on the counters
            records.delete(where, list(held.values()), lambda part: [], staged=job.sk)
    _forget_cites(where, journal)
    for user, ids in journal.l0.items():
        _erase_messages(asset, where, user, ids, context, job.sk)
    vector_erasure.erase(
        where, [(user, i) for part in (journal.l0, journal.l1) for user, ids in part.items() for i in ids]
    )
    _take_back_files(asset, journal, job)


def _unreinforce(where: Where, journal: Journal) -> None:
    """The records the import reinforced, as they were: their count and ``updated_at`` while they
    are as it left them; the sources it joined to them (and their citation entries) in any case —
    else erasing its messages would erase those records too."""
    for user, atom_id, count, updated_at, times, stamp, lines, *rest in journal.reinforced:
        added: list[str] = rest[0] if rest else []  # a journal written before sources had none
        reinforced = records.get(where, user, atom_id)
        if reinforced is not None:
            records.unreinforce(where, reinforced, (count, updated_at), times, stamp, lines)
            if added:
                records.drop_sources(where, user, atom_id, set(added))
        if added:
            citations.forget(where, user, ((m, atom_id) for m in added))


def _forget_cites(where: Where, journal: Journal) -> None:
    """Citation entries of the import's records naming messages that were there: a record deleted
    above took its own; these are of a record the import died before writing."""
    for user, ids in journal.cites.items():
        own = set(journal.l1.get(user, []))
        if ids and own:
            cited = citations.citing(where, user, ids)
            citations.forget(where, user, ((m, a) for m, found in cited.items() for a in found if a in own))


def _erase_messages(
    asset: Asset, where: Where, user: str, ids: list[str], context: EventContext, import_id: str
) -> None:
    """Delete the import's messages (and their notes on the counters, so counts read the same
    throughout the undo), then every record citing one of them, as any erasure of messages does.
    Of messages already gone (an earlier undo that stopped midway), the records citing them are
    looked up all the same, so a replay finishes that undo."""
    found = messages.get_many(where, user, ids)
    removed: list[Any] = []
    if found:
        counters.prepare_staging(where, [(messages.LAYER, user)])  # as for records above
        removed = messages.delete(where, list(found.values()), lambda part: [], staged=import_id)[0]
    erasure.cascade(asset, where, user, removed, context)
    gone = [i for i in ids if i not in found]
    if gone:
        cited = citations.citing(where, user, gone)
        atom_ids = list(dict.fromkeys(a for found_ids in cited.values() for a in found_ids))
        if atom_ids:
            erasure.erase_records(asset, where, list(records.get_many(where, user, atom_ids).values()), context)
        citations.forget(where, user, ((m, a) for m, found_ids in cited.items() for a in found_ids))


def _take_back_files(asset: Asset, journal: Journal, job: Job) -> None:
    scope = Scope(job.team_id, job.agent_id, "")
    epoch = int(asset.epoch)
    for path in journal.scenes_new:
        entry = scenes.current(scenes.get(scope.team_id, scope.agent_id, path), epoch)
        if entry is not None:
            scenes.remove(asset.memory_id, epoch, [entry], format_ms(now_ms()), [])
        blobs.delete(bucket.scene_key(scope.team_id, scope.agent_id, path))
    for path, saved in journal.scenes_over.items():
        put_back(scope, asset, saved, path)
    if journal.persona == "new":
        blobs.delete(bucket.persona_key(scope.team_id, scope.agent_id))
    elif journal.persona is not None:
        put_back(scope, asset, journal.persona)
    if journal.backups_before is not None:
        before = set(journal.backups_before)
        made = [k for k in blobs.keys_under(bucket.backup_prefix(scope.team_id, scope.agent_id)) if k not in before]
        blobs.delete_many(made)


def scene_index(scope: Scope, asset: Asset, path: str) -> Callable[[Draft, str], bool]:
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


def put_back(scope: Scope, asset: Asset, saved: str, path: str | None = None) -> None:
    """Undo: the scene file at ``path`` (the persona when None) as it was before the import — its
    saved copy byte for byte, with its version (a failed import leaves no trace, not even a spent
    version number). Only a file's generation moves on, so the index takes the restored entry over
    the import's."""
    copy = blobs.get(saved)
    if copy is None or copy.text is None:
        return
    text, epoch = copy.text, int(asset.epoch)
    if path is None:
        key = bucket.persona_key(scope.team_id, scope.agent_id)
    else:
        key = bucket.scene_key(scope.team_id, scope.agent_id, path)

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

    index = (lambda draft, etag: True) if path is None else scene_index(scope, asset, path)
    compare_and_swap(key, "put back", prepare, index)
