"""What export and import share: the job a caller polls, and handing a large one on to an
asynchronous invocation of the same function."""

from __future__ import annotations

from typing import Any

from ...clock import now_ms
from ...storage import invoke, jobs
from ...storage.models import Job
from ..errors import NotFound
from ..principal import Principal

JOB_EVENT_KEY = "memory_hub_job"
URL_LIFETIME_S = 3600
STALLED_MS = 16 * 60 * 1000  # longer than a Lambda invocation may run


def job_of(principal: Principal, job_id: str, kind: str) -> Job:
    """A job the key may see: another team's job is as unknown as a job that never was."""
    job = jobs.get(job_id)
    if job is None or job.kind != kind or not principal.covers_team(job.team_id):
        raise NotFound(f"{kind}_id: unknown {kind}")
    return job


def continue_later(job: Job) -> None:
    jobs.settle(job, "queued")
    invoke.this_function_later({JOB_EVENT_KEY: job.sk})


def describe(job: Job) -> dict[str, Any]:
    """A job as its status route answers it (never the object key, never content)."""
    answer: dict[str, Any] = {f"{job.kind}_id": job.sk, "state": job.state, "memory_id": job.memory_id}
    if job.state in ("queued", "running") and now_ms() - int(job.updated_at) > STALLED_MS:
        answer.update(state="failed", error=f"the {job.kind} stopped before it ended; start another")
        return answer
    if job.result:
        answer.update({k: v for k, v in job.result.items() if k != "key"})
    if job.error:
        answer["error"] = job.error
    return answer
