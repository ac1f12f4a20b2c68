"""`memory-hub mcp` (stdio) end to end: a real MCP client starts the server as a subprocess, pointed at
the live local API with the admin key, and runs the "Echo" protocol — search, show, delete by id at
the version shown."""

from __future__ import annotations

import json
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import pytest
from helpers import ADMIN_KEY, SERVICE_ID, make_scope
from mcp import ClientSession, StdioServerParameters, stdio_client
from memory_hub.domain.results import FormationStatus, MessageHit, RecordHit
from memory_hub_tools.client import MemoryHubClient

TIMEOUT = 60  # seconds for a whole session (spawn, initialize, calls); each request gets 20


def server_params(api_url: str, **env: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "memory_hub_tools.cli", "mcp"],
        env={
            "MEMORY_HUB_ENDPOINT": api_url,
            "MEMORY_HUB_API_KEY": ADMIN_KEY,
            "MEMORY_HUB_SERVICE_ID": SERVICE_ID,
            **env,
        },
    )


def in_session(api_url: str, tmp_path, body: Callable[[ClientSession], Awaitable[Any]], **env: str) -> Any:
    """Run ``body`` against a fresh `memory-hub mcp` subprocess; its stderr is shown on failure."""
    errlog_path = tmp_path / "mcp-server.stderr"

    async def main() -> Any:
        with anyio.fail_after(TIMEOUT), errlog_path.open("w") as errlog:
            async with stdio_client(server_params(api_url, **env), errlog=errlog) as (read, write):
                async with ClientSession(read, write, read_timeout_seconds=20) as session:
                    await session.initialize()
                    return await body(session)

    try:
        return anyio.run(main)
    except BaseException:
        sys.stderr.write(errlog_path.read_text() if errlog_path.exists() else "")
        raise


def payload(result: Any) -> Any:
    """A tool result's data: structured content (search results are wrapped as {"results": [...]})."""
    data = result.structured_content
    if data is None:
        data = json.loads(result.content[0].text)
    return data


@pytest.fixture
def api_url(stack) -> str:
    return stack.api_url


@pytest.fixture
def client(api_url) -> MemoryHubClient:
    return MemoryHubClient(api_url, ADMIN_KEY, SERVICE_ID, timeout=120)  # a cold function on a loaded machine


def scope_args(scope) -> dict[str, str]:
    return {"team_id": scope.team_id, "agent_id": scope.agent_id, "user_id": scope.user_id}


def remaining(client: MemoryHubClient, scope, query: str = "hello") -> dict[str, dict]:
    items = client.atomic_search(scope.team_id, scope.agent_id, scope.user_id, query=query, limit=100).items
    return {item.id: item.wire() for item in items}


ERASURE_TOOLS = {"search_for_deletion", "delete_memory"}
FORMATION_TOOLS = {"formation_status", "form_now"}


def test_lists_the_tools_with_the_confirmation_protocol(api_url, tmp_path):
    async def body(session: ClientSession) -> Any:
        listed = (await session.list_tools()).tools
        no_scope = await session.call_tool("search_for_deletion", {"query": "hello", "team_id": "t"})
        no_scope_add = await session.call_tool("add_memory", {"content": "x", "agent_id": "a"})
        return listed, no_scope, no_scope_add

    listed, no_scope, no_scope_add = in_session(api_url, tmp_path, body)
    # Without a default scope (no MEMORY_HUB_TEAM_ID/AGENT_ID/USER_ID) a call must name it.
    assert no_scope.is_error and "agent_id, user_id" in payload(no_scope)["error"]
    assert no_scope_add.is_error and "missing team_id, user_id" in payload(no_scope_add)["error"]
    tools = {tool.name: tool for tool in listed}
    assert set(tools) == {"search_memory", "add_memory", *ERASURE_TOOLS, *FORMATION_TOOLS}
    for name in ERASURE_TOOLS:
        text = tools[name].description.lower()
        assert "confirm" in text and "show" in text and "never delete by content" in text
        assert "409" in text
    delete = tools["delete_memory"]
    assert set(delete.input_schema["required"]) == {"id", "expected_version"}
    assert not any("content" in name or "query" in name for name in delete.input_schema["properties"])
    assert delete.annotations.destructive_hint is True
    assert tools["search_for_deletion"].annotations.read_only_hint is True
    # The two new tools: recall is read-only; add writes one record and destroys nothing. Only
    # delete_memory deletes, and only by id.
    assert tools["search_memory"].annotations.read_only_hint is True
    add = tools["add_memory"]
    assert add.annotations.read_only_hint is False and add.annotations.destructive_hint is False
    assert add.input_schema["required"] == ["content"]
    assert {"content", "type", "context", "tags"} <= set(add.input_schema["properties"])
    assert "search_for_deletion" in tools["search_memory"].description
    assert [t for t in tools.values() if t.annotations.destructive_hint] == [delete]
    # Formation: status only reads; form_now writes (queues a run) and deletes nothing.
    assert tools["formation_status"].annotations.read_only_hint is True
    assert tools["form_now"].annotations.read_only_hint is False
    assert "backfill" in tools["form_now"].input_schema["properties"]
    assert "source_message_ids" in add.input_schema["properties"]


def test_echo_three_near_identical_records_delete_exactly_the_confirmed_one(api_url, client, tmp_path):
    s = make_scope()
    plain = client.atomic_add(s.team_id, s.agent_id, s.user_id, content="Hello").id
    spaced = client.atomic_add(s.team_id, s.agent_id, s.user_id, content="Hello ").id
    other = client.atomic_add(s.team_id, s.agent_id, s.user_id, content="Hello", background="other context").id
    assert len({plain, spaced, other}) == 3

    async def body(session: ClientSession) -> Any:
        found = await session.call_tool("search_for_deletion", {"query": "Hello", "limit": 10, **scope_args(s)})
        assert not found.is_error, found.content
        records = payload(found)["results"]
        # The person is shown all three, and confirms the one with the trailing space.
        chosen = next(r for r in records if r["content"] == "Hello ")
        deleted = await session.call_tool(
            "delete_memory", {"id": chosen["id"], "expected_version": chosen["version"], **scope_args(s)}
        )
        return records, chosen, deleted

    records, chosen, deleted = in_session(api_url, tmp_path, body)
    assert len(records) == 3 and {r["id"] for r in records} == {plain, spaced, other}
    for record in records:
        assert set(record) >= {"id", "version", "content", "context", "type", "tags", "created_at", "updated_at"}
        assert record["version"] == 1 and record["type"] == "episodic"
    assert {(r["content"], r["context"]) for r in records} == {
        ("Hello", ""),
        ("Hello ", ""),
        ("Hello", "other context"),
    }
    assert chosen["id"] == spaced
    assert not deleted.is_error, deleted.content
    receipt = payload(deleted)
    assert receipt["deleted_ids"] == [spaced] and receipt["not_found_ids"] == []
    assert len(receipt["audit_ids"]) == 1 and receipt["audit_ids"][0].startswith("evt-")
    left = remaining(client, s)
    assert set(left) == {plain, other}
    assert {(i["content"], i["background"]) for i in left.values()} == {("Hello", ""), ("Hello", "other context")}


def test_conflict_and_missing_arguments_are_refused(api_url, client, tmp_path):
    s = make_scope()
    target = client.atomic_add(s.team_id, s.agent_id, s.user_id, content="hello conflict").id
    bystander = client.atomic_add(s.team_id, s.agent_id, s.user_id, content="hello bystander").id

    async def body(session: ClientSession) -> Any:
        found = payload(await session.call_tool("search_for_deletion", {"query": "conflict", **scope_args(s)}))[
            "results"
        ]
        shown = next(r for r in found if r["id"] == target)
        # Someone edits the record after it was shown to the person.
        client.atomic_update(s.team_id, s.agent_id, s.user_id, id=target, content="hello conflict, edited")
        stale = await session.call_tool(
            "delete_memory", {"id": target, "expected_version": shown["version"], **scope_args(s)}
        )
        no_version = await session.call_tool("delete_memory", {"id": target, **scope_args(s)})
        no_id = await session.call_tool("delete_memory", {"expected_version": 2, **scope_args(s)})
        made_up = await session.call_tool(
            "delete_memory", {"id": "hello conflict", "expected_version": 2, **scope_args(s)}
        )
        return shown, stale, no_version, no_id, made_up

    shown, stale, no_version, no_id, made_up = in_session(api_url, tmp_path, body)
    assert shown["version"] == 1
    assert stale.is_error
    conflict = payload(stale)
    assert conflict["code"] == 409
    assert conflict["conflicts"] == [{"id": target, "expected": 1, "actual": 2}]
    assert conflict["current"]["id"] == target and conflict["current"]["version"] == 2
    assert conflict["current"]["content"] == "hello conflict, edited"
    assert "nothing was deleted" in conflict["error"].lower()
    for refused in (no_version, no_id, made_up):
        assert refused.is_error
        assert "refused" in payload(refused)["error"]
    assert "expected_version" in payload(no_version)["error"]
    left = remaining(client, s)
    assert set(left) == {target, bystander}
    assert left[target]["version"] == 2


def test_l0_messages_and_default_scope_from_the_environment(api_url, client, tmp_path):
    s = make_scope()
    added = client.conversation_add(
        s.team_id,
        s.agent_id,
        s.user_id,
        session_id="sess-a",
        messages=[{"role": "user", "content": "my card is 4111"}, {"role": "user", "content": "my card is 4111"}],
    )
    first, second = added.accepted_ids

    async def body(session: ClientSession) -> Any:
        found = await session.call_tool("search_for_deletion", {"query": "card", "layer": "l0"})
        wrong_version = await session.call_tool("delete_memory", {"id": first, "expected_version": 2})
        deleted = await session.call_tool("delete_memory", {"id": first, "expected_version": 1})
        again = await session.call_tool("delete_memory", {"id": first, "expected_version": 1})
        return found, wrong_version, deleted, again

    found, wrong_version, deleted, again = in_session(
        api_url,
        tmp_path,
        body,
        MEMORY_HUB_TEAM_ID=s.team_id,
        MEMORY_HUB_AGENT_ID=s.agent_id,
        MEMORY_HUB_USER_ID=s.user_id,
    )
    records = payload(found)["results"]
    assert {r["id"] for r in records} == {first, second}
    for record in records:
        assert record["version"] == 1 and record["role"] == "user" and record["session_id"] == "sess-a"
        assert record["content"] == "my card is 4111" and record["timestamp"]
    assert wrong_version.is_error and "always 1" in payload(wrong_version)["error"]
    assert not deleted.is_error and payload(deleted)["deleted_ids"] == [first]
    assert not again.is_error and payload(again)["not_found_ids"] == [first]
    left = client.conversation_search(s.team_id, s.agent_id, s.user_id, query="card", limit=10).messages
    assert [m.id for m in left] == [second]


def test_add_memory_then_search_memory(api_url, client, tmp_path):
    s = make_scope()
    added = client.conversation_add(
        s.team_id,
        s.agent_id,
        s.user_id,
        session_id="trip",
        messages=[{"role": "user", "content": "book a window seat"}, {"role": "user", "content": "window or aisle?"}],
    ).accepted_ids
    client.conversation_add(
        s.team_id, s.agent_id, s.user_id, session_id="other", messages=[{"role": "user", "content": "window"}]
    )

    async def body(session: ClientSession) -> Any:
        first = await session.call_tool(
            "add_memory",
            {
                "content": "Prefers window seats ",
                "type": "preference",
                "context": "booking a flight",
                "tags": ["travel", "seat"],
                **scope_args(s),
            },
        )
        again = await session.call_tool(
            "add_memory",
            {"content": "Prefers window seats ", "type": "preference", "context": "booking a flight", **scope_args(s)},
        )
        plain = await session.call_tool("add_memory", {"content": "Window cleaner on Fridays", **scope_args(s)})
        found = await session.call_tool("search_memory", {"query": "window seats", "limit": 10, **scope_args(s)})
        typed = await session.call_tool(
            "search_memory", {"query": "window", "type": "preference", "limit": 10, **scope_args(s)}
        )
        messages = await session.call_tool(
            "search_memory", {"query": "window", "layer": "l0", "session_id": "trip", **scope_args(s)}
        )
        mixed = await session.call_tool(
            "search_memory", {"query": "window", "layer": "l0", "type": "preference", **scope_args(s)}
        )
        return first, again, plain, found, typed, messages, mixed

    first, again, plain, found, typed, messages, mixed = in_session(api_url, tmp_path, body)
    receipt = payload(first)
    assert not first.is_error, first.content
    assert receipt["id"].startswith("atom-") and receipt["created"] is True and receipt["version"] == 1
    assert receipt["reinforced_count"] == 1
    # The same content, type and context: the same record, reinforced; no second record.
    assert payload(again)["id"] == receipt["id"] and payload(again)["created"] is False
    assert payload(again)["reinforced_count"] == 2 and "no second record" in payload(again)["message"]
    other_id = payload(plain)["id"]

    records = payload(found)["results"]
    assert records[0]["id"] == receipt["id"]  # contains every word: ranked first
    best = records[0]
    assert best["content"] == "Prefers window seats " and best["context"] == "booking a flight"
    assert best["type"] == "preference" and best["tags"] == ["travel", "seat"] and best["version"] == 1
    assert isinstance(best["score"], float | int)
    assert [r["id"] for r in payload(typed)["results"]] == [receipt["id"]]
    assert other_id not in {r["id"] for r in payload(typed)["results"]}
    l0 = payload(messages)["results"]
    assert {r["id"] for r in l0} == set(added) and all(r["session_id"] == "trip" and r["version"] == 1 for r in l0)
    assert mixed.is_error and "l1 records only" in payload(mixed)["error"]

    stored = client.atomic_query(s.team_id, s.agent_id, s.user_id, limit=10).items
    assert {i.id for i in stored} == {receipt["id"], other_id}
    kept = next(i for i in stored if i.id == receipt["id"])
    assert kept.content == "Prefers window seats " and kept.background == "booking a flight"
    assert kept.tags == ["travel", "seat"] and kept.reinforced_count == 2


def test_add_memory_refusals_and_a_reader_key(api_url, client, tmp_path):
    s = make_scope()
    reader = client.keys_create(role="reader", team_ids=[s.team_id], name="mcp reader").api_key
    client.atomic_add(s.team_id, s.agent_id, s.user_id, content="hello reader")

    async def writer(session: ClientSession) -> Any:
        bad_type = await session.call_tool("add_memory", {"content": "x", "type": "Not-A-Type", **scope_args(s)})
        empty = await session.call_tool("add_memory", {"content": "", **scope_args(s)})
        return bad_type, empty

    async def read_only(session: ClientSession) -> Any:
        found = await session.call_tool("search_memory", {"query": "hello", **scope_args(s)})
        refused = await session.call_tool("add_memory", {"content": "hello writer", **scope_args(s)})
        return found, refused

    bad_type, empty = in_session(api_url, tmp_path, writer)
    for result in (bad_type, empty):
        assert result.is_error and payload(result)["code"] == 400 and "Nothing was added" in payload(result)["error"]
    assert "type" in payload(bad_type)["error"] and "content" in payload(empty)["error"]

    found, refused = in_session(api_url, tmp_path, read_only, MEMORY_HUB_API_KEY=reader)
    assert not found.is_error and [r["content"] for r in payload(found)["results"]] == ["hello reader"]
    assert refused.is_error and payload(refused)["code"] == 403
    left = remaining(client, s)
    assert [i["content"] for i in left.values()] == ["hello reader"]


def test_a_record_added_over_mcp_is_deleted_by_id_only(api_url, client, tmp_path):
    """add -> search_memory -> (the person confirms) -> delete_memory by that id and version."""
    s = make_scope()
    twin = client.atomic_add(s.team_id, s.agent_id, s.user_id, content="my pin is 1234").id

    async def body(session: ClientSession) -> Any:
        added = payload(await session.call_tool("add_memory", {"content": "my pin is 1234 ", **scope_args(s)}))
        found = payload(await session.call_tool("search_memory", {"query": "pin", "limit": 10, **scope_args(s)}))
        chosen = next(r for r in found["results"] if r["id"] == added["id"])
        deleted = await session.call_tool(
            "delete_memory", {"id": chosen["id"], "expected_version": chosen["version"], **scope_args(s)}
        )
        return added, found, deleted

    added, found, deleted = in_session(api_url, tmp_path, body)
    assert {r["content"] for r in found["results"]} == {"my pin is 1234", "my pin is 1234 "}
    assert payload(deleted)["deleted_ids"] == [added["id"]]
    assert set(remaining(client, s, "pin")) == {twin}


def test_records_carry_every_field_of_the_answer_model_sources_and_formed_included(api_url, client, tmp_path):
    """The tools map records from the API's answer models: what the API adds (here source_message_ids
    and formed) reaches the assistant without a list kept in the server."""
    s = make_scope()
    said = client.conversation_add(
        s.team_id, s.agent_id, s.user_id, session_id="s", messages=[{"role": "user", "content": "I fly on Mondays"}]
    ).accepted_ids

    async def body(session: ClientSession) -> Any:
        added = await session.call_tool(
            "add_memory", {"content": "flies on Mondays", "source_message_ids": said, **scope_args(s)}
        )
        found = await session.call_tool("search_memory", {"query": "mondays", **scope_args(s)})
        shown = await session.call_tool("search_for_deletion", {"query": "mondays", **scope_args(s)})
        message = await session.call_tool("search_memory", {"query": "mondays", "layer": "l0", **scope_args(s)})
        erased = await session.call_tool("delete_memory", {"id": said[0], "expected_version": 1, **scope_args(s)})
        return added, found, shown, message, erased

    added, found, shown, message, erased = in_session(api_url, tmp_path, body)
    assert not added.is_error, added.content
    shown_as = {"background": "context"}
    for result in (found, shown):
        (record,) = payload(result)["results"]
        assert set(record) == {shown_as.get(name, name) for name in RecordHit.model_fields}
        assert record["id"] == payload(added)["id"]
        assert record["source_message_ids"] == said and record["formed"] is False
    (hit,) = payload(message)["results"]
    assert set(hit) == {*MessageHit.model_fields, "version"} and hit["id"] == said[0]
    # Erasing the message erases the record drawn from it; the receipt says so.
    receipt = payload(erased)
    assert receipt["deleted_ids"] == said and receipt["records_deleted"] == 1
    assert "record(s) drawn from it" in receipt["message"]
    assert remaining(client, s, "mondays") == {}


def test_formation_tools_say_when_formation_is_off(api_url, client, tmp_path):
    """The session's stack runs without a model: formation_status says off, form_now runs nothing."""
    s = make_scope()
    client.conversation_add(
        s.team_id, s.agent_id, s.user_id, session_id="s", messages=[{"role": "user", "content": "hello"}]
    )

    async def body(session: ClientSession) -> Any:
        status = await session.call_tool("formation_status", {"session_id": "s", **scope_args(s)})
        run = await session.call_tool("form_now", {"backfill": True, **scope_args(s)})
        unscoped = await session.call_tool("form_now", {"team_id": s.team_id})
        return status, run, unscoped

    status, run, unscoped = in_session(api_url, tmp_path, body)
    assert not status.is_error, status.content
    assert set(payload(status)) == set(FormationStatus.model_fields)
    assert payload(status)["enabled"] is False and payload(status)["pending_messages"] == 0
    assert run.is_error and payload(run)["code"] == 409
    assert "formation is off" in payload(run)["error"] and "nothing was run" in payload(run)["error"]
    assert unscoped.is_error and "missing agent_id, user_id" in payload(unscoped)["error"]
