"""Import, applied: a checked tree planned (``planning``), its plan noted in the journal
(``rollback``), then written staged (``staging``): nothing is written before the journal names it,
and nothing written shows before the commit. Records whose natural key a record holds reinforce it,
as ``atomic/add`` would; a record's sources are checked again once it is written (a record never
outlives its sources)."""

from __future__ import annotations

from ...analysis import searchable, term_counts
from ...clock import now_ms
from ...storage import messages, records
from ...storage.concurrency import for_each, in_batches
from ...storage.counters import Where
from ...storage.errors import Cancelled
from ...storage.views import Asset, Job, Record
from .. import assets, meaning, provenance
from ..atomic import natural_key
from ..errors import Conflict
from . import landing, planning, tree
from .rollback import Journal
from .staging import stage

CHECK_CHUNK = 100  # cited messages looked up per call when the records' sources are checked again
ERASED_MEANWHILE = (
    "a message the tree's records cite was erased while the import ran; nothing of it was kept; try again"
)


Staged = tuple[Asset, Where, list[meaning.Piece], dict[str, int], dict[str, int]]


def write(parsed: tree.Tree, job: Job) -> Staged:
    """Plan, note the plan in the journal, then write, staged (``staging``): nothing is written
    before the journal names it, and nothing written shows before the commit. The asset and
    epoch written into, the vectors to make once committed, what was written and skipped."""
    existing = assets.of_pair(job.team_id, job.agent_id)
    journal = Journal(asset_created=existing is None)
    journal.save(job)  # before the asset: an import that dies right after creating it drops it again
    asset = assets.ensure(existing, job.team_id, job.agent_id, job.owner, hidden_by=job.sk)
    journal.epoch = int(asset.epoch)
    written = {"l0": 0, "l1": 0, "l2": 0, "l3": 0}
    skipped = {"l0": 0, "l1": 0, "l2": 0, "l3": 0}
    where = Where.of(asset)
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
    counter it will move (its users' L0 and L1 counters)."""
    layers = {(messages.LAYER, user) for (user, _, _), _ in l0} | {(records.LAYER, item.user_id) for item, _, _ in l1}
    stage(asset, job, where, layers)


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
