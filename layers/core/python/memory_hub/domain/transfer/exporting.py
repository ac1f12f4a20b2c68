"""Export: a memory (or one person's L0/L1, with the shared L2/L3 only on request) as one .tar.gz
of the memory-tdai tree, under the memory's own prefix, handed out as a presigned URL."""

from __future__ import annotations

import json
from typing import Any

from ...clock import format_ms, now_ms, ordered_id
from ...observability import logger
from ...storage import audit as stored_audit
from ...storage import blobs, bucket, counters, jobs, messages, records, scenes
from ...storage.audit import EventContext, NewEvent, event_items
from ...storage.concurrency import for_each, parallel
from ...storage.errors import PreconditionFailed
from ...storage.views import Asset, Job
from .. import assets
from ..audit import user_target
from ..files import number, visible
from ..principal import Principal
from ..results_admin import ExportJob
from . import tree
from .common import URL_LIFETIME_S, continue_later, describe, job_of

SYNC_ITEMS = 2_000  # more items than this are exported by an asynchronous invocation
FILE_WEIGHT = 20  # an L2 file counts as this many items when deciding where an export runs
ATTEMPTS = 3  # builds of an export that an erasure overtook, before it gives up
CLOCK_SKEW_MS = 5_000  # between the clocks of two Lambda environments (an erasure's event time)


def _object_key(job: Job) -> str:
    return bucket.export_key(job.team_id, job.agent_id, job.sk, job.spec.get("user_id"))


def start(principal: Principal, name: assets.Named, user_id: str | None, shared: bool, request_id: str) -> ExportJob:
    asset = assets.resolve(principal, name)  # the one pair that spells the id (else 403/404/409)
    memory_id = asset.memory_id
    spec = {"user_id": user_id, "shared": bool(shared or not user_id), "request_id": request_id}
    job = jobs.new(ordered_id("exp-"), "export", memory_id, asset.team_id, asset.agent_id, principal.key_id, spec)
    where = assets.where_of(asset)
    if user_id is not None:
        size = sum(counters.of_user(where, layer, user_id)[0] for layer in ("L0", "L1"))
    else:
        size = sum(counters.layer_totals(where).values())
    if shared or user_id is None:  # a file weighs up to 1 MB: count each as many items
        size += FILE_WEIGHT * scenes.count(asset.team_id, asset.agent_id, int(asset.epoch), "")
    if size > SYNC_ITEMS:
        return ExportJob.model_validate(describe(continue_later(job)))
    claimed = jobs.claim(job, "created")
    if claimed is not None:
        run(claimed)
    return status(principal, job.sk)


def status(principal: Principal, export_id: str) -> ExportJob:
    job = job_of(principal, export_id, "export")
    answer = describe(job)
    if job.state == "done":
        key = job.result["key"]
        if blobs.head(key) is None:  # erased since (a clear, a delete, a day passed)
            answer["state"] = "erased"
        else:
            answer["url"] = blobs.presigned("get_object", key, URL_LIFETIME_S)
            answer["expires_at"] = format_ms(now_ms() + URL_LIFETIME_S * 1000)
    return ExportJob.model_validate(answer)


def run(job: Job) -> None:
    """Build the tree and store it (the job is claimed: running); the job says how it went."""
    try:
        _run(job)
    except Exception:
        logger.exception("export failed")
        jobs.settle(job, "failed", error="the export failed; try again")


def _run(job: Job) -> None:
    key = _object_key(job)
    for _ in range(ATTEMPTS):
        asset = assets.of_pair(job.team_id, job.agent_id)
        if asset is None:
            jobs.settle(job, "failed", error="the memory no longer exists")
            return
        _mark(job, int(asset.epoch))
        # Erasures already recorded when the build begins (within the clocks' skew) are not news.
        since = now_ms() - CLOCK_SKEW_MS
        known = stored_audit.erasures_since(asset.team_id, asset.agent_id, since)
        files, counts = build(asset, job.spec.get("user_id"), bool(job.spec.get("shared")))
        data = tree.tarball(files, now_ms() // 1000)
        blobs.put_bytes(key, data, "application/gzip", {"epoch": str(int(asset.epoch))})
        if _erased_meanwhile(asset, since, known):
            blobs.delete(key)  # it may hold what a delete or a clear just erased: build it again
            continue
        target = user_target(job.spec["user_id"]) if job.spec.get("user_id") else job.memory_id
        context = EventContext(job.team_id, job.owner, job.spec.get("request_id"), job.agent_id, job.memory_id)
        stored_audit.put(event_items([NewEvent("export", "asset", target, sum(counts.values()))], context))
        jobs.settle(job, "done", result={"key": key, "counts": counts, "bytes": len(data)})
        return
    jobs.settle(job, "failed", error="the memory kept changing while it was exported; try again")


MARK_TRIES = 5  # exports of one memory putting its marker at once


def _mark(job: Job, epoch: int) -> None:
    """Put the memory's export marker, before the archive: an erasure that commits after this
    finds it and lists the exports (``assets.forget_exports``). Its content names the attempt (a
    new ETag each time: the cleanup's conditional delete of an old one never takes it) and its
    epoch, as the archive's, keeps it from a clear's purge of the epoch before — an epoch that
    never goes back: an attempt that read the epoch before a clear leaves a later epoch's marker
    as it is (its own archive is purged, or found out by its check), compare-and-swap on the ETag
    read, so it cannot overwrite one put meanwhile either."""
    key = bucket.export_marker(job.team_id, job.agent_id)
    held = blobs.head(key)
    for _ in range(MARK_TRIES):
        if held is not None and blobs.epoch_of(held) > epoch:
            return
        try:
            blobs.put(key, f"{job.sk} {now_ms()}", {"epoch": str(epoch)}, if_match=held.etag if held else None)
            return
        except PreconditionFailed:
            again = blobs.head(key)
        if again is not None and (held is None or again.etag != held.etag) and blobs.epoch_of(again) >= epoch:
            return  # another export put it after this one read it: as new as this put, of an epoch as late
        held = again
    raise RuntimeError("the export marker kept changing")


def _erased_meanwhile(asset: Asset, since: int, known: set[str]) -> bool:
    """Whether content was erased while the tree was built: an erasure event that was not there
    when the build began. An erasure that commits before this check is seen here; one that commits
    after it erases the stored archive itself (every erasure ends by erasing the memory's exports):
    either way no export outlives what it held."""
    now = assets.of_pair(asset.team_id, asset.agent_id)
    if now is None or int(now.epoch) != int(asset.epoch):
        return True
    return bool(stored_audit.erasures_since(asset.team_id, asset.agent_id, since) - known)


def build(asset: Asset, user_id: str | None, shared: bool) -> tuple[dict[str, bytes], dict[str, int]]:
    """The tree's files and how many items of each layer they hold."""
    where = assets.where_of(asset)  # what imports still running wrote is left out
    users = [user_id] if user_id is not None else counters.users(where)

    def of_user(user: str) -> tuple[list[Any], list[Any]]:
        return messages.shown(where, messages.of_user(where, user)), messages.shown(where, records.of_user(where, user))

    held = for_each(of_user, users, width=8)
    l0 = sorted((tree.l0_line(m) for found, _ in held for m in found), key=lambda line: (line["timestamp"], line["id"]))
    l1 = sorted((tree.l1_line(r) for _, found in held for r in found), key=lambda line: (line["createdAt"], line["id"]))
    files = {**tree.by_day(l0, "recordedAt", "conversations"), **tree.by_day(l1, "createdAt", "records")}
    counts = {"l0": len(l0), "l1": len(l1), "l2": 0, "l3": 0}
    persona: dict[str, Any] | None = None
    if shared:
        scene_files, persona = _shared(asset, files)
        counts["l2"], counts["l3"] = scene_files, int(persona is not None)
    summary: dict[str, Any] = {"memory_id": asset.memory_id, "team_id": asset.team_id, "agent_id": asset.agent_id}
    if user_id is not None:
        summary["user_id"] = user_id
    summary.update(exported_at=format_ms(now_ms()), counts=counts)
    if persona is not None:
        summary["persona"] = persona
    files[".metadata/memory-hub.json"] = json.dumps(summary, ensure_ascii=False, indent=2).encode()
    return files, counts


def _shared(asset: Asset, files: dict[str, bytes]) -> tuple[int, dict[str, Any] | None]:
    """The agent's L2 files, scene index, L3 persona and its backups, into ``files``."""
    epoch = int(asset.epoch)
    entries = scenes.live(asset.team_id, asset.agent_id, epoch, "", None, 1_000_000)
    prefix = bucket.prefix(asset.team_id, asset.agent_id)
    backup_keys = blobs.keys_under(bucket.backup_prefix(asset.team_id, asset.agent_id))
    stored, persona, backups = parallel(
        lambda: for_each(
            lambda e: blobs.get(bucket.scene_key(asset.team_id, asset.agent_id, e.path)), entries, width=16
        ),
        lambda: blobs.get(bucket.persona_key(asset.team_id, asset.agent_id)),
        lambda: for_each(blobs.get_bytes, backup_keys, width=16),
    )
    kept, heat = [], {}
    for entry, blob in zip(entries, stored, strict=True):
        live = visible(blob, epoch)
        if live is not None and live.text is not None:
            files[f"scene_blocks/{entry.path}"] = live.text.encode("utf-8")
            kept.append(entry)
            heat[entry.path] = tree.heat_of(live.text)
    files[".metadata/scene_index.json"] = tree.scene_index(kept, heat)
    for key, data in zip(backup_keys, backups, strict=True):
        if data is not None:
            files[key[len(prefix) :]] = data
    live_persona = visible(persona, epoch)
    if live_persona is None or live_persona.text is None:
        return len(kept), None
    files["persona.md"] = live_persona.text.encode("utf-8")
    return len(kept), {
        "version": number(live_persona, "version"),
        "created_at": live_persona.metadata.get("created-at"),
        "updated_at": live_persona.metadata.get("updated-at"),
    }
