"""What export and import share: the job a caller polls, and handing a large one on to an
asynchronous invocation of the same function."""

from __future__ import annotations

from typing import Any

from ...clock import now_ms
from ...storage import invoke, jobs
from ...storage.views import Job
from ..errors import NotFound
from ..principal import Principal

JOB_EVENT_KEY = "memory_hub_job"
URL_LIFETIME_S = 3600
# A running import refreshes its job every HEARTBEAT_S (``staging.Heartbeat``): silent for
# STALLED_MS, its process is gone. An export has no heartbeat, and a queued job waits for Lambda's
# asynchronous invocation: those are given up only after longer than an invocation may run.
HEARTBEAT_S = 30.0
STALLED_MS = 3 * 60 * 1000
SILENT_MS = 16 * 60 * 1000


def job_of(principal: Principal, job_id: str, kind: str) -> Job:
    """A job the key may see: another team's job is as unknown as a job that never was."""
    job = jobs.get(job_id)
    if job is None or job.kind != kind or not principal.covers_team(job.team_id):
        raise NotFound(f"{kind}_id: unknown {kind}")
    return job


def continue_later(job: Job) -> Job:
    """Hand the job on to an asynchronous run of this function: its view, queued."""
    queued = jobs.settle(job, "queued")
    invoke.this_function_later({JOB_EVENT_KEY: job.sk})
    return queued


def stalled(job: Job, now: int) -> bool:
    """The job began and its process is gone (see STALLED_MS)."""
    if job.state not in ("queued", "running"):
        return False
    limit = STALLED_MS if job.kind == "import" and job.state == "running" else SILENT_MS
    return now - int(job.updated_at) > limit


def describe(job: Job) -> dict[str, Any]:
    """A job as its status route answers it (never the object key, never content)."""
    answer: dict[str, Any] = {f"{job.kind}_id": job.sk, "state": job.state, "memory_id": job.memory_id}
    if stalled(job, now_ms()):
        answer.update(state="failed", error=f"the {job.kind} stopped before it ended; start another")
        return answer
    if job.result:
        answer.update({k: v for k, v in job.result.items() if k != "key"})
    if job.error:
        answer["error"] = job.error
    return answer
