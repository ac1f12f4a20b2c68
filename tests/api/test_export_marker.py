"""The exports' marker: every export puts it before its archive, and an erasure by id lists (and
erases) the memory's exports only when it is there — a ``HeadObject`` in place of a
``ListObjectsV2`` for a memory never exported. A memory created before the marker lists them every
time; the cleanup drops a marker only once every archive put after it is gone, and never one an
export put again meanwhile; a clear's purge keeps a marker an export put into the new epoch. On a
stack of its own: the cleanup walks every memory, a day or two ahead of the clock."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest
from helpers import (
    BUCKET,
    TABLES,
    Api,
    aws_client,
    export_archives,
    make_scope,
    memory_files,
    ok,
    own_stack,
    s3_keys,
)
from memory_hub.storage import bucket
from memory_hub.storage.assets import pair_sk
from test_cleanup import DAY_MS, cleanup, cleanup_held, now_ms
from test_clear import FIRST_PURGE_CALL
from test_transfer import export

HOUR_MS = 60 * 60 * 1000

stack, api, hooks = own_stack()


def _marker(s) -> str:
    return bucket.export_marker(s.team_id, s.agent_id)


def _message(api, s, text: str = "a message to erase") -> str:
    added = ok(api.post("/v3/conversation/add", s.body(session_id="s1", messages=[{"role": "user", "content": text}])))
    return added["accepted_ids"][0]


def _delete_calls(hooks, since: int) -> list[tuple[str, str | None]]:
    return [(c["operation"], c.get("key")) for c in hooks.calls(since) if c["function"] == "DeleteFunction"]


def _erase(api, s, message_id: str) -> dict:
    answer = ok(api.post("/v3/conversation/delete", s.body(message_ids=[message_id])))
    assert answer["deleted_count"] == 1, answer
    return answer


@pytest.mark.parametrize("route", ["conversation", "atomic"])
def test_an_erasure_of_a_memory_never_exported_reads_the_marker_and_lists_nothing(api, hooks, route):
    s = make_scope()
    if route == "conversation":
        body = s.body(message_ids=[_message(api, s)])
    else:
        body = s.body(ids=[ok(api.post("/v3/atomic/add", s.body(content="a fact to erase")))["id"]])
    since = hooks.last_seq()
    answer = ok(api.post(f"/v3/{route}/delete", body))
    assert answer["deleted_count"] == 1 and answer["files_deleted"] == 0, answer
    calls = _delete_calls(hooks, since)
    assert ("HeadObject", _marker(s)) in calls, calls
    assert not [c for c in calls if c[0] == "ListObjectsV2"], calls


def test_an_erasure_after_an_export_erases_its_archives_and_keeps_the_marker(api, hooks):
    s = make_scope()
    first, second = _message(api, s, "first"), _message(api, s, "second")
    export(api, s.memory_id)
    export(api, s.memory_id, user_id=s.user_id)
    assert len(export_archives(s)) == 2 and _marker(s) in memory_files(s, bucket.EXPORTS)
    since = hooks.last_seq()
    assert _erase(api, s, first)["files_deleted"] == 2
    assert [c for c in _delete_calls(hooks, since) if c[0] == "ListObjectsV2"]
    assert memory_files(s, bucket.EXPORTS) == [_marker(s)]  # the marker stays: an export may still run
    export(api, s.memory_id)
    assert _erase(api, s, second)["files_deleted"] == 1 and export_archives(s) == []


def test_a_memory_created_before_the_marker_lists_its_exports_at_every_erasure(api, hooks):
    s = make_scope()
    message = _message(api, s)
    aws_client("dynamodb").update_item(  # as an asset of before holds it: no export_marks
        TableName=TABLES["assets"],
        Key={"pk": {"S": s.memory_id}, "sk": {"S": pair_sk(s.team_id, s.agent_id)}},
        UpdateExpression="REMOVE xm",
    )
    archive = s.prefix + bucket.EXPORTS + "exp-before.tar.gz"  # an export of before: no marker
    aws_client("s3").put_object(Bucket=BUCKET, Key=archive, Body=b"a message to erase")
    since = hooks.last_seq()
    assert _erase(api, s, message)["files_deleted"] == 1
    assert s3_keys(archive) == []
    assert [c for c in _delete_calls(hooks, since) if c[0] == "ListObjectsV2"]


def test_the_cleanup_drops_the_marker_once_past_a_day_and_an_exports_run(api, hooks):
    s = make_scope()
    message = _message(api, s)
    start = now_ms()
    export(api, s.memory_id)
    assert cleanup(api, now=start + DAY_MS + 30 * 60 * 1000)["done"] is True  # the archive is a day old
    assert export_archives(s) == [] and memory_files(s, bucket.EXPORTS) == [_marker(s)]
    assert cleanup(api, now=start + DAY_MS + 2 * HOUR_MS)["done"] is True
    assert memory_files(s, bucket.EXPORTS) == []
    since = hooks.last_seq()
    _erase(api, s, message)
    assert not [c for c in _delete_calls(hooks, since) if c[0] == "ListObjectsV2"]


def test_a_marker_an_export_puts_again_while_the_cleanup_drops_the_old_one_stays(api, hooks):
    s = make_scope()
    message = _message(api, s)
    export(api, s.memory_id)
    held = {"operation": "DeleteObject", "key_contains": _marker(s)}
    with cleanup_held(api, hooks, held, now=now_ms() + 2 * DAY_MS) as run:
        export(api, s.memory_id)  # a new marker (another ETag) and a new archive
    assert run.result(timeout=120)["done"] is True
    assert _marker(s) in memory_files(s, bucket.EXPORTS) and len(export_archives(s)) == 1
    assert _erase(api, s, message)["files_deleted"] == 1 and export_archives(s) == []


def test_an_export_into_the_new_epoch_while_a_clear_purges_keeps_its_marker(api, hooks):
    s = make_scope()
    ok(api.post("/v3/scenario/write", s.body(path="a.md", content="cleared")))
    client = Api(api.base_url, api.key, api.service_id, lambda_url=api.lambda_url)
    with ThreadPoolExecutor(1) as pool:
        with hooks.paused(FIRST_PURGE_CALL) as hook:
            clearing = pool.submit(client.post, "/v3/chat-memory/clear", {"memory_ids": [s.memory_id]})
            assert hooks.wait(hook)  # the epoch moved on; the purge has not listed anything yet
            message = _message(api, s, "written after the clear")
            export(api, s.memory_id)
        assert clearing.result(timeout=120).status == 200
    assert _marker(s) in memory_files(s, bucket.EXPORTS) and len(export_archives(s)) == 1
    assert _erase(api, s, message)["files_deleted"] == 1 and export_archives(s) == []
