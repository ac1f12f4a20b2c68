"""Faults at the AWS boundary (botocore Stubber and event hooks on the process's clients, never
patched internals): storage/blobs and the compare-and-swap loop of domain/files."""

from __future__ import annotations

import uuid

import pytest
from aws_faults import Calls, answer, error, hook
from botocore.exceptions import ClientError
from botocore.stub import Stubber
from memory_hub.domain.errors import Unavailable
from memory_hub.domain.files import Draft, compare_and_swap
from memory_hub.storage import aws as clients
from memory_hub.storage import blobs
from memory_hub.storage.blobs import DELETE_BATCH
from memory_hub.storage.errors import PreconditionFailed, StorageError


def _key(name: str = "file.md") -> str:
    return f"unit/{uuid.uuid4().hex}/{name}"


# ---------------------------------------------------------------- blobs.put


@pytest.mark.parametrize(
    ("status", "code"), [(412, "PreconditionFailed"), (409, "ConditionalRequestConflict"), (404, "NoSuchKey")]
)
@pytest.mark.parametrize("if_match", [None, '"etag"'])
def test_put_maps_every_changed_meanwhile_answer_to_precondition_failed(aws, status, code, if_match):
    key = _key()
    with Stubber(clients.s3()) as stubber:
        stubber.add_client_error("put_object", service_error_code=code, http_status_code=status)
        with pytest.raises(PreconditionFailed) as caught:
            blobs.put(key, "text", {}, if_match=if_match)
        stubber.assert_no_pending_responses()
    assert clients.error_code(caught.value.__cause__) == code


@pytest.mark.parametrize(("status", "code"), [(403, "AccessDenied"), (500, "InternalError"), (400, "EntityTooLarge")])
def test_put_lets_other_errors_through(aws, status, code):
    with Stubber(clients.s3()) as stubber:
        stubber.add_client_error("put_object", service_error_code=code, http_status_code=status)
        with pytest.raises(ClientError) as caught:
            blobs.put(_key(), "text", {}, if_match=None)
    assert not isinstance(caught.value, PreconditionFailed)
    assert clients.error_code(caught.value) == code


def test_put_sends_the_right_condition(aws):
    key = _key()
    calls = Calls()
    with hook(clients.s3(), "provide-client-params.s3.PutObject", calls):
        etag = blobs.put(key, "one", {"epoch": "1"}, if_match=None)
        blobs.put(key, "two", {"epoch": "1"}, if_match=etag)
    first, second = calls.params
    assert first["IfNoneMatch"] == "*" and "IfMatch" not in first
    assert second["IfMatch"] == etag and "IfNoneMatch" not in second
    assert first["Body"] == b"one" and first["ContentType"] == "text/markdown; charset=utf-8"


def test_put_conditions_against_moto(aws):
    """The same three answers, produced by the (emulated) service itself."""
    key = _key()
    first = blobs.put(key, "one", {"epoch": "1"}, if_match=None)
    with pytest.raises(PreconditionFailed):
        blobs.put(key, "again", {}, if_match=None)  # create-only over an existing object
    second = blobs.put(key, "two", {"epoch": "1"}, if_match=first)
    assert second != first
    with pytest.raises(PreconditionFailed):
        blobs.put(key, "stale", {}, if_match=first)  # the version read was replaced
    assert blobs.delete(key, if_match=second)
    with pytest.raises(PreconditionFailed) as caught:
        blobs.put(key, "gone", {}, if_match=second)  # IfMatch on a key deleted since it was read
    assert clients.error_code(caught.value.__cause__) == "NoSuchKey"
    assert blobs.get(key) is None


# ---------------------------------------------------------------- blobs.delete_many


def test_delete_many_sends_at_most_1000_keys_per_call(aws):
    prefix = _key("")
    real = [f"{prefix}real{i}.md" for i in (0, 999, 1000, 2400)]
    for key in real:
        blobs.put(key, "x", {}, if_match=None)
    keys = [f"{prefix}k{i:04d}.md" for i in range(2500)]
    for index, key in zip((0, 999, 1000, 2400), real, strict=True):
        keys[index] = key
    calls, params = Calls(), Calls()  # every DeleteObjects call; the API parameters of each
    s3 = clients.s3()
    with hook(s3, "before-call.s3.DeleteObjects", calls), hook(s3, "provide-client-params.s3.DeleteObjects", params):
        assert blobs.delete_many(keys) == 2500
    assert len(calls) == 3
    sizes = sorted(len(p["Delete"]["Objects"]) for p in params.params)
    assert sizes == [500, 1000, 1000]
    sent = sorted(o["Key"] for p in params.params for o in p["Delete"]["Objects"])
    assert sent == sorted(keys)
    assert all(p["Delete"]["Quiet"] is True for p in params.params)
    assert blobs.keys_under(prefix) == []


@pytest.mark.parametrize(("count", "calls_expected"), [(0, 0), (1, 1), (DELETE_BATCH, 1), (DELETE_BATCH + 1, 2)])
def test_delete_many_batch_boundaries(aws, count, calls_expected):
    prefix = _key("")
    calls = Calls()
    with hook(clients.s3(), "before-call.s3.DeleteObjects", calls):
        assert blobs.delete_many([f"{prefix}{i}.md" for i in range(count)]) == count
    assert len(calls) == calls_expected


def test_delete_many_sends_etags_for_conditional_deletes(aws):
    prefix = _key("")
    keys = [f"{prefix}a.md", f"{prefix}b.md", f"{prefix}c.md"]
    params = Calls()
    with hook(clients.s3(), "provide-client-params.s3.DeleteObjects", params):
        blobs.delete_many(keys, ['"e1"', None, '"e3"'])
    (sent,) = params.params
    assert sent["Delete"]["Objects"] == [
        {"Key": keys[0], "ETag": '"e1"'},
        {"Key": keys[1]},
        {"Key": keys[2], "ETag": '"e3"'},
    ]


def test_delete_many_tolerates_changed_and_missing_keys(aws):
    prefix = _key("")
    keys = [f"{prefix}{i}.md" for i in range(5)]
    reply = answer(
        200,
        {
            "Errors": [
                {"Key": keys[1], "Code": "PreconditionFailed", "Message": "changed"},
                {"Key": keys[3], "Code": "NoSuchKey", "Message": "gone"},
            ]
        },
    )
    with hook(clients.s3(), "before-call.s3.DeleteObjects", Calls(reply)):
        assert blobs.delete_many(keys, ['"e"'] * 5) == 3  # the changed and the missing did not go


@pytest.mark.parametrize("code", ["AccessDenied", "InternalError", "SlowDown"])
def test_delete_many_raises_when_s3_could_not_delete_a_key(aws, code):
    prefix = _key("")
    keys = [f"{prefix}{i:04d}.md" for i in range(DELETE_BATCH * 2 + 1)]

    def reply(params, **_):  # the batch holding the last key reports it could not delete it
        if keys[-1] in params["body"].decode("utf-8"):
            return answer(
                200,
                {
                    "Errors": [
                        {"Key": keys[-1], "Code": code, "Message": "no"},
                        {"Key": keys[-2], "Code": "NoSuchKey", "Message": "gone"},
                    ]
                },
            )
        return None

    with hook(clients.s3(), "before-call.s3.DeleteObjects", reply), pytest.raises(StorageError) as caught:
        blobs.delete_many(keys)
    assert code in str(caught.value)
    assert "1 objects" in str(caught.value)


def test_delete_many_raises_when_the_call_itself_fails(aws):
    with (
        hook(clients.s3(), "before-call.s3.DeleteObjects", Calls(error(403, "AccessDenied"))),
        pytest.raises(ClientError),
    ):
        blobs.delete_many([_key()])


def test_keys_xml_cannot_carry_go_one_by_one(aws):
    prefix = _key("")
    odd = [f"{prefix}a\ufffe.md", f"{prefix}b\uffff.md"]
    plain = f"{prefix}plain.md"
    for key in [*odd, plain]:
        blobs.put(key, "x", {}, if_match=None)
    many, single = Calls(), Calls()
    s3 = clients.s3()
    with (
        hook(s3, "provide-client-params.s3.DeleteObjects", many),
        hook(s3, "provide-client-params.s3.DeleteObject", single),
    ):
        assert blobs.delete_many([odd[0], plain, odd[1]]) == 3
    assert [o["Key"] for p in many.params for o in p["Delete"]["Objects"]] == [plain]
    assert sorted(p["Key"] for p in single.params) == sorted(odd)
    assert blobs.keys_under(prefix) == []


# ---------------------------------------------------------------- domain/files.compare_and_swap


class Writer:
    """A prepare/commit pair that appends ``suffix`` to whatever the object holds."""

    def __init__(self, key: str, suffix: str = "+mine", commit_results: list[object] | None = None) -> None:
        self.key, self.suffix = key, suffix
        self.results = list(commit_results or [True])
        self.prepared = 0
        self.committed: list[str] = []
        self.before_put = None  # something that happens between our read and our put

    def prepare(self) -> Draft:
        self.prepared += 1
        blob = blobs.get(self.key)
        if self.before_put is not None:
            action, self.before_put = self.before_put, None
            action(blob)
        text = (blob.text if blob else "") + self.suffix
        return Draft(text, {"epoch": "7", "attempt": str(self.prepared)}, blob)

    def commit(self, draft: Draft, etag: str) -> bool:
        self.committed.append(etag)
        result = self.results.pop(0) if self.results else True
        if isinstance(result, BaseException):
            raise result
        if callable(result):
            return bool(result(draft, etag))
        return bool(result)


def _seed(key: str, text: str = "old") -> str:
    return blobs.put(key, text, {"epoch": "7", "who": "seed"}, if_match=None)


def test_compare_and_swap_writes_and_commits_once(aws):
    key = _key()
    _seed(key)
    writer = Writer(key)
    draft = compare_and_swap(key, "unit", writer.prepare, writer.commit)
    assert draft.text == "old+mine"
    assert (writer.prepared, len(writer.committed)) == (1, 1)
    stored = blobs.get(key)
    assert stored.text == "old+mine" and stored.etag == writer.committed[0]


@pytest.mark.parametrize(
    "failure",
    [
        RuntimeError("index write failed"),
        ClientError({"Error": {"Code": "InternalServerError", "Message": "x"}}, "TransactWriteItems"),
    ],
)
def test_a_failed_commit_puts_the_previous_object_back(aws, failure):
    key = _key()
    _seed(key)
    writer = Writer(key, commit_results=[failure])
    with pytest.raises(Unavailable) as caught:
        compare_and_swap(key, "unit", writer.prepare, writer.commit)
    assert caught.value.__cause__ is failure
    stored = blobs.get(key)
    assert stored.text == "old"
    assert stored.metadata == {"epoch": "7", "who": "seed"}


def test_a_failed_commit_of_a_new_object_removes_it(aws):
    key = _key()
    writer = Writer(key, commit_results=[RuntimeError("boom")])
    with pytest.raises(Unavailable):
        compare_and_swap(key, "unit", writer.prepare, writer.commit)
    assert blobs.get(key) is None


@pytest.mark.parametrize("failure", [PreconditionFailed("k"), Unavailable("dependency down")])
def test_known_commit_failures_are_re_raised_after_the_restore(aws, failure):
    key = _key()
    _seed(key)
    writer = Writer(key, commit_results=[failure])
    with pytest.raises(type(failure)) as caught:
        compare_and_swap(key, "unit", writer.prepare, writer.commit)
    assert caught.value is failure
    assert blobs.get(key).text == "old"


def test_the_restore_leaves_a_later_writers_object_alone(aws):
    key = _key()
    _seed(key)

    def someone_else_writes_then_we_fail(draft: Draft, etag: str) -> bool:
        blobs.put(key, "theirs", {"epoch": "7"}, if_match=etag)
        raise RuntimeError("our commit failed after their write")

    writer = Writer(key, commit_results=[someone_else_writes_then_we_fail])
    with pytest.raises(Unavailable):
        compare_and_swap(key, "unit", writer.prepare, writer.commit)
    assert blobs.get(key).text == "theirs"


def test_the_restore_failing_does_not_hide_the_commit_error(aws):
    key = _key()
    _seed(key)
    writer = Writer(key, commit_results=[RuntimeError("commit failed")])
    # the put-back (the second PutObject) fails too: still Unavailable, nothing else escapes
    with (
        hook(clients.s3(), "before-call.s3.PutObject", Calls(None, error(500, "InternalError"))),
        pytest.raises(Unavailable) as caught,
    ):
        compare_and_swap(key, "unit", writer.prepare, writer.commit)
    assert str(caught.value.__cause__) == "commit failed"
    assert blobs.get(key).text == "old+mine"  # could not be put back (logged); the error is still the commit's


def test_a_lost_race_reads_again_and_retries(aws):
    key = _key()
    _seed(key)
    writer = Writer(key)
    writer.before_put = lambda blob: blobs.put(key, "theirs", {"epoch": "7"}, if_match=blob.etag)
    draft = compare_and_swap(key, "unit", writer.prepare, writer.commit)
    assert writer.prepared == 2  # the first put lost (412) and was never committed
    assert len(writer.committed) == 1
    assert draft.text == "theirs+mine"
    assert blobs.get(key).text == "theirs+mine"


def test_a_removal_since_the_read_is_a_lost_race_too(aws):
    key = _key()
    _seed(key)
    writer = Writer(key)
    writer.before_put = lambda blob: blobs.delete(key)
    draft = compare_and_swap(key, "unit", writer.prepare, writer.commit)
    assert writer.prepared == 2  # IfMatch on a deleted key: NoSuchKey, read again, create
    assert draft.replaces is None
    assert blobs.get(key).text == "+mine"


@pytest.mark.parametrize(
    ("status", "code"), [(409, "ConditionalRequestConflict"), (412, "PreconditionFailed"), (404, "NoSuchKey")]
)
def test_injected_conflicts_are_retried(aws, status, code):
    key = _key()
    _seed(key)
    writer = Writer(key)
    puts = Calls(error(status, code), error(status, code))
    with hook(clients.s3(), "before-call.s3.PutObject", puts):
        draft = compare_and_swap(key, "unit", writer.prepare, writer.commit)
    assert len(puts) == 3 and writer.prepared == 3 and len(writer.committed) == 1
    assert draft.text == "old+mine"
    assert blobs.get(key).text == "old+mine"


def test_a_commit_that_says_write_again_writes_again(aws):
    key = _key()
    _seed(key)
    writer = Writer(key, commit_results=[False, True])
    compare_and_swap(key, "unit", writer.prepare, writer.commit)
    assert writer.prepared == 2 and len(writer.committed) == 2
    assert blobs.get(key).text == "old+mine+mine"  # the second attempt read the first one's object


def test_other_put_errors_are_not_retried(aws):
    key = _key()
    _seed(key)
    writer = Writer(key)
    with hook(clients.s3(), "before-call.s3.PutObject", Calls(error(403, "AccessDenied"))), pytest.raises(ClientError):
        compare_and_swap(key, "unit", writer.prepare, writer.commit)
    assert writer.prepared == 1 and writer.committed == []
    assert blobs.get(key).text == "old"
