"""What storage reports to the layers above, in its own terms (no HTTP status here)."""

from __future__ import annotations


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
