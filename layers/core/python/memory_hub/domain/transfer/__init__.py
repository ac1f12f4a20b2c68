"""Memory that moves: export a memory — or one person's part of it — as the
``memory-tdai`` tree TencentDB Agent Memory keeps on disk, and import such a tree.

Both run as jobs: small ones within the request, larger ones in an asynchronous invocation of the
same function, with a status to poll. Exports land under the memory's own prefix
(``…/<memory_id>/.exports/``) and are handed out as presigned URLs valid for an hour; every erasure
of the memory's content also erases its exports, and the cleanup drops them after a day. Imports
arrive through a presigned upload and the upload is deleted when the ingest ends, whatever its
outcome."""

from __future__ import annotations

from typing import Any

from ...storage import jobs
from . import exporting, importing
from .common import JOB_EVENT_KEY

RUNNERS = {"export": exporting.run, "import": importing.run}


def run_job(event: dict[str, Any]) -> dict[str, Any]:
    """An asynchronous continuation: run the named job if it is still queued. Lambda may deliver an
    event twice; only the invocation that moves the job from queued to running does the work."""
    job = jobs.get(str(event.get(JOB_EVENT_KEY, "")))
    claimed = jobs.claim(job, "queued") if job is not None and job.kind in RUNNERS else None
    if claimed is None:
        return {"ran": False}
    RUNNERS[claimed.kind](claimed)
    after = jobs.get(claimed.sk)  # the runner settled it
    return {"ran": True, "state": after.state if after is not None else "unknown"}


__all__ = ["JOB_EVENT_KEY", "run_job"]
