"""A session's messages are counted from the ``by-session`` index, not from a counter kept per
session (storage/counters.py): an add's and an erasure's transaction holds the messages, the user's
counter and the epoch check — one item less, two write units less a message — and a session's
count stays exact through any interleaving of adds and erasures (moto in process)."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from in_process import fresh_scope, writer
from memory_hub.domain import assets, conversation
from memory_hub.storage import counters, layout
from memory_hub.storage.models import Counter
from memory_hub.storage.transactions import Transaction

SESSIONS = ("s1", "s2", "s3")
STEPS = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.sampled_from(SESSIONS), st.integers(1, 3)),
        st.tuples(st.just("erase one"), st.sampled_from(SESSIONS), st.just(0)),
        st.tuples(st.just("erase session"), st.sampled_from(SESSIONS), st.just(0)),
    ),
    min_size=1,
    max_size=8,
)


def _counters(scope) -> list[Counter]:
    where = assets.where_of(assets.of_scope(scope))
    return list(Counter.query(where.counter_pk, consistent_read=True))


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=STEPS)
def test_a_sessions_count_stays_exact_through_adds_and_erasures_with_no_counter_of_its_own(aws, steps):
    scope = fresh_scope()
    held: dict[str, list[str]] = {s: [] for s in SESSIONS}
    for i, (kind, session, n) in enumerate(steps):
        in_session = replace(scope, session_id=session)
        if kind == "add":
            batch = [{"role": "user", "content": f"step {i} message {k} about tea"} for k in range(n)]
            held[session] += conversation.add(in_session, batch, writer(scope)).accepted_ids
        elif kind == "erase one" and held[session]:
            gone = held[session].pop(0)
            conversation.delete(scope, [gone], None, writer(scope), f"req-{i}")
        elif kind == "erase session":
            conversation.delete(scope, None, [session], writer(scope), f"req-{i}")
            held[session] = []
        for s in SESSIONS:
            assert conversation.count(replace(scope, session_id=s), None, None, writer(scope)).total == len(held[s])
        whole = conversation.count(replace(scope, session_id=None), None, None, writer(scope)).total
        assert whole == sum(len(ids) for ids in held.values())
    if any(kind == "add" for kind, _, _ in steps):
        kept = _counters(scope)
        assert kept and all(c.sk == layout.user_counter_sk("L0", scope.user_id) for c in kept)


def test_an_adds_transaction_holds_the_messages_the_users_counter_and_the_epoch_check(aws, monkeypatch):
    scope = fresh_scope()
    conversation.add(scope, [{"role": "user", "content": "a first message"}], writer(scope))  # the asset exists
    sizes: list[int] = []
    commit = Transaction.commit

    def counted(self: Transaction) -> None:
        sizes.append(len(self))
        commit(self)

    monkeypatch.setattr(Transaction, "commit", counted)
    conversation.add(scope, [{"role": "user", "content": f"message {k}"} for k in range(3)], writer(scope))
    assert sizes == [3 + 2]


def test_a_users_erasure_drops_the_session_counters_an_epoch_of_before_holds(aws):
    scope = fresh_scope()
    conversation.add(scope, [{"role": "user", "content": "kept until the user goes"}], writer(scope))
    where = assets.where_of(assets.of_scope(scope))
    legacy = Counter(where.counter_pk, layout.session_counter_sk(scope.user_id, "s"), item_count=4)
    legacy.user_id, legacy.session_id = scope.user_id, "s"
    legacy.save()
    assert counters.forget_user(where, scope.user_id) == 1  # the session's (it counts 4: never moved again)
    assert {c.sk for c in _counters(scope)} == {layout.user_counter_sk("L0", scope.user_id)}


def test_a_sessions_count_leaves_out_what_a_running_import_staged_until_its_id_leaves_the_set(aws):
    from memory_hub.analysis import term_counts
    from memory_hub.storage import assets as stored
    from memory_hub.storage import messages

    scope = fresh_scope(session_id="s1")
    conversation.add(scope, [{"role": "user", "content": f"kept {k}"} for k in range(2)], writer(scope))
    asset = assets.of_scope(scope)
    assert stored.begin_import(asset, "imp-s", int(asset.epoch))
    staged = [messages.NewMessage(f"msg-imp{k}", "user", "imported", k + 1, term_counts("imported")) for k in range(3)]
    counters.prepare_staging(assets.where_of(asset), [("L0", scope.user_id)])  # as an import's start does
    messages.add(assets.where_of(asset), scope.user_id, "s1", None, staged, 1, staged="imp-s")
    assert conversation.count(scope, None, None, writer(scope)).total == 2  # the import still runs
    stored.end_import(scope.team_id, scope.agent_id, "imp-s")  # its id leaves the set, as its commit does
    assert conversation.count(scope, None, None, writer(scope)).total == 5
