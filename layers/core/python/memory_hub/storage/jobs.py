"""Export and import jobs (ItemsTable, pk ``JOB``): what a caller polls while a large export or
import runs asynchronously. A job holds its spec, state and counts — never content."""

from __future__ import annotations

from typing import Any

from pynamodb.exceptions import DoesNotExist, UpdateError

from ..clock import now_ms
from . import layout, views
from .models import Job, own, snapshot

LIFETIME_MS = 2 * 86_400_000


def new(
    job_id: str, kind: str, memory_id: str, team_id: str, agent_id: str, owner: str, spec: dict[str, Any]
) -> views.Job:
    now = now_ms()
    job = Job(
        layout.JOB_PK,
        job_id,
        kind=kind,
        state="created",
        memory_id=memory_id,
        team_id=team_id,
        agent_id=agent_id,
        owner=owner,
        spec=spec,
        created_at=now,
        updated_at=now,
        expires=(now + LIFETIME_MS) // 1000,
    )
    job.save(condition=Job.sk.does_not_exist())
    return _view(job)


def get(job_id: str) -> views.Job | None:
    if not job_id or len(job_id) > 100:
        return None
    try:
        return _view(Job.get(layout.JOB_PK, job_id, consistent_read=True))
    except DoesNotExist:
        return None


def claim(job: views.Job, state: str) -> views.Job | None:
    """Move a job from ``state`` to running: its view as it is then; None when someone else did
    first (or it moved on)."""
    stored = own(Job, job)
    try:
        stored.update(actions=[Job.state.set("running"), Job.updated_at.set(now_ms())], condition=Job.state == state)
    except UpdateError as exc:
        if exc.cause_response_code == "ConditionalCheckFailedException":
            return None
        raise
    return _view(stored)


def touch(job: views.Job) -> bool:
    """A running job's heartbeat: ``updated_at`` now; False once it is not running any more."""
    try:
        own(Job, job).update(actions=[Job.updated_at.set(now_ms())], condition=Job.state == "running")
    except UpdateError as exc:
        if exc.cause_response_code == "ConditionalCheckFailedException":
            return False
        raise
    return True


def settle(job: views.Job, state: str, *, result: dict[str, Any] | None = None, error: str | None = None) -> views.Job:
    """Move a job on (created → queued, running → done | failed): its view as it is now."""
    actions: list[Any] = [Job.state.set(state), Job.updated_at.set(now_ms())]
    if result is not None:
        actions.append(Job.result.set(result))
    if error is not None:
        actions.append(Job.error.set(error))
    stored = own(Job, job)
    stored.update(actions=actions)  # answers every attribute as it is now
    return _view(stored)


def waiting(kind: str, before_ms: int) -> list[views.Job]:
    """Jobs of ``kind`` created before ``before_ms`` that never started (an import whose upload
    was never ingested)."""
    return [
        _view(job)
        for job in Job.query(layout.JOB_PK, consistent_read=True)
        if job.kind == kind and job.state == "created" and int(job.created_at) < before_ms
    ]


def unfinished(kind: str, before_ms: int) -> list[views.Job]:
    """Jobs of ``kind`` that began and did not end well: failed, or queued/running with no change
    since ``before_ms`` (their process may have died or run out of time: the caller judges)."""
    return [
        _view(job)
        for job in Job.query(layout.JOB_PK, consistent_read=True)
        if job.kind == kind
        and (job.state == "failed" or (job.state in ("queued", "running") and int(job.updated_at) < before_ms))
    ]


def started(kind: str) -> list[views.Job]:
    """Jobs of ``kind`` that left ``created`` (an import whose upload URL is used up)."""
    return [
        _view(job)
        for job in Job.query(layout.JOB_PK, consistent_read=True)
        if job.kind == kind and job.state != "created"
    ]


def _view(job: Job) -> views.Job:
    return snapshot(views.Job, job)
