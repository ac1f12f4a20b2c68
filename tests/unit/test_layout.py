"""storage/layout.py: every key fits AWS's limits at every valid input; time keys sort by time."""

from __future__ import annotations

import string

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from memory_hub import memory_ids
from memory_hub.clock import MAX_SECONDS, MIN_SECONDS, compact_stamp, ordered_id
from memory_hub.domain.rules import MAX_PATH_BYTES, free_id_problem, path_problem, team_or_agent_problem
from memory_hub.storage import bucket, layout

MAX_PARTITION_KEY, MAX_SORT_KEY, MAX_S3_KEY = 2048, 1024, 1024
MIN_MS, MAX_MS = MIN_SECONDS * 1000, MAX_SECONDS * 1000 + 999
TEAM_FIRST = string.ascii_letters + string.digits + "_@-"
TEAM_REST = TEAM_FIRST + "."


def _bytes(value: str) -> int:
    return len(value.encode("utf-8"))


# ---------------------------------------------------------------- strategies of valid inputs

team_ids = st.builds(
    lambda first, rest: first + rest, st.sampled_from(TEAM_FIRST), st.text(alphabet=TEAM_REST, max_size=63)
)
# Free ids: any code points but controls (and surrogates, which JSON parsing refuses), 4-byte ones included.
free_ids = st.text(alphabet=st.characters(blacklist_categories=("Cc", "Cs")), min_size=1, max_size=256)
wide_ids = st.integers(1, 256).map(lambda n: "😀" * n)  # the most bytes a valid free id can take


@st.composite
def paths(draw):
    """A valid file path of up to 512 UTF-8 bytes (often near the limit, with wide characters)."""
    unit = draw(st.sampled_from(["a", "é", "中", "😀", "\U0010fffd"]))
    segment = draw(
        st.text(
            alphabet=st.characters(blacklist_categories=("Cc", "Cs"), blacklist_characters="/\\"),
            min_size=1,
            max_size=20,
        ).filter(lambda s: not s.startswith("."))
    )
    budget = MAX_PATH_BYTES - _bytes(segment) - _bytes("/.md")
    count = draw(st.integers(0, max(budget, 0) // _bytes(unit)))
    path = (unit * count + "/" if count else "") + segment + ".md"
    return path


epochs = st.integers(0, 2**63 - 1)  # microseconds since 1970 in practice; any non-negative int here
times = st.integers(MIN_MS, MAX_MS)
item_ids = st.sampled_from(["msg-", "atom-"]).map(ordered_id)
terms = st.text(max_size=2000)


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(
    team=team_ids,
    agent=team_ids,
    user=st.one_of(free_ids, wide_ids),
    session=st.one_of(free_ids, wide_ids),
    epoch=epochs,
    ms=times,
    item_id=item_ids,
    term=terms,
    natural=st.text(max_size=300),
)
@example(
    team="t" * 64,
    agent="a" * 64,
    user="😀" * 256,
    session="😀" * 256,
    epoch=2**63 - 1,
    ms=MAX_MS,
    item_id="atom-" + "f" * 26,
    term="😀" * 5000,
    natural="😀" * 300,
)
def test_dynamodb_keys_fit_at_every_valid_input(team, agent, user, session, epoch, ms, item_id, term, natural):
    assert team_or_agent_problem(team) is None and team_or_agent_problem(agent) is None
    assert free_id_problem(user) is None and free_id_problem(session) is None
    term_key = layout.term_digest(term)
    partition_keys = [
        layout.item_pk("L0", team, agent, epoch, user),
        layout.item_pk("L1", team, agent, epoch, user),
        layout.counter_pk(team, agent, epoch),
        layout.scene_scope(team, agent),
        layout.audit_pair_pk(team, agent),
        layout.audit_key_pk(team),
        memory_ids.memory_id_of(team, agent),  # AssetsTable pk
        layout.PURGE_PK,
        layout.CLEANUP_PK,
        layout.JOB_PK,
    ]
    sort_keys = [
        item_id,
        layout.time_key(ms, item_id),  # lsi1
        layout.session_key(session, ms, item_id),  # lsi2
        layout.posting_term_key(term_key, item_id),  # lsi3
        layout.posting_sk(item_id, term_key),
        layout.postings_of(item_id),
        layout.natural_key_sk(layout.digest(natural, 64)),  # the natural key is a full SHA-256 hex
        layout.user_counter_sk("L0", user),
        layout.user_counter_sk("L1", user),
        layout.session_counter_sk(user, session),
        layout.purge_sk(team, agent, epoch),
        layout.time_bound(ms, upper=True),
        *layout.session_bounds(session, ms, ms),
        layout.term_prefix(term_key),
    ]
    for key in partition_keys:
        assert 1 <= _bytes(key) <= MAX_PARTITION_KEY, key
    for key in sort_keys:
        assert 1 <= _bytes(key) <= MAX_SORT_KEY, key
    assert all(layout.fits_key(k) for k in sort_keys)


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(
    team=team_ids,
    agent=team_ids,
    path=paths(),
    ms=times,
    version=st.integers(1, 2**63 - 1),
    name=st.text(alphabet=string.ascii_letters + string.digits + "._-", min_size=64, max_size=64),
)
@example(team="t" * 64, agent="a" * 64, path="😀" * 127 + ".md", ms=MAX_MS, version=2**63 - 1, name="n" * 64)
@example(team="t" * 64, agent="a" * 64, path="é" * 253 + "/ab.md", ms=MIN_MS, version=1, name="n" * 64)
def test_s3_keys_fit_at_every_valid_input(team, agent, path, ms, version, name):
    assert path_problem(path, kind="file") is None
    assert _bytes(path) <= MAX_PATH_BYTES
    keys = [
        bucket.scene_key(team, agent, path),
        bucket.scene_key(team, agent, path.rsplit("/", 1)[0] + "/"),
        bucket.persona_key(team, agent),
        bucket.backup_key(team, agent, compact_stamp(ms), version),
        bucket.export_prefix(team, agent) + name,
        bucket.import_prefix(team, agent) + name,
        bucket.prefix(team, agent) + bucket.METADATA + name,
    ]
    for key in keys:
        assert _bytes(key) <= MAX_S3_KEY, key
        assert key.startswith(bucket.prefix(team, agent))


def test_longest_keys_have_room():
    """The worst case written out: the numbers the module docstring promises."""
    team = agent = "x" * 64
    scene = bucket.scene_key(team, agent, "😀" * 127 + ".md")
    assert _bytes(scene) == _bytes(bucket.prefix(team, agent)) + len(bucket.SCENES) + 511
    assert _bytes(scene) <= MAX_S3_KEY
    assert len(memory_ids.memory_id_of(team, agent)) == memory_ids.MAX_MEMORY_ID_CHARS
    assert _bytes(layout.item_pk("L1", team, agent, 2**63 - 1, "😀" * 256)) < 300


# ---------------------------------------------------------------- time keys


@settings(max_examples=300)
@given(times, times, item_ids, item_ids)
@example(MIN_MS, MIN_MS + 1, "msg-" + "f" * 26, "msg-" + "0" * 26)
@example(-1, 0, "msg-" + "f" * 26, "msg-" + "0" * 26)
@example(MAX_MS - 1, MAX_MS, "atom-" + "f" * 26, "atom-" + "0" * 26)
def test_time_key_order_is_time_order(a, b, id_a, id_b):
    key_a, key_b = layout.time_key(a, id_a), layout.time_key(b, id_b)
    if a != b:
        assert (key_a < key_b) == (a < b)
    else:
        assert (key_a < key_b) == (id_a < id_b)
    # a bound at a time brackets every key at that time, and excludes the neighbours
    assert layout.time_bound(a, upper=False) <= key_a <= layout.time_bound(a, upper=True)
    assert layout.time_bound(None, upper=False) <= key_a <= layout.time_bound(None, upper=True)
    if a < MAX_MS:
        assert key_a < layout.time_bound(a + 1, upper=False)
    if a > MIN_MS:
        assert layout.time_bound(a - 1, upper=True) < key_a


def test_time_keys_are_fixed_width_and_non_negative_from_year_one():
    assert layout.time_key(MIN_MS, "m").startswith("000000000000000#")
    assert len(layout.time_key(MIN_MS, "")) == len(layout.time_key(MAX_MS, "")) == 16
    assert layout.time_key(-1, "x") < layout.time_key(0, "x") < layout.time_key(1, "x")


@settings(max_examples=100)
@given(free_ids, free_ids, times, times, item_ids)
def test_session_keys_stay_inside_their_session_bounds(session, other, ms, start, item_id):
    key = layout.session_key(session, ms, item_id)
    low, high = layout.session_bounds(session, start if start <= ms else ms, ms)
    assert low <= key <= high
    open_low, open_high = layout.session_bounds(session, None, None)
    assert open_low <= key <= open_high
    if layout.digest(other) != layout.digest(session):
        other_low, other_high = layout.session_bounds(other, None, None)
        assert not other_low <= key <= other_high


# ---------------------------------------------------------------- digests


@settings(max_examples=100)
@given(st.text(max_size=3000))
def test_digests_are_deterministic_and_fixed_length(value):
    assert layout.digest(value) == layout.digest(value)
    assert len(layout.digest(value)) == layout.ID_DIGEST == 32
    assert len(layout.term_digest(value)) == layout.TERM_DIGEST == 20
    assert set(layout.digest(value)) <= set("0123456789abcdef")
    assert layout.digest(value).startswith(layout.term_digest(value))
    assert layout.SEP not in layout.digest(value)


def test_digest_known_value_and_distinct_inputs():
    assert layout.digest("") == "e3b0c44298fc1c149afbf4c8996fb924"  # SHA-256 of nothing
    assert layout.digest("user") != layout.digest("user ")
    assert layout.digest("é") != layout.digest("e\u0301")  # no normalisation: ids are exact strings


@pytest.mark.parametrize(
    ("value", "fits"), [("x" * 1024, True), ("x" * 1025, False), ("😀" * 256, True), ("😀" * 256 + "x", False)]
)
def test_fits_key(value, fits):
    assert layout.fits_key(value) is fits


def test_separator_never_appears_in_a_valid_id():
    assert free_id_problem("a" + layout.SEP) is not None
    assert team_or_agent_problem("a" + layout.SEP) is not None
