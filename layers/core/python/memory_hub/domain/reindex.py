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

from ..storage import counters, layout, messages, postings, records
from ..storage.counters import Where
from ..storage.errors import Cancelled
from ..storage.models import Message, Posting, Record
from ..storage.transactions import Transaction
from .atomic import searchable
from .search import term_counts

CHUNK = 25
LAYERS = ("L0", "L1")


@dataclass
class Progress:
    items: int = 0
    partitions: int = 0


def _marker_key(where: Where, layer: str, user_id: str) -> tuple[str, str]:
    return where.item_pk(layer, user_id), f"ix{layout.SEP}{postings.FORMAT}"


def _marker(where: Where, layer: str, user_id: str) -> Posting | None:
    pk, sk = _marker_key(where, layer, user_id)
    found = list(Posting.batch_get([(pk, sk)], consistent_read=True, attributes_to_get=["pk", "sk", "lsi3"]))
    return found[0] if found else None


def _save_marker(where: Where, layer: str, user_id: str, after: str | None) -> None:
    """``after``: the last item re-indexed; None once the whole partition is current. Kept in
    ``lsi3`` outside the term index's key space (no term digest starts with ``~``)."""
    pk, sk = _marker_key(where, layer, user_id)
    Posting(pk, sk, lsi3="~done" if after is None else f"~after{layout.SEP}{after}").save()


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


def _rewrite(where: Where, layer: str, user_id: str, chunk: list[Any]) -> None:
    """Re-index a chunk of items: their postings and lengths as the current analysis gives them."""
    postings.erase_of((item.pk, item.id) for item in chunk)
    fresh: list[Posting] = []
    lengths: dict[str, int] = {}
    for item in chunk:
        counts = term_counts(_text(layer, item))
        lengths[item.id] = sum(counts.values())
        fresh += _postings(layer, item, counts, lengths[item.id])
    postings.put(fresh)
    # Each item's length (BM25's document length) and the user's token total follow the analysis.
    model: type[Message] | type[Record] = Message if layer == "L0" else Record
    transaction = Transaction()
    delta = 0
    for item in chunk:
        delta += lengths[item.id] - int(item.terms or 0)
        transaction.update(
            f"item:{item.id}",
            item,
            [model.terms.set(lengths[item.id]), model.index_format.set(postings.INDEX_FORMAT)],
            condition=model.pk.exists() & (model.terms == item.terms),
        )
    counters.change(transaction, where, layer, user_id, 0, delta)
    try:
        transaction.commit()
    except Cancelled:
        pass  # an item changed or went meanwhile: its writer keeps its length; the next run fixes a drift


def partition(where: Where, layer: str, user_id: str, out_of_time: Callable[[], bool], progress: Progress) -> bool:
    """Bring one user's partition of one layer to the current index; False when time ran out."""
    marker = _marker(where, layer, user_id)
    if marker is not None and marker.lsi3 == "~done":
        return True
    after = marker.lsi3.split(layout.SEP, 1)[1] if marker is not None and marker.lsi3.startswith("~after") else ""
    items = messages.of_user(where, user_id) if layer == "L0" else records.of_user(where, user_id)
    # An item written by the current code says so (``index_format``): only older ones are rewritten.
    pending = sorted(
        (i for i in items if i.id > after and int(i.index_format or 0) < postings.INDEX_FORMAT), key=lambda i: i.id
    )
    for start in range(0, len(pending), CHUNK):
        if out_of_time():
            return False
        chunk = pending[start : start + CHUNK]
        _rewrite(where, layer, user_id, chunk)
        progress.items += len(chunk)
        _save_marker(where, layer, user_id, chunk[-1].id)
    _save_marker(where, layer, user_id, None)
    progress.partitions += 1
    return True


def forget(where: Where, user_id: str) -> None:
    """Drop the user's re-index markers (their memory was erased)."""
    for layer in LAYERS:
        pk, sk = _marker_key(where, layer, user_id)
        Posting(pk, sk).delete()


def memory(where: Where, out_of_time: Callable[[], bool]) -> Progress:
    """Every partition of one memory epoch (its users from the counters)."""
    progress = Progress()
    for user_id in counters.users(where):
        for layer in LAYERS:
            if not partition(where, layer, user_id, out_of_time, progress):
                return progress
    return progress
