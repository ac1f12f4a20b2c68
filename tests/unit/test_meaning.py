"""Meaning's storage side: the vector index layout (names within S3 Vectors' rules at every valid
input), metadata without content, the search filters, Bedrock error classes and the short retry
budget, and the vector calls themselves over moto in process (with the local stack's S3 Vectors
patch, which adds QueryVectors)."""

from __future__ import annotations

import json
import re
import threading

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError
from hypothesis import given, settings
from hypothesis import strategies as st
from memory_hub.domain import meaning, vector_upkeep
from memory_hub.storage import embeddings, layout, vectors

TEAM_OR_AGENT = st.text(alphabet="ABCXYZabcxyz0189._@-", min_size=1, max_size=64)
# S3 Vectors: 3-63 characters of lower-case letters, digits, hyphens and dots, starting and ending
# with a letter or a digit (this layout uses no dots).
INDEX_NAME = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")


@st.composite
def _groups(draw):
    groups = draw(st.sampled_from([1, 2, 16, 255, vectors.MAX_GROUPS]) | st.integers(1, vectors.MAX_GROUPS))
    return draw(st.integers(0, groups - 1)), groups


@given(
    team=TEAM_OR_AGENT,
    agent=TEAM_OR_AGENT,
    epoch=st.integers(0, 2**64 - 1),
    dims=st.sampled_from([1, 256, 4096]),
    grouped=_groups(),
)
@settings(max_examples=300, deadline=None)
def test_every_valid_memory_epoch_size_and_group_names_a_valid_index(team, agent, epoch, dims, grouped):
    group, groups = grouped
    name = vectors.index_name(team, agent, epoch, dims, group, groups)
    assert INDEX_NAME.fullmatch(name) and len(name) <= 63, name
    assert name.startswith(vectors.epoch_prefix(team, agent, epoch))
    assert name.startswith(vectors.prefix(team, agent))
    assert vectors.parse_name(name) == vectors.Name(vectors.prefix(team, agent), epoch, dims, group, groups)
    if groups == 1:  # a memory of one group keeps the names of before
        assert name == f"{vectors.epoch_prefix(team, agent, epoch)}{dims}"


@given(user=st.text(min_size=1, max_size=300), groups=st.integers(1, vectors.MAX_GROUPS))
def test_a_user_has_one_group_and_the_name_of_its_index_says_so(user, groups):
    group = vectors.group_of(user, groups)
    assert 0 <= group < groups and group == vectors.group_of(user, groups)
    parsed = vectors.parse_name(vectors.index_name("t", "a", 3, 8, group, groups))
    assert parsed is not None and parsed.holds(user) and parsed.group == group
    others = [vectors.Name(parsed.prefix, 3, 8, g, groups) for g in range(groups) if g != group]
    assert not any(other.holds(user) for other in others)


def test_users_spread_over_every_group_and_group_counts_outside_the_range_are_refused():
    assert {vectors.group_of(f"user-{i}", 16) for i in range(400)} == set(range(16))
    assert vectors.group_of("anyone", 1) == 0
    for wrong in (0, vectors.MAX_GROUPS + 1):
        with pytest.raises(ValueError):
            vectors.group_of("u", wrong)


@pytest.mark.parametrize(
    "name", ["mabc-1-3-4of4", "mabc-1-3-0of1", "mabc-1-3-x", "mabc-1-3-2of", "mabc-1-3-1of300", "xabc-1-3", "mabc-1"]
)
def test_a_name_of_another_layout_is_not_taken_for_one_of_this(name):
    assert vectors.parse_name(name) is None


@given(a=st.tuples(TEAM_OR_AGENT, TEAM_OR_AGENT), b=st.tuples(TEAM_OR_AGENT, TEAM_OR_AGENT))
def test_memories_never_share_an_index_prefix(a, b):
    if a != b:
        assert vectors.prefix(*a) != vectors.prefix(*b)
    # one epoch's prefix never covers another epoch's indexes
    assert not vectors.index_name(*a, 12, 1024).startswith(vectors.epoch_prefix(*a, 1))


def test_a_memory_lives_in_one_bucket_and_memories_spread_over_all():
    buckets = ["b0", "b1", "b2", "b3"]
    chosen = {vectors.bucket_of(f"team{i}", "agent", buckets) for i in range(200)}
    assert chosen == set(buckets)
    assert vectors.bucket_of("t", "a", buckets) == vectors.bucket_of("t", "a", buckets)
    assert vectors.bucket_of("t", "a", []) == ""


def test_metadata_holds_digests_never_content_and_fits_the_filterable_limit():
    longest = "u" * 1024
    meta = vectors.metadata(
        layer="L1",
        user_id=longest,
        session_id=longest,
        task_id=None,
        type_="t" * 64,
        at_ms=1_700_000_000_000,
        model=embeddings.describe("amazon.titan-embed-text-v2:0", 1024),
    )
    assert meta["user"] == meta["session"] == layout.digest(longest)
    assert meta["task"] == vectors.NONE
    assert longest not in json.dumps(meta)
    assert len(json.dumps(meta).encode()) < 2048  # S3 Vectors: filterable metadata ≤ 2 KB


def test_search_filters_are_hard_filters_on_user_model_and_what_the_request_names():
    model = "m/1024"
    base = vectors.search_filter(layer="L0", user_id="alice", model=model)
    assert base == {
        "$and": [
            {"layer": {"$eq": "L0"}},
            {"user": {"$eq": layout.digest("alice")}},
            {"model": {"$eq": model}},
        ]
    }
    narrowed = vectors.search_filter(layer="L1", user_id="alice", model=model, task_id="t1", type_="persona")
    assert {"task": {"$eq": layout.digest("t1")}} in narrowed["$and"]
    assert {"type": {"$eq": "persona"}} in narrowed["$and"]
    assert vectors.search_filter(layer="L0", user_id="a", model=model, session_id="s")["$and"][-1] == {
        "session": {"$eq": layout.digest("s")}
    }


def _error(code: str, status: int, message: str = "") -> ClientError:
    return ClientError(
        {"Error": {"Code": code, "Message": message}, "ResponseMetadata": {"HTTPStatusCode": status}}, "InvokeModel"
    )


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        (_error("ThrottlingException", 429), embeddings.RETRY),
        (_error("ServiceUnavailableException", 503), embeddings.RETRY),
        (_error("InternalServerException", 500), embeddings.RETRY),
        (_error("ModelTimeoutException", 408), embeddings.RETRY),
        (_error("ModelNotReadyException", 429), embeddings.RETRY),
        (EndpointConnectionError(endpoint_url="https://bedrock-runtime"), embeddings.RETRY),
        (_error("ValidationException", 400, "Malformed input request"), embeddings.FINAL),
        (_error("AccessDeniedException", 403), embeddings.FINAL),
        (_error("ResourceNotFoundException", 404), embeddings.FINAL),
    ],
)
def test_error_classes(error, kind):
    assert embeddings.classify(error) == kind


@pytest.fixture
def invoked(monkeypatch):
    """Replace the Bedrock call: each test sets ``answers`` (a vector, or an exception to raise)."""
    calls: list[str] = []
    state: dict[str, object] = {"answer": [0.5, 0.5]}
    lock = threading.Lock()

    def fake(model_id: str, dimensions: int, text: str) -> list[float]:
        with lock:
            calls.append(text)
        answer = state["answer"]
        if callable(answer):
            answer = answer(text)
        if isinstance(answer, BaseException):
            raise answer
        return answer  # type: ignore[return-value]

    monkeypatch.setattr(embeddings, "_invoke", fake)
    return calls, state


def test_a_final_error_is_not_retried(invoked):
    calls, state = invoked
    state["answer"] = _error("AccessDeniedException", 403)
    assert embeddings.embed_many("m", 2, ["one", "two"], 5.0) == [embeddings.FINAL, embeddings.FINAL]
    assert len(calls) == 2  # one call each: no retry loop


def test_throttling_is_retry_later_not_now(invoked):
    calls, state = invoked
    state["answer"] = _error("ThrottlingException", 429)
    assert embeddings.embed_many("m", 2, ["x"] * 5, 5.0) == [embeddings.RETRY] * 5
    assert len(calls) == 5


def test_too_long_input_is_sent_once_more_at_half_length(invoked):
    calls, state = invoked
    state["answer"] = lambda text: (
        _error("ValidationException", 400, "Too many input tokens") if len(text) > 100 else [1.0, 0.0]
    )
    assert embeddings.embed_many("m", 2, ["a" * 150], 5.0) == [[1.0, 0.0]]
    assert [len(c) for c in calls] == [150, 75]


def test_texts_are_cut_to_the_input_limit_and_a_passed_deadline_calls_nothing(invoked):
    calls, _ = invoked
    embeddings.embed_many("m", 2, ["z" * 20_000], 5.0)
    assert len(calls[0]) == embeddings.MAX_INPUT_CHARS
    calls.clear()
    assert embeddings.embed_many("m", 2, ["a", "b"], 0.0) == [embeddings.RETRY, embeddings.RETRY]
    assert calls == []


def test_a_wrong_sized_answer_is_final(invoked):
    _, state = invoked
    state["answer"] = [1.0, 0.0, 0.0]
    assert embeddings.embed_many("m", 2, ["a"], 5.0) == [embeddings.FINAL]


# ---------------------------------------------------------------- the vector calls (moto in process)


@pytest.fixture
def index(aws):
    bucket = "memory-hub-vectorbucket0"
    name = vectors.index_name("team", "agent", 7, 3)
    yield vectors.Index(bucket, name)
    vectors.drop(vectors.Index(bucket, name))


def _v(key: str, data: list[float], user: str = "u", layer: str = "L0") -> vectors.Vector:
    meta = vectors.metadata(layer=layer, user_id=user, session_id="s", task_id=None, type_=None, at_ms=1, model="m/3")
    return vectors.Vector(key, data, meta)


def test_first_write_creates_the_index_and_racing_creators_are_fine(index):
    vectors.create_index(index, 3)
    vectors.create_index(index, 3)  # exists already: fine
    vectors.drop(index)
    threads = [
        threading.Thread(target=vectors.put, args=(index, 3, [_v(f"msg-{i}", [1.0, float(i), 0.0])])) for i in range(4)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(k for k, _ in vectors.keys(index)) == [f"msg-{i}" for i in range(4)]


def test_a_full_bucket_refuses_a_new_index_counted_and_raised_so_the_vectors_wait(index, monkeypatch):
    from memory_hub_local.aws.s3vectors import limits

    counted: list[tuple[str, int]] = []
    monkeypatch.setattr(vectors, "count_event", lambda name, value=1: counted.append((name, value)))
    vectors.create_index(vectors.Index(index.bucket, vectors.index_name("team", "agent", 7, 5)), 5)
    held = len(vectors.indexes(index.bucket, "m"))  # every index name of this layout starts so
    monkeypatch.setattr(limits, "MAX_INDEXES", held)  # the bucket holds its quota now
    with pytest.raises(ClientError) as refused:
        vectors.put(index, 3, [_v("msg-a", [1.0, 0.0, 0.0])])
    assert refused.value.response["Error"]["Code"] == "ServiceQuotaExceededException"
    assert counted == [(vectors.INDEX_QUOTA_METRIC, 1)]
    vectors.create_index(vectors.Index(index.bucket, vectors.index_name("team", "agent", 7, 5)), 5)  # exists: fine
    assert counted == [(vectors.INDEX_QUOTA_METRIC, 1)]
    monkeypatch.setattr(limits, "MAX_INDEXES", held + 1)
    vectors.put(index, 3, [_v("msg-a", [1.0, 0.0, 0.0])])  # the quota raised: the retry goes through
    assert [k for k, _ in vectors.keys(index)] == ["msg-a"]
    vectors.drop(vectors.Index(index.bucket, vectors.index_name("team", "agent", 7, 5)))


def test_query_is_hard_filtered_and_delete_by_key(index):
    vectors.put(index, 3, [_v("msg-a", [1.0, 0.0, 0.0]), _v("msg-b", [0.9, 0.1, 0.0], user="other")])
    mine = vectors.search_filter(layer="L0", user_id="u", model="m/3")
    assert [m.key for m in vectors.query(index, [1.0, 0.0, 0.0], 10, mine)] == ["msg-a"]
    [placed] = vectors.query(index, [1.0, 0.0, 0.0], 10, mine, with_metadata=True)
    placed_at = meaning.places_of([(placed.key, (0.0, placed.metadata))])
    assert placed_at == {"msg-a": (layout.digest("s"), 1)}  # for context
    assert vectors.query(index, [1.0, 0.0, 0.0], 10, mine)[0].metadata == {}  # asked for only when needed
    assert vectors.delete(index, ["msg-a", "msg-unknown"]) == 1  # DeleteVectors calls made (one batch)
    assert vectors.query(index, [1.0, 0.0, 0.0], 10, mine) == []
    # a memory without an index has no vectors; deleting from it is fine and still makes its one call
    missing = vectors.Index(index.bucket, vectors.index_name("nobody", "here", 1, 3))
    assert vectors.query(missing, [1.0, 0.0, 0.0], 10, mine) == []
    assert vectors.delete(missing, ["msg-a"]) == 1


@pytest.fixture
def stack_buckets(aws, monkeypatch):
    from memory_hub.settings import get_settings

    monkeypatch.setenv("VECTOR_BUCKETS", ",".join(f"memory-hub-vectorbucket{i}" for i in range(4)))
    get_settings.cache_clear()
    yield
    monkeypatch.delenv("VECTOR_BUCKETS")
    get_settings.cache_clear()


def test_drop_epoch_removes_every_index_of_that_epoch_only(stack_buckets):
    bucket = vectors.bucket_of("t9", "a9")
    for epoch, dims in ((1, 3), (1, 4), (2, 3)):
        vectors.create_index(vectors.Index(bucket, vectors.index_name("t9", "a9", epoch, dims)), dims)
    assert vectors.drop_epoch(bucket, "t9", "a9", 1) == 2
    assert vectors.indexes(bucket, vectors.prefix("t9", "a9")) == [vectors.index_name("t9", "a9", 2, 3)]
    vectors.drop(vectors.Index(bucket, vectors.index_name("t9", "a9", 2, 3)))


def test_settings_read_the_templates_meaning_variables():
    from memory_hub.settings import from_environment

    base = {
        "AWS_REGION": "eu-west-1",
        "MEMORY_HUB_BUCKET": "b",
        "ASSETS_TABLE": "A",
        "ITEMS_TABLE": "I",
        "SCENES_TABLE": "S",
        "KEYS_TABLE": "K",
        "AUDIT_TABLE": "Au",
        "IDEMPOTENCY_TABLE": "Id",
        "MEMORY_HUB_TOKEN_SECRET_ARN": "arn:aws:secretsmanager:eu-west-1:1:secret:t",
    }
    off = from_environment(base)
    assert (off.embeddings, off.vector_buckets, off.embed_queue_url) == (False, (), None)
    on = from_environment(
        {
            **base,
            "EMBEDDINGS": "Enabled",
            "EMBEDDING_MODEL": "amazon.titan-embed-text-v2:0",
            "EMBEDDING_DIMENSIONS": "512",
            "VECTOR_BUCKETS": "arn:aws:s3vectors:eu-west-1:1:bucket/v-0,arn:aws:s3vectors:eu-west-1:1:bucket/v-1",
            "EMBED_QUEUE_URL": "https://sqs.eu-west-1.amazonaws.com/1/q",
        }
    )
    assert on.embeddings is True and on.embedding_dimensions == 512
    assert on.vector_buckets == ("v-0", "v-1")
    assert from_environment({**base, "EMBEDDINGS": "Disabled"}).embeddings is False
    assert on.vectors_batched is False  # no VECTOR_WRITES (the template always sets one): Immediate
    assert from_environment({**base, "VECTOR_WRITES": "Batched"}).vectors_batched is True
    assert from_environment({**base, "VECTOR_WRITES": "Immediate"}).vectors_batched is False


def test_a_queue_batch_is_embedded_a_memory_at_a_time_in_chunks_and_a_chunk_not_begun_comes_again(monkeypatch):
    """Messages of one memory are embedded together, up to one PutVectors (500 ids) a chunk; with
    too little time left a chunk is not begun and its messages are delivered again; a chunk's
    retryable ids bring back the messages that named them; a malformed message is dropped."""
    monkeypatch.setattr(vector_upkeep, "enabled", lambda: True)
    seen: list[tuple[str, list[str]]] = []

    def chunk(where, named, remaining_s):
        seen.append((where.team_id, [m[0] for m in named]))
        return {"t1-0"} if len(seen) == 1 else set()

    monkeypatch.setattr(vector_upkeep, "_consume_chunk", chunk)

    def body(team: str, n: int, start: int = 0) -> dict:
        ids = [f"{team}-{i}" for i in range(start, start + n)]
        return {
            "team_id": team,
            "agent_id": "a",
            "epoch": 1,
            "memory_id": "m",
            "layer": "L0",
            "user_id": "u",
            "ids": ids,
        }

    bodies = [
        ("m1", body("t1", 300)),
        ("m2", body("t2", 1)),
        ("m3", body("t1", 300, 300)),
        ("m4", body("t1", 100, 600)),
        ("bad", {"ids": "not a message"}),
    ]
    left = iter([60.0, 60.0, 1.0])  # the time left as each chunk is about to begin
    again = vector_upkeep.consume(bodies, lambda: next(left))
    assert seen == [("t1", ["m1"]), ("t1", ["m3", "m4"])]
    assert again == ["m1", "m2"]
