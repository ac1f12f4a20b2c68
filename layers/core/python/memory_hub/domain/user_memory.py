"""User-memory delete: erase one end user's L0/L1 in a memory, or exactly one item of theirs.

L2 and L3 belong to the agent and stay. Deletion goes by id only: there is no delete by content."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..clock import ISSUED_ID
from ..observability import logger
from ..storage import audit as stored_audit
from ..storage import citations, counters, messages, postings, records
from ..storage.audit import EventContext, NewEvent, event_items
from ..storage.concurrency import Deadline, parallel
from ..storage.counters import Where
from ..storage.errors import Unfinished
from ..storage.views import Asset, AuditEvent
from . import assets, erasure, formed, reindex, vector_erasure
from .audit import user_target
from .principal import Principal
from .results_admin import UserItemDeleted, UserMemoryDeleted, UserMemoryErased

ACTION = "user_memory_delete"
Recorded = Callable[[list[Any]], list[AuditEvent]]
Erase = Callable[..., tuple[list[Any], list[AuditEvent]]]  # storage's delete_unindexed of a layer


def delete(
    principal: Principal, name: assets.Named, user_id: str, content_id: str | None, request_id: str
) -> UserMemoryDeleted:
    asset = assets.resolve(principal, name)
    memory_id = asset.memory_id
    where = Where.of(asset)
    target = user_target(user_id)
    context = EventContext(asset.team_id, principal.key_id, request_id, asset.agent_id, memory_id)

    def events(layer: str) -> Callable[[list[Any]], list[AuditEvent]]:
        # one event per transaction, with what that transaction deleted
        return lambda chunk: event_items([NewEvent(ACTION, layer, target, len(chunk))], context)

    if content_id is None:
        found_l0, found_l1 = parallel(lambda: messages.of_user(where, user_id), lambda: records.of_user(where, user_id))
        # The index entries go first, read as the user's two partitions whole: an erasure cut short
        # (a timeout) leaves items, which a retry finds and erases with what is left of them, never
        # index entries of items already gone (nothing would find them again).
        versions = {r.id: int(r.version) for r in found_l1}
        until = erasure.budget()  # past it: 503, and a retry goes on from what is left
        postings.erase_in(
            [where.item_pk(messages.LAYER, user_id), where.item_pk(records.LAYER, user_id)],
            {item.id for item in found_l0 + found_l1},
            until,
        )
        # L0 and L1 are apart (their items and counters): erased side by side; then, side by side
        # too, the audit of a layer that had nothing, the user's counters and re-index marks, and
        # the vectors and exports.
        (removed_l0, events_l0), (removed_l1, events_l1) = _erase_layers(
            asset, where, user_id, (found_l0, events("L0")), (found_l1, events("L1")), until
        )
        # a record updated meanwhile was indexed again: those postings go too; and any term count left
        postings.erase_of([r for r in removed_l1 if int(r.version) != versions.get(r.id)])
        postings.drop_counts([where.item_pk(messages.LAYER, user_id), where.item_pk(records.LAYER, user_id)])
        empty, (files, file_events), _, _, _, _, exports = parallel(
            lambda: _nothing_deleted(removed_l0, removed_l1, target, context),
            lambda: formed.drop_user(asset, where, user_id, context),
            lambda: citations.drop_user(where, user_id),
            lambda: vector_erasure.drop_waiting(where, user_id),  # whatever waits in their partitions
            lambda: counters.forget_user(where, user_id),
            lambda: reindex.forget(where, user_id),
            lambda: erasure.forget_erased(asset, where, [*removed_l0, *removed_l1]),
        )
        late = _written_meanwhile(asset, where, user_id, removed_l0, context)
        recorded = events_l0 + events_l1 + empty + file_events + late.events
        return UserMemoryErased(
            memory_id=memory_id,
            user_id=user_id,
            l0_deleted=len(removed_l0),
            l1_deleted=len(removed_l1) + len(late.records),
            files_deleted=files + exports + late.files_deleted,
            audit_ids=[e.event_id for e in recorded],
        )
    removed: list[Any] = []
    recorded = []
    followed = erasure.Cascade()
    forget = erasure.Forgetting(asset, where)

    if ISSUED_ID.fullmatch(content_id) and content_id.startswith("msg-"):
        found_messages = messages.get_many(where, user_id, [content_id])
        removed, recorded, followed = erasure.erase_messages(
            asset, where, user_id, list(found_messages.values()), events("L0"), context, beside=forget
        )
    elif ISSUED_ID.fullmatch(content_id):
        found_records = records.get_many(where, user_id, [content_id])
        removed, recorded = records.delete(where, list(found_records.values()), events("L1"), beside=forget)
        followed = erasure.files_of_records(asset, where, removed, context)
    return UserItemDeleted(
        memory_id=memory_id,
        user_id=user_id,
        deleted_count=len(removed),
        deleted_ids=[item.id for item in removed],
        not_found_ids=[] if removed else [content_id],
        records_deleted=len(followed.records),
        files_deleted=followed.files_deleted + forget.exports,
        audit_ids=[e.event_id for e in recorded + followed.events],
    )


def _erase_layers(
    asset: Asset,
    where: Where,
    user_id: str,
    l0: tuple[list[Any], Recorded],
    l1: tuple[list[Any], Recorded],
    until: Deadline,
) -> tuple[tuple[list[Any], list[AuditEvent]], tuple[list[Any], list[AuditEvent]]]:
    """A user's messages and records deleted side by side (their postings already gone). Cut by the
    time budget — or failing in one layer after the other removed items — what either removed takes
    its vectors (and the partitions' waiting ones) along before the error: a retry lists the user's
    items again and no longer sees those, so nothing else would erase their vectors."""
    gone: list[Any] = []

    def layer(delete: Erase, found: list[Any], recorded: Recorded) -> tuple[list[Any], list[AuditEvent]]:
        try:
            removed, written = delete(where, found, recorded, until=until)
        except Unfinished as cut:
            gone.extend(cut.removed)
            raise
        gone.extend(removed)
        return removed, written

    try:
        of_l0, of_l1 = parallel(
            lambda: layer(messages.delete_unindexed, *l0),
            lambda: layer(records.delete_unindexed, *l1),
        )
        return of_l0, of_l1
    except Exception:  # cut by the budget (503), or a layer failed after the other removed items
        try:
            parallel(
                lambda: vector_erasure.drop_waiting(where, user_id), lambda: erasure.forget_erased(asset, where, gone)
            )
        except Exception:
            logger.exception("the vectors of a cut user erasure were not erased; the cleanup's sweep is left")
        raise


def _written_meanwhile(
    asset: Asset, where: Where, user_id: str, erased: list[Any], context: EventContext
) -> erasure.Cascade:
    """A record written while this erasure ran, citing a message it erased, goes too: it was not
    among the records read at the start, and its own look at its sources (after its write) may have
    come before the messages went. Read once the messages are gone, so a record written later
    finds its sources gone itself."""
    erased_ids = {m.id for m in erased}
    if not erased_ids:
        return erasure.Cascade()
    stragglers = [
        r for r in records.of_user(where, user_id) if erased_ids & (set(r.sources or ()) | set(r.cited or ()))
    ]
    return erasure.erase_records(asset, where, stragglers, context)


def _nothing_deleted(
    removed_l0: list[Any], removed_l1: list[Any], target: str, context: EventContext
) -> list[AuditEvent]:
    """A layer with nothing to erase still leaves its (zero-count) event: the act is audited."""
    empty = [
        NewEvent(ACTION, layer, target, 0) for layer, removed in (("L0", removed_l0), ("L1", removed_l1)) if not removed
    ]
    items = event_items(empty, context)
    stored_audit.put(items)
    return items
