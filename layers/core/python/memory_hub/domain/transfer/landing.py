"""An import's files — scene files, the persona, persona backups — staged until it commits.

Before the commit nothing of them is at a key any read looks at: each file that differs from the
live one is written under the import's own prefix (``.imports/<id>.staged/``, beside its journal),
and the journal names it. Right after the commit they land at their keys (``land``), each as a
write would make it — the next version over a live file that differs, indexed in the scene index —
and each staged copy goes once its file has landed; a crash in between is finished from the journal
by the next status poll, the scheduled cleanup or the local stack's next start (``staging.finish``),
never undone. An import that fails before its commit has written no file at all: its staged copies
go with its journal."""

from __future__ import annotations

from typing import Any

from ...clock import format_ms, now_ms
from ...storage import blobs, bucket, scenes
from ...storage.errors import PreconditionFailed
from ...storage.views import Asset, Job
from .. import assets, meta, persona
from ..errors import Unavailable
from ..files import Draft, compare_and_swap, number, visible
from ..scope import Scope
from . import tree
from .rollback import Journal, scene_index


def staged_key(job: Job, kind: str, name: str) -> str:
    """Where an import keeps a file of ``kind`` (scene, persona, backup) until it commits (it goes
    with the journal: ``forget``)."""
    return bucket.staged_key(job.team_id, job.agent_id, job.sk, kind, name)


def stage(asset: Asset, parsed: tree.Tree, journal: Journal, job: Job, counted: dict[str, dict[str, int]]) -> None:
    """Put the tree's files under the import's prefix and name them in the journal (saved by the
    caller before the commit); a file the memory holds already, same content and summary, is
    skipped. ``counted``: the import's ``written`` and ``skipped`` tallies."""
    epoch = int(asset.epoch)
    for path, text in parsed.files.items():
        live = visible(blobs.get(bucket.scene_key(job.team_id, job.agent_id, path)), epoch)
        if live is not None and live.text is not None and _same_scene(live.text, *meta.split(text)):
            counted["skipped"]["l2"] += 1
            continue
        journal.files[path] = _put(job, "scene", path, text)
        counted["written"]["l2"] += 1
    if parsed.persona is not None:
        live = visible(blobs.get(bucket.persona_key(job.team_id, job.agent_id)), epoch)
        if live is not None and live.text == parsed.persona:
            counted["skipped"]["l3"] += 1
        else:
            journal.persona_staged = _put(job, "persona", bucket.PERSONA, parsed.persona)
            journal.persona_meta = dict(parsed.persona_meta)
            counted["written"]["l3"] += 1
    for name, text in parsed.backups.items():
        journal.backups[name] = _put(job, "backup", name, text)


def _put(job: Job, kind: str, name: str, text: str) -> str:
    key = staged_key(job, kind, name)
    blobs.put_bytes(key, text.encode("utf-8"), "text/markdown")
    return key


def land(job: Job, journal: Journal) -> int:
    """After the commit: every staged file at its key, each staged copy deleted once its file is
    there (so a replay lands only what is left). Nothing when a clear or a memory delete came
    after the commit (it erased the import with the rest). How many files landed."""
    if not (journal.files or journal.persona_staged or journal.backups) or journal.epoch is None:
        return 0
    asset = assets.of_pair(job.team_id, job.agent_id)
    if asset is None or int(asset.epoch) != journal.epoch:
        return 0
    scope = Scope(job.team_id, job.agent_id, "")
    landed = 0
    try:
        for path, key in journal.files.items():
            landed += _land(key, lambda text, path=path: _scene(scope, asset, path, text))
        if journal.persona_staged:
            landed += _land(journal.persona_staged, lambda text: _persona(scope, asset, text, journal.persona_meta))
        for name, key in journal.backups.items():
            landed += _land(key, lambda text, name=name: _backup(scope, asset, name, text))
    except Unavailable:
        moved = assets.of_pair(job.team_id, job.agent_id)
        if moved is None or int(moved.epoch) != journal.epoch:
            return landed  # cleared while landing: the rest belongs to erased content
        raise
    if journal.persona_staged or journal.backups:
        persona.prune_backups(job.team_id, job.agent_id)  # the newest 3 stay
    return landed


def _land(key: str, write: Any) -> int:
    copy = blobs.get(key)
    if copy is None or copy.text is None:
        return 0  # landed before a crash
    write(copy.text)
    blobs.delete(key)
    return 1


def _backup(scope: Scope, asset: Asset, name: str, text: str) -> None:
    key = bucket.backup_named(scope.team_id, scope.agent_id, name)
    try:
        blobs.put(key, text, {"epoch": str(int(asset.epoch))}, if_match=None)
    except PreconditionFailed:
        pass  # that backup is there already


def _scene(scope: Scope, asset: Asset, path: str, text: str) -> bool:
    """Store a file as exported (its META kept); False when the same content is there already.
    Over a different live file it comes as the next version (versions never go back)."""
    key = bucket.scene_key(scope.team_id, scope.agent_id, path)
    keys, body = meta.split(text)
    epoch = int(asset.epoch)

    def prepare() -> Draft:
        entry, blob = scenes.get(scope.team_id, scope.agent_id, path), blobs.get(key)
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

    return not compare_and_swap(key, "import scene", prepare, scene_index(scope, asset, path)).unchanged


def _same_scene(stored: str, keys: dict[str, str], body: str) -> bool:
    """The live file already holds what the tree gives: the same content and summary (times a
    tree without them got at import do not count)."""
    live_keys, live_body = meta.split(stored)
    return live_body == body and (live_keys.get("summary") or None) == (keys.get("summary") or None)


def _persona(scope: Scope, asset: Asset, text: str, persona_meta: dict[str, Any]) -> bool:
    """Store the persona as exported; False when the same text is there already. Over a different
    live persona it comes as the next version, the live one backed up first
    (versions never go back)."""
    key = bucket.persona_key(scope.team_id, scope.agent_id)
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
