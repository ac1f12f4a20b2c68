"""Memory assets and their teams' listings (AssetsTable).

One asset per (team, agent). Its ``memory_id`` ("chat_memory-" + team + "-" + agent) does not name
one pair: team ``a-b`` + agent ``c`` and team ``a`` + agent ``b-c`` spell the same string, and each
is a memory of its own. So the asset is keyed by its pair, inside a partition per memory_id:

    pk               sk                     what
    <memory_id>      A#<team>:<agent>       the asset of that pair (its content epoch fences clears)
    <memory_id>      fence#<team>:<agent>   its fence: the asset's epoch and running imports alone,
                                            what every write's transaction checks (``Fence``)
    <memory_id>      asset                  an asset stored before assets were keyed by pair (legacy);
                                            once moved to its pair's key it is marked ``moved_to``
    team#<team>      <memory_id>            a team's listing (within one team a memory_id names one pair)

Both questions are one round trip: a pair's asset (a write, a read) and the pairs that spell a
memory_id (a route that names one) are the same strongly consistent Query of the memory_id's
partition, which holds a handful of items at most. A legacy item met there is moved to its pair's
key in one conditional transaction before it is used — the pair's item put, the legacy one marked
``moved_to`` (the functions may put and update assets, only the clear may delete them); idempotent,
a racing mover simply wins — by
every function that may write AssetsTable; the functions that may only read it (``read_only``) use
it where it is, which is enough for them: none writes under an asset's epoch fence. So everything
stored before keeps working and is keyed by pair from its first use by a write-capable function on.

The fence moves with the asset's epoch and running imports, in the same transactions, so a write's
epoch check reads a small item rather than the asset (whose ACL and bindings can reach ~45 KB, and
a transaction bills a check by the item's size, twice). The partition's Query returns it beside
the asset; a pair is checked on its fence only when the two agreed when last read here
(``_fenced_pairs``), else on its asset, and an asset of before gets its fence at its next write
(``fence``). Code of before moves the asset alone, so while a deploy from it runs, a write racing a
clear made by a function still on it could pass a fence that lags: ``EPOCH_CHECKS=Asset`` (the
template's ``EpochChecks``) keeps every check on the asset while the fences are kept, for that
first deploy; a second deploy with ``Fence`` turns the checks over.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from dataclasses import replace
from typing import Any

from botocore.exceptions import ClientError
from pynamodb.expressions.condition import size

from ..clock import now_ms
from ..memory_ids import MAX_MEMORY_ID_CHARS, memory_id_of
from ..settings import get_settings
from . import aws, layout, views
from .concurrency import parallel
from .errors import Cancelled
from .models import ASSET_SK, Asset, Fence, Job, PurgeRecord, TeamEntry, own, snapshot
from .retry import attempts
from .transactions import Transaction

TEAM_PREFIX = "team#"
PAIR_PREFIX = "A#"
LEGACY_SK = ASSET_SK  # the one asset of a memory_id, as stored before assets were keyed by pair
FENCE_PREFIX = "fence#"  # a memory's fence: beside its asset, never read as one (see ``_is_asset``)
# Pairs whose asset, as this process last read it, has a fence that agrees with it (the same epoch
# and running imports, read in the same Query): their writes' epoch checks read the fence. Safe
# when stale: a pair left out is checked on its asset, whose epoch always moves with the fence, and
# a pair wrongly in fails its check once, and the retry's read of the asset puts it right. A fence
# that disagrees with its asset (a release of before moved the asset alone: a deploy's mixed
# minutes, a rollback) is never trusted, and the pair's next write puts it right (``fence``).
_fenced_pairs: dict[tuple[str, str], None] = {}
_fenced_lock = threading.Lock()
_FENCED_PAIRS_KEPT = 4096
_may_migrate = [True]  # False once this function's role was refused a write to AssetsTable


def read_only() -> None:
    """This function's role may read AssetsTable but not write it (deletes by id, the cleanup,
    embeddings — none of them writes under an asset's epoch fence): legacy items are used where
    they are, never moved from here."""
    _may_migrate[0] = False


def pair_sk(team_id: str, agent_id: str) -> str:
    return PAIR_PREFIX + layout.pair(team_id, agent_id)


def _is_asset(item: views.Asset) -> bool:
    return item.sk.startswith(PAIR_PREFIX) or (item.sk == LEGACY_SK and item.moved_to is None)


def spelling(memory_id: str) -> list[views.Asset]:
    """Every asset whose memory_id is this string, by (team, agent) — strongly consistent, legacy
    items moved to their pair's key first. None for an id no pair can spell."""
    if not memory_id or len(memory_id) > MAX_MEMORY_ID_CHARS:
        return []
    for _ in attempts("asset"):
        items = list(Asset.query(memory_id, consistent_read=True))  # the pairs' assets and their fences
        fences = {a.sk.removeprefix(FENCE_PREFIX): a for a in items if a.sk.startswith(FENCE_PREFIX)}
        found = [a for a in _views(a for a in items if not a.sk.startswith(FENCE_PREFIX)) if _is_asset(a)]
        for asset in found:
            if asset.sk.startswith(PAIR_PREFIX):
                _remember(asset, fences.get(asset.sk.removeprefix(PAIR_PREFIX)))
        legacy = [a for a in found if a.sk == LEGACY_SK]
        if not legacy or not _may_migrate[0]:
            return _by_pair(found)
        for item in legacy:
            migrate(item)
    raise AssertionError("unreachable")


def _by_pair(found: list[views.Asset]) -> list[views.Asset]:
    """One asset per pair, in (team, agent) order (a pair's own item wins over a legacy copy)."""
    chosen: dict[tuple[str, str], views.Asset] = {}
    for asset in sorted(found, key=lambda a: a.sk != LEGACY_SK):
        chosen.setdefault((asset.team_id, asset.agent_id), asset)
    return [chosen[p] for p in sorted(chosen)]


def get_pair(team_id: str, agent_id: str) -> views.Asset | None:
    """The pair's asset (one strongly consistent Query); another pair spelling the same memory_id
    never answers for it."""
    for asset in spelling(memory_id_of(team_id, agent_id)):
        if asset.team_id == team_id and asset.agent_id == agent_id:
            return asset
    return None


def migrate(legacy: views.Asset) -> bool:
    """Move an asset stored under its memory_id alone to its pair's key: put the pair's item unless
    it exists, mark the legacy one ``moved_to`` only while unchanged — one transaction. False when
    a racing mover (or a change of the legacy item) got there first: the caller reads again."""
    target = pair_sk(legacy.team_id, legacy.agent_id)
    moved = Asset(legacy.memory_id, target, **_fields(own(Asset, legacy), exclude=("pk", "sk", "moved_to")))
    unchanged = (Asset.epoch == int(legacy.epoch)) & Asset.moved_to.does_not_exist()
    transaction = Transaction()
    transaction.put("pair", moved, condition=Asset.pk.does_not_exist())
    transaction.update("legacy", legacy, [Asset.moved_to.set(target)], condition=unchanged)
    try:
        transaction.commit()
        return True
    except ClientError as exc:
        if aws.error_code(exc) != "AccessDeniedException":
            raise
        # A function that may only read assets (deletes by id, the cleanup, embeddings) reads the
        # legacy item where it is: none of them writes under the asset's epoch fence. The next
        # function that may write assets moves it.
        _may_migrate[0] = False
        return False
    except Cancelled as cancelled:
        if cancelled.failed == ["pair"]:
            # The pair's item exists already (it is the asset): the legacy copy is stale. Marked,
            # so it never shadows the pair again.
            stale = Transaction()
            stale.update("legacy", legacy, [Asset.moved_to.set(target)], condition=unchanged)
            try:
                stale.commit()
            except Cancelled:
                pass
        return False


def _fields(asset: Asset, exclude: tuple[str, ...] = ()) -> dict[str, Any]:
    return {name: getattr(asset, name) for name in asset.get_attributes() if name not in exclude}


def new(**fields: Any) -> views.Asset:
    """A new asset's view, not stored yet (``create`` stores it, with its fence). Its exports will
    put their marker (``export_marks``: an erasure lists them only when the marker is there)."""
    fields.setdefault("fenced", True)
    fields.setdefault("export_marks", True)
    return snapshot(views.Asset, Asset(fields["memory_id"], pair_sk(fields["team_id"], fields["agent_id"]), **fields))


def create(asset: views.Asset) -> bool:
    """Store a new asset, its fence and its team listing unless the pair's asset exists (a
    conditional put decides a race between creators)."""
    transaction = Transaction()
    transaction.put("asset", asset, condition=Asset.pk.does_not_exist())
    if asset.fenced:
        transaction.put("fence", _fence_of(asset, int(asset.epoch)))
    transaction.put("team", _team_entry(asset))
    try:
        transaction.commit()
    except Cancelled:
        return False
    _remember(asset, _fence_of(asset, int(asset.epoch)))
    return True


def claim(asset: views.Asset, owner: str, stamp: str, fields: dict[str, Any]) -> views.Asset | None:
    """A client's write to a memory an import created and has not committed (``hidden_by``): the
    asset becomes the writer's, as if its write had created it (owner, times, the fields it gives),
    and shows from now on. The asset as it is then — None when the import's undo deleted it first;
    unchanged when this function may not write assets (formation: it only ever writes after a
    client's write, which claimed it)."""
    if not _may_migrate[0]:
        return asset
    actions = [Asset.hidden_by.remove(), Asset.owner.set(owner), Asset.created_at.set(stamp)]
    actions += [Asset.updated_at.set(stamp)] + [getattr(Asset, k).set(v) for k, v in fields.items() if v is not None]
    transaction = Transaction()
    transaction.update("asset", asset, actions, condition=Asset.hidden_by == str(asset.hidden_by))
    try:
        transaction.commit()
    except Cancelled:
        pass  # claimed, committed or dropped meanwhile: as it is now
    except ClientError as exc:
        if aws.error_code(exc) != "AccessDeniedException":
            raise
        _may_migrate[0] = False  # a function that may only read assets: never asked again
        return asset
    return get_pair(asset.team_id, asset.agent_id)


def fence_sk(team_id: str, agent_id: str) -> str:
    return FENCE_PREFIX + layout.pair(team_id, agent_id)


def _fence_of(asset: views.Asset, epoch: int) -> Fence:
    fence_ = Fence(asset.memory_id, fence_sk(asset.team_id, asset.agent_id), epoch=epoch)
    if asset.importing:
        fence_.importing = set(asset.importing)
    return fence_


def _agrees(asset: views.Asset, fence_: Any) -> bool:
    """Whether a fence as read holds the asset's epoch and running imports."""
    return (
        fence_ is not None
        and int(fence_.epoch) == int(asset.epoch)
        and set(fence_.importing or ()) == set(asset.importing or ())
    )


def _as_read(asset: views.Asset) -> Any:
    """The condition that the asset is fenced, or not, as ``asset`` says: a change of the epoch or
    of the running imports writes the fence too exactly when the asset has one."""
    return Asset.fenced.exists() if asset.fenced else Asset.fenced.does_not_exist()


def _remember(asset: views.Asset, fence_: Any) -> None:
    """Note whether the pair's asset has a fence that agrees with it, as just read together (see
    ``_fenced_pairs``)."""
    pair = (asset.team_id, asset.agent_id)
    with _fenced_lock:
        if not (asset.fenced and _agrees(asset, fence_)):
            _fenced_pairs.pop(pair, None)
            return
        if pair not in _fenced_pairs and len(_fenced_pairs) >= _FENCED_PAIRS_KEPT:
            _fenced_pairs.pop(next(iter(_fenced_pairs)), None)  # the oldest: checked on its asset now
        _fenced_pairs[pair] = None


def _fenced(team_id: str, agent_id: str) -> bool:
    with _fenced_lock:
        return (team_id, agent_id) in _fenced_pairs


def fence(asset: views.Asset) -> views.Asset:
    """Give an asset its fence when it has none (an asset of before) or when its fence disagrees
    with it (a release of before moved the asset alone), so its writes' epoch checks read a small
    item: the fence put (with the asset's epoch) and the asset marked, in one transaction, while the
    asset is as read and no import runs into it. The asset as it is then — unchanged when its fence
    is trusted already, an import runs, a racing change came first or this function may not write
    assets."""
    if not _may_migrate[0] or _fenced(asset.team_id, asset.agent_id):
        return asset
    if asset.importing or not asset.sk.startswith(PAIR_PREFIX):
        return asset
    unchanged = (Asset.epoch == int(asset.epoch)) & _as_read(asset) & Asset.importing.does_not_exist()
    transaction = Transaction()
    transaction.update("asset", asset, [Asset.fenced.set(True)], condition=unchanged)
    transaction.put("fence", _fence_of(asset, int(asset.epoch)))
    try:
        transaction.commit()
    except Cancelled:
        return asset
    except ClientError as exc:
        if aws.error_code(exc) != "AccessDeniedException":
            raise
        _may_migrate[0] = False  # a function that may only read assets: never asked again
        return asset
    fenced = replace(asset, fenced=True)
    _remember(fenced, _fence_of(fenced, int(asset.epoch)))
    return fenced


def _team_entry(asset: views.Asset) -> TeamEntry:
    return TeamEntry(TEAM_PREFIX + asset.team_id, asset.memory_id)


def update(
    asset: views.Asset, changes: dict[str, Any], updated_at: str, events: list[views.AuditEvent]
) -> views.Asset | None:
    """Change fields (None removes one) and record the events, in one transaction; the asset as
    stored afterwards, or None when it no longer exists."""
    actions = [Asset.updated_at.set(updated_at)]
    for name, value in changes.items():
        attribute = getattr(Asset, name)
        actions.append(attribute.remove() if value is None else attribute.set(value))
    transaction = Transaction()
    transaction.update("asset", asset, actions, condition=Asset.pk.exists())
    for event in events:
        transaction.put("audit", event)
    try:
        transaction.commit()
    except Cancelled:
        return None
    return get_pair(asset.team_id, asset.agent_id)


def of_team(team_id: str, after: str | None, limit: int) -> list[str]:
    """Memory ids of a team in order, from ``after`` on (inclusive; strongly consistent)."""
    condition = TeamEntry.sk >= after if after else None
    return [entry.sk for entry in TeamEntry.query(TEAM_PREFIX + team_id, condition, limit=limit, consistent_read=True)]


def of_pairs(pairs: list[tuple[str, str]]) -> dict[tuple[str, str], views.Asset]:
    """The assets of these pairs that exist, by pair (one Query per memory_id, at once)."""
    memory_ids = list(dict.fromkeys(memory_id_of(t, a) for t, a in pairs))
    wanted = set(pairs)
    found = parallel(*[lambda m=m: spelling(m) for m in memory_ids]) if memory_ids else []
    return {(a.team_id, a.agent_id): a for batch in found for a in batch if (a.team_id, a.agent_id) in wanted}


def _scan_filter() -> Any:
    return ((Asset.sk == LEGACY_SK) & Asset.moved_to.does_not_exist()) | Asset.sk.startswith(PAIR_PREFIX)


def scan_page(position: dict[str, Any] | None, limit: int) -> tuple[list[views.Asset], dict[str, Any] | None]:
    """One page of every asset from ``position``: (assets, next position or None). A legacy asset
    met here is moved to its pair's key (the scheduled cleanup's walk migrates what no request
    touched); the page holds it as moved."""
    result = Asset.scan(_scan_filter(), last_evaluated_key=position, limit=limit, consistent_read=True)
    page = [_current(a) if a.sk == LEGACY_SK else a for a in _views(result)]
    return [a for a in page if a is not None], result.last_evaluated_key


def position_after(asset: views.Asset) -> dict[str, Any]:
    """Where ``scan_page`` resumes to read the assets after this one (a scan's exclusive start key)."""
    return {"pk": {"S": asset.pk}, "sk": {"S": asset.sk}}


def _current(legacy: views.Asset) -> views.Asset | None:
    if not _may_migrate[0]:
        return legacy
    migrate(legacy)
    return legacy if not _may_migrate[0] else get_pair(legacy.team_id, legacy.agent_id)


def everything() -> Iterator[views.Asset]:
    """Every asset (a scan; legacy items as they are stored)."""
    return (_view(asset) for asset in Asset.scan(_scan_filter(), consistent_read=True))


def guard_epoch(
    transaction: Transaction, team_id: str, agent_id: str, epoch: int, *, running: str | None = None
) -> None:
    """Make ``transaction`` fail (as 'epoch') if a clear moved the pair's memory to another content
    epoch since ``epoch`` was read: a write never lands in content that is already cleared.
    ``running``: and unless that import still runs into it."""
    memory_id = memory_id_of(team_id, agent_id)
    if get_settings().epoch_checks == "Fence" and _fenced(team_id, agent_id):
        condition = Fence.epoch == int(epoch)
        if running is not None:
            condition = condition & Fence.importing.contains(running)
        transaction.check("epoch", Fence, memory_id, fence_sk(team_id, agent_id), condition=condition)
        return
    condition = Asset.epoch == int(epoch)
    if running is not None:
        condition = condition & Asset.importing.contains(running)
    transaction.check("epoch", Asset, memory_id, pair_sk(team_id, agent_id), condition=condition)


def retire_epoch(
    asset: views.Asset,
    *,
    new_epoch: int | None,
    stamp: str,
    purge_record: PurgeRecord,
    events: list[views.AuditEvent],
    hidden_by: str | None = None,
) -> None:
    """Move the asset to ``new_epoch`` (or delete it and its team listing, with None), note the
    old epoch for purging and record the events — one transaction, the instant a clear (or a
    memory delete) takes effect. Cancelled ('asset') if the epoch moved since it was read, or,
    with ``hidden_by``, if that import's mark left it (a client's write claimed it)."""
    transaction = Transaction()
    still = (Asset.epoch == int(asset.epoch)) & _as_read(asset)
    if hidden_by is not None:
        still = still & (Asset.hidden_by == hidden_by)
    fence_ = _fence_of(asset, int(asset.epoch))
    if new_epoch is None:
        transaction.delete("asset", asset, condition=still)
        transaction.delete("team", _team_entry(asset))
        if asset.fenced:
            transaction.delete("fence", fence_)
    else:
        transaction.update(
            "asset",
            asset,
            [Asset.epoch.set(new_epoch), Asset.last_cleared_at.set(stamp), Asset.updated_at.set(stamp)],
            condition=still,
        )
        if asset.fenced:
            transaction.update("fence", fence_, [Fence.epoch.set(new_epoch)])
    transaction.put("purge", purge_record)
    for event in events:
        transaction.put("audit", event)
    transaction.commit()


def record_in_epoch(team_id: str, agent_id: str, epoch: int, events: list[views.AuditEvent]) -> None:
    """Record audit events only while the pair's memory is still at ``epoch`` (Cancelled 'epoch'
    else): the commit of a change whose data lives outside DynamoDB (the persona)."""
    transaction = Transaction()
    guard_epoch(transaction, team_id, agent_id, epoch)
    for event in events:
        transaction.put("audit", event)
    transaction.commit()


MAX_RUNNING_IMPORTS = 20  # per memory: reads filter on their ids (a filter holds at most 100 values)


def begin_import(asset: views.Asset, import_id: str, epoch: int) -> bool:
    """Note ``import_id`` among the imports running into the memory, at ``epoch``: from now on
    reads leave out what it writes. False when the epoch moved or too many imports run. (An asset
    that got its fence since it was read is read again: its fence must name the import too.)"""
    for _ in range(3):
        running = Asset.importing.does_not_exist() | (size(Asset.importing) < MAX_RUNNING_IMPORTS)  # type: ignore[no-untyped-call]
        transaction = Transaction()
        transaction.update(
            "asset",
            asset,
            [Asset.importing.add({import_id})],
            condition=(Asset.epoch == int(epoch)) & running & _as_read(asset),
        )
        if asset.fenced:
            transaction.update("fence", _fence_of(asset, int(epoch)), [Fence.importing.add({import_id})])
        try:
            transaction.commit()
            return True
        except Cancelled:
            fresh = get_pair(asset.team_id, asset.agent_id)
            if fresh is None or bool(fresh.fenced) == bool(asset.fenced):
                return False  # the epoch moved or too many imports run: the fence was not why
            asset = fresh
    return False


def commit_import(
    asset: views.Asset, job: views.Job, result: dict[str, Any], events: list[views.AuditEvent]
) -> views.Job:
    """The one write that makes an import visible: its id (the job's) leaves the running set (only
    if it is there: an undo may have taken it out), its job is ``done`` with ``result`` and its
    audit event is recorded, together; the job's view as it is then. Cancelled: 'asset' when the
    id is not running any more."""
    updated = now_ms()
    actions = [Job.state.set("done"), Job.updated_at.set(updated), Job.result.set(result)]
    transaction = Transaction()
    condition = Asset.importing.contains(job.sk) & _as_read(asset)
    shown = [Asset.importing.delete({job.sk}), Asset.hidden_by.remove()]  # an asset it created shows now
    transaction.update("asset", asset, shown, condition=condition)
    if asset.fenced:
        transaction.update("fence", _fence_of(asset, int(asset.epoch)), [Fence.importing.delete({job.sk})])
    transaction.update("job", job, actions)
    for event in events:
        transaction.put("audit", event)
    transaction.commit()
    return replace(job, state="done", updated_at=updated, result=result)


def end_import(team_id: str, agent_id: str, import_id: str) -> None:
    """An undone import leaves the running set (after what it wrote is gone), the asset's and its
    fence's together; nothing when the asset or the id is not there."""
    for _ in attempts("asset"):
        asset = get_pair(team_id, agent_id)
        if asset is None or import_id not in (asset.importing or ()):
            return
        transaction = Transaction()
        condition = Asset.importing.contains(import_id) & _as_read(asset)
        transaction.update("asset", asset, [Asset.importing.delete({import_id})], condition=condition)
        if asset.fenced:
            transaction.update("fence", _fence_of(asset, int(asset.epoch)), [Fence.importing.delete({import_id})])
        try:
            transaction.commit()
            return
        except Cancelled:
            continue  # the asset changed since it was read: read it again


def _view(asset: Asset) -> views.Asset:
    return snapshot(views.Asset, asset)


def _views(assets: Iterable[Asset]) -> list[views.Asset]:
    return [_view(asset) for asset in assets]
