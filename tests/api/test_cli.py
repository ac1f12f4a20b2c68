"""`memory-hub` operator commands against the real local HTTP servers (the `live` fixture).

ID-based erasure only: search shows ids and versions, delete takes exactly one id (at the version the
person saw), and destructive commands refuse to run unconfirmed without a terminal (exit 2).
"""

from __future__ import annotations

import io
import json
import os
import re
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import ADMIN_KEY, SERVICE_ID, make_scope
from memory_hub.domain.results import FormationStatus
from memory_hub_local.template import load_raw
from memory_hub_tools import cli
from memory_hub_tools.client import ApiError, MemoryHubClient

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def env(stack, monkeypatch):
    """Point the CLI at the live API through the environment (as an operator would)."""
    api_url = stack.api_url
    monkeypatch.setenv("MEMORY_HUB_ENDPOINT", api_url)
    monkeypatch.setenv("MEMORY_HUB_API_KEY", ADMIN_KEY)
    monkeypatch.setenv("MEMORY_HUB_SERVICE_ID", SERVICE_ID)
    for name in ("MEMORY_HUB_TEAM_ID", "MEMORY_HUB_AGENT_ID", "MEMORY_HUB_USER_ID"):
        monkeypatch.delenv(name, raising=False)
    return api_url


@pytest.fixture
def client(env) -> MemoryHubClient:
    return MemoryHubClient(env, ADMIN_KEY, SERVICE_ID, timeout=120)  # a cold function on a loaded machine


def run(capsys, *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    try:
        code = cli.main(list(argv))
    except SystemExit as exc:  # argparse usage errors
        code = exc.code if isinstance(exc.code, int) else 1
    out, err = capsys.readouterr()
    return code, _without_server_log(out), _without_server_log(err)


def _without_server_log(text: str) -> str:
    """The live servers run in this process and log each request (one JSON line) to stdout."""
    return "".join(line for line in text.splitlines(keepends=True) if not line.startswith('{"level":'))


def scope_flags(scope) -> list[str]:
    return ["--team", scope.team_id, "--agent", scope.agent_id, "--user", scope.user_id]


def ids_of(client: MemoryHubClient, scope, query: str = "hello") -> set[str]:
    data = client.atomic_search(scope.team_id, scope.agent_id, scope.user_id, query=query, limit=100)
    return {item.id for item in data.items}


class FakeTerminal(io.StringIO):
    """A stdin that claims to be a terminal and answers the prompts with ``answers``."""

    def isatty(self) -> bool:
        return True


def on_terminal(monkeypatch, *answers: str) -> None:
    monkeypatch.setattr("sys.stdin", FakeTerminal("".join(a + "\n" for a in answers)))


# --- search -----------------------------------------------------------------------------------------


def test_search_prints_id_version_type_context_tags_and_exact_content(env, client, capsys):
    s = make_scope()
    plain = client.atomic_add(s.team_id, s.agent_id, s.user_id, content="Hello world", tags=["greeting", "en"])
    spaced = client.atomic_add(
        s.team_id, s.agent_id, s.user_id, content="Hello world ", background="other context", type="preference"
    )
    code, out, err = run(capsys, "search", "hello", *scope_flags(s), "--limit", "10")
    assert code == 0, err
    assert plain.id in out and spaced.id in out
    blocks = {block.split()[0]: block for block in out.strip().split("\n\n")}
    assert set(blocks) == {plain.id, spaced.id}
    first = blocks[plain.id]
    assert "  v1  episodic  " in first
    assert 'context: ""' in first
    assert "tags:    greeting, en" in first
    assert 'content: "Hello world"' in first
    second = blocks[spaced.id]
    assert "  v1  preference  " in second
    assert 'context: "other context"' in second
    assert 'content: "Hello world "' in second  # trailing whitespace is visible

    code, out, _ = run(capsys, "search", "hello", *scope_flags(s), "--type", "preference", "--json")
    assert code == 0
    items = json.loads(out)["items"]
    assert [i["id"] for i in items] == [spaced.id]
    assert items[0]["version"] == 1 and items[0]["background"] == "other context"

    code, out, _ = run(capsys, "search", "nothingmatcheshere", *scope_flags(s))
    assert code == 0 and "no matches" in out


def test_search_l0_prints_id_role_session_content(env, client, capsys):
    s = make_scope()
    added = client.conversation_add(
        s.team_id,
        s.agent_id,
        s.user_id,
        session_id="sess-1",
        messages=[{"role": "user", "content": "my passport number is 123"}, {"role": "assistant", "content": "noted"}],
    )
    code, out, err = run(capsys, "search", "passport", *scope_flags(s), "--layer", "l0")
    assert code == 0, err
    msg_id = added.accepted_ids[0]
    assert msg_id in out and "  user  " in out and "session sess-1" in out
    assert 'content: "my passport number is 123"' in out
    assert added.accepted_ids[1] not in out


def test_scope_flags_are_required(env, capsys):
    code, _, err = run(capsys, "search", "hello", "--team", "t")
    assert code == 2 and "--agent, --user" in err


def test_flags_override_environment(stack, monkeypatch, capsys):
    live = (stack.api_url, stack.lambda_url)
    for name in ("MEMORY_HUB_ENDPOINT", "MEMORY_HUB_API_KEY", "MEMORY_HUB_SERVICE_ID"):
        monkeypatch.delenv(name, raising=False)
    s = make_scope()
    MemoryHubClient(live[0], ADMIN_KEY).atomic_add(s.team_id, s.agent_id, s.user_id, content="hello flags")
    code, out, err = run(
        capsys,
        "search",
        "flags",
        *scope_flags(s),
        "--endpoint",
        live[0],
        "--api-key",
        ADMIN_KEY,
        "--service-id",
        SERVICE_ID,
    )
    assert code == 0, err
    assert '"hello flags"' in out
    code, _, err = run(capsys, "search", "flags", *scope_flags(s), "--endpoint", live[0])
    assert code == 1 and "MEMORY_HUB_API_KEY" in err
    code, _, err = run(
        capsys,
        "search",
        "flags",
        *scope_flags(s),
        "--endpoint",
        live[0],
        "--api-key",
        ADMIN_KEY,
        "--service-id",
        "other",
    )
    assert code == 1 and "401" in err and "unknown service" in err


# --- delete -----------------------------------------------------------------------------------------


def test_delete_yes_with_expected_version(env, client, capsys):
    s = make_scope()
    target = client.atomic_add(s.team_id, s.agent_id, s.user_id, content="Hello").id
    twin = client.atomic_add(s.team_id, s.agent_id, s.user_id, content="Hello ").id
    client.atomic_update(s.team_id, s.agent_id, s.user_id, id=target, tags=["edited"])  # now version 2

    code, out, err = run(capsys, "delete", "--id", target, "--expected-version", "1", "--yes", *scope_flags(s))
    assert code == 1
    assert "conflict" in err and "version 2, not 1" in err and "Nothing was deleted" in err
    assert ids_of(client, s) == {target, twin}

    code, out, err = run(capsys, "delete", "--id", target, "--expected-version", "2", "--yes", *scope_flags(s))
    assert code == 0, err
    assert f"deleted:   {target}" in out
    assert "not found: (none)" in out
    assert "audit ids: evt-" in out
    assert ids_of(client, s) == {twin}

    # Retrying the same conditional delete is safe: reported as not found, exit 1.
    code, out, _ = run(capsys, "delete", "--id", target, "--expected-version", "2", "--yes", *scope_flags(s), "--json")
    assert code == 1
    receipt = json.loads(out)
    assert receipt["deleted_ids"] == [] and receipt["not_found_ids"] == [target]
    assert ids_of(client, s) == {twin}


def test_delete_refuses_without_terminal_and_without_yes(env, client, capsys):
    s = make_scope()
    target = client.atomic_add(s.team_id, s.agent_id, s.user_id, content="Hello").id
    code, _out, err = run(capsys, "delete", "--id", target, "--expected-version", "1", *scope_flags(s))
    assert code == 2
    assert "refused" in err and "--yes" in err
    assert ids_of(client, s) == {target}


def test_delete_takes_no_content_and_only_ids(env, client, capsys):
    s = make_scope()
    target = client.atomic_add(s.team_id, s.agent_id, s.user_id, content="Hello").id
    code, _, err = run(capsys, "delete", "--content", "Hello", "--yes", *scope_flags(s))
    assert code == 2
    code, _, err = run(capsys, "delete", "--id", "Hello", "--yes", *scope_flags(s))
    assert code == 2 and "atom-" in err
    code, _, err = run(capsys, "delete", "--yes", *scope_flags(s))
    assert code == 2 and "--id" in err
    assert ids_of(client, s) == {target}
    delete_flags = {opt for action in _subparser("delete")._actions for opt in action.option_strings}
    assert not any("content" in flag or "query" in flag or "text" in flag for flag in delete_flags)


def _subparser(name: str):
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    return sub.choices[name]


def test_delete_on_terminal_shows_the_record_and_deletes_the_version_shown(env, client, capsys, monkeypatch):
    s = make_scope()
    target = client.atomic_add(s.team_id, s.agent_id, s.user_id, content="Hello", background="ctx", tags=["t1"]).id
    twin = client.atomic_add(s.team_id, s.agent_id, s.user_id, content="Hello", background="other context").id

    on_terminal(monkeypatch, "no")
    code, out, _ = run(capsys, "delete", "--id", target, *scope_flags(s))
    assert code == 1 and "aborted" in out
    assert target in out and 'context: "ctx"' in out and 'content: "Hello"' in out and "tags:    t1" in out
    assert ids_of(client, s) == {target, twin}

    on_terminal(monkeypatch, "yes")
    code, out, err = run(capsys, "delete", "--id", target, *scope_flags(s))
    assert code == 0, err
    assert "This record will be deleted" in out and f"deleted:   {target}" in out
    assert ids_of(client, s) == {twin}

    # A record edited since it was looked at: the terminal flow refuses before asking.
    client.atomic_update(s.team_id, s.agent_id, s.user_id, id=twin, content="Hello again")
    on_terminal(monkeypatch, "yes")
    code, out, _ = run(capsys, "delete", "--id", twin, "--expected-version", "1", *scope_flags(s))
    assert code == 1 and "now at version 2, not 1" in out
    assert ids_of(client, s) == {twin}


def test_delete_message_by_id(env, client, capsys):
    s = make_scope()
    added = client.conversation_add(
        s.team_id,
        s.agent_id,
        s.user_id,
        session_id="sess",
        messages=[{"role": "user", "content": "hello one"}, {"role": "user", "content": "hello one"}],
    )
    first, second = added.accepted_ids
    code, _, err = run(capsys, "delete", "--id", first, "--expected-version", "2", "--yes", *scope_flags(s))
    assert code == 2 and "always 1" in err
    code, out, err = run(capsys, "delete", "--id", first, "--expected-version", "1", "--yes", *scope_flags(s))
    assert code == 0, err
    assert f"deleted:   {first}" in out and "audit ids: evt-" in out
    left = client.conversation_search(s.team_id, s.agent_id, s.user_id, query="hello", limit=10).messages
    assert [m.id for m in left] == [second]


# --- clear, user-memory delete ----------------------------------------------------------------------


def test_clear_yes_prints_counts_and_audit_ids(env, client, capsys):
    s = make_scope()
    client.atomic_add(s.team_id, s.agent_id, s.user_id, content="hello record")
    client.conversation_add(
        s.team_id, s.agent_id, s.user_id, session_id="sess", messages=[{"role": "user", "content": "hello"}]
    )

    code, _, err = run(capsys, "clear", s.memory_id)
    assert code == 2 and "refused" in err
    assert ids_of(client, s)

    code, out, err = run(capsys, "clear", s.memory_id, "--yes")
    assert code == 0, err
    assert f"{s.memory_id}: cleared" in out
    assert "l0_deleted 1" in out and "l1_deleted 1" in out and "l2_deleted 0" in out and "l3_deleted 0" in out
    assert "audit ids: evt-" in out
    assert ids_of(client, s) == set()

    code, out, _ = run(capsys, "clear", s.memory_id, "--yes", "--json")
    assert code == 0
    item = json.loads(out)["items"][0]
    assert item["cleared"] is True and item["l1_deleted"] == 0


def test_clear_and_user_memory_delete_name_the_pair_when_several_spell_the_id(env, client, capsys):
    base = make_scope()
    first = type(base)(base.team_id, "x-support", base.user_id)
    second = type(base)(base.team_id + "-x", "support", base.user_id)
    assert first.memory_id == second.memory_id
    for s in (first, second):
        client.atomic_add(s.team_id, s.agent_id, s.user_id, content="hello record")
    code, _, err = run(capsys, "clear", first.memory_id, "--yes")
    assert code == 1 and "memory_id ambiguous" in err and "--team and --agent" in err, err
    assert ids_of(client, first) and ids_of(client, second)
    code, out, err = run(capsys, "clear", first.memory_id, "--yes", "--team", first.team_id, "--agent", first.agent_id)
    assert code == 0 and f"{first.memory_id}: cleared" in out, err
    assert not ids_of(client, first) and ids_of(client, second)
    pair = ["--team", second.team_id, "--agent", second.agent_id]
    code, _, err = run(
        capsys, "user-memory", "delete", "--memory-id", second.memory_id, "--user", second.user_id, "--yes", *pair
    )
    assert code == 0, err
    assert not ids_of(client, second)


def test_clear_on_terminal_needs_the_memory_id_retyped(env, client, capsys, monkeypatch):
    s = make_scope()
    client.atomic_add(s.team_id, s.agent_id, s.user_id, content="hello record")
    on_terminal(monkeypatch, "yes")
    code, out, _ = run(capsys, "clear", s.memory_id)
    assert code == 1 and "aborted" in out and "L1 1" in out
    assert ids_of(client, s)
    on_terminal(monkeypatch, s.memory_id)
    code, out, _ = run(capsys, "clear", s.memory_id)
    assert code == 0 and "cleared" in out
    assert ids_of(client, s) == set()


def test_user_memory_delete(env, client, capsys):
    s = make_scope()
    other = f"{s.user_id}-other"
    one = client.atomic_add(s.team_id, s.agent_id, s.user_id, content="hello one").id
    two = client.atomic_add(s.team_id, s.agent_id, s.user_id, content="hello two").id
    client.conversation_add(
        s.team_id, s.agent_id, s.user_id, session_id="sess", messages=[{"role": "user", "content": "hello"}]
    )
    kept = client.atomic_add(s.team_id, s.agent_id, other, content="hello one").id

    code, _, err = run(capsys, "user-memory", "delete", "--memory-id", s.memory_id, "--user", s.user_id)
    assert code == 2 and "refused" in err

    code, out, err = run(
        capsys, "user-memory", "delete", "--memory-id", s.memory_id, "--user", s.user_id, "--content-id", one, "--yes"
    )
    assert code == 0, err
    assert f"deleted:   {one}" in out and "audit ids: evt-" in out
    assert ids_of(client, s) == {two}

    code, out, err = run(capsys, "user-memory", "delete", "--memory-id", s.memory_id, "--user", s.user_id, "--yes")
    assert code == 0, err
    assert "l0_deleted 1" in out and "l1_deleted 1" in out and "audit ids: evt-" in out
    assert ids_of(client, s) == set()
    other_scope = type(s)(s.team_id, s.agent_id, other)
    assert ids_of(client, other_scope) == {kept}


# --- keys, audit ------------------------------------------------------------------------------------


def test_keys_create_list_revoke(env, client, capsys):
    s = make_scope()
    code, out, err = run(
        capsys, "keys", "create", "--role", "reader", "--team", s.team_id, "--name", "cli test", "--json"
    )
    assert code == 0, err
    created = json.loads(out)
    assert created["role"] == "reader" and created["team_ids"] == [s.team_id] and created["api_key"]
    key_id, secret = created["key_id"], created["api_key"]

    code, out, _ = run(capsys, "keys", "create", "--role", "writer", "--team", s.team_id)
    assert code == 0 and "api_key  " in out and "shown only now" in out

    code, out, _ = run(capsys, "keys", "list")
    assert code == 0
    line = next(line for line in out.splitlines() if line.startswith(key_id))
    assert "reader" in line and "active" in line and s.team_id in line and '"cli test"' in line
    assert secret not in out

    client.atomic_add(s.team_id, s.agent_id, s.user_id, content="hello reader")
    code, out, err = run(capsys, "search", "hello", *scope_flags(s), "--api-key", secret)
    assert code == 0, err
    assert '"hello reader"' in out

    code, out, _ = run(capsys, "keys", "revoke", key_id)
    assert code == 0 and f"{key_id}: revoked" in out
    code, out, _ = run(capsys, "keys", "list", "--json")
    assert next(k for k in json.loads(out)["keys"] if k["key_id"] == key_id)["revoked"] is True
    code, _, err = run(capsys, "search", "hello", *scope_flags(s), "--api-key", secret)
    assert code == 1 and "401" in err


def test_audit_lists_one_line_per_event(env, client, capsys):
    s = make_scope()
    target = client.atomic_add(s.team_id, s.agent_id, s.user_id, content="hello audit").id
    code, _, err = run(capsys, "delete", "--id", target, "--expected-version", "1", "--yes", *scope_flags(s))
    assert code == 0, err
    code, out, err = run(capsys, "audit", s.memory_id)
    assert code == 0, err
    lines = out.strip().splitlines()
    assert len(lines) == 1
    assert " delete " in lines[0] and " L1 " in lines[0] and target in lines[0]
    assert "actor=bootstrap" in lines[0] and "count=1" in lines[0] and s.memory_id in lines[0]
    assert "hello audit" not in out

    code, out, _ = run(capsys, "audit", s.memory_id, "--action", "clear", "--json")
    assert code == 0 and json.loads(out)["events"] == []
    code, out, _ = run(capsys, "audit", "--limit", "1", "--json")
    assert code == 0 and len(json.loads(out)["events"]) == 1


def test_api_errors_exit_1_with_code_and_message(env, capsys):
    code, _, err = run(capsys, "audit", "chat_memory-nosuchteam-nosuchagent")
    assert code == 1 and "404" in err
    with pytest.raises(ApiError) as caught:
        MemoryHubClient(env, ADMIN_KEY).call("/v3/atomic/search", {"team_id": "t"})
    assert caught.value.code == 422 and "agent_id" in caught.value.message


# --- cleanup ----------------------------------------------------------------------------------------


class FakeLambda:
    def __init__(self, results: list[dict[str, Any]]) -> None:
        self.results, self.calls = list(results), []

    def invoke(self, **kwargs: Any) -> dict[str, Any]:
        self.calls.append(kwargs)
        return {"StatusCode": 200, "Payload": io.BytesIO(json.dumps(self.results.pop(0)).encode())}


def test_cleanup_repeats_until_done(monkeypatch, capsys):
    fake = FakeLambda([{"done": False, "deleted": 3}, {"done": False, "deleted": 2}, {"done": True, "deleted": 0}])
    monkeypatch.setattr("memory_hub_tools.cli.invoke._lambda_client", lambda args: (fake, "us-east-1", "fake"))
    code, out, _ = run(capsys, "cleanup")
    assert code == 0
    assert [line.split(": ", 1)[0] for line in out.strip().splitlines()] == ["run 1", "run 2", "run 3"]
    assert len(fake.calls) == 3
    event = json.loads(fake.calls[0]["Payload"])
    assert fake.calls[0]["FunctionName"] == "CleanupFunction"
    assert event["detail-type"] == "Scheduled Event" and event["source"] == "aws.events"

    fake = FakeLambda([{"done": False}] * 5)
    monkeypatch.setattr("memory_hub_tools.cli.invoke._lambda_client", lambda args: (fake, "us-east-1", "fake"))
    code, out, err = run(capsys, "cleanup", "--max-runs", "2", "--json")
    assert code == 1 and len(fake.calls) == 2 and "work left" in err
    assert [json.loads(line) for line in out.strip().splitlines()] == [{"done": False}] * 2


def test_cleanup_against_the_local_lambda_endpoint(stack, capsys):
    live = (stack.api_url, stack.lambda_url)
    code, out, err = run(capsys, "cleanup", "--lambda-endpoint", live[1], "--json", "--max-runs", "5")
    assert code == 0, err
    results = [json.loads(line) for line in out.strip().splitlines()]
    assert results and results[-1]["done"] is True


def test_cleanup_unknown_function_fails(stack, capsys):
    live = (stack.api_url, stack.lambda_url)
    code, _, err = run(capsys, "cleanup", "--lambda-endpoint", live[1], "--function-name", "NoSuchFunction")
    assert code == 1
    assert one_line(err).startswith("error: no function NoSuchFunction; the template has: AdminFunction, ")
    assert "CleanupFunction" in err and "ScenarioFunction" in err


# --- cleanup and invoke target the running stack, on its ports --------------------------------------


def one_line(err: str) -> str:
    """An error is exactly one line on stderr, and never a traceback."""
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


def dead_port() -> int:
    with socket.socket() as sock:  # bound, never listening: connections to it are refused
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def lambda_env(stack, monkeypatch):
    """No Lambda endpoint configured anywhere: each test says where the stack's Invoke API is."""
    monkeypatch.delenv("MEMORY_HUB_LAMBDA_ENDPOINT", raising=False)
    monkeypatch.delenv("LAMBDA_PORT", raising=False)
    return stack


def test_the_lambda_endpoint_defaults_to_lambda_port_then_3001(monkeypatch):
    from argparse import Namespace

    monkeypatch.delenv("MEMORY_HUB_LAMBDA_ENDPOINT", raising=False)
    monkeypatch.delenv("LAMBDA_PORT", raising=False)
    assert cli.lambda_endpoint(Namespace(lambda_endpoint=None)) == "http://127.0.0.1:3001"
    monkeypatch.setenv("LAMBDA_PORT", "4123")
    assert cli.lambda_endpoint(Namespace(lambda_endpoint=None)) == "http://127.0.0.1:4123"
    monkeypatch.setenv("MEMORY_HUB_LAMBDA_ENDPOINT", "http://127.0.0.1:4999/")
    assert cli.lambda_endpoint(Namespace(lambda_endpoint=None)) == "http://127.0.0.1:4999"
    assert cli.lambda_endpoint(Namespace(lambda_endpoint="http://h:1")) == "http://h:1"


def test_cleanup_follows_lambda_port(lambda_env, monkeypatch, capsys):
    # Nothing set and nothing listening on the default port the test stack does not use: LAMBDA_PORT
    # is what points it at the running stack.
    monkeypatch.setenv("LAMBDA_PORT", str(lambda_env.lambda_port))
    code, out, err = run(capsys, "cleanup", "--json", "--max-runs", "5")
    assert code == 0, err
    assert json.loads(out.strip().splitlines()[-1])["done"] is True

    monkeypatch.setenv("LAMBDA_PORT", str(dead_port()))
    code, out, err = run(capsys, "cleanup")
    assert code == 1 and out == ""
    assert one_line(err).startswith(
        f"error: cannot reach the Lambda Invoke API at http://127.0.0.1:{os.environ['LAMBDA_PORT']}"
    )

    monkeypatch.setenv("LAMBDA_PORT", "not-a-port")
    code, _, err = run(capsys, "cleanup")
    assert code == 2 and "LAMBDA_PORT" in one_line(err)


def test_lambda_endpoint_environment_then_flag_win_over_lambda_port(lambda_env, monkeypatch, capsys):
    live, dead = lambda_env.lambda_url, f"http://127.0.0.1:{dead_port()}"
    monkeypatch.setenv("LAMBDA_PORT", str(dead_port()))
    monkeypatch.setenv("MEMORY_HUB_LAMBDA_ENDPOINT", live)
    code, _, err = run(capsys, "cleanup", "--json")
    assert code == 0, err

    monkeypatch.setenv("MEMORY_HUB_LAMBDA_ENDPOINT", dead)
    code, _, err = run(capsys, "cleanup", "--json", "--lambda-endpoint", live)
    assert code == 0, err
    code, _, err = run(capsys, "cleanup", "--json")
    assert code == 1 and f"cannot reach the Lambda Invoke API at {dead}" in one_line(err)
    code, _, err = run(capsys, "cleanup", "--aws", "--lambda-endpoint", live)
    assert code == 2 and "exclude each other" in one_line(err)


def write_event(tmp_path, scope, path: str, content: str, key: str = ADMIN_KEY) -> str:
    from memory_hub_local.gateway import api_event

    headers = {"Authorization": f"Bearer {key}", "x-tdai-service-id": SERVICE_ID}
    body = json.dumps(scope.body(path=path, content=content)).encode()
    event_file = tmp_path / f"{path}.json"
    event_file.write_text(json.dumps(api_event("POST", "/v3/scenario/write", headers, body)))
    return str(event_file)


def test_invoke_runs_against_the_running_stack_on_lambda_port(lambda_env, client, monkeypatch, capsys, tmp_path):
    s = make_scope()
    monkeypatch.setenv("LAMBDA_PORT", str(lambda_env.lambda_port))
    code, out, err = run(capsys, "invoke", "ScenarioFunction", write_event(tmp_path, s, "inv.md", "invoked"))
    assert code == 0, err
    assert json.loads(out)["statusCode"] == 200
    # What the function wrote is in the running stack: the API serves it.
    read = client.call("/v3/scenario/read", s.body(path="inv.md"))
    assert read["version"] == 1 and read["content"].endswith("\n\ninvoked")

    # The README's command, with a shipped event (a read: it changes nothing).
    code, out, err = run(capsys, "invoke", "ScenarioFunction", str(ROOT / "events" / "scenario-read.json"))
    assert code == 0, err
    assert json.loads(out)["statusCode"] == 200


def test_invoke_answering_401_exits_non_zero(lambda_env, monkeypatch, capsys, tmp_path):
    s = make_scope()
    monkeypatch.setenv("LAMBDA_PORT", str(lambda_env.lambda_port))
    monkeypatch.delenv("MEMORY_HUB_API_KEY", raising=False)
    event = write_event(tmp_path, s, "denied.md", "x", key="mhk_not-a-key")
    code, out, err = run(capsys, "invoke", "ScenarioFunction", event)
    assert code == 1
    assert json.loads(out)["statusCode"] == 401  # the result is still printed
    assert one_line(err).startswith("error: ScenarioFunction answered 401: authorization: invalid key (")


def test_invoke_puts_the_running_stacks_key_into_the_event(lambda_env, monkeypatch, capsys, tmp_path):
    """The shipped events carry the test key; --api-key (or MEMORY_HUB_API_KEY) replaces it."""
    s = make_scope()
    monkeypatch.setenv("LAMBDA_PORT", str(lambda_env.lambda_port))
    monkeypatch.delenv("MEMORY_HUB_API_KEY", raising=False)
    event = write_event(tmp_path, s, "keyed.md", "x", key="mhk_not-a-key")
    code, out, err = run(capsys, "invoke", "ScenarioFunction", event, "--api-key", ADMIN_KEY)
    assert code == 0 and json.loads(out)["statusCode"] == 200, err
    monkeypatch.setenv("MEMORY_HUB_API_KEY", ADMIN_KEY)
    code, out, err = run(capsys, "invoke", "ScenarioFunction", event)
    assert code == 0 and json.loads(out)["statusCode"] == 200, err


def test_invoke_errors_are_one_line(lambda_env, monkeypatch, capsys, tmp_path):
    monkeypatch.setenv("LAMBDA_PORT", str(lambda_env.lambda_port))
    event = str(ROOT / "events" / "scenario-read.json")
    code, out, err = run(capsys, "invoke", "ScenarioFunctio", event)
    assert code == 1 and out == ""
    line = one_line(err)
    assert line.startswith("error: no function ScenarioFunctio (did you mean ScenarioFunction?); the template has: ")
    # every function of the template, in name order (FormationFunction among them, not a list kept here)
    functions = sorted(
        name
        for name, resource in load_raw()["Resources"].items()
        if resource.get("Type") == "AWS::Serverless::Function"
    )
    assert "FormationFunction" in functions and "ScenarioFunction" in functions
    assert line.endswith("; the template has: " + ", ".join(functions))

    code, _, err = run(capsys, "invoke", "ScenarioFunction", str(tmp_path / "missing.json"))
    assert code == 2 and "missing.json: cannot read the event: No such file or directory" in one_line(err)
    (tmp_path / "bad.json").write_text("{not json")
    code, _, err = run(capsys, "invoke", "ScenarioFunction", str(tmp_path / "bad.json"))
    assert code == 2 and "not JSON" in one_line(err)
    code, _, err = run(
        capsys, "invoke", "ScenarioFunction", event, "--lambda-endpoint", f"http://127.0.0.1:{dead_port()}"
    )
    assert code == 1 and "cannot reach the Lambda Invoke API" in one_line(err)
    code, _, err = run(capsys, "invoke", "ScenarioFunction")
    assert code == 2 and "event" in one_line(err)


# --- errors: one line on stderr, non-zero exit ------------------------------------------------------


def test_connection_and_key_errors_are_one_line(env, monkeypatch, capsys):
    s = make_scope()
    dead = f"http://127.0.0.1:{dead_port()}"
    code, out, err = run(capsys, "ls", "l1", *scope_flags(s), "--endpoint", dead)
    assert code == 1 and out == ""
    assert one_line(err).startswith(f"error: cannot reach {dead}: ")
    code, _, err = run(capsys, "search", "x", *scope_flags(s), "--endpoint", "localhost:3000")
    assert code == 1 and one_line(err).startswith("error: invalid endpoint 'localhost:3000'")
    monkeypatch.delenv("MEMORY_HUB_API_KEY")
    code, _, err = run(capsys, "ls", *scope_flags(s))
    assert code == 1 and one_line(err) == "error: no API key: set MEMORY_HUB_API_KEY or pass --api-key"
    code, _, err = run(capsys, "audit", "--api-key", "mhk_wrong")
    assert code == 1 and one_line(err).startswith("error: 401 authorization: invalid key on /v3/audit/query [req-")


def test_api_errors_are_one_line_with_their_details(env, client, capsys):
    s = make_scope()
    code, _, err = run(capsys, "ls", "l0", *scope_flags(s), "--limit", "101")
    assert code == 1 and one_line(err).startswith("error: 400 limit: ")
    target = client.atomic_add(s.team_id, s.agent_id, s.user_id, content="hello").id
    client.atomic_update(s.team_id, s.agent_id, s.user_id, id=target, content="hello there")
    code, _, err = run(capsys, "delete", "--id", target, "--expected-version", "1", "--yes", *scope_flags(s))
    assert code == 1 and one_line(err).startswith(f"conflict: {target} is at version 2, not 1")
    code, _, err = run(
        capsys, "user-memory", "delete", "--memory-id", "chat_memory-nosuch-nosuch", "--user", "u", "--yes"
    )
    assert code == 1 and one_line(err).startswith("error: 404 ")


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        ([], "the following arguments are required: command"),
        (["nosuch"], "invalid choice: 'nosuch'"),
        (["search"], "the following arguments are required: query"),
        (["search", "x", "--limit", "ten"], "argument --limit: not an integer: 'ten'"),
        (["search", "x", "--limit", "0"], "argument --limit: must be at least 1"),
        (["search", "x", "--timeout", "-1"], "argument --timeout: must be more than 0"),
        (["search", "x", "--bogus"], "unrecognized arguments: --bogus"),
        (["ls", "l5"], "invalid choice: 'l5'"),
        (["cleanup", "--max-runs", "0"], "argument --max-runs: must be at least 1"),
        (["keys", "create"], "the following arguments are required: --role"),
    ],
)
def test_bad_flags_are_one_line_and_exit_2(env, capsys, argv, needle):
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == ""
    line = one_line(err)
    assert line.startswith("memory-hub") and ": error: " in line and needle in line and "--help" in line


def test_the_console_script_prints_no_traceback(stack, tmp_path):
    """The installed `memory-hub` in a process of its own, as an operator runs it."""
    script = Path(sys.executable).with_name("memory-hub")
    command = [str(script)] if script.exists() else [sys.executable, "-m", "memory_hub_tools.cli"]
    env = {
        **os.environ,
        "MEMORY_HUB_ENDPOINT": f"http://127.0.0.1:{dead_port()}",
        "MEMORY_HUB_API_KEY": ADMIN_KEY,
        "LAMBDA_PORT": str(stack.lambda_port),
    }
    env.pop("MEMORY_HUB_LAMBDA_ENDPOINT", None)
    cases = [
        (["ls", "--team", "t", "--agent", "a", "--user", "u"], 1, "error: cannot reach "),
        (["invoke", "ScenarioFunctio", str(ROOT / "events" / "scenario-read.json")], 1, "error: no function "),
        (["invoke", "ScenarioFunction", str(tmp_path / "none.json")], 2, "cannot read the event"),
        (["show", "nothing"], 2, "expected an L0 message id"),
    ]
    for argv, expected, needle in cases:
        done = subprocess.run([*command, *argv], env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == expected, (argv, done.stderr)
        assert needle in one_line(done.stderr), argv


# --- provenance and formation -----------------------------------------------------------------------


def test_records_show_their_sources_and_whether_formation_wrote_them(env, client, capsys):
    s = make_scope()
    said = client.conversation_add(
        s.team_id, s.agent_id, s.user_id, session_id="s", messages=[{"role": "user", "content": "I like green tea"}]
    ).accepted_ids
    cited = client.atomic_add(s.team_id, s.agent_id, s.user_id, content="likes green tea", source_message_ids=said).id
    code, out, err = run(capsys, "search", "tea", *scope_flags(s))
    assert code == 0, err
    assert f"  sources: {said[0]}\n  formed:  no\n" in out
    code, out, err = run(capsys, "ls", "l1", *scope_flags(s))
    assert code == 0 and out.startswith(cited) and "  sources 1  client  " in out, err
    code, out, err = run(capsys, "show", cited, *scope_flags(s))
    assert code == 0, err
    assert re.search(rf'\n  source_message_ids: +\["{said[0]}"\]\n', out) and re.search(r"\n  formed: +false\n", out)
    # Erasing the message erases the record drawn from it, and the receipt says so.
    code, out, err = run(capsys, "delete", "--id", said[0], "--yes", *scope_flags(s))
    assert code == 0, err
    assert f"deleted:   {said[0]}" in out and "records:   1 erased with it" in out
    assert ids_of(client, s, "tea") == set()


def test_formation_status_and_form_when_formation_is_off(env, client, capsys):
    """The session's stack runs without a model: status says so, and form is refused in one line."""
    s = make_scope()
    client.conversation_add(
        s.team_id, s.agent_id, s.user_id, session_id="s", messages=[{"role": "user", "content": "hello"}]
    )
    code, out, err = run(capsys, "formation-status", *scope_flags(s))
    assert code == 0, err
    assert "formation:        off (this memory's setting: records)" in out and "pending messages: 0" in out
    assert "model:            -" in out and "last error:       -" in out
    code, out, _ = run(capsys, "formation-status", *scope_flags(s), "--session", "s", "--json")
    status = json.loads(out)
    assert set(status) == set(FormationStatus.model_fields) and status["enabled"] is False
    code, out, err = run(capsys, "form", *scope_flags(s), "--backfill")
    assert code == 1 and out == ""
    assert one_line(err).startswith("error: 409 formation: off on /v3/formation/run [req-")
    code, _, err = run(capsys, "form", "--team", s.team_id)
    assert code == 2 and "--agent, --user" in one_line(err)


@pytest.fixture(scope="module")
def formation_stack():
    """A stack of this module's own with formation on, against the scripted model; its idle delay is
    long, so only `memory-hub form` starts a run."""
    from helpers import checked_stack
    from memory_hub_local import scripted_llm

    server, url = scripted_llm.serve()
    try:
        with checked_stack(
            "Disabled", llm_url=url, llm_model="scripted", formation_batch=5, formation_idle_s=600
        ) as running:
            yield running
    finally:
        scripted_llm.stop(server)


def test_form_runs_formation_and_formation_status_follows_it(formation_stack, capsys):
    from helpers import eventually

    s = make_scope()
    endpoint = ["--endpoint", formation_stack.api_url, "--api-key", ADMIN_KEY]
    client = MemoryHubClient(formation_stack.api_url, ADMIN_KEY, SERVICE_ID, timeout=120)
    said = client.conversation_add(
        s.team_id,
        s.agent_id,
        s.user_id,
        session_id="s",
        messages=[{"role": "user", "content": f"I like tea number {n}"} for n in range(3)],
    ).accepted_ids
    code, out, err = run(capsys, "formation-status", *scope_flags(s), *endpoint)
    assert code == 0, err
    assert "formation:        on (records)" in out and "model:            -" not in out
    assert "state:            idle" in out and "pending messages: 3" in out and "last run:         never" in out

    code, out, err = run(capsys, "form", *scope_flags(s), *endpoint)
    assert code == 0, err
    assert re.fullmatch(r"formation (queued|running): 3 pending message\(s\)\n", out), out

    def settled() -> bool:
        status = client.formation_status(s.team_id, s.agent_id, s.user_id)
        return status.state == "idle" and status.pending_messages == 0

    eventually(settled, "formation did not settle", timeout=90)
    code, out, err = run(capsys, "formation-status", *scope_flags(s), *endpoint, "--json")
    assert code == 0 and json.loads(out)["records_formed"] == 3, err
    assert json.loads(out)["last_formed_message_id"] == max(said)
    code, out, err = run(capsys, "ls", "l1", *scope_flags(s), *endpoint)
    lines = out.splitlines()
    assert code == 0 and len(lines) == 3 and all("  sources 1  formed  " in line for line in lines), out
    code, out, _ = run(capsys, "search", "tea", *scope_flags(s), *endpoint, "--limit", "10")
    assert out.count("  formed:  yes (by formation)") == 3
    assert {line.split(": ")[1] for line in out.splitlines() if line.startswith("  sources: ")} == set(said)
    code, out, _ = run(capsys, "form", *scope_flags(s), *endpoint)
    assert code == 0 and out.startswith("nothing to form: no unformed messages")


def test_scripted_model_serves_a_model_to_relay_formation_to(capsys):
    """`memory-hub scripted-model` starts memory_hub_local's scripted model and says where it is."""
    import urllib.request

    script = Path(sys.executable).with_name("memory-hub")
    command = [str(script)] if script.exists() else [sys.executable, "-m", "memory_hub_tools.cli"]
    process = subprocess.Popen(
        [*command, "scripted-model", "--port", "0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert process.stdout is not None
        banner = process.stdout.readline()
        found = re.search(r"(http://127\.0\.0\.1:\d+/v1)", banner)
        assert found, banner
        with urllib.request.urlopen(found.group(1) + "/models", timeout=30) as answer:
            assert [m["id"] for m in json.load(answer)["data"]] == ["scripted"]
    finally:
        process.terminate()
        process.wait(timeout=30)
    assert process.returncode == 0
    code, _, err = run(capsys, "scripted-model", "--port", "70000")
    assert code == 2 and "must be 0-65535" in one_line(err)
