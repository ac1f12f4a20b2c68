"""Import: a memory-tdai tree (ours, or one TencentDB wrote) uploaded through a presigned URL, then
ingested into one (team, agent) memory. The whole tree is checked before anything is written; items
keep their ids where this service could have issued them and they are free, their times, sessions,
versions; L2 files keep their META as stored. An item already there with the same id and content
is skipped, an L1 record whose natural key is taken is skipped: importing the same tree twice
changes nothing."""

from __future__ import annotations

import hashlib
from collections import defaultdict
from typing import Any

from ...clock import ISSUED_ID, format_ms, now_ms, ordered_id
from ...observability import logger
from ...storage import audit as stored_audit
from ...storage import blobs, jobs, layout, messages, records, scenes
from ...storage.audit import EventContext, NewEvent, event_items
from ...storage.concurrency import parallel
from ...storage.counters import Where
from ...storage.errors import Cancelled, PreconditionFailed
from ...storage.models import Asset, Job
from .. import assets, meaning, meta, persona
from ..atomic import natural_key, searchable
from ..errors import Conflict, Invalid
from ..files import Draft, compare_and_swap, number, visible
from ..principal import Principal
from ..scope import Scope
from ..search import term_counts
from . import tree
from .common import URL_LIFETIME_S, continue_later, describe, job_of

SYNC_BYTES = 512 * 1024  # a larger upload is ingested by an asynchronous invocation
SYNC_ITEMS = 2_000  # so is a tree of more items and files than this (it may compress very well)
MAX_UPLOAD_BYTES = 64 * 1024 * 1024  # compressed; unpacked, tree.MAX_TREE_BYTES


def _upload_key(job: Job) -> str:
    return layout.import_upload_key(job.team_id, job.agent_id, job.sk)


def create(
    principal: Principal,
    team_id: str,
    agent_id: str,
    user_id: str | None,
    from_team: str | None,
    from_agent: str | None,
    request_id: str,
) -> dict[str, Any]:
    principal.require_team(team_id)
    memory_id = layout.memory_id_of(team_id, agent_id)
    spec = {"user_id": user_id, "from_team": from_team, "from_agent": from_agent, "request_id": request_id}
    job = jobs.new(ordered_id("imp-"), "import", memory_id, team_id, agent_id, principal.key_id, spec)
    url = blobs.presigned("put_object", _upload_key(job), URL_LIFETIME_S, ContentType="application/gzip")
    return {
        "import_id": job.sk,
        "upload_url": url,
        "method": "PUT",
        "headers": {"Content-Type": "application/gzip"},
        "expires_at": format_ms(now_ms() + URL_LIFETIME_S * 1000),
        "state": job.state,
    }


def begin(principal: Principal, import_id: str) -> dict[str, Any]:
    job = job_of(principal, import_id, "import")
    if job.state != "created":
        return describe(job)
    upload = blobs.head(_upload_key(job))
    if upload is None:
        raise Invalid("import_id: nothing was uploaded to its upload_url yet")
    if upload.size > MAX_UPLOAD_BYTES:
        blobs.delete(_upload_key(job))
        jobs.settle(job, "failed", error=f"the upload is larger than {MAX_UPLOAD_BYTES // 2**20} MiB")
        return describe(job)
    if upload.size > SYNC_BYTES:
        continue_later(job)
        return describe(job)
    if jobs.claim(job, "created"):
        run(job, within_request=True)
    return status(principal, import_id)


def status(principal: Principal, import_id: str) -> dict[str, Any]:
    return describe(job_of(principal, import_id, "import"))


def run(job: Job, *, within_request: bool = False) -> None:
    """Ingest the upload (the job is claimed: running); delete it when the ingest ends, whatever
    its outcome. Within a request, a tree of more than SYNC_ITEMS items (a small upload may unpack
    to many lines) is handed on to an asynchronous invocation before anything is written. The job
    tells how it went."""
    key = _upload_key(job)
    handed_on = False
    try:
        data = blobs.get_bytes(key)
        if data is None:
            jobs.settle(job, "failed", error="nothing was uploaded")
            return
        try:
            files = tree.untar(data)
            selection = tree.Selection(job.spec.get("user_id"), job.spec.get("from_team"), job.spec.get("from_agent"))
            parsed = tree.read(files, selection)
        except tree.Malformed as exc:
            jobs.settle(job, "failed", result={"problems": exc.problems[:100]}, error="the tree is malformed")
            return
        if within_request and parsed.size() > SYNC_ITEMS:
            continue_later(job)
            handed_on = True
            return
        written, skipped = write(parsed, job)
        context = EventContext(job.team_id, job.owner, job.spec.get("request_id"), job.agent_id, job.memory_id)
        stored_audit.put(event_items([NewEvent("import", "asset", job.memory_id, sum(written.values()))], context))
        jobs.settle(job, "done", result={"counts": written, "skipped": skipped})
    except Conflict as exc:
        jobs.settle(job, "failed", error=exc.message)
    except Exception:
        logger.exception("import failed")
        jobs.settle(job, "failed", error="the import failed; try again")
    finally:
        if not handed_on:
            blobs.delete(key)


def _derived_id(prefix: str, ms: int, source: str) -> str:
    """A stable id for a foreign item (time-ordered like ours): importing it again finds it again."""
    return f"{prefix}{max(ms, 0) % (1 << 48):012x}{hashlib.sha256(source.encode()).hexdigest()[:14]}"


def _id_for(prefix: str, source: str | None, ms: int, fallback: str) -> str:
    if source and ISSUED_ID.fullmatch(source) and source.startswith(prefix):
        return source
    return _derived_id(prefix, ms, source or fallback)


def write(parsed: tree.Tree, job: Job) -> tuple[dict[str, int], dict[str, int]]:
    scope = Scope(job.team_id, job.agent_id, "")
    asset = assets.ensure(assets.of_pair(job.team_id, job.agent_id), job.team_id, job.agent_id, job.owner)
    written = {"l0": 0, "l1": 0, "l2": 0, "l3": 0}
    skipped = {"l0": 0, "l1": 0, "l2": 0, "l3": 0}
    where = Where(asset.team_id, asset.agent_id, int(asset.epoch), asset.memory_id)
    made: list[meaning.Piece] = []  # imported items get their vectors as new items do, once all is written
    _messages(where, parsed, written, skipped, made)
    _records(where, parsed, written, skipped, made)
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
    if parsed.backups or written["l3"]:
        persona.prune_backups(scope.team_id, scope.agent_id)  # the newest 3 stay (§6)
    meaning.embed_after_write(where, made)
    return written, skipped


def _messages(
    where: Where, parsed: tree.Tree, written: dict[str, int], skipped: dict[str, int], made: list[meaning.Piece]
) -> None:
    groups: dict[tuple[str, str, str | None], list[tree.Message]] = defaultdict(list)
    for message in parsed.messages:
        groups[(message.user_id, message.session_id, message.task_id)].append(message)
    for (user, session, task), group in groups.items():
        wanted: dict[str, tree.Message] = {}
        for m in group:
            message_id = _id_for("msg-", m.source_id, m.timestamp, f"{m.timestamp}:{m.role}:{m.content}")
            if message_id in wanted and wanted[message_id].content != m.content:
                # two lines of the tree share an id: the later one gets an id of its own (stable
                # across imports, so a second import finds it again)
                message_id = _derived_id("msg-", m.timestamp, f"{m.source_id}:{m.role}:{m.content}")
            if message_id in wanted:
                skipped["l0"] += 1  # the same message twice in the tree
                continue
            wanted[message_id] = m
        found = messages.get_many(where, user, list(wanted)) if wanted else {}
        new = []
        for message_id, message in wanted.items():
            there = found.get(message_id)
            if there is not None and there.content == message.content:
                skipped["l0"] += 1
                continue
            if there is not None:
                message_id = ordered_id("msg-")  # the id is taken by another message: a new one
            new.append(
                messages.NewMessage(
                    message_id,
                    message.role,
                    message.content,
                    message.timestamp,
                    term_counts(message.content),
                    message.recorded_at,
                )
            )
        for start in range(0, len(new), messages.PER_ADD):
            messages.add(where, user, session, task, new[start : start + messages.PER_ADD], now_ms())
        made += meaning.new_messages(user, session, task, new)
        written["l0"] += len(new)


def _records(
    where: Where, parsed: tree.Tree, written: dict[str, int], skipped: dict[str, int], made: list[meaning.Piece]
) -> None:
    for item in parsed.records:
        atom_id = _id_for("atom-", item.source_id, item.created_at, f"{item.created_at}:{item.content}")
        there = records.get(where, item.user_id, atom_id)
        if there is not None and there.content == item.content:
            skipped["l1"] += 1
            continue
        if there is not None:
            atom_id = ordered_id("atom-")
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
            written["l1"] += 1
            made.append(meaning.piece(record))
        except Cancelled as exc:
            if "guard" not in exc.failed:
                raise
            skipped["l1"] += 1  # the same (task, type, background, content) is there already


def _scene(scope: Scope, asset: Asset, path: str, text: str) -> bool:
    """Store a file as exported (its META kept); False when the same content is there already.
    Over a different live file it comes as the next version (versions never go back, §5)."""
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
            previous = {k: v for k, v in keys.items() if k not in ("version", "created_at", "updated_at", "summary")}
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

    def commit(draft: Draft, etag: str) -> bool:
        try:
            scenes.commit_write(
                asset.memory_id,
                scope.team_id,
                scope.agent_id,
                epoch,
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

    return not compare_and_swap(key, "import scene", prepare, commit).unchanged


def _same_scene(stored: str, keys: dict[str, str], body: str) -> bool:
    """The live file already holds what the tree gives: the same content and summary (times a
    tree without them got at import do not count)."""
    live_keys, live_body = meta.split(stored)
    return live_body == body and (live_keys.get("summary") or None) == (keys.get("summary") or None)


def _persona(scope: Scope, asset: Asset, text: str, persona_meta: dict[str, Any]) -> bool:
    """Store the persona as exported; False when the same text is there already. Over a different
    live persona it comes as the next version, the live one backed up first (§6)."""
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
