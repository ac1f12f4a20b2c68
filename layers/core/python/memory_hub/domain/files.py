"""What L2 scene files and the L3 persona share: S3 objects stamped with the content epoch they
belong to, and one compare-and-swap write loop.

A write reads the object, builds the new version, puts it only over exactly what it read
(``IfMatch``; ``IfNoneMatch`` for a new object) and then commits (index and/or audit event, in one
transaction). Losing the race to another writer, or to a removal, means reading again. If the
commit fails for any other reason the object is put back as it was, so a change and its audit
event succeed or fail together.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..observability import logger
from ..storage import blobs
from ..storage.errors import PreconditionFailed
from ..storage.retry import attempts
from .errors import Unavailable


def visible(blob: blobs.Blob | None, epoch: float | None) -> blobs.Blob | None:
    """The object if it belongs to the memory's current content epoch (older ones are cleared)."""
    if blob is None or epoch is None or blob.metadata.get("epoch") != str(int(epoch)):
        return None
    return blob


def number(blob: blobs.Blob | None, name: str) -> int:
    try:
        return int(blob.metadata.get(name, "0")) if blob else 0
    except ValueError:
        return 0


@dataclass
class Draft:
    """One attempt's new version of an object, and what it replaces."""

    text: str
    metadata: dict[str, str]
    replaces: blobs.Blob | None
    facts: dict[str, Any] = field(default_factory=dict)
    unchanged: bool = False  # the object already holds what would be written: nothing to do


def compare_and_swap(key: str, what: str, prepare: Callable[[], Draft], commit: Callable[[Draft, str], bool]) -> Draft:
    """Write ``prepare()``'s draft over exactly the object it read, then ``commit`` it (True: done;
    False: the content epoch moved on, write again). A draft marked ``unchanged`` is returned as it
    is. Retried under the one policy."""
    for _ in attempts(what):
        draft = prepare()
        if draft.unchanged:
            return draft
        try:
            etag = blobs.put(key, draft.text, draft.metadata, if_match=draft.replaces.etag if draft.replaces else None)
        except PreconditionFailed:
            continue
        try:
            done = commit(draft, etag)
        except Exception as exc:
            _restore(key, draft.replaces, etag)
            if isinstance(exc, PreconditionFailed | Unavailable):
                raise
            logger.exception("commit failed; the object was put back", extra={"what": what})
            raise Unavailable(f"{what}: storage failed, nothing was changed; try again") from exc
        if done:
            return draft
    raise AssertionError("unreachable: attempts() raises when it gives up")


def _restore(key: str, previous: blobs.Blob | None, ours: str) -> None:
    """Undo our put — unless someone else has already written over it."""
    try:
        if previous is None or previous.text is None:
            blobs.delete(key, if_match=ours)
        else:
            blobs.put(key, previous.text, previous.metadata, if_match=ours)
    except PreconditionFailed:
        pass  # a later write replaced ours: nothing of ours is left to undo
    except Exception:
        logger.exception("could not put the object back", extra={"key_bytes": len(key)})
