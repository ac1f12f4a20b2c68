"""What storage reports to the layers above, in its own terms (no HTTP status here)."""

from __future__ import annotations

from typing import Any


class StorageError(Exception):
    """Base of the storage errors below."""


class Busy(StorageError):
    """Too many concurrent writers (or clears) for one item: retried until the deadline, then given up.
    Safe to retry later."""


class Cancelled(StorageError):
    """A transaction was cancelled because conditions failed: ``failed`` names those actions."""

    def __init__(self, failed: list[str]) -> None:
        super().__init__("transaction cancelled: " + ", ".join(failed))
        self.failed = failed


class PreconditionFailed(StorageError):
    """An S3 object changed (or vanished, or appeared) between our read and our conditional write."""


class Unfinished(Busy):
    """An erasure stopped at its request's time budget after erasing a part: what it erased is gone,
    the rest is still there, and repeating the request finishes it."""

    def __init__(self, removed: list[Any] | None = None) -> None:
        super().__init__("the erasure did not finish within this request; what it erased is gone: repeat it to finish")
        self.removed = removed or []  # the items erased before it stopped (what goes with them is the caller's)
