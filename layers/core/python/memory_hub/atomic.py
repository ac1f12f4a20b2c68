"""L1 atomic records (§8): natural-key dedup on add, surgical update and delete by id.

Every record has a guard item ``nk␟<sha256(task, type, background, content)>`` in its partition
that names the record holding that natural key. Creating a record puts the guard under the
condition that it does not exist, in the same transaction as the record and its counter, so two
racing adds of one natural key make exactly one record and the loser reinforces it.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from pynamodb.exceptions import TransactWriteError

from . import assets, audit, items, search
from .audit import Event
from .clock import now_ms, ordered_id
from .dal.aws import gather
from .dal.models import Item
from .edge import Isolation, current
from .errors import BadRequest, Conflict, NotFound, Unavailable

NOT_FOUND = "id: no such record"


def as_dict(scope: Isolation, item: Item) -> dict[str, Any]:
    return {"id": item.id, "type": item.type, "content": item.content, "background": item.background or "",
            "tags": list(item.tags or []), "metadata": item.meta or {}, "version": int(item.version),
            "reinforced_count": int(item.reinforced_count), "team_id": scope.team_id,
            "agent_id": scope.agent_id, "user_id": item.user_id, "task_id": item.task_id,
            "session_id": item.session_id, "created_at": items.iso(item.created_at),
            "updated_at": items.iso(item.updated_at)}


def _pk(scope: Isolation, epoch: int) -> str:
    return items.l1_pk(scope.team_id, scope.agent_id, epoch, scope.user_id)


def _guard(pk: str, key: str, atom_id: str) -> Item:
    return Item(pk, items.nk_sk(key), atom_id=atom_id)


def add(scope: Isolation, content: str, type_: str, background: str, tags: list[str],
        metadata: dict[str, Any]) -> dict[str, Any]:
    ctx = current()
    raw_asset = assets.get(scope.memory_id)
    principal = ctx.check_access()
    asset, _ = assets.ensure(raw_asset, scope.team_id, scope.agent_id, owner=principal.key_id)
    epoch = int(asset.epoch)
    pk = _pk(scope, epoch)
    key = items.natural_key(scope.task_id, type_, background, content)
    counters = items.counter_pk(scope.team_id, scope.agent_id, epoch)
    for _ in range(20):
        now = now_ms()
        atom_id = ordered_id("atom-")
        record = Item(pk, atom_id, id=atom_id, lsi1=items.time_key(now, atom_id), user_id=scope.user_id,
                      session_id=scope.session_id, task_id=scope.task_id, content=content, type=type_,
                      background=background, tags=tags, meta=metadata, version=1, reinforced_count=1,
                      created_at=now, updated_at=now, natural_key=key)

        def build(transaction: Any, record: Item = record) -> None:
            items.epoch_guard(transaction, scope.memory_id, epoch)
            transaction.save(_guard(pk, key, record.id), condition=Item.sk.does_not_exist())
            transaction.save(record)
            items.counter_delta(transaction, counters, {items.counter_sk("L1", scope.user_id): 1})

        try:
            items.transact(build)
            return {"id": atom_id, "version": 1, "created": True, "reinforced_count": 1}
        except TransactWriteError as exc:
            failed = items.failed_conditions(exc)
            if 0 in failed:  # a clear moved the memory on: add into the new epoch
                return add(scope, content, type_, background, tags, metadata)
            if 1 not in failed:
                raise
        reinforced = _reinforce(pk, key)
        if reinforced is not None:
            return {"id": reinforced.id, "version": int(reinforced.version), "created": False,
                    "reinforced_count": int(reinforced.reinforced_count)}
    raise Unavailable("atomic/add: the record changed too often, try again")


def _reinforce(pk: str, key: str) -> Item | None:
    """Add 1 to the holder of ``key`` and move its updated_at; None if it vanished meanwhile."""
    from pynamodb.exceptions import DoesNotExist, UpdateError

    try:
        guard = Item.get(pk, items.nk_sk(key), consistent_read=True)
        record = Item.get(pk, guard.atom_id, consistent_read=True)
    except DoesNotExist:
        return None
    now = now_ms()
    try:
        record.update(actions=[Item.reinforced_count.add(1), Item.updated_at.set(now),
                               Item.lsi1.set(items.time_key(now, record.id))],
                      condition=Item.natural_key == key)
    except UpdateError as exc:
        if exc.cause_response_code == "ConditionalCheckFailedException":
            return None
        raise
    return record


def _in_task(scope: Isolation, record: Item) -> bool:
    """A task_id in the request narrows the scope (§3): another task's record is out of scope."""
    return scope.task_id is None or record.task_id == scope.task_id


def _get(scope: Isolation, pk: str, atom_id: str) -> Item | None:
    from pynamodb.exceptions import DoesNotExist

    if not atom_id.startswith("atom-"):
        return None
    try:
        record = Item.get(pk, atom_id, consistent_read=True)
    except DoesNotExist:
        return None
    return record if _in_task(scope, record) else None


def update(scope: Isolation, atom_id: str, changes: dict[str, Any], expected_version: int | None) -> dict:
    ctx = current()
    raw_asset = assets.get(scope.memory_id)
    asset = assets.owned_by(raw_asset, scope.team_id, scope.agent_id)
    principal = ctx.check_access()
    if raw_asset is not None and asset is None:
        raise Conflict(assets.COLLISION)  # another pair spells this memory_id: update is a write (§4)
    if asset is None:
        raise NotFound(NOT_FOUND)
    pk = _pk(scope, int(asset.epoch))
    for _ in range(20):
        record = _get(scope, pk, atom_id)
        if record is None:
            raise NotFound(NOT_FOUND)
        version = int(record.version)
        if expected_version is not None and expected_version != version:
            raise Conflict(f"expected_version: {expected_version} but the record is at {version}",
                           {"current_version": version})
        content = changes.get("content", record.content)
        background = changes.get("background", record.background or "")
        new_key = items.natural_key(record.task_id, record.type, background, content)
        now = now_ms()
        actions = [Item.version.set(version + 1), Item.updated_at.set(now), Item.content.set(content),
                   Item.background.set(background), Item.natural_key.set(new_key),
                   Item.lsi1.set(items.time_key(now, atom_id))]
        if "tags" in changes:
            actions.append(Item.tags.set(changes["tags"]))
        if "metadata" in changes:
            actions.append(Item.meta.set(changes["metadata"]))

        event = audit.build([Event("atomic_update", "L1", atom_id, 1)], memory_id=scope.memory_id,
                            team_id=scope.team_id, actor=principal.key_id, request_id=ctx.request_id)[0]

        def build(transaction: Any, record: Item = record, event: Any = event) -> None:
            items.epoch_guard(transaction, scope.memory_id, int(asset.epoch))
            transaction.update(record, actions=actions, condition=Item.version == version)
            if new_key != record.natural_key:
                transaction.save(_guard(pk, new_key, atom_id), condition=Item.sk.does_not_exist())
                transaction.delete(_guard(pk, record.natural_key, atom_id), condition=Item.atom_id == atom_id)
            transaction.save(event)  # the audit event commits with the change (one round trip less)

        try:
            items.transact(build)
            break
        except TransactWriteError as exc:
            failed = items.failed_conditions(exc)
            if 0 in failed:  # cleared meanwhile: the record is gone
                raise NotFound(NOT_FOUND) from None
            if 2 in failed:
                raise Conflict("content: another record already has this content, type and background") from None
            if not failed:
                raise
            # the record changed (or vanished) between our read and write: read again
    else:
        raise Unavailable("atomic/update: the record changed too often, try again")
    return {"id": atom_id, "version": f"v{version + 1}", "updated_at": items.iso(now)}


def _records(scope: Isolation, epoch: int, type_: str | None, start: int | None, end: int | None,
             limit: int | None) -> Any:
    conditions = []
    if type_ is not None:
        conditions.append(Item.type == type_)
    if scope.task_id is not None:
        conditions.append(Item.task_id == scope.task_id)
    filter_condition = None
    for condition in conditions:
        filter_condition = condition if filter_condition is None else filter_condition & condition
    return Item.by_time.query(_pk(scope, epoch),
                              Item.lsi1.between(items.time_bound(start, False), items.time_bound(end, True)),
                              filter_condition=filter_condition, scan_index_forward=False, consistent_read=True,
                              limit=limit)


def _total(scope: Isolation, epoch: int, type_: str | None, start: int | None, end: int | None) -> int:
    if type_ is None and start is None and end is None and scope.task_id is None:
        sk = items.counter_sk("L1", scope.user_id)
        return items.counter_values(items.counter_pk(scope.team_id, scope.agent_id, epoch), [sk])[sk]
    return sum(1 for _ in _records(scope, epoch, type_, start, end, None))


def query(scope: Isolation, type_: str | None, limit: int, offset: int, time_start: str | None,
          time_end: str | None) -> dict:
    start, end = items.time_range(time_start, time_end)
    asset = assets.for_scope(scope)
    current().check_access()
    if asset is None:
        return {"items": [], "total": 0}
    epoch = int(asset.epoch)
    page, total = gather(lambda: list(_records(scope, epoch, type_, start, end, offset + limit)),
                         lambda: _total(scope, epoch, type_, start, end))
    return {"items": [as_dict(scope, r) for r in page[offset : offset + limit]], "total": total}


def count(scope: Isolation, type_: str | None, time_start: str | None, time_end: str | None) -> dict:
    start, end = items.time_range(time_start, time_end)
    asset = assets.for_scope(scope)
    current().check_access()
    if asset is None:
        return {"total": 0}
    return {"total": _total(scope, int(asset.epoch), type_, start, end)}


def search_records(scope: Isolation, text: str, type_: str | None, limit: int) -> dict:
    asset = assets.for_scope(scope)
    current().check_access()
    if asset is None:
        return {"items": []}
    docs = [(r, f"{r.content}\n{r.background or ''}") for r in
            _records(scope, int(asset.epoch), type_, None, None, None)]
    return {"items": [dict(as_dict(scope, r), score=score) for r, score in search.rank(text, docs, limit)]}


def delete(scope: Isolation, ids: list[str], expected_versions: dict[str, int] | None,
           actor: str | None = None) -> dict[str, Any]:
    from .conversation import clean_ids

    ctx = current()
    wanted = clean_ids(ids)
    if not wanted:
        raise BadRequest("ids: give at least one non-blank id")
    expected = {k.strip(): v for k, v in (expected_versions or {}).items()}
    stray = [k for k in expected if k not in wanted]
    if stray:
        raise BadRequest("expected_versions: keys must be in ids (" + ", ".join(stray[:5]) + ")")
    asset = assets.for_scope(scope)
    principal = ctx.check_access()
    if asset is None:
        return {"deleted_count": 0, "deleted_ids": [], "not_found_ids": wanted, "audit_ids": []}
    epoch = int(asset.epoch)
    pk = _pk(scope, epoch)
    found = items.batch_get([(pk, i) for i in wanted if i.startswith("atom-") and items.could_be_id(i)])
    records = {sk: r for (_, sk), r in found.items() if _in_task(scope, r)}
    conflicts = [{"id": i, "expected": expected[i], "actual": int(records[i].version)}
                 for i in wanted if i in expected and i in records and int(records[i].version) != expected[i]]
    if conflicts:
        raise Conflict("expected_versions: some records have another version; nothing was deleted",
                       {"conflicts": conflicts})
    removed = erase(scope.team_id, scope.agent_id, epoch, [records[i] for i in wanted if i in records],
                    check_version=set(expected))
    deleted = [i for i in wanted if i in removed]
    audit_ids = audit.record([Event("delete", "L1", i, 1) for i in deleted], memory_id=scope.memory_id,
                             team_id=scope.team_id, actor=actor or principal.key_id,
                             request_id=ctx.request_id) if deleted else []
    return {"deleted_count": len(deleted), "deleted_ids": deleted,
            "not_found_ids": [i for i in wanted if i not in removed], "audit_ids": audit_ids}


def erase(team_id: str, agent_id: str, epoch: int, doomed: list[Item], check_version: set[str] = frozenset(),
          skip_conflicts: bool = False) -> set[str]:
    """Delete records with their guards and counters; returns the ids removed.

    A record listed in ``check_version`` is deleted only at the version read; one edited
    meanwhile raises 409 (the person confirmed another text), or is left alone with
    ``skip_conflicts``."""
    counters = items.counter_pk(team_id, agent_id, epoch)
    removed: set[str] = set()
    pending = list(doomed)
    per_tx = (items.TRANSACTION_MAX - 8) // 2
    while pending:
        part = pending[:per_tx]
        users = Counter(items.counter_sk("L1", record.user_id) for record in part)

        def build(transaction: Any, part: list[Item] = part, users: Counter[str] = users) -> None:
            for record in part:
                condition = Item.pk.exists()
                if record.id in check_version:
                    condition = condition & (Item.version == int(record.version))
                transaction.delete(record, condition=condition)
                transaction.delete(_guard(record.pk, record.natural_key, record.id),
                                   condition=Item.atom_id == record.id)
            items.counter_delta(transaction, counters, {sk: -n for sk, n in users.items()})

        try:
            items.transact(build)
        except TransactWriteError as exc:
            failed = items.failed_conditions(exc)
            if not failed:
                raise
            refreshed = items.batch_get([(r.pk, r.sk) for r in part])
            conflicts = []
            for record in part:
                now = refreshed.get((record.pk, record.sk))
                if record.id in check_version and now is not None and int(now.version) != int(record.version):
                    conflicts.append({"id": record.id, "expected": int(record.version), "actual": int(now.version)})
            if conflicts and skip_conflicts:
                skipped = {c["id"] for c in conflicts}
                refreshed = {k: v for k, v in refreshed.items() if v.id not in skipped}
            elif conflicts:
                raise Conflict("expected_versions: a record was edited meanwhile; it was not deleted",
                               {"conflicts": conflicts}) from None
            pending = [refreshed[(r.pk, r.sk)] for r in part if (r.pk, r.sk) in refreshed] + pending[len(part):]
            continue
        removed.update(r.id for r in part)
        pending = pending[len(part):]
    return removed
