"""What a re-index writes beside the postings (``domain/reindex`` runs it): a progress marker per
(layer, user) partition and each item's length.

The marker is an item in the user's partition (``ix␟<format>``) that records the last item
re-indexed, then that the partition is current; its position is kept in ``lsi3``, outside the term
index's key space (no term digest starts with ``~``).
"""

from __future__ import annotations

from collections.abc import Sequence

from . import counters, layout, postings, views
from .counters import Where
from .errors import Cancelled
from .models import Message, Posting, Record
from .transactions import Transaction

DONE = "~done"
_AFTER = "~after"


def _marker_key(where: Where, layer: str, user_id: str) -> tuple[str, str]:
    pk = where.item_pk(layer, user_id)
    return pk, f"ix{layout.SEP}{postings.current_since(pk)}"


def position(where: Where, layer: str, user_id: str) -> str | None:
    """Where the partition's re-index stands: ``DONE``, the id of the last item re-indexed, or
    None when it has not begun (or its marker is not one this format writes: it begins again)."""
    pk, sk = _marker_key(where, layer, user_id)
    found = list(Posting.batch_get([(pk, sk)], consistent_read=True, attributes_to_get=["pk", "sk", "lsi3"]))
    if not found:
        return None
    mark = found[0].lsi3
    return DONE if mark == DONE else mark.split(layout.SEP, 1)[1] if mark.startswith(_AFTER) else None


def advance(where: Where, layer: str, user_id: str, after: str) -> None:
    """The partition is re-indexed up to the item ``after``."""
    pk, sk = _marker_key(where, layer, user_id)
    Posting(pk, sk, lsi3=f"{_AFTER}{layout.SEP}{after}").save()


def finish(where: Where, layer: str, user_id: str) -> None:
    """The whole partition is current."""
    pk, sk = _marker_key(where, layer, user_id)
    Posting(pk, sk, lsi3=DONE).save()


def forget(where: Where, user_id: str, layers: Sequence[str]) -> None:
    """Drop the user's markers (their memory was erased)."""
    for layer in layers:
        pk, sk = _marker_key(where, layer, user_id)
        Posting(pk, sk).delete()


def set_lengths(
    where: Where, layer: str, user_id: str, chunk: Sequence[views.Message | views.Record], lengths: dict[str, int]
) -> set[str]:
    """Each item's length (BM25's document length) and format as the current analysis gives them,
    and the user's token total moved by the difference, in one transaction. An item that changed or
    went meanwhile cancels it: the others are set again without it (its writer keeps its length,
    and the next run fixes a drift). Returns the ids of the items left out."""
    model: type[Message] | type[Record] = Message if layer == "L0" else Record
    left_out: set[str] = set()
    while pending := [item for item in chunk if item.id not in left_out]:
        transaction = Transaction()
        delta = 0
        for item in pending:
            delta += lengths[item.id] - int(item.terms or 0)
            transaction.update(
                f"item:{item.id}",
                item,
                [model.terms.set(lengths[item.id]), model.index_format.set(postings.index_format(item.pk))],
                condition=model.pk.exists() & (model.terms == item.terms),
            )
        counters.change(transaction, where, layer, user_id, 0, delta)
        try:
            transaction.commit()
        except Cancelled as exc:
            refused = {name.split(":", 1)[1] for name in exc.failed if name.startswith("item:")}
            if not refused:  # not an item's doing: as before, the next run fixes a drift
                return left_out
            left_out |= refused
            continue
        break
    return left_out
