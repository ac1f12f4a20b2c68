"""The search index: impact-ordered postings and per-term document frequencies, in the partition of
the items they index.

A posting is one distinct term of one item, ordered within its term by *impact* (BM25's
term-frequency part computed with a fixed reference length, ``REFERENCE_LENGTH``): the postings of a
term are read best first, and a search can stop reading a term once nothing unread could enter its
answer (the true BM25 part of an unread posting is bounded by ``bound(impact, average length)``;
see ``domain.retrieval``). Two layouts, by layer:

- A *message's* postings are keyed by term in the table itself (``t␟<term>␟3<impact>␟<id>``): one
  write each. A message never changes, so its postings are a function of its text
  (``memory_hub.analysis``): they are found again from it when it goes (``held_by``), before the
  message (``erase_ahead``: a request dying after the message went would leave them, its retry no
  longer finding it), and a retried erasure uncounts only the postings it found.
- A *record's* postings are keyed by item (``p␟<id>␟<term>``) and ordered by term in the
  ``by-term`` index (``<term>␟2<impact>␟<id>``): an update rewrites what the record holds, and
  racing updates converge by reading the postings present under the record's prefix — which a
  term-keyed layout cannot list. Each costs two writes (the item and its index entry).

Beside the postings of a term sits its document frequency (``df␟<term>``, outside the ``by-term``
index: an update writes the row alone, one write unit, where an index entry would double it). A
search reads the frequencies of its terms in one ``BatchGetItem`` beside their first pages
(``frequencies``). It changes with the postings (written and erased by the same calls, one plain
update per term whose count moves), so it is right unless a process dies between the two; the
re-index (``domain.reindex``) rewrites an item's postings with their counts.

A term's count is *sampled*: one posting in ``SAMPLE`` (chosen by a hash of its item and term, so
every writer and eraser makes the same choice) adds ``SAMPLE``, the others nothing, and each
carries what it added (``n``) so an erasure takes off exactly that — a message's are computed
again from its text, a record's read under its prefix. An add then updates about T ÷ ``SAMPLE``
counters instead of T (T: the item's distinct terms), and a record's update moves a kept term's
count not at all (its share is the same). The count is exact on average, not posting by posting;
so a search counts the postings of a term it needs exactly (``count_up_to``, for a term below
``EXACT_BELOW`` postings whose first page did not hold them all) and takes the sampled count only
above that, for a word common enough to weigh little (``document_frequencies``). Messages of
format 3 and records of format 2 counted one a posting (``n`` absent); both kinds sum in one
counter, and their postings are keyed as today's.

An item records the format it was indexed in (``index_format``): messages indexed before their
postings were keyed by term (format 2, by item) are erased by their prefix and rewritten by
``domain.reindex``; until then a search does not find them by words. Postings older still (no impact
in their index key) are not read by searches either. Terms appear in keys only as digests.
"""

from __future__ import annotations

import hashlib
from collections import Counter as Tally
from collections.abc import Callable, Iterable, Mapping, Set
from dataclasses import dataclass
from typing import Any, TypeVar

from pynamodb.constants import COUNT
from pynamodb.exceptions import DeleteError

from ..analysis import searchable, term_counts
from . import layout, views
from .concurrency import Deadline, for_each, in_batches, parallel
from .errors import Unfinished
from .models import Posting, own, snapshot

WRITE_CHUNK = 100  # postings per batch_write context (PynamoDB sends them 25 at a time)
READ_WIDTH = 16  # terms or items looked up at once
WRITE_WIDTH = 16  # document frequencies updated at once
FORMAT = "2"  # the by-term index key format of a record's impact-ordered postings
MESSAGE_KEYS = 3  # a message's postings keyed by term, the format digit of their keys (formats 3 and 4)
MESSAGE_FORMAT = 4  # what a message records it was indexed with: keyed by term, counted by sampling
VECTOR_FORMAT = 5  # a message whose terms are in its vector (``vectors.TERMS``): no postings, counted as 4
RECORD_KEYS = int(FORMAT)  # a record's postings in the by-term index, the format digit of their keys
RECORD_FORMAT = 3  # what a record records: its by-term keys (format 2), counted by sampling
SAMPLE = 8  # a posting adds SAMPLE to its term's count one time in SAMPLE, else nothing
EXACT_BELOW = 64  # a search counts a term's postings itself up to this many
_KEYS_AND_SHARE = ["pk", "sk", "lsi3", "n"]  # what an erasure reads of a posting (``n``: its share)
_BY_TERM = "t"  # the sort-key kind of a posting keyed by term
REFERENCE_LENGTH = 16.0  # the item length the static impact is computed with
K1, B = 1.2, 0.75
_IMPACT_DIGITS = 7
_IMPACT_SCALE = 10**_IMPACT_DIGITS - 1
MAX_IMPACT = K1 + 1


def impact(frequency: int, length: int) -> float:
    """BM25's term-frequency part at the reference length (0 < impact < k1 + 1)."""
    return float(frequency * (K1 + 1) / (frequency + K1 * (1 - B + B * length / REFERENCE_LENGTH)))


def bound(impact_value: float, average_length: float) -> float:
    """The largest BM25 term-frequency part (at ``average_length``) of a posting whose static
    impact is at most ``impact_value``: stretching the average length by a factor stretches the
    length penalty by at most that factor."""
    quantum = MAX_IMPACT / _IMPACT_SCALE
    return float((impact_value + quantum) * max(1.0, average_length / REFERENCE_LENGTH))


def _impact_key(value: float) -> str:
    """Fixed-width, highest impact first in ascending order."""
    return f"{round((1 - value / MAX_IMPACT) * _IMPACT_SCALE):0{_IMPACT_DIGITS}d}"


def term_key(digest: str, value: float, item_id: str) -> str:
    """A record's posting in the ``by-term`` index."""
    return f"{digest}{layout.SEP}{FORMAT}{_impact_key(value)}{layout.SEP}{item_id}"


def by_term_sk(digest: str, value: float, item_id: str) -> str:
    """A message's posting, keyed by its term in the table."""
    return f"{_term_prefix(digest)}{_impact_key(value)}{layout.SEP}{item_id}"


def _term_prefix(digest: str) -> str:
    return f"{_BY_TERM}{layout.SEP}{digest}{layout.SEP}{MESSAGE_KEYS}"


def keyed_by_term(pk: str) -> bool:
    """Whether a partition's postings are keyed by term (a user's messages) or by item (records)."""
    return layout.layer_of(pk) == "L0"


def index_format(pk: str) -> int:
    """The format an item of this partition is indexed in today."""
    return MESSAGE_FORMAT if keyed_by_term(pk) else RECORD_FORMAT


def current_since(pk: str) -> int:
    """The oldest format of this partition that today's searches read (what the re-index leaves):
    a message of format 3 or 4 (a record of format 2 or 3) has the same postings, only counted
    another way."""
    return MESSAGE_KEYS if keyed_by_term(pk) else RECORD_KEYS


def share(item_id: str, digest: str) -> int:
    """What a posting written today adds to its term's count: ``SAMPLE`` for one in ``SAMPLE`` of
    them, chosen by a hash of the item and the term, else 0."""
    chosen = hashlib.blake2b(f"{item_id}{layout.SEP}{digest}".encode(), digest_size=4).digest()
    return SAMPLE if int.from_bytes(chosen, "big") % SAMPLE == 0 else 0


def frequency_sk(digest: str) -> str:
    return f"df{layout.SEP}{digest}"


@dataclass(frozen=True)
class Filters:
    """What a search is narrowed to, as the postings store it."""

    session_id: str | None = None
    task_id: str | None = None
    type: str | None = None
    start_ms: int | None = None
    end_ms: int | None = None

    def admit(self, row: views.Posting) -> bool:
        """Whether the item behind ``row`` passes (every posting of an item carries its filters)."""
        if self.session_id is not None and row.session_digest != layout.digest(self.session_id):
            return False
        if self.task_id is not None and row.task_digest != layout.digest(self.task_id):
            return False
        if self.type is not None and row.record_type != self.type:
            return False
        if self.start_ms is not None and (row.timestamp is None or int(row.timestamp) < self.start_ms):
            return False
        return not (self.end_ms is not None and (row.timestamp is None or int(row.timestamp) > self.end_ms))


def build(
    pk: str,
    item_id: str,
    counts: Mapping[str, int],
    length: int,
    *,
    timestamp: int | None = None,
    session_id: str | None = None,
    type_: str | None = None,
    task_id: str | None = None,
    sampled: bool = True,
) -> list[views.Posting]:
    """The postings of one item, each carrying what it adds to its term's count (``share``;
    ``sampled=False``: as a message of format 3 or a record of format 2 wrote them, one each,
    nothing carried)."""
    session = layout.digest(session_id) if session_id is not None else None
    task = layout.digest(task_id) if task_id is not None else None
    by_term = keyed_by_term(pk)
    rows: list[views.Posting] = []
    for term, frequency in counts.items():
        digest = layout.term_digest(term)
        value = impact(frequency, length)
        rows.append(
            _view(
                pk,
                by_term_sk(digest, value, item_id) if by_term else layout.posting_sk(item_id, digest),
                lsi3=None if by_term else term_key(digest, value, item_id),
                document_frequency=share(item_id, digest) if sampled else None,
                term_frequency=frequency,
                item_length=length,
                timestamp=timestamp,
                session_digest=session,
                record_type=type_,
                task_digest=task,
            )
        )
    return rows


def indexed(message: views.Message) -> list[views.Posting]:
    """A message's postings, from its text: what ``messages.add`` wrote for it (format 3 or 4)."""
    counts = term_counts(message.content)
    return build(
        message.pk,
        message.id,
        counts,
        sum(counts.values()),
        timestamp=int(message.timestamp),
        session_id=message.session_id,
        task_id=message.task_id,
        sampled=int(message.index_format or 0) >= MESSAGE_FORMAT,
    )


def _current(row: Any) -> bool:
    """Whether a posting is impact-ordered (counted in its term's document frequency)."""
    if row.sk.startswith(f"{_BY_TERM}{layout.SEP}"):
        return True
    key = getattr(row, "lsi3", None) or ""
    parts = key.split(layout.SEP)
    return len(parts) == 3 and parts[1].startswith(FORMAT) and row.sk.startswith(f"p{layout.SEP}")


def _counted(row: Any) -> int:
    """What a posting adds to its term's document frequency: what it carries (``share``), or one
    for a posting written before sampling (it carries nothing)."""
    if not _current(row):
        return 0
    return 1 if row.document_frequency is None else int(row.document_frequency)


def _frequencies(moves: Iterable[tuple[Any, int]]) -> None:
    """Move the document frequency of each (partition, term) by what its postings add (``_counted``)
    times their sign (+1 written, −1 erased): one plain ``UpdateItem`` per term whose count changes,
    side by side. The updates are independent (nothing reads two of them together), so a
    transaction would only double what each costs (DynamoDB bills transactional writes twice)."""
    deltas: Tally[tuple[str, str]] = Tally()
    for row, sign in moves:
        if n := _counted(row):
            deltas[(row.pk, digest_of(row))] += sign * n
    changes = [(key, n) for key, n in deltas.items() if n]

    def one(change: tuple[tuple[str, str], int]) -> None:
        (pk, digest), n = change
        row = Posting(pk, frequency_sk(digest))
        # (removing the index key takes a row written before out of the by-term index, once)
        row.update(actions=[Posting.document_frequency.add(n), Posting.lsi3.remove()])
        if n < 0 and int(row.document_frequency or 0) <= 0:  # the update answers the new count
            _drop_if_unused(pk, digest)  # a term no item holds any more leaves no trace of itself

    for_each(one, changes, width=WRITE_WIDTH)


def _drop_if_unused(pk: str, digest: str) -> None:
    """Delete a term's counter at zero — only then: a delete whose condition fails is billed all
    the same. The condition keeps a count that an add raised meanwhile."""
    try:
        Posting(pk, frequency_sk(digest)).delete(condition=Posting.document_frequency <= 0)
    except DeleteError as exc:
        if exc.cause_response_code != "ConditionalCheckFailedException":
            raise


def put(rows: list[views.Posting]) -> None:
    """Write new postings (none of them may exist yet) and count them in their terms' frequencies."""
    _write(rows)
    _frequencies((row, +1) for row in rows)


def count(rows: list[views.Posting], sign: int = +1) -> None:
    """Count postings in their terms' frequencies (``sign`` −1: uncount them) without writing or
    erasing them: the terms of a message whose words are in its vector (``VECTOR_FORMAT``), counted
    by the same shares as if it had postings (``build``)."""
    _frequencies((row, sign) for row in rows)


def replace(stale: list[Any], fresh: list[views.Posting]) -> None:
    """Erase ``stale`` postings, then write ``fresh`` ones (a key may be in both: a posting whose
    impact moved), moving each term's count by the difference only: a term both hold keeps its
    count untouched — two updates fewer for each (an item re-indexed, a record updated)."""
    _erase(stale)
    _write(fresh)
    _frequencies([*((row, -1) for row in stale), *((row, +1) for row in fresh)])


def _write(rows: list[views.Posting]) -> None:
    def one(chunk: list[views.Posting]) -> None:
        with Posting.batch_write() as batch:  # retries unprocessed items itself
            for row in chunk:
                batch.save(own(Posting, row))

    for_each(one, in_batches(rows, WRITE_CHUNK))


def _erase(rows: list[Any]) -> None:
    def one(chunk: list[Any]) -> None:
        with Posting.batch_write() as batch:
            for row in chunk:
                batch.delete(Posting(row.pk, row.sk))

    for_each(one, in_batches(rows, WRITE_CHUNK))


def of_item(pk: str, item_id: str) -> list[views.Posting]:
    """The postings an item holds under its prefix (a record's; a message's indexed before format 3)."""
    return _views(
        Posting.query(
            pk,
            Posting.sk.startswith(layout.postings_of(item_id)),
            consistent_read=True,
            attributes_to_get=_KEYS_AND_SHARE,
        )
    )


WAVE = 8 * WRITE_CHUNK  # postings erased between two looks at a deadline


def delete(rows: list[Any], until: Deadline | None = None) -> int:
    """Erase postings (as read by ``of_item``) and uncount them from their terms' frequencies. With
    ``until``: a wave at a time, stopping (Unfinished) once it has passed — what a wave erased is
    uncounted with it, so the counts stay those of the postings left."""
    for index, wave in enumerate(in_batches(rows, WAVE if until is not None else max(1, len(rows)))):
        if until is not None and index and until.passed():  # each request erases at least a wave
            raise Unfinished
        _erase(wave)
        _frequencies((row, -1) for row in wave)
    return len(rows)


def of_partition(pk: str) -> list[views.Posting]:
    """Every posting of one partition (one user's items of a layer), in one paged query per layout
    (a message partition may hold postings of both until it is re-indexed)."""
    kinds = [_BY_TERM, "p"] if keyed_by_term(pk) else ["p"]
    return [
        row
        for kind in kinds
        for row in _views(
            Posting.query(
                pk,
                Posting.sk.startswith(f"{kind}{layout.SEP}"),
                consistent_read=True,
                attributes_to_get=_KEYS_AND_SHARE,
            )
        )
    ]


def erase_in(pks: list[str], item_ids: Set[str], until: Deadline | None = None) -> int:
    """Remove every posting of these items from these partitions: the partitions are read whole,
    a page at a time (a user's erasure: one query instead of one per item)."""
    found = [row for rows in for_each(of_partition, pks) for row in rows if item_in_key(row) in item_ids]
    return delete(found, until)


def drop_counts(pks: list[str]) -> int:
    """Delete every term count left in these partitions (a user's erased whole: a count that drift
    left — a request that died between an item's transaction and its terms' counts — is no trace
    of what they held either). How many were left."""
    rows = [
        row
        for found in for_each(
            lambda pk: list(Posting.query(pk, Posting.sk.startswith(frequency_sk("")), consistent_read=True)), pks
        )
        for row in found
    ]
    _erase(rows)
    return len(rows)


def erase_items(pk: str, item_ids: list[str]) -> int:
    """Remove every posting of these records of one partition (whatever terms they held)."""
    if keyed_by_term(pk):
        raise ValueError("a message's postings are found from its text: erase_of(messages)")
    return delete(_under_prefix([(pk, item_id) for item_id in item_ids]))


def in_vector(item: Any) -> bool:
    """Whether an item's terms are in its vector, not in postings (``VECTOR_FORMAT``)."""
    return int(getattr(item, "index_format", None) or 0) == VECTOR_FORMAT


def vectored(items: Iterable[views.Message | views.Record]) -> list[views.Posting]:
    """The postings the items whose terms are in their vectors would have (none is written): what
    their terms' counts hold of them, from their text."""
    rows: list[views.Posting] = []
    for item in items:
        if in_vector(item):
            text = item.content if isinstance(item, views.Message) else searchable(item.content, item.background or "")
            counts = term_counts(text)
            rows += build(item.pk, item.id, counts, sum(counts.values()))
    return rows


def held_by(items: Iterable[views.Message | views.Record]) -> list[views.Posting]:
    """The postings these items hold: a message indexed in today's format from its text (nothing
    read), any other item by its prefix (read in parallel)."""
    computed: list[views.Posting] = []
    prefixed: list[tuple[str, str]] = []
    for item in items:
        if in_vector(item):
            continue  # no postings: its terms' counts are taken off once it is gone (``count``)
        if isinstance(item, views.Message) and int(item.index_format or 0) >= MESSAGE_KEYS:
            computed += indexed(item)
        else:
            prefixed.append((item.pk, item.id))
    return computed + _under_prefix(prefixed)


def _under_prefix(items: list[tuple[str, str]]) -> list[views.Posting]:
    return [row for rows in for_each(lambda k: of_item(*k), items, width=READ_WIDTH) for row in rows]


def erase_ahead(messages: list[views.Message]) -> int:
    """The postings of messages about to be deleted, erased before them: a request that dies after
    their transaction leaves none (its retry no longer finds the messages, whose text says where
    their postings are). A posting that carries a share of its term's count is deleted only if it
    is there, and only those found are uncounted, so a retry that finds the messages again (the
    request died before their transaction) uncounts nothing twice."""
    rows = held_by(messages)
    counted = [row for row in rows if _counted(row)]

    def if_there(row: Any) -> Any | None:
        try:
            Posting(row.pk, row.sk).delete(condition=Posting.pk.exists())
        except DeleteError as exc:
            if exc.cause_response_code != "ConditionalCheckFailedException":
                raise
            return None
        return row

    _, found = parallel(
        lambda: _erase([row for row in rows if not _counted(row)]),
        lambda: [row for row in for_each(if_there, counted, width=WRITE_WIDTH) if row is not None],
    )
    _frequencies((row, -1) for row in found)
    return len(rows)


def uncount_vectored(messages: Iterable[views.Message | views.Record], sign: int = -1) -> None:
    """Take the terms of items whose terms are in their vectors (no postings) off their counts, so
    that nothing of their words outlives them (a counter at zero goes): messages before they go,
    as ``erase_ahead`` does with postings (a retry after a request died between this and their
    transaction takes them off again: a count left low reads as the candidates holding the term,
    never a trace of a message that is gone); records once gone, as their postings are erased.
    ``sign`` +1 counts them again (a write that took them off and then failed)."""
    rows = vectored(messages)
    if rows:
        count(rows, sign)


def erase_of(items: Iterable[views.Message | views.Record]) -> int:
    """Remove every posting of these items (a message's found from its text). An erasure of
    messages by id erases theirs ahead of its transactions instead (``erase_ahead``), where a retry
    uncounts nothing twice."""
    return delete(held_by(items))


Removed = TypeVar("Removed", bound=list[Any])


def erase_removed(removed: Removed, beside: Callable[[Removed], object] | None = None) -> None:
    """The postings of items just deleted (each with its ``pk`` and ``id``), and ``beside(removed)``
    at the same time when there are any: one round trip instead of two."""

    def erase() -> None:
        erase_of(removed)

    if beside is not None and removed:
        parallel(erase, lambda: beside(removed))
    else:
        erase()


def digest(term: str) -> str:
    """A search term as its postings name it (a fixed-length digest)."""
    return layout.term_digest(term)


def digest_of(row: Any) -> str:
    """The term digest of a posting."""
    sk = str(row.sk)
    return sk.split(layout.SEP)[1] if sk.startswith(f"{_BY_TERM}{layout.SEP}") else sk.rsplit(layout.SEP, 1)[1]


def item_of(row: views.Posting) -> str:
    """The item of a posting read from a term's page."""
    return (row.lsi3 or row.sk).rsplit(layout.SEP, 1)[1]


def item_in_key(row: Any) -> str:
    """The item of a posting, from its key alone (either layout)."""
    sk = str(row.sk)
    return sk.rsplit(layout.SEP, 1)[1] if sk.startswith(f"{_BY_TERM}{layout.SEP}") else sk.split(layout.SEP)[1]


@dataclass
class Page:
    """One page of a term's postings, best impact first."""

    rows: list[views.Posting]
    next: dict[str, Any] | None  # where the next page starts; None when the term is exhausted


def term_page(pk: str, digest: str, limit: int, start: dict[str, Any] | None = None) -> Page:
    """Up to ``limit`` postings of one term after ``start``."""
    if keyed_by_term(pk):
        at = _term_prefix(digest)
        result = Posting.query(
            pk,
            Posting.sk.between(f"{at}0", f"{at}:"),
            consistent_read=True,
            limit=limit,
            last_evaluated_key=start,
        )
        return Page(_views(result), result.last_evaluated_key)
    prefix = f"{digest}{layout.SEP}{FORMAT}"
    result = Posting.by_term.query(
        pk,
        Posting.lsi3.between(f"{prefix}0", f"{prefix}:"),  # the impact digits: never a row of before
        consistent_read=True,
        limit=limit,
        last_evaluated_key=start,
    )
    rows = _views(result)
    return Page(rows, result.last_evaluated_key)


def count_up_to(pk: str, digest: str, cap: int) -> int:
    """How many postings a term has in a partition, counted up to ``cap``: one eventually
    consistent ``Query`` that answers a count (of the table's ``t␟`` range for messages, the
    ``by-term`` index's for records), billed by the postings it passes (~180 bytes each:
    ``EXACT_BELOW`` of them ≈ 1.5 read units)."""
    if keyed_by_term(pk):
        at = _term_prefix(digest)
        condition, index = Posting.sk.between(f"{at}0", f"{at}:"), None
    else:
        at = f"{digest}{layout.SEP}{FORMAT}"
        condition, index = Posting.lsi3.between(f"{at}0", f"{at}:"), Posting.by_term.Meta.index_name
    # One page (``Model.count`` would read on past ``limit``: it pages until the term is exhausted).
    answer = Posting._get_connection().query(  # the count of one page
        pk, range_key_condition=condition, index_name=index, limit=cap, select=COUNT
    )
    return int(answer["Count"])


def document_frequencies(
    pk: str, digests: list[str], first: list[Page], known: Mapping[str, int], asked: int
) -> dict[str, int]:
    """How many items hold each term (by digest), given its first page (``asked`` postings long)
    and its counter (``known``). A page that held all of a term's postings counted them. A
    counter is sampled (``SAMPLE``), so a term it puts below ``EXACT_BELOW`` has its postings
    counted (``count_up_to``, side by side): a word's weight is exact where it is large and moves
    most with a count's error. At or above it, the sampled count is taken: its error there is about
    √(SAMPLE ÷ count), a third at most and less as the count grows, and a word that common weighs
    little."""
    frequency: dict[str, int] = {}
    uncertain: list[str] = []
    for digest, page in zip(digests, first, strict=True):
        if page.next is None or len(page.rows) < asked:
            frequency[digest] = len(page.rows)  # the page held every posting of the term
            continue
        frequency[digest] = max(known[digest], len(page.rows))
        if frequency[digest] < EXACT_BELOW:
            uncertain.append(digest)
    counted = for_each(lambda d: count_up_to(pk, d, EXACT_BELOW), uncertain, width=READ_WIDTH)
    for digest, n in zip(uncertain, counted, strict=True):
        frequency[digest] = n if n < EXACT_BELOW else max(frequency[digest], EXACT_BELOW)
    return frequency


def frequencies(pk: str, digests: list[str]) -> dict[str, int]:
    """The document frequency of each term of one partition (0 for a term no item holds), in one
    eventually consistent ``BatchGetItem`` per 100 terms: it weighs a term, it finds nothing."""
    keys = [(pk, frequency_sk(d)) for d in dict.fromkeys(digests)]
    rows = [
        row
        for rows in for_each(
            lambda chunk: list(Posting.batch_get(chunk, attributes_to_get=["pk", "sk", "n"])), in_batches(keys, 100)
        )
        for row in rows
    ]
    found = {str(row.sk).split(layout.SEP, 1)[1]: int(row.document_frequency or 0) for row in rows}
    return {d: found.get(d, 0) for d in digests}


def _view(pk: str, sk: str, **attributes: Any) -> views.Posting:
    return snapshot(views.Posting, Posting(pk, sk, **attributes))


def _views(rows: Iterable[Posting]) -> list[views.Posting]:
    return [snapshot(views.Posting, row) for row in rows]
