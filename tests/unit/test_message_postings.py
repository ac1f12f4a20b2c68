"""A message's search postings (storage/postings.py, moto in process): keyed by term in the table,
with no index entry, and computed again from the message's text when it is erased — so what
``conversation/add`` wrote is exactly what an erasure finds, and an erasure retried with the same
messages does not uncount a term twice. A term's count is sampled: each posting carries what it
added (``SAMPLE`` or nothing), and the count is the sum of what its postings carry."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from in_process import fresh_scope, writer
from memory_hub.analysis import term_counts
from memory_hub.domain import assets, conversation
from memory_hub.storage import layout, messages, postings
from memory_hub.storage.models import Message, Posting


def _stored(pk: str, kind: str) -> dict[str, Posting]:
    return {r.sk: r for r in Posting.query(pk, Posting.sk.startswith(f"{kind}{layout.SEP}"), consistent_read=True)}


def _added(texts: list[str]) -> tuple[object, str, list[str]]:
    scope = fresh_scope()
    ids = conversation.add(scope, [{"role": "user", "content": t} for t in texts], writer(scope)).accepted_ids
    where = assets.where_of(assets.of_scope(scope))
    return where, where.item_pk("L0", scope.user_id), ids


TEXTS = st.lists(
    st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=80).filter(str.strip),
    min_size=1,
    max_size=4,
)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(texts=TEXTS)
def test_what_an_add_writes_is_what_the_messages_text_gives_back(aws, texts):
    where, pk, ids = _added(texts)
    held = list(messages.get_many(where, "u", ids).values())
    computed = {row.sk: row for message in held for row in postings.held_by([message])}
    stored = _stored(pk, "t")
    assert set(computed) == set(stored)  # every posting found from the text, none left over
    for sk, row in stored.items():
        assert row.lsi3 is None  # in no index: one write each
        assert (row.term_frequency, row.item_length, row.timestamp, row.document_frequency) == (
            computed[sk].term_frequency,
            computed[sk].item_length,
            computed[sk].timestamp,
            computed[sk].document_frequency,
        )
        assert row.document_frequency in (0, postings.SAMPLE)
    assert _stored(pk, "p") == {}
    assert _counts(pk) == _shares(pk)  # each term counts what its postings carry, nothing else


def _shares(pk: str) -> dict[str, int]:
    """What the postings of each term carry, summed (terms whose postings carry nothing left out)."""
    shares: dict[str, int] = {}
    for row in _stored(pk, "t").values():
        digest = postings.digest_of(row)
        shares[digest] = shares.get(digest, 0) + int(row.document_frequency)
    return {d: n for d, n in shares.items() if n}


def _counts(pk: str) -> dict[str, int]:
    """The document-frequency counters of a partition."""
    return {str(r.sk).split(layout.SEP, 1)[1]: int(r.document_frequency) for r in _stored(pk, "df").values()}


def test_an_erasure_retried_with_the_same_messages_uncounts_nothing_twice(aws):
    where, pk, ids = _added(["apple pie", "apple tart", "apple crumble"])
    digest = layout.term_digest("appl")
    doomed = list(messages.get_many(where, "u", ids[:1]).values())
    before = postings.frequencies(pk, [digest])[digest]
    left = sum(postings.share(i, digest) for i in ids[1:])
    messages.delete(where, doomed, lambda part: [])
    assert postings.frequencies(pk, [digest]) == {digest: left} and _counts(pk) == _shares(pk)
    assert before - left == postings.share(ids[0], digest)
    removed, _ = messages.delete(where, doomed, lambda part: [])  # the same views again: a retry
    assert removed == []
    assert postings.frequencies(pk, [digest]) == {digest: left} and _counts(pk) == _shares(pk)
    assert {postings.item_in_key(r) for r in _stored(pk, "t").values()} == set(ids[1:])
    messages.delete(where, list(messages.get_many(where, "u", ids[1:]).values()), lambda part: [])
    assert _stored(pk, "t") == {} and _counts(pk) == {}  # every counter gone with the last posting


def test_one_posting_in_sample_counts_for_sample_and_the_choice_is_the_same_every_time():
    ids = [f"msg-{n:08d}" for n in range(4000)]
    digest = layout.term_digest("appl")
    shares = [postings.share(i, digest) for i in ids]
    assert set(shares) == {0, postings.SAMPLE}
    assert shares == [postings.share(i, digest) for i in ids]  # the erasure makes the same choice
    chosen = shares.count(postings.SAMPLE)
    assert 0.75 * len(ids) / postings.SAMPLE < chosen < 1.25 * len(ids) / postings.SAMPLE
    other = [postings.share(i, layout.term_digest("pie")) for i in ids]
    assert other != shares  # chosen per term too, not per message: an add updates some of its terms


def test_a_message_of_format_3_is_uncounted_one_a_posting_beside_sampled_ones(aws):
    """Messages counted before sampling (format 3: one a posting, nothing carried) stay searchable
    and are erased by what they added, in counters that also sum sampled postings."""
    where, pk, ids = _added(["apple pie", "apple tart"])
    old = messages.get_many(where, "u", ids[:1])[ids[0]]
    Message(pk, old.sk).update(actions=[Message.index_format.set(3)])  # as format 3 wrote it:
    for row in postings.indexed(old):  # its postings carry nothing and its terms counted one each
        Posting(pk, row.sk).update(actions=[Posting.document_frequency.remove()])
        moved = 1 - int(row.document_frequency)
        Posting(pk, postings.frequency_sk(postings.digest_of(row))).update(
            actions=[Posting.document_frequency.add(moved)]
        )
    digest = layout.term_digest("appl")
    assert postings.frequencies(pk, [digest])[digest] == 1 + postings.share(ids[1], digest)
    assert all(
        row.document_frequency is None for row in postings.held_by([messages.get_many(where, "u", ids[:1])[ids[0]]])
    )
    messages.delete(where, list(messages.get_many(where, "u", ids[:1]).values()), lambda part: [])
    assert _counts(pk) == _shares(pk)  # what is left: the sampled message's shares alone


def test_a_users_erasure_reads_what_each_posting_carries_and_leaves_no_count(aws):
    """A user's erasure reads the partition's postings (``erase_in``), not the messages' texts: each
    posting read says what it added, so the counters of sampled and of format-3 messages both end
    at nothing."""
    _, pk, ids = _added(["apple pie", "apple tart", "apple crumble", "pie crust"])
    row = next(r for r in _stored(pk, "t").values() if postings.item_in_key(r) == ids[0])
    Posting(pk, row.sk).update(actions=[Posting.document_frequency.remove()])  # as format 3 wrote it
    Posting(pk, postings.frequency_sk(postings.digest_of(row))).update(
        actions=[Posting.document_frequency.add(1 - int(row.document_frequency))]
    )
    assert postings.erase_in([pk], set(ids[:3])) == sum(
        len(term_counts(t)) for t in ["apple pie", "apple tart", "apple crumble"]
    )
    assert _counts(pk) == _shares(pk)  # what is left: the last message's shares
    postings.erase_in([pk], {ids[3]})
    assert _stored(pk, "t") == {} and _counts(pk) == {}


def _with_counted_postings(n: int) -> tuple[object, str, list[str], list[object]]:
    """``n`` messages of several words each, and (as views) two of them holding postings that carry
    a share of their term's count — what a double uncount would show in."""
    words = ["apple", "pie", "tart", "cream", "crumble", "pear", "cake", "plum", "jam", "honey", "bread", "butter"]
    texts = [" ".join(words[(i + k) % len(words)] for k in range(5)) + f" {i}" for i in range(n)]
    where, pk, ids = _added(texts)
    held = messages.get_many(where, "u", ids)
    counted = [held[i] for i in ids if any(row.document_frequency for row in postings.held_by([held[i]]))]
    assert len(counted) >= 2  # 1 posting in 8 carries a share: near certain with this many
    return where, pk, ids, counted[:2]


def _died(*args: object, **kwargs: object) -> None:
    raise TimeoutError("the Lambda was stopped")


def test_an_erasure_dying_after_its_messages_transaction_has_already_erased_their_postings(aws, monkeypatch):
    """Its retry no longer finds the messages, whose text says where their postings are: they go
    before the transaction, uncounted with them."""
    where, pk, ids, doomed = _with_counted_postings(24)
    monkeypatch.setattr(messages, "_finish", _died)  # right after the messages' transaction
    with pytest.raises(TimeoutError):
        messages.delete(where, doomed, lambda part: [])  # type: ignore[arg-type]
    gone = {m.id for m in doomed}  # type: ignore[attr-defined]
    assert set(messages.get_many(where, "u", ids)) == set(ids) - gone
    assert {postings.item_in_key(r) for r in _stored(pk, "t").values()} == set(ids) - gone
    assert _counts(pk) == _shares(pk)


def test_an_erasure_dying_before_its_messages_transaction_and_retried_uncounts_nothing_twice(aws, monkeypatch):
    """Its postings went, its messages did not: the retry finds them, erases their postings again
    (none is there) and uncounts only what it found — nothing."""
    where, pk, ids, doomed = _with_counted_postings(24)
    gone = {m.id for m in doomed}  # type: ignore[attr-defined]
    real = messages.Transaction

    class Died(real):  # type: ignore[misc,valid-type]
        def commit(self, *args: object, **kwargs: object) -> None:
            _died()

    monkeypatch.setattr(messages, "Transaction", Died)
    with pytest.raises(TimeoutError):
        messages.delete(where, doomed, lambda part: [])  # type: ignore[arg-type]
    assert set(messages.get_many(where, "u", ids)) == set(ids)  # the messages stay ...
    assert {postings.item_in_key(r) for r in _stored(pk, "t").values()} == set(ids) - gone  # ... not their postings
    assert _counts(pk) == _shares(pk)
    monkeypatch.setattr(messages, "Transaction", real)
    removed, _ = messages.delete(where, doomed, lambda part: [])  # type: ignore[arg-type]  # the retry
    assert {m.id for m in removed} == gone
    assert _counts(pk) == _shares(pk)  # every term counts what its postings left carry: none uncounted twice
