"""domain/reindex.py (moto in process): items indexed before stems, stop words and impact order are
found again after the re-index, which is idempotent and resumable."""

from __future__ import annotations

import uuid
from collections import Counter

from memory_hub.analysis import query_terms, term_counts, words
from memory_hub.domain import reindex, retrieval
from memory_hub.storage import counters, layout, messages, postings, reindexing
from memory_hub.storage.counters import Where
from memory_hub.storage.models import Message, Posting
from memory_hub.storage.transactions import Transaction


def _stored_message(
    where: Where, user: str, item_id: str, text: str, length: int, index_format: int | None = None
) -> None:
    """The message item itself, said at time 1 in session ``s``."""
    Message(
        where.item_pk("L0", user),
        item_id,
        id=item_id,
        lsi1=layout.time_key(1, item_id),
        lsi2=layout.session_key("s", 1, item_id),
        user_id=user,
        session_id="s",
        role="user",
        content=text,
        timestamp=1,
        recorded_at=1,
        terms=length,
        index_format=index_format,
    ).save()


def _old_message(where: Where, user: str, item_id: str, text: str) -> None:
    """A message as the earlier code stored it: unstemmed terms, postings keyed ``<term>␟<id>``."""
    pk = where.item_pk("L0", user)
    tokens = words(text)
    _stored_message(where, user, item_id, text, len(tokens))
    for token in set(tokens):
        digest = layout.term_digest(token)
        Posting(
            pk,
            layout.posting_sk(item_id, digest),
            lsi3=f"{digest}{layout.SEP}{item_id}",
            term_frequency=1,
            item_length=len(tokens),
        ).save()
    transaction = Transaction()
    counters.change(transaction, where, "L0", user, 1, len(tokens))
    transaction.commit()


def _found(where: Where, user: str, query: str) -> list[str]:
    stats = counters.of_user(where, "L0", user)
    pk = where.item_pk("L0", user)

    def counts(ids: list[str]) -> dict[str, Counter[str]]:
        return {i: term_counts(m.content) for i, m in messages.get_many(where, user, ids).items()}

    return [i for i, _ in retrieval.ranked(pk, query_terms(query), 5, postings.Filters(), lambda: stats, counts).order]


def test_an_item_indexed_the_old_way_is_found_after_the_reindex(aws):
    where = Where(f"t{uuid.uuid4().hex[:8]}", "agent", 1, "m")
    _old_message(where, "u1", "msg-000000000000000000000000a1", "Prefers aisle seats on long flights")
    _old_message(where, "u1", "msg-000000000000000000000000a2", "The car needs an oil change")
    assert _found(where, "u1", "seat") == []  # the old postings are not read by the new search

    progress = reindex.memory(where, lambda: False)
    assert progress.items == 2 and progress.partitions >= 1
    assert _found(where, "u1", "seat") == ["msg-000000000000000000000000a1"]
    assert _found(where, "u1", "changing oil") == ["msg-000000000000000000000000a2"]
    # lengths follow the analysis (stop words no longer count), and the item says it is current
    item = Message.get(where.item_pk("L0", "u1"), "msg-000000000000000000000000a1", consistent_read=True)
    assert int(item.terms) == 5 and int(item.index_format) == postings.MESSAGE_FORMAT
    assert counters.of_user(where, "L0", "u1") == (2, 5 + 4)  # car need oil chang
    # no posting of the old format is left: a message's are keyed by term now, none by item
    pk = where.item_pk("L0", "u1")
    assert list(Posting.query(pk, Posting.sk.startswith("p"), consistent_read=True)) == []
    rows = list(Posting.query(pk, Posting.sk.startswith("t"), consistent_read=True))
    assert len(rows) == 5 + 4 and all(r.lsi3 is None for r in rows)

    again = reindex.memory(where, lambda: False)
    assert again.items == 0  # done: the marker says so
    assert _found(where, "u1", "seat") == ["msg-000000000000000000000000a1"]


def test_a_reindex_out_of_time_goes_on_where_it_stopped(aws, monkeypatch):
    where = Where(f"t{uuid.uuid4().hex[:8]}", "agent", 1, "m")
    ids = [f"msg-0000000000000000000000{n:04d}" for n in range(5)]
    for n, item_id in enumerate(ids):
        _old_message(where, "u1", item_id, f"note number {n} about apples")
    monkeypatch.setattr(reindex, "CHUNK", 2)
    calls = iter([False, True])  # one chunk, then out of time
    first = reindex.memory(where, lambda: next(calls, True))
    assert first.items == 2 and first.partitions == 0
    second = reindex.memory(where, lambda: False)
    assert second.items == 3  # the rest, not the first two again
    assert sorted(_found(where, "u1", "apple")) == sorted(ids)
    digest = layout.term_digest("appl")
    # each item counted once (what its posting carries), however often the re-index ran
    counted = sum(postings.share(i, digest) for i in ids)
    assert postings.frequencies(where.item_pk("L0", "u1"), [digest]) == {digest: counted}


def _format2_message(where: Where, user: str, item_id: str, text: str) -> None:
    """A message as the code before term-keyed postings stored it: impact-ordered postings keyed by
    item (``p␟<id>␟<term>``) with a ``by-term`` index entry each, counted in the frequencies."""
    pk = where.item_pk("L0", user)
    counts = term_counts(text)
    length = sum(counts.values())
    _stored_message(where, user, item_id, text, length, index_format=2)
    for term, frequency in counts.items():
        digest = layout.term_digest(term)
        value = postings.impact(frequency, length)
        Posting(
            pk,
            layout.posting_sk(item_id, digest),
            lsi3=postings.term_key(digest, value, item_id),
            term_frequency=frequency,
            item_length=length,
            timestamp=1,
            session_digest=layout.digest("s"),
        ).save()
        Posting(pk, postings.frequency_sk(digest)).update(actions=[Posting.document_frequency.add(1)])
    transaction = Transaction()
    counters.change(transaction, where, "L0", user, 1, length)
    transaction.commit()


def test_messages_indexed_by_item_are_rewritten_keyed_by_term_and_counted_once(aws):
    where = Where(f"t{uuid.uuid4().hex[:8]}", "agent", 1, "m")
    pk = where.item_pk("L0", "u1")
    ids = [f"msg-0000000000000000000000{n:04d}" for n in range(3)]
    for n, item_id in enumerate(ids):
        _format2_message(where, "u1", item_id, f"apples and pears, basket {n}")
    digests = [layout.term_digest(t) for t in ("appl", "pear", "basket")]
    assert postings.frequencies(pk, digests) == dict.fromkeys(digests, 3)
    assert _found(where, "u1", "apples") == []  # by item: not read by a search of today

    assert reindex.memory(where, lambda: False).items == 3
    assert sorted(_found(where, "u1", "apples")) == sorted(ids)
    assert list(Posting.query(pk, Posting.sk.startswith("p"), consistent_read=True)) == []
    # uncounted one each, counted again as today's postings carry
    assert postings.frequencies(pk, digests) == {d: sum(postings.share(i, d) for i in ids) for d in digests}
    # and each message's postings are found from its text when it goes: nothing left, no count
    gone = list(messages.get_many(where, "u1", ids).values())
    messages.delete(where, gone, lambda part: [])
    assert list(Posting.query(pk, Posting.sk.startswith("t"), consistent_read=True)) == []
    assert postings.frequencies(pk, digests) == dict.fromkeys(digests, 0)


def test_a_message_of_format_3_is_current_and_left_as_it_is(aws):
    """Format 3 and 4 hold the same postings (only counted another way): the re-index passes a
    format-3 message by, and a partition done at format 3 stays done."""
    where = Where(f"t{uuid.uuid4().hex[:8]}", "agent", 1, "m")
    _stored_message(where, "u1", "msg-00000000000000000000000001", "pears", 1, index_format=3)
    progress = reindex.Progress()
    assert reindex.partition(where, "L0", "u1", lambda: False, progress) and progress.items == 0
    stored = Message.get(where.item_pk("L0", "u1"), "msg-00000000000000000000000001", consistent_read=True)
    assert int(stored.index_format) == 3
    assert reindexing.position(where, "L0", "u1") == reindexing.DONE  # at ``ix␟3``, as before


def test_a_message_erased_while_its_chunk_is_reindexed_leaves_no_posting_and_the_rest_are_current(aws, monkeypatch):
    """An erasure that read a message in its old format looks for postings of that format: if the
    re-index wrote the new ones meanwhile, the re-index erases them again; the other messages of
    the chunk still become current (one item gone does not hold the rest back)."""
    where = Where(f"t{uuid.uuid4().hex[:8]}", "agent", 1, "m")
    pk = where.item_pk("L0", "u1")
    ids = [f"msg-0000000000000000000000{n:04d}" for n in range(3)]
    for n, item_id in enumerate(ids):
        _format2_message(where, "u1", item_id, f"apples and pears, basket {n}")
    doomed = messages.get_many(where, "u1", ids[:1])[ids[0]]  # as its erasure read it: format 2
    rewrite = postings.replace

    def erased_meanwhile(stale: list, fresh: list) -> None:
        rewrite(stale, fresh)
        messages.delete(where, [doomed], lambda part: [])

    monkeypatch.setattr(postings, "replace", erased_meanwhile)
    assert reindex.memory(where, lambda: False).items == 3
    monkeypatch.undo()
    held = {postings.item_in_key(r) for r in Posting.query(pk, Posting.sk.startswith("t"), consistent_read=True)}
    assert held == set(ids[1:])  # none of the erased message's
    for item_id in ids[1:]:
        assert int(Message.get(pk, item_id, consistent_read=True).index_format) == postings.MESSAGE_FORMAT
    messages.delete(where, list(messages.get_many(where, "u1", ids[1:]).values()), lambda part: [])
    assert list(Posting.query(pk, Posting.sk.startswith("t"), consistent_read=True)) == []
    assert list(Posting.query(pk, Posting.sk.startswith("df"), consistent_read=True)) == []  # no count left
