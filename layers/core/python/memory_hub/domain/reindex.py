"""Re-index after the analyzer or the index format changed: every L0 message and L1 record of a
memory gets the postings the current analysis gives it (stems, no stop words, impact order) and
its terms counted in their document frequencies; the item's length and its user's token counter
follow.

It runs per (memory epoch, layer, user) from the scheduled cleanup (``memory-hub cleanup`` runs it
at once after an upgrade). It is idempotent — rewriting an item erases all its postings, whatever
their format, and writes the current ones, so doing it twice changes nothing — and resumable: a
marker item in the user's partition (``ix␟<format>``) records the last item done and, at the end,
that the partition is current, so a run that runs out of time goes on where it stopped. Items
written after the upgrade are indexed the current way already; rewriting them again is harmless.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..analysis import searchable, term_counts
from ..storage import counters, messages, postings, records, reindexing
from ..storage.counters import Where
from ..storage.views import Message, Posting, Record

CHUNK = 25
LAYERS = ("L0", "L1")


@dataclass
class Progress:
    items: int = 0
    partitions: int = 0


def _text(layer: str, item: Any) -> str:
    return item.content if layer == "L0" else searchable(item.content, item.background or "")


def _postings(layer: str, item: Any, counts: Any, length: int) -> list[Posting]:
    if layer == "L0":
        return postings.build(
            item.pk,
            item.id,
            counts,
            length,
            timestamp=int(item.timestamp),
            session_id=item.session_id,
            task_id=item.task_id,
        )
    return postings.build(item.pk, item.id, counts, length, type_=item.type, task_id=item.task_id)


def _rewrite(where: Where, layer: str, user_id: str, chunk: list[Message | Record]) -> None:
    """Re-index a chunk of items: their postings and lengths as the current analysis gives them (a
    term the old postings held too keeps its count as it is). An item erased meanwhile has the
    postings written for it erased again: its erasure looked for those of its old format."""
    stale = postings.held_by(chunk)
    fresh: list[Posting] = []
    lengths: dict[str, int] = {}
    for item in chunk:
        counts = term_counts(_text(layer, item))
        lengths[item.id] = sum(counts.values())
        fresh += _postings(layer, item, counts, lengths[item.id])
    postings.replace(stale, fresh)
    left_out = reindexing.set_lengths(where, layer, user_id, chunk, lengths)
    gone = left_out - _present(where, layer, user_id, sorted(left_out)) if left_out else set()
    if gone:  # erased meanwhile: its erasure looked for the postings of its old format, not these
        postings.delete([row for row in fresh if postings.item_in_key(row) in gone])


def _present(where: Where, layer: str, user_id: str, ids: list[str]) -> set[str]:
    """Which of these items exist (those of running imports included)."""
    everything = where.everything()
    if layer == "L0":
        return set(messages.get_many(everything, user_id, ids))
    return set(records.get_many(everything, user_id, ids))


def partition(where: Where, layer: str, user_id: str, out_of_time: Callable[[], bool], progress: Progress) -> bool:
    """Bring one user's partition of one layer to the current index; False when time ran out."""
    at = reindexing.position(where, layer, user_id)
    if at == reindexing.DONE:
        return True
    after = at or ""
    items: list[Message] | list[Record] = (
        messages.of_user(where, user_id) if layer == "L0" else records.of_user(where, user_id)
    )
    # An item says what it was indexed in (``index_format``): only those searches cannot read are
    # rewritten (a message of format 3 is counted another way than one of today, keyed alike).
    current = postings.current_since(where.item_pk(layer, user_id))
    pending = sorted((i for i in items if i.id > after and int(i.index_format or 0) < current), key=lambda i: i.id)
    for start in range(0, len(pending), CHUNK):
        if out_of_time():
            return False
        chunk = pending[start : start + CHUNK]
        _rewrite(where, layer, user_id, chunk)
        progress.items += len(chunk)
        reindexing.advance(where, layer, user_id, chunk[-1].id)
    reindexing.finish(where, layer, user_id)
    progress.partitions += 1
    return True


def forget(where: Where, user_id: str) -> None:
    """Drop the user's re-index markers (their memory was erased)."""
    reindexing.forget(where, user_id, LAYERS)


def memory(where: Where, out_of_time: Callable[[], bool]) -> Progress:
    """Every partition of one memory epoch (its users from the counters)."""
    progress = Progress()
    for user_id in counters.users(where):
        for layer in LAYERS:
            if not partition(where, layer, user_id, out_of_time, progress):
                return progress
    return progress
