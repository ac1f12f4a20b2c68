"""Provenance through export and import (README "Export and import", docs/API.md): a record line
carries the record's own ``source_message_ids`` and ``formed``; an import maps each cited id to the
id the tree's message gets in the target, drops what the tree does not hold (or holds for another
user or task), keeps the newest 100, writes the citations (so erasing an imported message erases
the records citing it), joins them into a record its natural-key dedup reinforces, and a failed
import takes all of it back — and erases a client's record that cited one of its messages
meanwhile.

Every test works on fresh (team, agent) pairs of the shared local stack; trees are built here as
plain dicts of path → bytes (test_transfer's helpers)."""

from __future__ import annotations

import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from helpers import TABLES, Api, Scope, epoch_of, jsonl, make_scope, ok, partition, tarball
from memory_hub.storage.citations import LAYER
from memory_hub.storage.layout import CITATIONS, item_pk
from test_transfer import (
    CONVERSATIONS,
    ISSUED,
    RECORDS,
    export,
    import_tree,
    lines_of,
    snapshot,
    without_summary,
)

AT = 1767607200000  # 2026-01-05T10:00:00Z
CREATED = "2026-01-05T11:00:00.000Z"


def our_id(prefix: str) -> str:
    """An id this service could have issued (kept by an import where it is free)."""
    return f"{prefix}-{uuid.uuid4().hex[:26]}"


def message_line(message_id: str, content: str, user: str = "u", task: str | None = None, n: int = 0) -> dict:
    return {
        "id": message_id,
        "sessionId": "s",
        "userId": user,
        "taskId": task,
        "role": "user",
        "content": content,
        "timestamp": AT + n,
    }


def record_line(content: str, sources: Any = None, user: str = "u", **extra: Any) -> dict:
    line = {"id": our_id("atom"), "content": content, "userId": user, "createdAt": CREATED, **extra}
    if sources is not None:
        line["source_message_ids"] = sources
    return line


def records_of(api: Api, scope: Scope, user: str = "u") -> dict[str, dict[str, Any]]:
    """The user's records by content."""
    items = ok(api.post("/v3/atomic/query", scope.body(user_id=user, limit=100)))["items"]
    return {i["content"]: i for i in items}


def message_ids(api: Api, scope: Scope, user: str = "u") -> dict[str, str]:
    """The user's messages: content → id."""
    found = ok(api.post("/v3/conversation/query", scope.body(user_id=user, limit=100)))["messages"]
    return {m["content"]: m["id"] for m in found}


def delete_messages(api: Api, scope: Scope, ids: list[str], user: str = "u") -> dict[str, Any]:
    return ok(api.post("/v3/conversation/delete", scope.body(user_id=user, message_ids=ids)))


def citation_entries(scope: Scope, users: tuple[str, ...] = ("u",)) -> list[str]:
    """The sort keys of every citation entry (``c␟<message>␟<record>``) in these users' L1
    partitions at the pair's epoch (keys as ``memory_hub.storage.layout`` spells them): one Query
    each. A Scan of the whole table took ~30 s in a full run of the tier, long enough to race
    what it looked at."""
    epoch = epoch_of(scope)
    pks = [item_pk(LAYER, scope.team_id, scope.agent_id, epoch, user) for user in users]
    return [item["sk"]["S"] for pk in pks for item in partition(TABLES["items"], pk, CITATIONS)]


# ---- export, and the round trip ---------------------------------------------------------------------


class Cited:
    """A memory whose records cite messages through the API: one cites two (then a reinforcing add
    joins a third), one of a task cites that task's message, one cites nothing."""

    def __init__(self, api: Api) -> None:
        self.scope = s = make_scope()
        talk = [{"role": "user", "content": f"provmarker said {i}"} for i in range(3)]
        self.messages = ok(api.post("/v3/conversation/add", s.body(session_id="s1", messages=talk)))["accepted_ids"]
        tasked = [{"role": "user", "content": "provmarker task talk"}]
        body = s.body(session_id="s2", task_id="t1", messages=tasked)
        self.tasked = ok(api.post("/v3/conversation/add", body))["accepted_ids"][0]
        m = self.messages
        cites = s.body(content="provmarker cites", source_message_ids=[m[2], m[0]])
        self.cites = ok(api.post("/v3/atomic/add", cites))["id"]
        again = ok(api.post("/v3/atomic/add", {**cites, "source_message_ids": [m[1], m[0]]}))
        assert again["id"] == self.cites and again["reinforced_count"] == 2
        body = s.body(content="provmarker task fact", task_id="t1", source_message_ids=[self.tasked])
        self.task_record = ok(api.post("/v3/atomic/add", body))["id"]
        self.plain = ok(api.post("/v3/atomic/add", s.body(content="provmarker cites nothing")))["id"]


def test_export_carries_each_records_sources_and_formed(api):
    cited = Cited(api)
    _, files = export(api, cited.scope.memory_id)
    lines = {line["id"]: line for line in lines_of(files, "records")}
    m = cited.messages
    assert lines[cited.cites]["source_message_ids"] == [m[2], m[0], m[1]]  # order kept, the add's joined
    assert lines[cited.task_record]["source_message_ids"] == [cited.tasked]
    assert lines[cited.plain]["source_message_ids"] == []
    assert all(line["formed"] is False for line in lines.values())
    assert all("tdai" not in line["metadata"] for line in lines.values())  # written once, at top level
    # a person's export keeps the ids as they are
    _, own = export(api, cited.scope.memory_id, user_id=cited.scope.user_id)
    assert {line["id"]: line["source_message_ids"] for line in lines_of(own, "records")} == {
        i: line["source_message_ids"] for i, line in lines.items()
    }


def test_round_trip_keeps_sources_line_for_line_and_a_second_import_changes_nothing(api):
    cited = Cited(api)
    _, files = export(api, cited.scope.memory_id)
    target = make_scope()
    done = import_tree(api, target, tarball(files))
    assert done["state"] == "done", done
    items = records_of(api, target, cited.scope.user_id)
    m = cited.messages
    assert items["provmarker cites"]["source_message_ids"] == [m[2], m[0], m[1]]  # free ids: kept
    assert items["provmarker task fact"]["source_message_ids"] == [cited.tasked]
    assert items["provmarker cites nothing"]["source_message_ids"] == []
    assert all(i["formed"] is False for i in items.values())

    _, again = export(api, target.memory_id)
    assert sorted(again) == sorted(files)
    for name in without_summary(files):
        assert again[name] == files[name], name  # line for line, the sources included

    view = snapshot(api, target, [cited.scope.user_id], "t1")
    entries = sorted(citation_entries(target, (cited.scope.user_id,)))
    second = import_tree(api, target, tarball(files))
    assert second["counts"] == {"l0": 0, "l1": 0, "l2": 0, "l3": 0}, second
    assert snapshot(api, target, [cited.scope.user_id], "t1") == view
    assert sorted(citation_entries(target, (cited.scope.user_id,))) == entries
    assert len(entries) == 4  # cites → 3 messages, the task fact → 1

    # erasing an imported message erases the imported record citing it (and only that one)
    body = target.body(user_id=cited.scope.user_id, message_ids=[m[1]])
    erased = ok(api.post("/v3/conversation/delete", body))
    assert (erased["deleted_count"], erased["records_deleted"]) == (1, 1), erased
    left = records_of(api, target, cited.scope.user_id)
    assert sorted(left) == ["provmarker cites nothing", "provmarker task fact"]
    assert sorted(records_of(api, cited.scope, cited.scope.user_id)) == sorted(items)  # the source pair keeps its


# ---- mapping --------------------------------------------------------------------------------------


def test_a_cited_id_whose_message_gets_another_id_is_mapped_to_it(api):
    target = make_scope()
    taken, free = our_id("msg"), our_id("msg")
    squatter = {CONVERSATIONS: jsonl([message_line(taken, "the squatter")])}
    assert import_tree(api, target, squatter)["state"] == "done"
    tree = {
        CONVERSATIONS: jsonl([message_line(taken, "the original", n=1), message_line(free, "a free one", n=2)]),
        RECORDS: jsonl([record_line("drawn from both", [taken, free])]),
    }
    done = import_tree(api, target, tree)
    assert done["state"] == "done" and done["counts"]["l0"] == 2, done
    ids = message_ids(api, target)
    assert ids["the squatter"] == taken and ids["a free one"] == free
    moved = ids["the original"]
    assert ISSUED.match(moved) and moved != taken
    [item] = records_of(api, target).values()
    assert item["source_message_ids"] == [moved, free]  # the tree's id mapped to the one its message got

    assert import_tree(api, target, tree)["counts"] == {"l0": 0, "l1": 0, "l2": 0, "l3": 0}
    assert delete_messages(api, target, [taken])["records_deleted"] == 0  # the squatter is not a source
    erased = delete_messages(api, target, [moved])
    assert erased["records_deleted"] == 1, erased
    assert records_of(api, target) == {}


def test_ids_the_tree_does_not_hold_for_that_user_or_task_are_dropped_and_the_newest_100_kept(api):
    target = make_scope()
    talk = [our_id("msg") for _ in range(120)]
    in_t1, in_t2, of_v = our_id("msg"), our_id("msg"), our_id("msg")
    conversations = [message_line(i, f"line {n}", n=n) for n, i in enumerate(talk)]
    conversations += [
        message_line(in_t1, "in task one", task="t1", n=200),
        message_line(in_t2, "in task two", task="t2", n=201),
        message_line(of_v, "of user v", user="v", n=202),
    ]
    many = ["msg-not-in-the-tree", of_v, talk[0], talk[0], *talk, in_t2, our_id("msg")]
    records = [
        record_line("no task: any of the user's messages", many),
        record_line("task one", [in_t2, in_t1, talk[5], "msg-4b1d5e7a9c01"], taskId="t1"),
        record_line("of user v", [talk[0], of_v], user="v"),
        record_line("nothing known", ["msg-nope", 7 * "x"]),
        record_line("null sources", None, source_message_ids=None),
    ]
    done = import_tree(api, target, {CONVERSATIONS: jsonl(conversations), RECORDS: jsonl(records)})
    assert done["state"] == "done", done  # never an error
    items = {**records_of(api, target), **records_of(api, target, "v")}
    every = [*talk, in_t2]  # duplicates removed, order kept: 121 ids
    assert items["no task: any of the user's messages"]["source_message_ids"] == every[-100:]
    assert items["task one"]["source_message_ids"] == [in_t1]
    assert items["of user v"]["source_message_ids"] == [of_v]
    assert items["nothing known"]["source_message_ids"] == []
    assert items["null sources"]["source_message_ids"] == []

    malformed = import_tree(api, make_scope(), {RECORDS: jsonl([record_line("x", "msg-1"), record_line("y", [1])])})
    assert malformed["state"] == "failed", malformed
    assert [p.split(": ", 1)[1] for p in malformed["problems"]] == [
        "source_message_ids must be a list of message ids"
    ] * 2


def test_a_tencentdb_tree_imports_its_sources_mapped_to_the_new_ids(api):
    target = make_scope()
    conversations = [
        {**message_line("msg-2bbd30095e65", "book me a flight to Oslo"), "userId": "default"},
        {**message_line("msg-2bbd30095e66", "Done: Oslo, Friday 9:00", n=5), "role": "assistant"},
    ]
    record = {
        "id": "m_1796101100101_729c3408",
        "content": "flies to Oslo on Fridays",
        "type": "preference",
        "priority": 50,
        "scene_name": "",
        "source_message_ids": ["msg-2bbd30095e66", "msg-ffffffffffff", "msg-2bbd30095e65"],
        "metadata": {},
        "timestamps": [CREATED],
        "createdAt": CREATED,
        "updatedAt": CREATED,
        "userId": "default",
        "version": 0,
    }
    tree = {CONVERSATIONS: jsonl(conversations), RECORDS: jsonl([record])}
    done = import_tree(api, target, tree, user_id="u")
    assert done["state"] == "done" and done["counts"]["l1"] == 1, done
    ids = message_ids(api, target)
    assert all(ISSUED.match(i) for i in ids.values())
    [item] = records_of(api, target).values()
    assert item["source_message_ids"] == [ids["Done: Oslo, Friday 9:00"], ids["book me a flight to Oslo"]]
    assert item["metadata"] == {"tdai": {"source_id": record["id"]}}  # the sources are not kept there

    again = import_tree(api, target, tree, user_id="u")
    assert again["counts"] == {"l0": 0, "l1": 0, "l2": 0, "l3": 0}, again
    assert list(records_of(api, target).values()) == [item]

    _, files = export(api, target.memory_id)
    [line] = lines_of(files, "records")
    assert line["source_message_ids"] == item["source_message_ids"]
    assert line["metadata"] == {"tdai": {"source_id": record["id"]}}


def test_a_tree_exported_before_sources_were_a_field_reads_the_metadata_copy(api):
    target = make_scope()
    cited = our_id("msg")
    legacy = record_line("an older export", metadata={"k": 1, "tdai": {"source_message_ids": [cited, "msg-gone"]}})
    both = record_line("both given", [cited], metadata={"tdai": {"source_message_ids": ["msg-other"], "priority": 70}})
    tree = {CONVERSATIONS: jsonl([message_line(cited, "the cited one")]), RECORDS: jsonl([legacy, both])}
    assert import_tree(api, target, tree)["state"] == "done"
    items = records_of(api, target)
    assert items["an older export"]["source_message_ids"] == [cited]
    assert items["an older export"]["metadata"] == {"k": 1}
    assert items["both given"]["source_message_ids"] == [cited]  # the line's own field wins
    assert items["both given"]["metadata"] == {"tdai": {"priority": 70}}
    _, files = export(api, target.memory_id)
    lines = {line["content"]: line for line in lines_of(files, "records")}
    assert lines["an older export"]["source_message_ids"] == [cited]
    assert lines["an older export"]["metadata"] == {"k": 1}
    assert lines["both given"]["metadata"] == {}
    assert lines["both given"]["priority"] == 70


# ---- formed ------------------------------------------------------------------------------------------


def test_formed_is_read_kept_and_written_back_and_formed_files_import_as_plain_files(api):
    target = make_scope()
    scene = "formed/0123456789abcdef/people.md"
    tree = {
        RECORDS: jsonl(
            [
                record_line("formed by a service", formed=True),
                record_line("a client's", formed=False),
                record_line("absent"),
            ]
        ),
        f"scene_blocks/{scene}": "# People\nAlice works on Apollo\n",
    }
    done = import_tree(api, target, tree)
    assert done["state"] == "done" and done["counts"]["l2"] == 1, done
    items = records_of(api, target)
    assert {c: i["formed"] for c, i in items.items()} == {
        "formed by a service": True,
        "a client's": False,
        "absent": False,
    }
    read = ok(api.post("/v3/scenario/read", target.body(path=scene)))
    assert read["content"].endswith("# People\nAlice works on Apollo\n"), read
    refused = api.post("/v3/scenario/write", target.body(path="formed/x.md", content="by hand"))
    assert refused.status == 400, refused.body  # the API's rule; an import is not held to it

    _, files = export(api, target.memory_id)
    assert {line["content"]: line["formed"] for line in lines_of(files, "records")} == {
        "formed by a service": True,
        "a client's": False,
        "absent": False,
    }
    assert f"scene_blocks/{scene}" in files
    other = make_scope()
    assert import_tree(api, other, tarball(files))["state"] == "done"
    _, back = export(api, other.memory_id)
    for name in without_summary(files):
        assert back[name] == files[name], name

    bad = import_tree(api, make_scope(), {RECORDS: jsonl([record_line("x", formed="yes")])})
    assert bad["state"] == "failed" and bad["problems"][0].endswith(": formed must be true or false"), bad


# ---- natural-key dedup joins the sources ---------------------------------------------------------


def test_a_reinforcing_line_joins_its_sources_into_the_record_it_reinforces(api):
    target = make_scope()
    there = ok(
        api.post(
            "/v3/conversation/add",
            target.body(user_id="u", session_id="s", messages=[{"role": "user", "content": "there before"}]),
        )
    )["accepted_ids"][0]
    held = ok(api.post("/v3/atomic/add", target.body(user_id="u", content="a shared fact", source_message_ids=[there])))
    brought = our_id("msg")
    tree = {
        CONVERSATIONS: jsonl([message_line(brought, "brought by the tree")]),
        RECORDS: jsonl([record_line("a shared fact", [brought, there, "msg-unknown"])]),
    }
    done = import_tree(api, target, tree)
    assert done["state"] == "done" and done["counts"]["l1"] == 1, done
    [item] = records_of(api, target).values()
    assert (item["id"], item["reinforced_count"]) == (held["id"], 2)
    assert item["source_message_ids"] == [there, brought]  # joined, order kept
    assert import_tree(api, target, tree)["counts"]["l1"] == 0  # a re-import changes nothing
    assert records_of(api, target)["a shared fact"] == item

    erased = delete_messages(api, target, [brought])
    assert erased["records_deleted"] == 1, erased  # the record now cites the imported message
    assert records_of(api, target) == {}
    assert citation_entries(target) == []


# ---- a failed import takes its citations back --------------------------------------------------------


def test_a_failed_import_leaves_no_citation_and_its_messages_cannot_be_cited_meanwhile(api, hooks):
    target = make_scope()
    body = target.body(user_id="u", session_id="s", messages=[{"role": "user", "content": "there before"}])
    there = ok(api.post("/v3/conversation/add", body))["accepted_ids"][0]
    held = ok(
        api.post(
            "/v3/atomic/add", target.body(user_id="u", content="a record there before", source_message_ids=[there])
        )
    )
    ok(api.post("/v3/core/write", target.body(content="live persona")))
    before = snapshot(api, target, ["u"])
    entries_before = citation_entries(target)
    brought = [our_id("msg") for _ in range(3)]
    tree = {
        CONVERSATIONS: jsonl(
            [message_line(i, f"brought {n}", n=n) for n, i in enumerate(brought)]
            + [message_line(there, "there before", n=9)]  # there already: skipped, and cited by its id
        ),
        RECORDS: jsonl(
            [
                record_line("imported, cites two", [brought[0], brought[1]]),
                record_line("imported, cites one there", [there]),
                record_line("a record there before", [brought[2], there]),  # reinforces the held one
            ]
        ),
        "scene_blocks/new.md": "a new scene",
        "persona.md": "imported persona",
    }
    scene = {
        "function": "TransferFunction",
        "operation": "PutObject",
        "key_contains": [target.prefix, ".staged/scene-"],
    }
    persona = {
        "function": "TransferFunction",
        "operation": "PutObject",
        "key_contains": [target.prefix, ".staged/persona-"],
    }
    with hooks.failing(persona, code="AccessDenied", status=403), ThreadPoolExecutor(1) as pool:
        with hooks.paused(scene) as hook:
            running = pool.submit(import_tree, api, target, tree)
            assert hooks.wait(hook, timeout=120), "the import never reached its files"
            # midway: its messages and records are written, with their citations, and staged: none
            # shows, and the record that was there is reinforced only at the commit
            midway = records_of(api, target)
            assert list(midway) == ["a record there before"]
            assert midway["a record there before"]["source_message_ids"] == [there]
            assert len(citation_entries(target)) == len(entries_before) + 3  # its own records'
            client = target.body(user_id="u", content="a client's record", source_message_ids=[brought[1]])
            refused = api.post("/v3/atomic/add", client)
            assert refused.status == 400, refused.body  # a running import's message is not there to cite
        failed = running.result(timeout=300)
    assert failed["state"] == "failed", failed

    after = snapshot(api, target, ["u"])
    assert after["users"] == before["users"]
    [record] = after["users"]["u"]["l1"]
    assert (record["id"], record["reinforced_count"], record["source_message_ids"]) == (held["id"], 1, [there])
    assert sorted(citation_entries(target)) == sorted(entries_before)

    retry = import_tree(api, target, tree)
    assert retry["state"] == "done", retry
    assert records_of(api, target)["a record there before"]["source_message_ids"] == [there, brought[2]]
