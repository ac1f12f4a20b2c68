"""The exports' marker in this process over moto: an export puts it with its epoch, which never goes
back (an attempt that read the epoch before a clear leaves a later epoch's marker as it is), by a
compare-and-swap on the ETag it read; a clear's purge judges it by that epoch whatever its time
says, and never counts it as a file."""

from __future__ import annotations

import time
import uuid
from types import SimpleNamespace

import pytest
from memory_hub.domain.transfer import exporting
from memory_hub.storage import blobs, bucket, purge
from memory_hub.storage.errors import PreconditionFailed


def _job() -> SimpleNamespace:
    return SimpleNamespace(team_id=f"t{uuid.uuid4().hex[:8]}", agent_id="agent", sk=f"exp-{uuid.uuid4().hex}")


def _held(job) -> blobs.Blob:
    held = blobs.head(bucket.export_marker(job.team_id, job.agent_id))
    assert held is not None
    return held


def test_the_markers_epoch_never_goes_back_and_each_put_is_a_new_etag(aws):
    job = _job()
    exporting._mark(job, 7)
    first = _held(job)
    assert first.metadata["epoch"] == "7"
    exporting._mark(job, 6)  # an attempt that read the epoch before a clear
    assert _held(job).etag == first.etag, "a later epoch's marker is left as it is"
    exporting._mark(job, 7)
    again = _held(job)
    assert again.metadata["epoch"] == "7" and again.etag != first.etag, "the same epoch: put again (newer)"
    exporting._mark(job, 8)
    assert _held(job).metadata["epoch"] == "8"


def _put_with(monkeypatch, meanwhile, *, lose: bool, every: bool = False) -> list:
    """``blobs.put`` with ``meanwhile(real_put, key, if_match)`` run before this export's first put
    (``every``: before each) — another export's put, the cleanup's delete — then the put lost
    (``lose``: PreconditionFailed, as S3 answers) or made; what ``meanwhile`` answered."""
    real, seen = blobs.put, []

    def put(key, text, metadata, *, if_match):
        if every or not seen:
            seen.append(meanwhile(real, key, if_match))
            if lose:
                raise PreconditionFailed(key)
        return real(key, text, metadata, if_match=if_match)

    monkeypatch.setattr(blobs, "put", put)
    return seen


def test_a_marker_put_meanwhile_is_read_again_never_overwritten_blind(aws, monkeypatch):
    job = _job()
    exporting._mark(job, 3)
    later = _put_with(monkeypatch, lambda put, key, m: put(key, "other", {"epoch": "9"}, if_match=m), lose=True)
    exporting._mark(job, 4)
    assert _held(job).metadata["epoch"] == "9" and _held(job).etag == later[0]


def test_exports_racing_for_the_marker_all_go_on_when_another_put_it_after_their_read(aws, monkeypatch):
    """Every put loses to another export's of the same epoch, made after this one read the marker:
    that put is as new as this one's would be — the export goes on (it failed after five losses)."""
    job = _job()
    exporting._mark(job, 2)
    another = lambda put, key, m: put(key, "another export", {"epoch": "2"}, if_match=m)  # noqa: E731
    others = _put_with(monkeypatch, another, lose=True, every=True)
    exporting._mark(job, 2)
    assert len(others) == 1 and _held(job).etag == others[0]


def test_a_marker_deleted_under_the_put_is_put_again(aws, monkeypatch):
    job = _job()
    exporting._mark(job, 2)
    lost = _put_with(monkeypatch, lambda put, key, m: blobs.delete(key), lose=False)  # the cleanup drops it
    exporting._mark(job, 3)
    assert lost == [True] and _held(job).metadata["epoch"] == "3"


def _target(job, epoch: int) -> purge.Target:
    # the clear's clock an hour ahead of S3's: every object looks older than the epoch change
    retired = int(time.time() * 1000) + 3_600_000
    return purge.Target(f"m-{job.team_id}", job.team_id, job.agent_id, epoch, retired)


@pytest.mark.parametrize(("marked", "kept"), [(5, True), (4, False)])
def test_a_clears_purge_judges_the_marker_by_its_epoch_and_never_counts_it(aws, marked, kept):
    job = _job()
    exporting._mark(job, marked)
    scene = bucket.scene_key(job.team_id, job.agent_id, "a.md")
    blobs.put_bytes(scene, b"x", "text/markdown", {"epoch": "4"})
    result = purge.Result()
    assert purge.objects(_target(job, 4), result, purge.Deadline.after(30))
    assert (blobs.head(bucket.export_marker(job.team_id, job.agent_id)) is not None) is kept
    assert blobs.head(scene) is None and result.files == 1, "the file goes and is counted; the marker is not"
