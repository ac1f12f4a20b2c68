"""`memory-hub ls` and `memory-hub show` against the session's local stack: browsing one user's memory
from the terminal, read-only, through the API's read routes."""

from __future__ import annotations

import json

import pytest
from helpers import ADMIN_KEY, SERVICE_ID, make_scope
from memory_hub_tools.client import MemoryHubClient
from test_cli import on_terminal, one_line, run, scope_flags


@pytest.fixture
def env(stack, monkeypatch):
    monkeypatch.setenv("MEMORY_HUB_ENDPOINT", stack.api_url)
    monkeypatch.setenv("MEMORY_HUB_API_KEY", ADMIN_KEY)
    monkeypatch.setenv("MEMORY_HUB_SERVICE_ID", SERVICE_ID)
    for name in ("MEMORY_HUB_TEAM_ID", "MEMORY_HUB_AGENT_ID", "MEMORY_HUB_USER_ID"):
        monkeypatch.delenv(name, raising=False)
    return stack.api_url


@pytest.fixture
def client(env) -> MemoryHubClient:
    return MemoryHubClient(env, ADMIN_KEY, SERVICE_ID, timeout=30)


def at(second: int) -> str:
    return f"2026-01-01T00:00:{second:02d}.000Z"


def unquote_lines(lines: list[str]) -> str:
    """Join the JSON string literals `show` prints for content over several lines."""
    return "".join(json.loads(line.strip()) for line in lines)


# --- ls ---------------------------------------------------------------------------------------------


def test_ls_without_a_layer_summarises_the_four_layers(env, client, capsys, monkeypatch):
    s = make_scope()
    client.conversation_add(
        s.team_id, s.agent_id, s.user_id, session_id="s1", messages=[{"role": "user", "content": "a"}] * 3
    )
    client.atomic_add(s.team_id, s.agent_id, s.user_id, content="one")
    client.atomic_add(s.team_id, s.agent_id, s.user_id, content="two")
    client.call("/v3/scenario/write", s.body(path="a.md", content="x"))
    # The scope from the environment, as an operator sets it once.
    monkeypatch.setenv("MEMORY_HUB_TEAM_ID", s.team_id)
    monkeypatch.setenv("MEMORY_HUB_AGENT_ID", s.agent_id)
    monkeypatch.setenv("MEMORY_HUB_USER_ID", s.user_id)
    code, out, err = run(capsys, "ls")
    assert code == 0, err
    assert out.splitlines()[0] == f"{s.team_id}/{s.agent_id}/{s.user_id}  (memory {s.memory_id})"
    rows = {line.split()[0]: line for line in out.splitlines()[1:]}
    assert "  3 message(s) of this user" in rows["l0"] and "memory-hub ls l0" in rows["l0"]
    assert "  2 record(s) of this user" in rows["l1"]
    assert "  1 scene file(s) of the agent" in rows["l2"]
    assert "no persona" in rows["l3"]

    client.call("/v3/core/write", s.body(content="I am a persona"))
    code, out, _ = run(capsys, "ls", "--json")
    assert code == 0
    summary = json.loads(out)
    assert summary["memory_id"] == s.memory_id and summary["user_id"] == s.user_id
    assert summary["l0"] == {"messages": 3} and summary["l1"] == {"records": 2} and summary["l2"] == {"files": 1}
    assert summary["l3"]["persona"] is True and summary["l3"]["version"] == 1

    other = make_scope()  # an empty scope: all zero, nothing created by looking
    code, out, _ = run(capsys, "ls", "--json", *scope_flags(other))
    assert code == 0 and json.loads(out)["l0"] == {"messages": 0} and json.loads(out)["l3"]["persona"] is False
    assert client.call("/v3/memory/list", {"team_id": other.team_id})["items"] == []


def test_ls_l0_newest_first_with_session_and_paging(env, client, capsys):
    s = make_scope()
    client.conversation_add(
        s.team_id,
        s.agent_id,
        s.user_id,
        session_id="morning",
        messages=[
            {"role": "user", "content": "first", "timestamp": at(1)},
            {"role": "assistant", "content": "second  ", "timestamp": at(2)},
        ],
    )
    later = client.conversation_add(
        s.team_id,
        s.agent_id,
        s.user_id,
        session_id="evening talk",
        messages=[
            {"role": "user", "content": "third\nline", "timestamp": at(3)},
            {"role": "user", "content": "x" * 200, "timestamp": at(4)},
        ],
    ).accepted_ids
    client.conversation_add(
        s.team_id, s.agent_id, f"{s.user_id}-other", session_id="morning", messages=[{"role": "user", "content": "no"}]
    )

    code, out, err = run(capsys, "ls", "l0", *scope_flags(s))
    assert code == 0, err
    lines = out.splitlines()
    assert len(lines) == 4
    assert [line.split("  ")[1] for line in lines] == [at(4), at(3), at(2), at(1)]  # newest first
    assert lines[0].startswith(later[1]) and lines[1].startswith(later[0])
    assert 'session "evening talk"' in lines[0] and "session morning" in lines[3]
    assert lines[0].endswith('"' + "x" * 60 + '"… (200 chars)')  # cut, and says so
    assert lines[1].endswith('"third\\nline"') and lines[2].endswith('"second  "')  # whitespace visible
    assert "  assistant  " in lines[2]
    assert "messages 1-4 of 4, newest first" in err

    code, out, err = run(capsys, "ls", "l0", *scope_flags(s), "--session", "morning")
    assert code == 0 and [line.split("  ")[1] for line in out.splitlines()] == [at(2), at(1)]

    code, out, err = run(capsys, "ls", "l0", *scope_flags(s), "--limit", "3")
    assert code == 0 and len(out.splitlines()) == 3
    assert "messages 1-3 of 4" in err and "more: --offset 3" in err
    code, out, err = run(capsys, "ls", "l0", *scope_flags(s), "--limit", "3", "--offset", "3")
    assert code == 0 and [line.split("  ")[1] for line in out.splitlines()] == [at(1)]
    assert "messages 4-4 of 4" in err and "more:" not in err

    code, out, _ = run(capsys, "ls", "l0", *scope_flags(s), "--limit", "2", "--json")
    data = json.loads(out)
    assert data["total"] == 4 and [m["id"] for m in data["messages"]] == list(reversed(later))

    code, out, _ = run(capsys, "ls", "l0", *scope_flags(s), "--session", "evening talk", "--long")
    assert code == 0
    blocks = out.split("\n\n")
    assert blocks[1].startswith(f"L0 message {later[0]}\n")
    assert '  session_id: "evening talk"' in blocks[1]
    assert "  content:    2 lines, 10 chars" in blocks[1]
    assert blocks[1].rstrip().endswith('    "third\\n"\n    "line"')


def test_ls_l1_newest_update_first_with_type_and_tags(env, client, capsys):
    s = make_scope()
    older = client.atomic_add(s.team_id, s.agent_id, s.user_id, content="likes tea", tags=["food", "a b"]).id
    pref = client.atomic_add(s.team_id, s.agent_id, s.user_id, content="dark mode", type="preference").id
    client.atomic_add(s.team_id, f"{s.agent_id}x", s.user_id, content="another agent's")
    client.atomic_update(s.team_id, s.agent_id, s.user_id, id=older, content="likes green tea ")

    code, out, err = run(capsys, "ls", "l1", *scope_flags(s))
    assert code == 0, err
    lines = out.splitlines()
    assert [line.split()[0] for line in lines] == [older, pref]  # the update moved it up
    assert lines[0].split("  ")[1:3] == ["v2", "episodic"]
    assert 'tags food,"a b"' in lines[0] and lines[0].endswith('"likes green tea "')
    assert "tags -" in lines[1] and "  preference  " in lines[1]
    assert "records 1-2 of 2, newest update first" in err

    code, out, _ = run(capsys, "ls", "L1", *scope_flags(s), "--type", "preference")
    assert code == 0 and [line.split()[0] for line in out.splitlines()] == [pref]
    code, out, err = run(capsys, "ls", "l1", *scope_flags(s), "--limit", "1", "--offset", "1", "--json")
    data = json.loads(out)
    assert data["total"] == 2 and [i["id"] for i in data["items"]] == [pref]
    code, out, err = run(capsys, "ls", "l1", *scope_flags(s), "--offset", "5")
    assert code == 0 and out == "" and "no records here (2 in all, offset 5)" in err


def test_ls_l2_files_in_path_order_with_prefix_and_pages(env, client, capsys):
    s = make_scope()
    for path in ("notes/b.md", "notes/a.md", "top.md", "notesx.md"):
        client.call("/v3/scenario/write", s.body(path=path, content=f"# {path}\n", summary=f"about {path}"))
    client.call("/v3/scenario/write", s.body(path="notes/a.md", content="again"))

    code, out, err = run(capsys, "ls", "l2", *scope_flags(s))
    assert code == 0, err
    lines = out.splitlines()
    assert [line.split()[0] for line in lines] == ["notes/a.md", "notes/b.md", "notesx.md", "top.md"]
    assert lines[0].split("  ")[1] == "v2" and 'summary "about notes/a.md"' in lines[0]
    assert lines[1].split("  ")[2].endswith(" B")
    assert "4 of 4 file(s)" in err

    code, out, err = run(capsys, "ls", "l2", *scope_flags(s), "--prefix", "notes/")
    assert [line.split()[0] for line in out.splitlines()] == ["notes/a.md", "notes/b.md"]
    code, out, err = run(capsys, "ls", "l2", *scope_flags(s), "--prefix", "notes", "--limit", "2")
    assert [line.split()[0] for line in out.splitlines()] == ["notes/a.md", "notes/b.md"]
    token = next(line for line in err.splitlines() if line.startswith("more: --next-token ")).split()[-1]
    code, out, err = run(
        capsys, "ls", "l2", *scope_flags(s), "--prefix", "notes", "--limit", "2", "--next-token", token
    )
    assert code == 0 and out.splitlines() == [line for line in out.splitlines() if line.startswith("notesx.md")]
    assert len(out.splitlines()) == 1 and "more:" not in err

    client.call("/v3/scenario/write", s.body(path="top.md", content="Zoë — café ☕"))
    code, out, _ = run(capsys, "ls", "l2", *scope_flags(s), "--json")
    data = json.loads(out)
    assert data["total"] == 4 and data["entries"][0]["path"] == "notes/a.md"
    # ls's size (the API's: bytes of the stored file) is show's size of the raw content.
    code, shown, _ = run(capsys, "show", "top.md", *scope_flags(s), "--json")
    stored = json.loads(shown)
    assert stored["size"] == len(stored["content"].encode("utf-8")) == data["entries"][-1]["size"]


def test_ls_l3_says_whether_there_is_a_persona(env, client, capsys):
    s = make_scope()
    code, out, _ = run(capsys, "ls", "l3", *scope_flags(s))
    assert code == 0 and out.strip() == "no persona"
    client.call("/v3/core/write", s.body(content="Name: Ada\n"))
    client.call("/v3/core/write", s.body(content="Name: Ada Lovelace\n"))
    code, out, _ = run(capsys, "ls", "l3", *scope_flags(s))
    assert code == 0 and out.startswith("persona  v2  19 chars  updated ")
    assert out.rstrip().endswith('"Name: Ada Lovelace\\n"')


def test_ls_refuses_options_of_another_layer(env, capsys):
    s = make_scope()
    for argv, flag in (
        (["ls", "l2", "--session", "x"], "--session"),
        (["ls", "l0", "--type", "x"], "--type"),
        (["ls", "l1", "--prefix", "x"], "--prefix"),
        (["ls", "l2", "--offset", "1"], "--offset"),
        (["ls", "l0", "--next-token", "x"], "--next-token"),
        (["ls", "--limit", "3"], "--limit"),
        (["ls", "l3", "--long"], "--long"),
    ):
        code, out, err = run(capsys, *argv, *scope_flags(s))
        assert code == 2 and out == "", argv
        assert one_line(err).startswith(f"memory-hub ls: error: {flag}: not an option of `memory-hub ls")
    code, _, err = run(capsys, "ls", "l0", *scope_flags(s), "--offset", "10001")
    assert code == 2 and "--offset: at most 10,000" in one_line(err)
    code, _, err = run(capsys, "ls", "l0", "--team", s.team_id)
    assert code == 2 and "--agent, --user required" in one_line(err)


# --- show -------------------------------------------------------------------------------------------


def test_show_a_record_prints_every_field_and_the_exact_content(env, client, capsys):
    s = make_scope()
    content = "likes tea\twith milk "
    rid = client.atomic_add(
        s.team_id,
        s.agent_id,
        s.user_id,
        content=content,
        background="said on Monday",
        tags=["food"],
        metadata={"source": "chat"},
        session_id="s 1",
    ).id
    twin = client.atomic_add(s.team_id, s.agent_id, s.user_id, content=content.strip()).id

    code, out, err = run(capsys, "show", rid, *scope_flags(s))
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == f"L1 record {rid}"
    fields = {line.split(":", 1)[0].strip(): line.split(":", 1)[1].strip() for line in lines[1:]}
    assert fields["id"] == rid and fields["version"] == "1" and fields["type"] == "episodic"
    assert fields["context"] == '"said on Monday"' and fields["tags"] == '["food"]'
    assert fields["metadata"] == '{"source": "chat"}' and fields["reinforced_count"] == "1"
    assert fields["session_id"] == '"s 1"' and fields["task_id"] == "null"
    assert fields["user_id"] == json.dumps(s.user_id)  # chosen by a client: quoted, exact
    assert fields["team_id"] == s.team_id  # a plain word by its pattern
    assert fields["created_at"].endswith("Z") and fields["updated_at"].endswith("Z")
    assert lines[-1].startswith("  content:") and lines[-1].endswith('"likes tea\\twith milk "')

    code, out, _ = run(capsys, "show", twin, *scope_flags(s))
    assert code == 0 and out.splitlines()[-1].endswith('"likes tea\\twith milk"')  # the twin differs, visibly

    code, out, _ = run(capsys, "show", rid, *scope_flags(s), "--raw")
    assert code == 0 and out == content
    code, out, _ = run(capsys, "show", rid, *scope_flags(s), "--json")
    item = json.loads(out)
    assert item["id"] == rid and item["content"] == content and item["background"] == "said on Monday"

    other = type(s)(s.team_id, s.agent_id, f"{s.user_id}-other")  # another user's view: not there
    code, out, err = run(capsys, "show", rid, *scope_flags(other))
    assert code == 1 and out == ""
    assert one_line(err) == f"error: no record {rid} in {s.team_id}/{s.agent_id}/{other.user_id} (all 0 checked)"


def test_show_a_message_over_several_lines(env, client, capsys):
    s = make_scope()
    content = "line one  \n\tline two\r\nend\n"
    mid = client.conversation_add(
        s.team_id,
        s.agent_id,
        s.user_id,
        session_id="sess",
        messages=[{"role": "assistant", "content": content, "timestamp": at(7)}],
    ).accepted_ids[0]
    code, out, err = run(capsys, "show", mid, *scope_flags(s))
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == f"L0 message {mid}"
    assert '  session_id: "sess"' in lines and "  role:       assistant" in lines and f"  timestamp:  {at(7)}" in lines
    head = next(n for n, line in enumerate(lines) if line.startswith("  content:"))
    assert lines[head].startswith(f"  content:    3 lines, {len(content)} chars, {len(content.encode())} bytes")
    assert lines[head + 1 :] == ['    "line one  \\n"', '    "\\tline two\\r\\n"', '    "end\\n"']
    assert unquote_lines(lines[head + 1 :]) == content  # joined, the exact content
    code, out, _ = run(capsys, "show", mid, *scope_flags(s), "--raw")
    assert out == content


def test_show_finds_an_id_beyond_the_first_page_and_says_how_far_it_looked(env, client, capsys):
    s = make_scope()
    old = client.conversation_add(
        s.team_id,
        s.agent_id,
        s.user_id,
        session_id="old",
        messages=[{"role": "user", "content": "the old one", "timestamp": at(0)}],
    ).accepted_ids[0]
    for batch in range(2):
        client.conversation_add(
            s.team_id,
            s.agent_id,
            s.user_id,
            session_id="new",
            messages=[
                {"role": "user", "content": f"filler {batch}.{n}", "timestamp": at(10 + batch)} for n in range(75)
            ],
        )
    code, out, err = run(capsys, "show", old, *scope_flags(s), "--scan", "100")
    assert code == 1 and out == ""
    assert one_line(err) == (
        f"error: {old} is not among the newest 100 of 151 messages of "
        f"{s.team_id}/{s.agent_id}/{s.user_id}; look further with --scan 151"
    )
    code, out, err = run(capsys, "show", old, *scope_flags(s))  # the default looks through 1,000
    assert code == 0, err
    assert out.splitlines()[-1] == '  content:    "the old one"'
    code, out, err = run(capsys, "show", old, *scope_flags(s), "--scan", "100", "--session", "old")
    assert code == 0, err  # narrowed to its session, the first page holds it
    code, _, err = run(capsys, "show", old, *scope_flags(s), "--scan", "20000")
    assert code == 2 and "--scan: at most 10,100" in one_line(err)


def test_show_a_scene_file_and_the_persona(env, client, capsys):
    s = make_scope()
    client.call("/v3/scenario/write", s.body(path="notes/trip.md", content="# Trip \n\nto Oslo", summary="travel"))
    stored = client.call("/v3/scenario/read", s.body(path="notes/trip.md"))
    code, out, err = run(capsys, "show", "notes/trip.md", *scope_flags(s))
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == "L2 scene file notes/trip.md"
    assert "  path:       notes/trip.md" in lines and '  summary:    "travel"' in lines and "  version:    1" in lines
    assert f"  size:       {len(stored['content'].encode())}" in lines
    head = next(n for n, line in enumerate(lines) if line.startswith("  content:"))
    assert lines[head + 1] == '    "-----META-START-----\\n"'  # raw: the META block is part of the file
    assert '    "# Trip \\n"' in lines and lines[-1] == '    "to Oslo"'
    assert unquote_lines(lines[head + 1 :]) == stored["content"]
    code, out, _ = run(capsys, "show", "notes/trip.md", *scope_flags(s), "--raw")
    assert out == stored["content"]

    code, out, err = run(capsys, "show", "notes/none.md", *scope_flags(s))
    assert (
        code == 1 and out == "" and one_line(err) == f'error: no scene file "notes/none.md" in {s.team_id}/{s.agent_id}'
    )
    code, _, err = run(capsys, "show", "../x.md", *scope_flags(s))
    assert code == 1 and one_line(err).startswith("error: 400 path: ")

    code, out, err = run(capsys, "show", "persona", *scope_flags(s))
    assert code == 1 and one_line(err) == f"error: {s.team_id}/{s.agent_id} has no persona (L3)"
    persona = "Name: Ada \r\nLikes: tea"
    client.call("/v3/core/write", s.body(content=persona))
    code, out, err = run(capsys, "show", "persona", *scope_flags(s))
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == f"L3 persona of {s.team_id}/{s.agent_id}" and "  version:    1" in lines
    assert lines[-2:] == ['    "Name: Ada \\r\\n"', '    "Likes: tea"']
    code, out, _ = run(capsys, "show", "l3", *scope_flags(s), "--raw")
    assert out == persona
    code, out, _ = run(capsys, "show", "persona", *scope_flags(s), "--json")
    assert json.loads(out)["content"] == persona and json.loads(out)["version"] == 1


def test_show_usage_errors(env, capsys):
    s = make_scope()
    for argv, needle in (
        (["show", "hello"], "expected an L0 message id (msg-…), an L1 record id (atom-…)"),
        (["show", "atom-x", "--session", "s"], "--session: only for an L0 message id"),
        (["show", "msg-x", "--type", "t"], "--type: only for an L1 record id"),
        (["show", "a.md", "--scan", "5"], "--scan: only for an id"),
        (["show", "persona", "--raw", "--json"], "--raw and --json exclude each other"),
    ):
        code, out, err = run(capsys, *argv, *scope_flags(s))
        assert code == 2 and out == "", argv
        assert needle in one_line(err), argv


def test_browsing_never_writes(env, client, capsys, monkeypatch):
    """ls and show read only: not even the memory asset is created by looking."""
    s = make_scope()
    on_terminal(monkeypatch)  # nothing is asked either
    for argv in (["ls"], ["ls", "l0"], ["ls", "l1"], ["ls", "l2"], ["ls", "l3"], ["show", "persona"]):
        run(capsys, *argv, *scope_flags(s))
    run(capsys, "show", "atom-00000000000000000000000000", *scope_flags(s))
    assert client.call("/v3/memory/list", {"team_id": s.team_id})["items"] == []
