"""Provenance, message → record: which L1 records cite which L0 messages.

A record names the messages it was drawn from (``source_message_ids``). Beside the records, in the
user's L1 partition, one entry per citation — sort key ``c␟<message id>␟<record id>``, keys only —
answers the question every erasure of a message asks: which records cite it? The entries of one
message are one prefix, so the answer is one Query per message (or, for many messages at once, one
paged Query of the user's citations). A record remembers every message it ever cited (``cited``),
so its entries go with it when it is erased.

Order of writes (a record never outlives its sources): a writer puts its entries *before* the
record, and checks its sources again *after*; an eraser deletes the messages *before* it reads
the entries. Whichever of the two comes second sees the other's work, so a record written while
one of its sources is being erased is erased by one of them.
"""

from __future__ import annotations

from collections.abc import Iterable

from . import layout
from .concurrency import for_each, in_batches
from .counters import Where
from .models import Citation

LAYER = "L1"
WRITE_CHUNK = 100
READ_WIDTH = 16
# One Query per message up to this many messages; beyond, the user's citations are read whole.
PER_MESSAGE_QUERIES = 32


def _pk(where: Where, user_id: str) -> str:
    return where.item_pk(LAYER, user_id)


def _write(rows: list[Citation], *, delete: bool) -> None:
    def one(chunk: list[Citation]) -> None:
        with Citation.batch_write() as batch:  # retries unprocessed items itself
            for row in chunk:
                if delete:
                    batch.delete(row)
                else:
                    batch.save(row)

    for_each(one, in_batches(rows, WRITE_CHUNK))


def put(where: Where, user_id: str, atom_id: str, message_ids: Iterable[str]) -> None:
    """The entries saying record ``atom_id`` cites each of ``message_ids`` (idempotent)."""
    pk = _pk(where, user_id)
    _write([Citation(pk, layout.citation_sk(m, atom_id)) for m in dict.fromkeys(message_ids)], delete=False)


def _parse(sk: str) -> tuple[str, str]:
    _, message_id, atom_id = sk.split(layout.SEP, 2)
    return message_id, atom_id


def _of_one(pk: str, message_id: str) -> list[str]:
    rows = Citation.query(
        pk,
        Citation.sk.startswith(layout.citations_of(message_id)),
        consistent_read=True,
        attributes_to_get=["pk", "sk"],
    )
    return [row.sk for row in rows]


def _all(pk: str) -> list[str]:
    rows = Citation.query(
        pk, Citation.sk.startswith(layout.CITATIONS), consistent_read=True, attributes_to_get=["pk", "sk"]
    )
    return [row.sk for row in rows]


def citing(where: Where, user_id: str, message_ids: list[str]) -> dict[str, list[str]]:
    """Message id → the ids of the records that cite it (messages nothing cites are left out)."""
    pk = _pk(where, user_id)
    wanted = set(message_ids)
    if len(wanted) <= PER_MESSAGE_QUERIES:
        keys = [sk for found in for_each(lambda m: _of_one(pk, m), sorted(wanted), width=READ_WIDTH) for sk in found]
    else:
        keys = [sk for sk in _all(pk) if _parse(sk)[0] in wanted]
    found: dict[str, list[str]] = {}
    for sk in keys:
        message_id, atom_id = _parse(sk)
        found.setdefault(message_id, []).append(atom_id)
    return found


def forget(where: Where, user_id: str, pairs: Iterable[tuple[str, str]]) -> int:
    """Delete the entries of these (message id, record id) citations."""
    pk = _pk(where, user_id)
    rows = [Citation(pk, layout.citation_sk(m, a)) for m, a in dict.fromkeys(pairs)]
    _write(rows, delete=True)
    return len(rows)


def forget_record(where: Where, user_id: str, atom_id: str, cited: Iterable[str]) -> int:
    """Delete the entries of one record (every message it ever cited)."""
    return forget(where, user_id, ((m, atom_id) for m in cited))


def drop_user(where: Where, user_id: str) -> int:
    """Delete every citation entry of a user (their memory is being erased whole)."""
    pk = _pk(where, user_id)
    rows = [Citation(pk, sk) for sk in _all(pk)]
    _write(rows, delete=True)
    return len(rows)
