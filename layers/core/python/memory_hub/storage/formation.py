"""Formation's state in ItemsTable: which messages wait to be formed, each user's run state, a run's
stored answer, the runs done, and the lineage of formed files (layout in ``layout``).

Everything of a user lives in their own partitions of the memory epoch, so a clear drops it with
the epoch and a user's erasure with the user. Writes to the user's state are conditional on the
run's lease (or, for the first write, fenced by the asset's epoch): a run a clear overtook writes
nothing."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pynamodb.exceptions import DoesNotExist, PutError, UpdateError

from ..clock import now_ms
from . import assets, bucket, layout, views
from .concurrency import for_each, in_batches
from .counters import Where
from .errors import Cancelled
from .models import FormationState, FormedFile, FormedRun, ItemKey, PendingRun, Unformed, own, snapshot
from .transactions import MAX_ACTIONS, Transaction

L0, L1 = "L0", "L1"
WRITE_CHUNK = 100


def _l0(where: Where, user_id: str) -> str:
    return where.item_pk(L0, user_id)


def _l1(where: Where, user_id: str) -> str:
    return where.item_pk(L1, user_id)


def _batch_write(rows: list[Any], *, delete: bool) -> None:
    """Put (or delete) items of ItemsTable, 25 a request (PynamoDB retries what is unprocessed)."""

    def one(chunk: list[Any]) -> None:
        with ItemKey.batch_write() as batch:
            for row in chunk:
                if delete:
                    batch.delete(ItemKey(row.pk, row.sk))
                else:
                    batch.save(ItemKey(row.pk, row.sk))  # every such row is keys only

    for_each(one, in_batches(rows, WRITE_CHUNK))


def _conditional_failed(exc: PutError | UpdateError) -> bool:
    return exc.cause_response_code == "ConditionalCheckFailedException"


# ---------------------------------------------------------------- unformed messages


def unformed_rows(
    where: Where, user_id: str, session_id: str, task_id: str | None, message_ids: Iterable[str]
) -> list[views.Unformed]:
    pk = _l0(where, user_id)
    return [views.Unformed(pk, layout.unformed_sk(session_id, task_id, m)) for m in message_ids]


def mark(rows: list[views.Unformed]) -> None:
    """Note messages as waiting to be formed (written before the messages, like their postings)."""
    _batch_write(rows, delete=False)


def unmark(rows: list[Any]) -> None:
    _batch_write(rows, delete=True)


SPAN_READ = 25  # a batch's span of marks is read up to two an erased message and this many more (then by key)


def unmark_messages(where: Where, user_id: str, messages: Iterable[Any]) -> None:
    """Forget that these messages (each with ``id``, ``session_id``, ``task_id``) wait: the marks
    read first, then only those there deleted — a delete of an item that is not there is billed a
    write unit all the same, and most erased messages have none (formation off, or their batch
    formed). Each batch's marks are read between its first and last erased id (one ``Query``: a
    read unit holds ~25 marks), at most ``2n + SPAN_READ`` of them for n erased ids: past that
    (erased ids far apart in a long backlog), the rest are read by key (a read unit each). A mark
    is written before its message, or by a run's backfill for a message it read, which reads its
    messages back after and drops the marks of those gone."""
    pk = _l0(where, user_id)
    batches: dict[str, set[str]] = {}
    for m in messages:
        if m.session_id is not None:
            batches.setdefault(layout.unformed_prefix(m.session_id, m.task_id), set()).add(m.id)
    found = for_each(lambda batch: _marks_of(pk, *batch), list(batches.items()))
    unmark([row for rows in found for row in rows])


def _marks_of(pk: str, prefix: str, ids: set[str]) -> list[Unformed]:
    """The marks there of these messages of one batch (``prefix``)."""
    ordered = sorted(ids)
    budget = 2 * len(ordered) + SPAN_READ
    span = ItemKey.sk.between(prefix + ordered[0], prefix + ordered[-1])
    rows = list(ItemKey.query(pk, span, consistent_read=True, attributes_to_get=["pk", "sk"], limit=budget))
    there = [Unformed(pk, row.sk) for row in rows if row.sk[len(prefix) :] in ids]
    if len(rows) < budget:
        return there  # the whole span was read
    rest = [(pk, prefix + i) for i in ordered if prefix + i > rows[-1].sk]
    return there + [Unformed(pk, row.sk) for row in ItemKey.batch_get(rest, consistent_read=True)]


def _keys(pk: str, prefix: str, limit: int | None = None) -> list[str]:
    rows = ItemKey.query(
        pk, ItemKey.sk.startswith(prefix), consistent_read=True, limit=limit, attributes_to_get=["pk", "sk"]
    )
    return [row.sk for row in rows]


def waiting(where: Where, user_id: str, session_id: str, task_id: str | None, limit: int | None) -> list[str]:
    """Ids of a batch's unformed messages, oldest first (ids are time-ordered)."""
    prefix = layout.unformed_prefix(session_id, task_id)
    return [sk[len(prefix) :] for sk in _keys(_l0(where, user_id), prefix, limit)]


def waiting_all(where: Where, user_id: str, session_id: str | None = None) -> dict[tuple[str, str], list[str]]:
    """Every unformed message of a user (or of one session), by batch: (session digest, task
    digest or ``-``) → message ids, oldest first."""
    found: dict[tuple[str, str], list[str]] = {}
    prefix = layout.unformed_prefix(session_id, any_task=True) if session_id is not None else layout.unformed_prefix()
    for sk in _keys(_l0(where, user_id), prefix):
        _, session, task, message_id = sk.split(layout.SEP)
        found.setdefault((session, task), []).append(message_id)
    return found


def unmark_waiting(where: Where, user_id: str, marks: Iterable[tuple[tuple[str, str], str]]) -> None:
    """Delete marks as ``waiting_all`` names them: ((session digest, task digest), message id)."""
    pk = _l0(where, user_id)
    unmark([Unformed(pk, layout.unformed_batch_sk(batch, i)) for batch, i in marks])


def newest_waiting(where: Where, user_id: str, session_id: str, task_id: str | None) -> str | None:
    """The newest unformed message of a batch (its id tells when it was added)."""
    prefix = layout.unformed_prefix(session_id, task_id)
    rows = ItemKey.query(
        _l0(where, user_id),
        ItemKey.sk.startswith(prefix),
        consistent_read=True,
        scan_index_forward=False,
        limit=1,
        attributes_to_get=["pk", "sk"],
    )
    for row in rows:
        return str(row.sk)[len(prefix) :]
    return None


def count_waiting(where: Where, user_id: str, session_id: str | None = None) -> int:
    prefix = layout.unformed_prefix(session_id, any_task=True) if session_id is not None else layout.unformed_prefix()
    return int(ItemKey.count(_l0(where, user_id), ItemKey.sk.startswith(prefix), consistent_read=True))


# ---------------------------------------------------------------- the user's state


def state(where: Where, user_id: str) -> views.FormationState | None:
    try:
        found = FormationState.get(_l0(where, user_id), layout.FORMATION_STATE, consistent_read=True)
    except DoesNotExist:
        return None
    return snapshot(views.FormationState, found)


def _ensure_state(where: Where, user_id: str) -> None:
    """The user's state item, created (fenced by the epoch) when it is not there yet."""
    transaction = Transaction()
    assets.guard_epoch(transaction, where.team_id, where.agent_id, where.epoch)
    transaction.put(
        "state",
        FormationState(_l0(where, user_id), layout.FORMATION_STATE),
        condition=FormationState.sk.does_not_exist(),
    )
    try:
        transaction.commit()
    except Cancelled as exc:
        if "epoch" in exc.failed:
            raise


def acquire(where: Where, user_id: str, owner: str, now: int, until: int) -> views.FormationState | None:
    """Take the user's lease until ``until`` (runs of one user never overlap): the state as taken,
    or None when another run holds it. Cancelled('epoch') when the memory was cleared."""
    _ensure_state(where, user_id)
    item = FormationState(_l0(where, user_id), layout.FORMATION_STATE)
    free = FormationState.lease_until.does_not_exist() | (FormationState.lease_until < now)
    try:
        item.update(
            [FormationState.lease_owner.set(owner), FormationState.lease_until.set(until)],
            condition=FormationState.sk.exists() & free,
        )
    except UpdateError as exc:
        if _conditional_failed(exc):
            return None
        raise
    return state(where, user_id)


def held(owner: str) -> Any:
    return FormationState.lease_owner == owner


def change(where: Where, user_id: str, actions: list[Any], owner: str | None = None) -> bool:
    """Change the user's state — only while ``owner`` holds the lease when given, else only while
    it exists (a clear or a user's erasure removed it: nothing is written back). False when the
    condition failed."""
    item = FormationState(_l0(where, user_id), layout.FORMATION_STATE)
    condition = FormationState.sk.exists() if owner is None else FormationState.sk.exists() & held(owner)
    try:
        item.update(actions, condition=condition)
    except UpdateError as exc:
        if _conditional_failed(exc):
            return False
        raise
    return True


def change_or_create(where: Where, user_id: str, actions: list[Any]) -> None:
    """Change the user's state, creating it first when needed (fenced by the epoch)."""
    if not change(where, user_id, actions):
        _ensure_state(where, user_id)
        change(where, user_id, actions)


def queue(where: Where, user_id: str, now: int) -> None:
    """A run is asked for: the user's state says so (created when needed), and a pause or the
    failures before it are forgotten."""
    actions = [
        FormationState.state.set("queued"),
        FormationState.queued_at.set(now),
        FormationState.paused.remove(),
        FormationState.failures.remove(),
    ]
    change_or_create(where, user_id, actions)


def run_over(where: Where, user_id: str, owner: str) -> bool:
    """The run ``owner`` holds has done what was asked: nothing is queued any more."""
    return change(where, user_id, [FormationState.state.remove(), FormationState.queued_at.remove()], owner)


def formed(where: Where, user_id: str, owner: str, now: int, newest: str, dropped: int) -> bool:
    """A batch is formed: the newest message formed and the time noted, failures forgotten, and the
    model's entries refused (``dropped``) added to the count."""
    actions: list[Any] = [
        FormationState.last_run_at.set(now),
        FormationState.last_formed.set(newest),
        FormationState.failures.remove(),
        FormationState.last_error.remove(),
    ]
    if dropped:
        actions.append(FormationState.dropped.add(dropped))
    return change(where, user_id, actions, owner)


def failed(where: Where, user_id: str, owner: str, failures: int, error: dict[str, str]) -> bool:
    """A model call failed (``failures`` in a row); a run is tried again later."""
    actions = [FormationState.failures.set(failures), FormationState.last_error.set(error)]
    return change(where, user_id, actions, owner)


def pause(where: Where, user_id: str, owner: str, failures: int, error: dict[str, str]) -> bool:
    """A model call failed once too often: formation waits for a person to ask for a run."""
    actions = [
        FormationState.failures.set(failures),
        FormationState.last_error.set(error),
        FormationState.paused.set(True),
        FormationState.state.remove(),
    ]
    return change(where, user_id, actions, owner)


def files_due(where: Where, user_id: str) -> None:
    """The user's formed files are to be formed again (a record they came from changed or went)."""
    change(where, user_id, [FormationState.files_due.set(True)])


def files_done(where: Where, user_id: str) -> None:
    change(where, user_id, [FormationState.files_due.remove()])


def release(where: Where, user_id: str, owner: str) -> bool:
    return change(where, user_id, [FormationState.lease_until.remove(), FormationState.lease_owner.remove()], owner)


# ---------------------------------------------------------------- a run's stored answer


def pending(where: Where, user_id: str) -> views.PendingRun | None:
    try:
        found = PendingRun.get(_l0(where, user_id), layout.PENDING_RUN, consistent_read=True)
    except DoesNotExist:
        return None
    return snapshot(views.PendingRun, found)


def store_pending(
    where: Where,
    user_id: str,
    owner: str,
    run_id: str,
    message_ids: list[str],
    session_id: str,
    task_id: str | None,
    plan: dict[str, Any],
) -> bool:
    """Store a run's validated answer, only while ``owner`` holds the user's lease and no other
    answer is stored (one transaction): False otherwise."""
    transaction = Transaction()
    transaction.check("lease", FormationState, _l0(where, user_id), layout.FORMATION_STATE, condition=held(owner))
    row = PendingRun(
        _l0(where, user_id),
        layout.PENDING_RUN,
        run_id=run_id,
        message_ids=message_ids,
        session_id=session_id,
        task_id=task_id,
        plan=plan,
    )
    transaction.put("pending", row, condition=PendingRun.sk.does_not_exist())
    try:
        transaction.commit()
    except Cancelled:
        return False
    return True


def drop_pending(where: Where, user_id: str, run_id: str | None = None) -> None:
    """Forget a stored answer (of ``run_id`` only, when given)."""
    row = PendingRun(_l0(where, user_id), layout.PENDING_RUN)
    try:
        if run_id is None:
            row.delete()
        else:
            row.delete(condition=PendingRun.run_id == run_id)
    except Exception as exc:
        if getattr(exc, "cause_response_code", None) != "ConditionalCheckFailedException":
            raise


def commit(
    where: Where,
    user_id: str,
    owner: str,
    run_id: str,
    session_id: str,
    task_id: str | None,
    message_ids: list[str],
    now: int,
    events: list[views.AuditEvent],
) -> bool:
    """A run is done: its messages are formed — the run is noted, its stored answer goes and its
    audit events are recorded (one transaction, only while ``owner`` holds the lease), then the
    messages' waiting marks go. False when it lost the lease (or a clear came)."""
    pk = _l0(where, user_id)
    transaction = Transaction()
    transaction.check("lease", FormationState, pk, layout.FORMATION_STATE, condition=held(owner))
    transaction.put("run", FormedRun(pk, layout.formed_run_sk(run_id), message_ids=message_ids, at=now))
    transaction.delete("pending", PendingRun(pk, layout.PENDING_RUN), condition=PendingRun.run_id == run_id)
    for event in events[: MAX_ACTIONS - 3]:
        transaction.put("audit", event)
    try:
        transaction.commit()
    except Cancelled:
        return False
    unmark(unformed_rows(where, user_id, session_id, task_id, message_ids))
    return True


def formed_run(where: Where, user_id: str, run_id: str) -> list[str] | None:
    """The messages a committed run formed, or None when no such run committed."""
    try:
        row = FormedRun.get(_l0(where, user_id), layout.formed_run_sk(run_id), consistent_read=True)
    except DoesNotExist:
        return None
    return list(row.message_ids or [])


def formed_ids(where: Where, user_id: str) -> set[str]:
    """Every message a committed run formed (a backfill skips them)."""
    rows = FormedRun.query(_l0(where, user_id), FormedRun.sk.startswith(layout.FORMED_RUNS), consistent_read=True)
    return {m for row in rows for m in (row.message_ids or [])}


# ---------------------------------------------------------------- formed files and their lineage


def files(where: Where, user_id: str) -> list[views.FormedFile]:
    return [
        _file_view(item)
        for item in FormedFile.query(
            _l1(where, user_id), FormedFile.sk.startswith(layout.FORMED_FILES), consistent_read=True
        )
    ]


def file(where: Where, user_id: str, file_id: str) -> views.FormedFile | None:
    try:
        return _file_view(FormedFile.get(_l1(where, user_id), layout.formed_file_sk(file_id), consistent_read=True))
    except DoesNotExist:
        return None


def file_id_of(item: views.FormedFile) -> str:
    return str(item.sk).split(layout.SEP, 1)[1]


def new_file(where: Where, user_id: str, kind: str, title: str) -> views.FormedFile:
    """A formed file not stored yet: its id, and its path in the user's formed folder."""
    file_id = layout.digest(f"{user_id}:{now_ms()}:{title}", 26)
    path = f"{bucket.formed_folder(user_id)}{file_id}.md"
    return _file_view(FormedFile(_l1(where, user_id), layout.formed_file_sk(file_id), path=path, kind=kind))


def save_file(where: Where, user_id: str, item: views.FormedFile, added: list[str]) -> None:
    """Store a formed file's entry, just written from the records ``added`` (beside those it came
    from before; no longer stale), and the lineage entries of those records."""
    file_id = file_id_of(item)
    pk = _l1(where, user_id)
    rows: list[Any] = [ItemKey(pk, layout.lineage_sk(a, file_id)) for a in dict.fromkeys(added)]
    _batch_write(rows, delete=False)
    entry = own(FormedFile, item)
    entry.records = set(entry.records or ()) | set(added)
    entry.stale = None
    entry.updated = now_ms()
    entry.save()


def mark_stale(item: views.FormedFile, left: set[str]) -> None:
    """A record a file came from was erased: the file keeps the ones ``left``, to be formed again."""
    entry = own(FormedFile, item)
    entry.records = left or None
    entry.stale = True
    entry.save()


def files_of_records(where: Where, user_id: str, atom_ids: list[str]) -> dict[str, list[str]]:
    """File id → the ids among ``atom_ids`` it was formed from."""
    pk = _l1(where, user_id)
    found: dict[str, list[str]] = {}
    for atom_id, keys in zip(
        atom_ids, for_each(lambda a: _keys(pk, layout.lineage_of(a)), atom_ids, width=16), strict=True
    ):
        for sk in keys:
            found.setdefault(sk.rsplit(layout.SEP, 1)[1], []).append(atom_id)
    return found


def forget_lineage(where: Where, user_id: str, pairs: Iterable[tuple[str, str]]) -> None:
    """Delete the lineage entries of these (record id, file id) pairs."""
    pk = _l1(where, user_id)
    _batch_write([ItemKey(pk, layout.lineage_sk(a, f)) for a, f in dict.fromkeys(pairs)], delete=True)


def delete_file(where: Where, user_id: str, file_id: str) -> None:
    FormedFile(_l1(where, user_id), layout.formed_file_sk(file_id)).delete()


# ---------------------------------------------------------------- erasure


def drop_user(where: Where, user_id: str) -> int:
    """Every formation item of a user: state, unformed marks, stored answers, runs, formed files'
    entries and lineage (their memory is being erased whole)."""
    rows = [
        ItemKey(pk, sk)
        for pk in (_l0(where, user_id), _l1(where, user_id))
        for sk in _keys(pk, layout.FORMATION)
        if sk.startswith(("fs", "fp", "fu" + layout.SEP, "fr" + layout.SEP, "ff" + layout.SEP, "fl" + layout.SEP))
    ]
    _batch_write(rows, delete=True)
    return len(rows)


def _file_view(item: FormedFile) -> views.FormedFile:
    return snapshot(views.FormedFile, item)
