"""``memory-hub export`` and ``memory-hub import``: move a memory out of and into
Memory Hub as TencentDB Agent Memory's ``memory-tdai`` tree, against any endpoint.

Export asks the service to build the tree (one .tar.gz under the memory's own prefix), waits while
a large one is built, downloads it through the presigned URL and unpacks it into a directory.
Import packs the parts of a tree the service reads (TencentDB's own databases and logs stay
behind), uploads them through a presigned URL, starts the ingest and waits for its counts."""

from __future__ import annotations

import io
import tarfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import Any, TypeVar

from memory_hub.domain.results_admin import ExportJob, ImportJobState

from .client import MemoryHubClient, MemoryHubError, TransportError

J = TypeVar("J", ExportJob, ImportJobState)

POLL_S = 1.0
WAIT_S = 20 * 60.0  # an asynchronous job may run Lambda's 15 minutes
LAYERS = ("l0", "l1", "l2", "l3")

# What the service reads from a tree; everything else (vectors.db, checkpoints, logs, manifest) stays.
_READ = ("conversations/", "records/", "scene_blocks/", ".backup/persona/", "profiles/")
_READ_FILES = ("persona.md", ".metadata/memory-hub.json")
_PROFILE_PARTS = ("scene_blocks/", ".backup/persona/")


class TransferFailed(MemoryHubError):
    """A job ended in failure; ``problems`` lists the malformed lines (``<file>:<line>: <problem>``)."""

    def __init__(self, message: str, problems: list[str] | None = None) -> None:
        super().__init__(message)
        self.problems = problems or []


def _wait(poll: Callable[[str], J], job_id: str, answer: J, progress: Callable[[str], None], what: str) -> J:
    deadline = time.monotonic() + WAIT_S
    while answer.state in ("created", "queued", "running"):
        if time.monotonic() > deadline:
            raise TransferFailed(f"{what} {job_id} still {answer.state} after {WAIT_S:.0f} s")
        progress(f"{what} {job_id}: {answer.state}…")
        time.sleep(POLL_S)
        answer = poll(job_id)
    if answer.state != "done":
        problems = getattr(answer, "problems", None)
        raise TransferFailed(str(answer.error or f"ended {answer.state}"), problems)
    return answer


def _http(request: urllib.request.Request, timeout: float) -> bytes:
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            body: bytes = response.read()
            return body
    except urllib.error.HTTPError as exc:
        raise TransportError(f"storage answered HTTP {exc.code} for the presigned URL") from None
    except (urllib.error.URLError, OSError) as exc:
        raise TransportError(f"cannot reach the presigned URL: {getattr(exc, 'reason', exc)}") from None


def unpack(data: bytes, out: Path) -> list[str]:
    """Write the archive's regular files under ``out`` (nothing outside it); their paths."""
    written = []
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as archive:
        for member in archive:
            parts = PurePosixPath(member.name).parts
            if not member.isfile() or member.name.startswith("/") or ".." in parts:
                continue
            target = out.joinpath(*parts)
            target.parent.mkdir(parents=True, exist_ok=True)
            handle = archive.extractfile(member)
            target.write_bytes(handle.read() if handle else b"")
            written.append(member.name)
    return written


def export(
    client: MemoryHubClient,
    memory_id: str,
    out: Path,
    *,
    user_id: str | None = None,
    shared: bool = False,
    progress: Callable[[str], None] = lambda _: None,
    pair: tuple[str, str] | None = None,
) -> dict[str, Any]:
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise TransferFailed(f"{out}: not an empty directory (an export would mix with what is there)")
    team_id, agent_id = pair if pair is not None else (None, None)  # which pair, when several spell memory_id
    started = client.memory_export(
        memory_id=memory_id,
        team_id=team_id,
        agent_id=agent_id,
        user_id=user_id,
        shared=shared if user_id is not None else None,
    )
    answer = _wait(
        lambda job_id: client.memory_export_status(export_id=job_id), started.export_id, started, progress, "export_id"
    )
    if answer.url is None:
        raise TransferFailed(f"export {answer.export_id} is done but names no archive")
    data = _http(urllib.request.Request(answer.url), client.timeout * 10)
    out.mkdir(parents=True, exist_ok=True)
    return {**answer.wire(), "files": unpack(data, out)}


def _wanted(relative: str) -> bool:
    if relative in _READ_FILES or relative == ".metadata/scene_index.json":
        return True
    if relative.startswith("profiles/"):
        rest = relative.split("/", 2)[2] if relative.count("/") >= 2 else ""
        return rest == "persona.md" or rest.startswith(_PROFILE_PARTS)
    return relative.startswith(_READ)


def pack(tree: Path) -> tuple[bytes, int]:
    """A .tar.gz of the parts of ``tree`` the service reads; how many files it holds."""
    if not tree.is_dir():
        raise TransferFailed(f"{tree}: not a directory")
    raw = io.BytesIO()
    count = 0
    with tarfile.open(fileobj=raw, mode="w:gz") as archive:
        for path in sorted(p for p in tree.rglob("*") if p.is_file()):
            relative = path.relative_to(tree).as_posix()
            if _wanted(relative):
                archive.add(path, arcname=relative, recursive=False)
                count += 1
    if not count:
        raise TransferFailed(f"{tree}: no memory-tdai files (conversations/, records/, scene_blocks/, persona.md)")
    return raw.getvalue(), count


def import_tree(
    client: MemoryHubClient,
    tree: Path,
    team_id: str,
    agent_id: str,
    *,
    user_id: str | None = None,
    from_team: str | None = None,
    from_agent: str | None = None,
    progress: Callable[[str], None] = lambda _: None,
) -> dict[str, Any]:
    data, count = pack(tree)
    progress(f"packed {count} files ({len(data)} bytes)")
    created = client.memory_import(
        team_id=team_id, agent_id=agent_id, user_id=user_id, from_team=from_team, from_agent=from_agent
    )
    upload = urllib.request.Request(created.upload_url, data=data, method=created.method, headers=created.headers)
    _http(upload, client.timeout * 10)
    started = client.memory_import_start(import_id=created.import_id)
    done = _wait(
        lambda job_id: client.memory_import_status(import_id=job_id), created.import_id, started, progress, "import_id"
    )
    return done.wire()


def counts_line(counts: dict[str, int]) -> str:
    return "  ".join(f"{layer.upper()} {counts.get(layer, 0)}" for layer in LAYERS)
