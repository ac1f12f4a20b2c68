"""Memory formation end to end over the local stack, the model a scripted OpenAI-compatible server
(deterministic answers, bad ones included): records formed from each batch cite its messages, runs
happen exactly once, failures pause without losing anything, users never share a model request,
bad entries are dropped and counted, a cut-off answer splits the batch, and an erased message takes
what was formed from it — files included — before the erasure answers."""

from __future__ import annotations

import json
import re
import time
from typing import Any

import pytest
from helpers import Scope, epoch_of, eventually, make_scope, ok, own_stack
from memory_hub.clock import format_ms
from memory_hub_local import scripted_llm

BATCH = 5
IDLE_S = 2
SERVER, URL = scripted_llm.serve()
MODEL = scripted_llm.ScriptedClient(URL)
stack, api, hooks = own_stack(llm_url=URL, llm_model="scripted", formation_batch=BATCH, formation_idle_s=IDLE_S)
BLOCK = re.compile(r"<conversation>\n(.*)\n</conversation>", re.S)


@pytest.fixture
def scope() -> Scope:
    return make_scope()


@pytest.fixture(autouse=True)
def _quiet_model():
    MODEL.clear_script()
    yield
    MODEL.clear_script()


# The model sees a message under a short id (m1…, c1… for context), never its own: a request's
# messages are told apart by their text and time, which ``add`` sets and notes here.
SAID: dict[tuple[str, str], str] = {}  # (content, time as the model sees it) → the message's id
_LAST_MS = [0]


def _times(n: int) -> list[str]:
    """``n`` times from now on, each after the last one given (the model's format: ms, UTC)."""
    start = max(int(time.time() * 1000), _LAST_MS[0] + 1)
    _LAST_MS[0] = start + n - 1
    return [format_ms(ms) for ms in range(start, start + n)]


def add(api, scope: Scope, contents: list[str], session: str = "s1", role: str = "user", **fields: Any) -> list[str]:
    times = _times(len(contents))
    said = [{"role": role, "content": c, "timestamp": t} for c, t in zip(contents, times, strict=True)]
    ids = ok(api.post("/v3/conversation/add", scope.body(session_id=session, messages=said, **fields)))["accepted_ids"]
    SAID.update({(c, t): i for c, t, i in zip(contents, times, ids, strict=True)})
    return ids


def status(api, scope: Scope, **fields: Any) -> dict[str, Any]:
    return ok(api.post("/v3/formation/status", scope.body(**fields)))


def settled(api, scope: Scope, timeout: float = 90) -> dict[str, Any]:
    def done() -> dict[str, Any] | None:
        now = status(api, scope)
        return now if now["pending_messages"] == 0 and now["state"] == "idle" else None

    return eventually(done, lambda: f"formation did not settle: {status(api, scope)}", timeout=timeout)


def records(api, scope: Scope) -> list[dict[str, Any]]:
    return ok(api.post("/v3/atomic/query", scope.body(limit=100)))["items"]


def batch_of(request: dict[str, Any]) -> dict[str, Any]:
    """The formation input of one model request (the last user message's JSON object)."""
    last = [m for m in request["messages"] if m["role"] == "user"][-1]
    text = last["content"] if isinstance(last["content"], str) else "".join(p.get("text", "") for p in last["content"])
    found = BLOCK.search(text)
    assert found, text
    batch = dict(json.loads(found.group(1)))
    for message in batch["messages"]:  # its own id (``own``) beside the one shown
        message["own"] = SAID.get((message["content"], message["time"]))
    return batch


def requests_about(ids: set[str]) -> list[dict[str, Any]]:
    """The model requests whose batch holds one of ``ids``."""
    return [b for b in map(batch_of, _saves()) if {m["own"] for m in b["messages"]} & ids]


def _saves() -> list[dict[str, Any]]:
    return [r for r in MODEL.requests() if any(t["function"]["name"] == "save_memories" for t in r.get("tools", []))]


def queued(api, scope: Scope, kind: str, session: str = "s1") -> dict[str, Any]:
    """The FormationFunction invoked as the queue's event source invokes it, with one message."""
    body = {
        "team_id": scope.team_id,
        "agent_id": scope.agent_id,
        "epoch": epoch_of(scope),
        "user_id": scope.user_id,
        "session_id": session,
        "task_id": None,
        "kind": kind,
    }
    event = {"Records": [{"messageId": "m-1", "body": json.dumps(body), "eventSource": "aws:sqs"}]}
    return dict(api.invoke("FormationFunction", event))


def test_fifty_messages_form_records_that_cite_their_batch(api, scope):
    before = len(_saves())
    ids = add(api, scope, [f"My fact number {i} is that I like item {i}" for i in range(50)])
    done = settled(api, scope)
    assert done["enabled"] is True and done["model"] and done["layers"] == "records"
    assert done["records_formed"] == 50 and done["last_error"] is None
    assert done["last_formed_message_id"] == max(ids) and done["last_run_at"]
    formed = records(api, scope)
    assert len(formed) == 50 and all(r["formed"] is True for r in formed)
    batches = requests_about(set(ids))
    assert len(_saves()) - before >= len(batches) == 50 // BATCH
    for batch in batches:
        own = [m["id"] for m in batch["messages"] if not m["context"]]
        assert len(own) == BATCH
    cited = {i for r in formed for i in r["source_message_ids"]}
    assert cited == set(ids)
    for record in formed:  # each cites a message of the batch it was formed in
        (source,) = record["source_message_ids"]
        assert any(source in {m["own"] for m in b["messages"] if not m["context"]} for b in batches)
    events = ok(api.post("/v3/audit/query", {"memory_id": scope.memory_id, "action": "formation", "limit": 100}))
    assert len(events["events"]) == 50 and {e["actor"] for e in events["events"]} == {"system:formation"}


def test_the_context_is_earlier_messages_and_never_cited(api, scope):
    add(api, scope, ["first", "second", "third"], session="c")
    settled(api, scope)
    later = add(api, scope, ["fourth", "fifth"], session="c")
    settled(api, scope)
    (batch,) = requests_about(set(later))
    context = [m for m in batch["messages"] if m["context"]]
    assert [m["content"] for m in context] == ["first", "second", "third"]
    assert {
        i for r in records(api, scope) if set(r["source_message_ids"]) & set(later) for i in r["source_message_ids"]
    } <= set(later)


def test_two_users_never_share_a_model_request(api, scope):
    other = Scope(scope.team_id, scope.agent_id, scope.user_id + "-b")
    mine = set(add(api, scope, [f"alpha {i}" for i in range(7)]))
    theirs = set(add(api, other, [f"beta {i}" for i in range(7)]))
    settled(api, scope)
    settled(api, other)
    asked = requests_about(mine | theirs)
    assert len(asked) >= 4  # each user's 7 messages: a full batch of 5 and the rest
    for batch in asked:
        ids = {m["own"] for m in batch["messages"]}
        assert ids <= mine or ids <= theirs, batch
    assert {i for r in records(api, other) for i in r["source_message_ids"]} <= theirs


def test_bad_entries_are_dropped_and_counted_never_a_failure(api, scope):
    earlier = add(api, scope, ["an earlier batch"], session="old")
    settled(api, scope)

    # the batch (a new session: no context) is shown as m1, m2, m3; a message's own id is never shown
    good = {"op": "add", "type": "persona", "content": "The user likes tea", "source_message_ids": ["m1"]}
    bad = [
        {"op": "add", "content": "cites another batch by its own ids", "source_message_ids": earlier},
        {"op": "add", "content": "cites an id shown for no message", "source_message_ids": ["m4"]},
        {"op": "update", "alias": 42, "content": "no such alias", "source_message_ids": ["m2"]},
        {"op": "add", "content": "", "source_message_ids": ["m2"]},
    ]
    filler = [
        {"op": "add", "type": "episodic", "content": f"event {n}", "source_message_ids": ["m3"]} for n in range(45)
    ]
    MODEL.script({"tool_input": {"memories": [good, *bad, *filler]}})  # 50 entries in all
    ids = add(api, scope, ["I like tea", "I like coffee", "I went out"], session="new")
    done = settled(api, scope)
    formed = [r for r in records(api, scope) if set(r["source_message_ids"]) <= set(ids)]
    # the first 20 entries: 1 good + 4 bad + 15 events; the 30 past the 20th are dropped
    assert len(formed) == 16, formed
    assert done["dropped"] == 4 + 30 and done["last_error"] is None and done["state"] == "idle"


def test_an_answer_cut_off_by_the_output_limit_splits_the_batch(api, scope):
    MODEL.script({"finish_reason": "length", "tool_input": {"memories": []}})
    ids = add(api, scope, [f"long story part {i}" for i in range(4)])
    settled(api, scope)
    batches = requests_about(set(ids))
    sizes = [len([m for m in b["messages"] if not m["context"]]) for b in batches]
    assert sizes[0] == 4 and sizes[1] == 2, sizes  # cut off at 4: half of it next, then the rest
    assert {i for r in records(api, scope) for i in r["source_message_ids"]} == set(ids)


def test_a_full_batch_cut_off_is_split_by_the_same_run(api, scope):
    """A batch run as soon as it is full (not by its idle timer) is split too, and its run forms
    both halves: none is left to the idle timer, which would ask for the whole batch again."""
    MODEL.script({"finish_reason": "length", "tool_input": {"memories": []}})
    ids = add(api, scope, [f"long chapter {i}" for i in range(BATCH)])
    settled(api, scope)
    sizes = [len([m for m in b["messages"] if not m["context"]]) for b in requests_about(set(ids))]
    assert sizes == [BATCH, BATCH // 2, BATCH - BATCH // 2], sizes
    assert {i for r in records(api, scope) for i in r["source_message_ids"]} == set(ids)


def test_a_failing_model_pauses_loses_nothing_and_run_resumes(api, scope):
    MODEL.script(*[{"status": 500, "body": {"error": {"message": "down"}}}] * 3)
    ids = add(api, scope, [f"keep me {i}" for i in range(3)])
    paused = eventually(
        lambda: (s := status(api, scope))["state"] == "paused" and s, "formation did not pause", timeout=120
    )
    assert paused["pending_messages"] == 3 and paused["records_formed"] == 0
    error = paused["last_error"]
    assert error["kind"] == "model_unavailable" and error["message"] == "the formation model is unavailable"
    assert "down" not in json.dumps(paused)  # never the model's own words
    assert len(requests_about(set(ids))) == 3
    again = ok(api.post("/v3/formation/run", scope.body()))
    assert again == {"state": "queued", "pending_messages": 3}
    done = settled(api, scope)
    assert done["records_formed"] == 3 and done["last_error"] is None
    assert {i for r in records(api, scope) for i in r["source_message_ids"]} == set(ids)


def test_a_run_killed_after_the_answer_forms_every_message_once_on_the_retry(api, hooks, scope):
    """The run's commit fails once (as if the function died after writing its records): the stored
    answer is replayed by the next run — the model is not asked again, nothing is written twice."""
    commit = {"function": "FormationFunction", "operation": "TransactWriteItems", "body_contains": "fr\\x1f"}
    with hooks.failing(commit, code="ValidationException", status=400, times=1) as hook:
        ids = add(api, scope, [f"once only {i}" for i in range(BATCH)])
        eventually(lambda: hooks.state(hook)["hits"] == 1, "the commit was not reached")
    done = settled(api, scope)
    assert done["records_formed"] == BATCH
    formed = records(api, scope)
    assert sorted(i for r in formed for i in r["source_message_ids"]) == sorted(ids)  # each once
    assert all(r["reinforced_count"] == 1 for r in formed)  # a replay never reinforces
    assert len(requests_about(set(ids))) == 1
    # delivered again: nothing is waiting, nothing is written, the model is not asked
    assert queued(api, scope, "batch") == {"batchItemFailures": []}
    assert queued(api, scope, "run") == {"batchItemFailures": []}
    assert len(records(api, scope)) == BATCH and len(requests_about(set(ids))) == 1


def test_consolidation_updates_a_formed_record_by_alias(api, scope):
    """The user's similar formed records are offered under aliases; the scripted model answers an
    update when the fact it would add is one of them: one record, its sources joined."""
    first = add(api, scope, ["I live in Paris"], session="a")
    settled(api, scope)
    (record,) = records(api, scope)
    later = add(api, scope, ["I live in Paris"], session="b")
    settled(api, scope)
    (batch,) = requests_about(set(later))
    assert batch["memories"] == [{"alias": 1, "type": "episodic", "content": record["content"]}]
    (updated,) = records(api, scope)
    assert updated["id"] == record["id"] and updated["version"] == 2 and updated["formed"] is True
    assert updated["source_message_ids"] == first + later


def test_a_supersede_whose_replacement_was_skipped_erases_nothing(api, scope):
    """A supersede stands only beside an add or update that wrote: an add skipped because a
    client's record holds its natural key replaces nothing, so the formed record stays."""
    add(api, scope, ["I live in Paris"], session="a")
    settled(api, scope)
    (formed,) = records(api, scope)
    client = ok(api.post("/v3/atomic/add", scope.body(content="I moved to Lyon", type="episodic")))
    for replacement in ("I moved to Lyon", "I moved to Lyon for good"):  # skipped, then written
        add(api, scope, ["I live in Paris no more"], session="b")  # the record is offered: alias 1
        entries = [  # the one message of the batch is shown as m1
            {"op": "supersede", "alias": 1, "source_message_ids": ["m1"]},
            {"op": "add", "type": "episodic", "content": replacement, "source_message_ids": ["m1"]},
        ]
        dropped = status(api, scope)["dropped"]
        MODEL.script({"tool_input": {"memories": entries}})
        done = settled(api, scope)
        ids = {r["id"] for r in records(api, scope)}
        if replacement == "I moved to Lyon":
            assert ids == {formed["id"], client["id"]} and done["dropped"] == dropped, (ids, done)
    assert formed["id"] not in ids and client["id"] in ids and len(ids) == 2  # written: the supersede stood


def test_erasing_a_message_takes_what_was_formed_from_it(api, scope):
    ids = add(api, scope, ["I am allergic to nuts", "I play chess", "I have a cat"], session="e1")
    settled(api, scope)
    by_source = {r["source_message_ids"][0]: r["id"] for r in records(api, scope)}
    gone = ok(api.post("/v3/conversation/delete", scope.body(message_ids=[ids[0]])))
    assert gone["records_deleted"] == 1
    left = {r["id"] for r in records(api, scope)}
    assert by_source[ids[0]] not in left and {by_source[ids[1]], by_source[ids[2]]} <= left
    assert status(api, scope)["records_formed"] == 2
    by_session = ok(api.post("/v3/conversation/delete", scope.body(session_ids=["e1"])))
    assert by_session["records_deleted"] == 2 and records(api, scope) == []
    assert status(api, scope)["last_formed_message_id"] is None  # erased


MARK_DELETES = {"function": "DeleteFunction", "operation": "BatchWriteItem", "body_contains": "fu\\x1f"}


def test_an_erasure_takes_exactly_the_erased_messages_marks_and_deletes_no_absent_one(api, hooks, scope):
    """A delete of an item that is not there is billed a write unit: an erasure reads its messages'
    waiting marks and deletes those there, and only those."""
    MODEL.script(*[{"status": 500}] * 3)
    kept = add(api, scope, ["waiting one", "waiting two", "waiting three", "waiting four"], session="w")
    other = add(api, scope, ["another session waits"], session="v")
    eventually(lambda: status(api, scope)["state"] == "paused", "formation did not pause", timeout=120)
    assert status(api, scope)["pending_messages"] == 5
    ok(api.post("/v3/conversation/delete", scope.body(message_ids=[kept[1], kept[3]])))
    assert status(api, scope)["pending_messages"] == 3  # the marks of the others stay, in both sessions
    MODEL.clear_script()
    ok(api.post("/v3/formation/run", scope.body()))
    settled(api, scope)
    assert {i for r in records(api, scope) for i in r["source_message_ids"]} == {kept[0], kept[2], *other}
    counted = hooks.add(MARK_DELETES, action="delay", times=None)
    try:  # formed: no mark is left, so these erasures delete none
        ok(api.post("/v3/conversation/delete", scope.body(message_ids=[kept[0]])))
        ok(api.post("/v3/conversation/delete", scope.body(session_ids=["v"])))
        assert hooks.state(counted)["hits"] == 0
    finally:
        hooks.remove(counted)


def _died_adding(api, hooks, scope: Scope, session: str, content: str) -> None:
    """An add that dies between its marks and its message (its transaction refused): a mark with
    no message, first in its batch."""
    died = {"operation": "TransactWriteItems", "body_contains": content}
    with hooks.failing(died, code="ValidationException", status=400):
        lost = api.post(
            "/v3/conversation/add", scope.body(session_id=session, messages=[{"role": "user", "content": content}])
        )
    assert lost.status >= 400


def _cited(api, scope: Scope) -> set[str]:
    return {i for r in records(api, scope) for i in r["source_message_ids"]}


def _formation_ran(hooks, since: int) -> bool:
    """Whether FormationFunction has handled a queued message since ``since`` (it read the user's
    state: a DynamoDB call, not only its queue's)."""
    return any(c["function"] == "FormationFunction" and c["service"] == "dynamodb" for c in hooks.calls(since))


def test_a_batch_whose_first_mark_has_no_message_is_formed_by_a_run(api, hooks, scope):
    """An add that died after writing its marks (before its messages) leaves a mark with no
    message. A run asked for the user's batches looks each up by its first marks whose message is
    there: the batch behind such a mark is formed. The mark itself stays, counted, until it is
    older than any add can run (its add might still be writing): the unit tier drops old ones."""
    MODEL.script(*[{"status": 500}] * 3)
    paused_by = add(api, scope, ["pause the runs"], session="p")
    eventually(lambda: status(api, scope)["state"] == "paused", "formation did not pause", timeout=120)
    _died_adding(api, hooks, scope, "h", "lost on the way")
    since = hooks.last_seq()
    kept = add(api, scope, ["kept one", "kept two"], session="h")
    assert status(api, scope)["pending_messages"] == 4  # the orphan mark first in its batch
    # the batch's idle timer fires while formation is paused (and forms nothing): only the run is left
    eventually(lambda: _formation_ran(hooks, since), "no idle run came")
    MODEL.clear_script()
    ok(api.post("/v3/formation/run", scope.body()))
    eventually(lambda: _cited(api, scope) == {*paused_by, *kept}, lambda: f"formed: {_cited(api, scope)}", timeout=90)
    after = eventually(lambda: (s := status(api, scope))["state"] == "idle" and s, "the run did not end")
    assert after["pending_messages"] == 1 and after["last_error"] is None  # the orphan's mark, young


def test_a_run_committed_behind_a_young_mark_is_not_formed_again(api, hooks, scope):
    """A run whose marks' removal failed after its commit is found committed by the next run — by
    its first message, not by a young mark left out at the batch's head: the model is not asked
    again and nothing is reinforced."""
    _died_adding(api, hooks, scope, "k", "lost ahead of the batch")
    unmarking = {"function": "FormationFunction", "operation": "BatchWriteItem", "body_contains": "fu\\x1f"}
    with hooks.failing(unmarking, code="ValidationException", status=400, times=1) as hook:
        ids = add(api, scope, [f"formed once {i}" for i in range(BATCH)], session="k")
        eventually(lambda: hooks.state(hook)["hits"] == 1, "the marks' removal was not reached")
    ok(api.post("/v3/formation/run", scope.body()))
    eventually(lambda: set(ids) <= _cited(api, scope), lambda: f"formed: {_cited(api, scope)}", timeout=120)
    eventually(lambda: status(api, scope)["pending_messages"] == 1, "the batch's marks did not go")  # the young one
    asked = [b for b in requests_about({ids[0]}) if any(m["own"] == ids[0] and not m["context"] for m in b["messages"])]
    assert len(asked) == 1  # the committed run was not asked again (later batches show it as context)
    assert all(r["reinforced_count"] == 1 for r in records(api, scope))


def test_a_message_erased_while_a_backfill_marks_it_leaves_no_mark(api, hooks, scope):
    """A backfill marks the messages it read; one erased between that read and its mark was looked
    for by the erasure before the mark came: the backfill reads its messages back and takes it."""
    ok(api.post("/v3/memory/create", {"team_id": scope.team_id, "agent_id": scope.agent_id, "formation": "off"}))
    (doomed,) = add(api, scope, ["erased while it is marked"], session="b")
    ok(api.post("/v3/memory/update", {"memory_id": scope.memory_id, "formation": "records"}))
    marking = {"function": "FormationFunction", "operation": "BatchWriteItem", "body_contains": "fu\\x1f"}
    with hooks.paused(marking) as hook:
        assert ok(api.post("/v3/formation/run", scope.body(backfill=True)))["state"] == "queued"
        assert hooks.wait(hook), "the backfill did not mark"
        assert ok(api.post("/v3/conversation/delete", scope.body(message_ids=[doomed])))["deleted_count"] == 1
    done = settled(api, scope)
    assert done["pending_messages"] == 0 and records(api, scope) == []


def test_a_user_erasure_takes_their_formation_state(api, scope):
    add(api, scope, ["one", "two"])
    settled(api, scope)
    MODEL.script(*[{"status": 500}] * 3)
    add(api, scope, ["three"])
    eventually(lambda: status(api, scope)["state"] == "paused", "formation did not pause", timeout=120)
    erased = ok(api.post("/v3/user-memory/delete", {"memory_id": scope.memory_id, "user_id": scope.user_id}))
    assert erased["l0_deleted"] == 3 and erased["l1_deleted"] == 2
    fresh = status(api, scope)
    assert (fresh["state"], fresh["pending_messages"], fresh["records_formed"], fresh["dropped"]) == ("idle", 0, 0, 0)
    assert fresh["last_error"] is None and fresh["last_run_at"] is None


def test_formation_off_for_the_asset_marks_nothing_and_backfill_forms_it_later(api, scope):
    ok(api.post("/v3/memory/create", {"team_id": scope.team_id, "agent_id": scope.agent_id, "formation": "off"}))
    before = add(api, scope, ["said while off", "also while off"])
    off = status(api, scope)
    assert (off["enabled"], off["layers"], off["model"], off["pending_messages"]) == (False, "off", None, 0)
    refused = api.post("/v3/formation/run", scope.body())
    assert refused.status == 409 and refused.message == "formation: off" and refused.body["retryable"] is False
    ok(api.post("/v3/memory/update", {"memory_id": scope.memory_id, "formation": "records"}))
    after = add(api, scope, ["said while on"])
    settled(api, scope)
    assert {i for r in records(api, scope) for i in r["source_message_ids"]} == set(after)
    assert ok(api.post("/v3/formation/run", scope.body())) == {"state": "idle", "pending_messages": 0}
    assert ok(api.post("/v3/formation/run", scope.body(backfill=True)))["state"] == "queued"
    settled(api, scope)
    assert {i for r in records(api, scope) for i in r["source_message_ids"]} == set(before + after)
    # everything is formed now: a backfill finds nothing, so it answers idle and asks no model
    asked = len(_saves())
    assert ok(api.post("/v3/formation/run", scope.body(backfill=True))) == {"state": "idle", "pending_messages": 0}
    assert status(api, scope)["state"] == "idle" and len(_saves()) == asked


def test_a_backfill_for_a_user_with_no_message_answers_idle(api, scope):
    add(api, scope, ["the memory exists"])  # another user's message: the asset is there
    settled(api, scope)  # (formed by its idle timer: no model call of it comes later)
    nobody = Scope(scope.team_id, scope.agent_id, "nobody")
    asked = len(_saves())
    answer = ok(api.post("/v3/formation/run", nobody.body(backfill=True)))
    assert answer == {"state": "idle", "pending_messages": 0}
    assert status(api, nobody)["state"] == "idle" and len(_saves()) == asked


def test_roles_and_a_client_write_to_a_formed_record(api, scope):
    add(api, scope, ["I drink green tea"])
    settled(api, scope)
    (record,) = records(api, scope)
    key = ok(api.post("/v3/admin/keys/create", {"role": "reader", "team_ids": [scope.team_id]}))["api_key"]
    reader = api.with_key(key)
    assert reader.post("/v3/formation/status", scope.body()).status == 200
    assert reader.post("/v3/formation/run", scope.body()).status == 403
    # a client's update makes a formed record the client's for good
    ok(api.post("/v3/atomic/update", scope.body(id=record["id"], tags=["mine"])))
    (after,) = records(api, scope)
    assert after["formed"] is False and status(api, scope)["records_formed"] == 0
    written = api.post("/v3/scenario/write", scope.body(path="formed/x.md", content="mine"))
    assert written.status == 400 and written.message == "path: formed/ is written by formation"


def formed_files(api, scope: Scope) -> dict[str, dict[str, Any]]:
    listed = ok(api.post("/v3/scenario/ls", scope.body(path_prefix="formed/")))["entries"]
    return {e["path"]: e for e in listed}


def read(api, scope: Scope, path: str) -> str:
    return str(ok(api.post("/v3/scenario/read", scope.body(path=path)))["content"])


def test_with_all_a_user_gets_scenes_and_a_persona_formed_again_after_an_erasure(api, scope):
    ok(api.post("/v3/memory/create", {"team_id": scope.team_id, "agent_id": scope.agent_id, "formation": "all"}))
    ids = add(api, scope, ["I am allergic to peanuts", "I collect vinyl records", "I run on Sundays"])
    settled(api, scope)
    files = eventually(lambda: len(formed_files(api, scope)) >= 2 and formed_files(api, scope), "no formed files")
    digest = __import__("hashlib").sha256(scope.user_id.encode()).hexdigest()[:16]
    assert all(re.fullmatch(rf"formed/{digest}/[0-9a-f]{{26}}\.md", p) for p in files)  # opaque names
    persona = next(p for p, e in files.items() if e["summary"] == "Persona")
    assert "peanuts" in read(api, scope, persona)
    # the agent's own persona.md is never formation's
    assert ok(api.post("/v3/core/read", scope.body()))["content"] is None
    gone = ok(api.post("/v3/conversation/delete", scope.body(message_ids=[ids[0]])))
    assert gone["records_deleted"] == 1 and gone["files_deleted"] >= 1
    assert persona not in formed_files(api, scope)  # removed before the answer
    again = eventually(
        lambda: next((p for p, e in formed_files(api, scope).items() if e["summary"] == "Persona"), None),
        "the persona was not formed again",
    )
    text = read(api, scope, again)
    assert "peanuts" not in text and "vinyl" in text  # from what remains
    events = ok(api.post("/v3/audit/query", {"memory_id": scope.memory_id, "action": "formation", "limit": 100}))
    assert any(e["layer"] == "L2" and e["target"].startswith(f"formed/{digest}/") for e in events["events"])
    erased = ok(api.post("/v3/user-memory/delete", {"memory_id": scope.memory_id, "user_id": scope.user_id}))
    assert erased["files_deleted"] >= 1 and formed_files(api, scope) == {}
