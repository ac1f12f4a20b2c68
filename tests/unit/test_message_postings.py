"""A message's search postings (storage/postings.py, moto in process): keyed by term in the table,
with no index entry, and computed again from the message's text when it is erased — so what
``conversation/add`` wrote is exactly what an erasure finds, and an erasure retried with the same
messages does not uncount a term twice."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from in_process import fresh_scope, writer
from memory_hub.domain import assets, conversation
from memory_hub.storage import layout, messages, postings
from memory_hub.storage.models import Posting


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
        assert (row.term_frequency, row.item_length, row.timestamp) == (
            computed[sk].term_frequency,
            computed[sk].item_length,
            computed[sk].timestamp,
        )
    assert _stored(pk, "p") == {}


def test_an_erasure_retried_with_the_same_messages_uncounts_nothing_twice(aws):
    where, pk, ids = _added(["apple pie", "apple tart", "apple crumble"])
    digest = layout.term_digest("appl")
    doomed = list(messages.get_many(where, "u", ids[:1]).values())
    messages.delete(where, doomed, lambda part: [])
    assert postings.frequencies(pk, [digest]) == {digest: 2}
    removed, _ = messages.delete(where, doomed, lambda part: [])  # the same views again: a retry
    assert removed == []
    assert postings.frequencies(pk, [digest]) == {digest: 2}
    assert {postings.item_in_key(r) for r in _stored(pk, "t").values()} == set(ids[1:])
