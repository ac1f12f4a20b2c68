"""L2 scenario files: versions, META block, ls/count/rm, path rules, isolation, concurrency."""

from __future__ import annotations

import functools
import itertools
import operator
import re
import unicodedata
from concurrent.futures import ThreadPoolExecutor

import pytest
from helpers import BUCKET, aws_client, make_scope, memory_files, pair_assets, s3_keys
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from memory_hub.storage import bucket

START, END = "-----META-START-----\n", "\n-----META-END-----\n"
TIME = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")


def write(api, scope, path, content="c", **fields):
    answer = api.post("/v3/scenario/write", scope.body(path=path, content=content, **fields))
    assert answer.status == 200, answer.body
    return answer.data


def read(api, scope, path):
    answer = api.post("/v3/scenario/read", scope.body(path=path))
    assert answer.status == 200, answer.body
    return answer.data


def ls(api, scope, **fields):
    answer = api.post("/v3/scenario/ls", scope.body(**fields))
    assert answer.status == 200, answer.body
    return answer.data


def meta_block(version, created_at, updated_at, summary=None, extra=()):
    lines = [f"version: {version}", f"created_at: {created_at}", f"updated_at: {updated_at}"]
    if summary:
        lines.append(f"summary: {summary}")
    lines += [f"{k}: {v}" for k, v in extra]
    return START + "\n".join(lines) + END + "\n"


def parse_meta(stored):
    assert stored.startswith(START)
    block, _, rest = stored[len(START) :].partition(END)
    return dict(line.split(": ", 1) for line in block.split("\n")), rest[1:]


def strip_meta(content):
    """A leading META block (up to its terminator plus one newline) is removed on write."""
    if content.startswith(START):
        end = content.find(END)
        if end >= 0:
            rest = content[end + len(END) :]
            return rest[1:] if rest.startswith("\n") else rest
    return content


def scene_prefix(scope):
    return scope.prefix + bucket.SCENES


def team_files(scope):
    """Every key in the bucket under the scope's team, whatever the agent: the memory's folder as
    the runtime names it, cut after the team id."""
    return s3_keys(scope.prefix[: scope.prefix.index(scope.team_id) + len(scope.team_id)])


# --- versions, created, summary --------------------------------------------------------------------


def test_versions_count_up_from_one_and_created_flags_the_first(api, scope):
    answers = [write(api, scope, "v/a.md", f"body {i}") for i in range(3)]
    assert [a["version"] for a in answers] == [1, 2, 3]
    assert [a["created"] for a in answers] == [True, False, False]
    assert all(
        a["path"] == "v/a.md" and a["team_id"] == scope.team_id and a["agent_id"] == scope.agent_id for a in answers
    )
    assert all(TIME.match(a["updated_at"]) for a in answers)
    assert answers[0]["updated_at"] <= answers[1]["updated_at"] <= answers[2]["updated_at"]
    got = read(api, scope, "v/a.md")
    assert got["version"] == 3 and got["content"].endswith("\n\nbody 2")
    assert got["updated_at"] == answers[2]["updated_at"]


def test_created_at_never_changes_after_the_first_write(api, scope):
    write(api, scope, "t.md", "one")
    first = read(api, scope, "t.md")
    write(api, scope, "t.md", "two")
    write(api, scope, "t.md", "three")
    last = read(api, scope, "t.md")
    assert first["created_at"] == last["created_at"]
    assert TIME.match(last["created_at"]) and TIME.match(last["updated_at"])
    assert last["updated_at"] >= first["updated_at"]
    entry = ls(api, scope)["entries"][0]
    assert entry["created_at"] == first["created_at"] and entry["updated_at"] == last["updated_at"]


def test_summary_persists_until_replaced_and_empty_removes_it(api, scope):
    write(api, scope, "s.md", "a", summary="first summary")
    write(api, scope, "s.md", "b")
    got = read(api, scope, "s.md")
    assert got["summary"] == "first summary"
    assert parse_meta(got["content"])[0]["summary"] == "first summary"
    write(api, scope, "s.md", "c", summary="second")
    assert read(api, scope, "s.md")["summary"] == "second"
    assert ls(api, scope)["entries"][0]["summary"] == "second"
    write(api, scope, "s.md", "d", summary="")
    got = read(api, scope, "s.md")
    assert got["summary"] is None
    assert "summary" not in parse_meta(got["content"])[0]
    assert ls(api, scope)["entries"][0]["summary"] is None
    write(api, scope, "s.md", "e")
    assert read(api, scope, "s.md")["summary"] is None


@pytest.mark.parametrize("summary", ["x" * 1025, "line\nbreak", "tab\there", "nul\x00"])
def test_bad_summaries_are_400(api, scope, summary):
    answer = api.post("/v3/scenario/write", scope.body(path="s.md", content="c", summary=summary))
    assert answer.status == 400 and answer.message.startswith("summary: "), answer.body
    assert read(api, scope, "s.md")["content"] is None


def test_content_limit_is_a_million_chars(api, scope):
    ok = api.post("/v3/scenario/write", scope.body(path="big.md", content="x" * 1_000_000))
    assert ok.status == 200, ok.body
    too_long = api.post("/v3/scenario/write", scope.body(path="big2.md", content="x" * 1_000_001))
    assert too_long.status == 400 and too_long.message.startswith("content: ")


# --- META block ------------------------------------------------------------------------------------


def test_meta_block_format_is_exact(api, scope):
    write(api, scope, "m.md", "hello\nworld\n", summary="what it is")
    got = read(api, scope, "m.md")
    expected = (
        f"-----META-START-----\nversion: 1\ncreated_at: {got['created_at']}\n"
        f"updated_at: {got['updated_at']}\nsummary: what it is\n-----META-END-----\n\nhello\nworld\n"
    )
    assert got["content"] == expected
    assert got["created_at"] == got["updated_at"]
    write(api, scope, "m.md", "")
    again = read(api, scope, "m.md")
    assert again["content"] == meta_block(2, got["created_at"], again["updated_at"], "what it is")


def test_a_meta_block_inside_written_content_is_stripped(api, scope):
    nested = "-----META-START-----\nversion: 99\nsummary: evil\nheat: 7\n-----META-END-----\n\nthe body"
    written = write(api, scope, "n.md", nested)
    assert written["version"] == 1
    got = read(api, scope, "n.md")
    assert got["summary"] is None
    assert got["content"] == meta_block(1, got["created_at"], got["updated_at"]) + "the body"
    # a read-modify-write never nests blocks
    write(api, scope, "n.md", got["content"] + " and more", summary="s")
    again = read(api, scope, "n.md")
    assert again["content"].count("-----META-START-----") == 1
    assert again["content"] == meta_block(2, got["created_at"], again["updated_at"], "s") + "the body and more"


@pytest.mark.parametrize(
    "content, kept",
    [
        (START + "k: v" + END + "\n\nX", "\nX"),  # only one newline after the terminator goes
        (START + "k: v" + END + "X", "X"),
        (START + END.lstrip("\n") + "X", "X"),  # empty block: the start's newline ends it
        (START + "no terminator\nX", START + "no terminator\nX"),
        ("text\n" + START + "k: v" + END + "\nX", "text\n" + START + "k: v" + END + "\nX"),  # not leading
        (" " + START + "k: v" + END + "\nX", " " + START + "k: v" + END + "\nX"),
    ],
)
def test_meta_stripping_edge_cases(api, scope, content, kept):
    write(api, scope, "e.md", content)
    got = read(api, scope, "e.md")
    assert got["content"] == meta_block(1, got["created_at"], got["updated_at"]) + kept


def test_other_meta_keys_in_the_stored_file_are_kept_in_order(api, scope):
    write(api, scope, "o.md", "v1", summary="sum")
    key = scene_prefix(scope) + "o.md"
    head = aws_client("s3").head_object(Bucket=BUCKET, Key=key)
    # the file as another memory-tdai tool might leave it: extra keys after ours
    doctored = (
        START + "version: 1\ncreated_at: 2026-01-02T03:04:05.006Z\nupdated_at: 2026-01-02T03:04:05.006Z\n"
        "heat: 3\nsummary: sum\ncustom: a: b" + END + "\nv1"
    )
    aws_client("s3").put_object(Bucket=BUCKET, Key=key, Body=doctored.encode(), Metadata=head["Metadata"])
    write(api, scope, "o.md", START + "heat: 999\nown: x" + END + "\nv2")
    got = read(api, scope, "o.md")
    assert got["version"] == 2 and got["created_at"] == "2026-01-02T03:04:05.006Z"
    assert (
        got["content"]
        == meta_block(
            2, "2026-01-02T03:04:05.006Z", got["updated_at"], "sum", extra=[("heat", "3"), ("custom", "a: b")]
        )
        + "v2"
    )


# --- expected_version ------------------------------------------------------------------------------


def test_expected_version_guards_the_write(api, scope):
    assert write(api, scope, "x.md", "one", expected_version=0)["version"] == 1
    conflict = api.post("/v3/scenario/write", scope.body(path="x.md", content="two", expected_version=0))
    assert conflict.status == 409 and conflict.body["data"] == {"current_version": 1}
    assert conflict.body["retryable"] is False
    assert write(api, scope, "x.md", "two", expected_version=1)["version"] == 2
    stale = api.post("/v3/scenario/write", scope.body(path="x.md", content="three", expected_version=1, summary="s"))
    assert stale.status == 409 and stale.body["data"] == {"current_version": 2}
    got = read(api, scope, "x.md")
    assert got["version"] == 2 and got["content"].endswith("\n\ntwo") and got["summary"] is None
    assert ls(api, scope)["entries"][0]["version"] == 2


def test_expected_version_on_a_missing_file_writes_nothing(api, scope):

    conflict = api.post("/v3/scenario/write", scope.body(path="y.md", content="c", expected_version=3))
    assert conflict.status == 409 and conflict.body["data"] == {"current_version": 0}
    assert read(api, scope, "y.md")["content"] is None
    assert team_files(scope) == []
    assert pair_assets(scope.memory_id) == [], "a refused write must not create the memory asset"


@pytest.mark.parametrize("value", [-1, "1", 1.0, True, 2**53 + 1, 10**40])
def test_expected_version_must_be_a_whole_number_from_0_to_2_to_the_53(api, scope, value):
    """Versions are whole numbers up to 2^53 (as ``atomic/update`` and ``atomic/delete`` take them):
    a value past that is refused as a value, never sent to storage as a number."""
    answer = api.post("/v3/scenario/write", scope.body(path="x.md", content="c", expected_version=value))
    assert answer.status == 400 and answer.message.startswith("expected_version: "), answer.body
    assert read(api, scope, "x.md")["content"] is None


# --- read -------------------------------------------------------------------------------------------


def test_reading_a_missing_file_answers_code_0_with_nulls(api, scope):
    answer = api.post("/v3/scenario/read", scope.body(path="never/there.md"))
    assert answer.status == 200 and answer.body["code"] == 0
    data = answer.data
    assert data["path"] == "never/there.md"
    assert (data["content"], data["version"], data["created_at"], data["updated_at"]) == (None, None, None, None)
    write(api, scope, "other.md")
    assert read(api, scope, "never/there.md")["content"] is None


def test_read_returns_every_field(api, scope):
    write(api, scope, "f.md", "x", summary="s")
    got = read(api, scope, "f.md")
    assert {"path", "content", "version", "summary", "created_at", "updated_at", "team_id", "agent_id"} <= set(got)
    assert (got["team_id"], got["agent_id"], got["path"]) == (scope.team_id, scope.agent_id, "f.md")


# --- ls, count --------------------------------------------------------------------------------------

NAMES = [
    "b.md",
    "a.md",
    "Z.md",
    "é.md",
    "中/x.md",
    "😀.md",
    "｡.md",
    "a/b.md",
    "a-b.md",
    "a.b.md",
    "ab.md",
    "a/c/d.md",
    "%2e%2e/p.md",
    "~.md",
]


def test_ls_lists_files_sorted_by_utf8_bytes_with_every_field(api, scope):
    for name in NAMES:
        write(api, scope, name, f"content of {name}")
    data = ls(api, scope)
    paths = [e["path"] for e in data["entries"]]
    assert paths == sorted(NAMES, key=lambda p: p.encode("utf-8"))
    assert paths.index("｡.md") < paths.index("😀.md")  # UTF-16 order would differ here
    assert data["scenes"] == data["entries"] and data["total"] == len(NAMES)
    assert "next_token" not in data
    for entry in data["entries"]:
        stored = read(api, scope, entry["path"])
        assert entry["size"] == len(stored["content"].encode("utf-8"))
        assert entry["version"] == 1 and entry["summary"] is None
        assert (entry["team_id"], entry["agent_id"]) == (scope.team_id, scope.agent_id)
        assert entry["created_at"] == stored["created_at"] and entry["updated_at"] == stored["updated_at"]


def test_ls_of_an_unknown_memory_is_empty(api, scope):
    data = ls(api, scope)
    assert data["entries"] == [] and data["scenes"] == [] and data["total"] == 0 and "next_token" not in data
    assert api.post("/v3/scenario/count", scope.body()).data == {"count": 0, "total": 0}


@pytest.fixture(scope="module")
def named(api):
    """One scope holding NAMES, shared by the prefix cases (they only read it)."""
    scope = make_scope()
    for name in NAMES:
        write(api, scope, name)
    return scope


@pytest.mark.parametrize(
    "prefix, expected",
    [
        ("", NAMES),
        ("a/", ["a/b.md", "a/c/d.md"]),
        ("a", ["a.md", "a/b.md", "a-b.md", "a.b.md", "ab.md", "a/c/d.md"]),
        ("a/c/", ["a/c/d.md"]),
        ("中", ["中/x.md"]),
        ("zz", []),
        ("a.md", ["a.md"]),
    ],
)
def test_path_prefix_is_a_plain_string_prefix(api, named, prefix, expected):
    data = ls(api, named, path_prefix=prefix)
    want = sorted(expected, key=lambda p: p.encode("utf-8"))
    assert [e["path"] for e in data["entries"]] == want and data["total"] == len(want)
    counted = api.post("/v3/scenario/count", named.body(path_prefix=prefix)).data
    assert counted == {"count": len(want), "total": len(want)}


def test_ls_pages_with_limit_and_next_token(api, scope):
    names = [f"p/{i:02d}.md" for i in range(7)] + ["q.md"]
    for name in names:
        write(api, scope, name)
    pages, token, limits = [], None, itertools.cycle([3, 2])
    while True:
        fields = {"path_prefix": "p/", "limit": next(limits)}
        if token:
            fields["next_token"] = token
        page = ls(api, scope, **fields)
        assert page["total"] == 7 and page["scenes"] == page["entries"]
        pages.append([e["path"] for e in page["entries"]])
        token = page.get("next_token")
        if token is None:
            break
        assert isinstance(token, str) and token
    assert [len(p) for p in pages] == [3, 2, 2]
    assert functools.reduce(operator.iadd, pages, []) == names[:7]
    exact = ls(api, scope, path_prefix="p/", limit=7)
    assert len(exact["entries"]) == 7 and "next_token" not in exact


def test_bad_next_tokens_are_400(api, scope):
    for i in range(3):
        write(api, scope, f"a/{i}.md")
    token = ls(api, scope, path_prefix="a/", limit=1)["next_token"]
    other = make_scope()
    write(api, other, "a/0.md")
    write(api, other, "a/1.md")
    flipped = token[:-2] + ("A" if token[-2] != "A" else "B") + token[-1]
    for fields, who in [
        ({"path_prefix": "", "next_token": token}, scope),
        ({"path_prefix": "a", "next_token": token}, scope),
        ({"path_prefix": "a/", "next_token": flipped}, scope),
        ({"path_prefix": "a/", "next_token": "garbage"}, scope),
        ({"path_prefix": "a/", "next_token": token}, other),
    ]:
        answer = api.post("/v3/scenario/ls", who.body(**fields))
        assert answer.status == 400 and answer.message == "next_token: invalid", (fields, answer.body)
    assert len(ls(api, scope, path_prefix="a/", limit=5, next_token=token)["entries"]) == 2


# --- rm ---------------------------------------------------------------------------------------------


def test_rm_of_a_file(api, scope):
    write(api, scope, "r/a.md")
    write(api, scope, "r/b.md")
    answer = api.post("/v3/scenario/rm", scope.body(path="r/a.md"))
    assert answer.status == 200, answer.body
    assert answer.data["success"] is True and answer.data["deleted"] == 1
    assert isinstance(answer.data["audit_ids"], list) and len(answer.data["audit_ids"]) == 1
    assert read(api, scope, "r/a.md")["content"] is None
    assert [e["path"] for e in ls(api, scope)["entries"]] == ["r/b.md"]
    assert memory_files(scope, bucket.SCENES) == [scene_prefix(scope) + "r/b.md"]


def test_rm_of_a_folder_removes_everything_under_it(api, scope):
    for name in ["a/x.md", "a/y/z.md", "ab.md", "a.md", "b/a/x.md"]:
        write(api, scope, name)
    answer = api.post("/v3/scenario/rm", scope.body(path="a/"))
    assert answer.data["deleted"] == 2 and answer.data["success"] is True
    assert [e["path"] for e in ls(api, scope)["entries"]] == ["a.md", "ab.md", "b/a/x.md"]
    assert api.post("/v3/scenario/count", scope.body()).data["count"] == 3
    assert sorted(memory_files(scope, bucket.SCENES)) == sorted(
        scene_prefix(scope) + p for p in ["a.md", "ab.md", "b/a/x.md"]
    )


def test_rm_of_nothing_deletes_zero(api, scope):
    for path in ["none.md", "none/"]:
        answer = api.post("/v3/scenario/rm", scope.body(path=path))
        assert answer.status == 200 and answer.data["success"] is True and answer.data["deleted"] == 0
    write(api, scope, "keep.md")
    for path in ["none.md", "none/", "kee/"]:
        assert api.post("/v3/scenario/rm", scope.body(path=path)).data["deleted"] == 0
    assert read(api, scope, "keep.md")["version"] == 1


def test_rm_never_creates_the_memory(api, scope):
    api.post("/v3/scenario/rm", scope.body(path="x/"))
    assert team_files(scope) == []
    assert write(api, scope, "x/a.md")["created"] is True


def test_after_rm_the_version_restarts_at_one(api, scope):
    write(api, scope, "again.md", "a", summary="old")
    write(api, scope, "again.md", "b")
    first = read(api, scope, "again.md")
    api.post("/v3/scenario/rm", scope.body(path="again.md"))
    answer = write(api, scope, "again.md", "c")
    assert answer["version"] == 1 and answer["created"] is True
    got = read(api, scope, "again.md")
    assert got["summary"] is None and got["created_at"] >= first["updated_at"]
    assert ls(api, scope)["entries"][0]["version"] == 1
    write(api, scope, "f/one.md")
    api.post("/v3/scenario/rm", scope.body(path="f/"))
    assert write(api, scope, "f/one.md")["version"] == 1


def test_rm_of_a_file_whose_path_xml_cannot_carry(api, scope):
    write(api, scope, "x/\uffff.md")
    write(api, scope, "x/ok.md")
    answer = api.post("/v3/scenario/rm", scope.body(path="x/"))
    assert answer.status == 200, answer.body
    assert answer.data["deleted"] == 2
    assert memory_files(scope, bucket.SCENES) == []


# --- path rules ---------------------------------------------------------------------------------------

BAD_FILE_PATHS = [
    "",
    "/a.md",
    "a//b.md",
    "a/./b.md",
    "a/../b.md",
    "../a.md",
    "./a.md",
    ".hidden.md",
    "a/.b/c.md",
    ".md",
    "a\\b.md",
    "a\x00.md",
    "a\x1f.md",
    "a\x7f.md",
    "a\x9f.md",
    "a\n.md",
    "a.txt",
    "a",
    "a.MD",
    "a/",
    "a.md/",
    "x" * 510 + ".md",
    "é" * 255 + ".md",
    "a/.../b.md",
    "//a.md",
    "a/b.md/",
]


@pytest.mark.parametrize("path", BAD_FILE_PATHS)
@pytest.mark.parametrize("route", ["/v3/scenario/write", "/v3/scenario/read"])
def test_bad_file_paths_are_400(api, scope, route, path):
    answer = api.post(route, scope.body(path=path, content="c"))
    assert answer.status == 400 and answer.message.startswith("path: "), (path, answer.body)


@pytest.mark.parametrize(
    "path",
    [
        "x" * 509 + ".md",
        "é" * 254 + "x.md",
        "%2e%2e/a.md",
        "a/%00.md",
        "a b/ c .md",
        "a..b.md",
        "a/b./c.md",
        "é/中/😀.md",
        "a/-/_.md",
        "~/a.md",
    ],
)
def test_good_file_paths_are_stored_literally(api, scope, path):
    assert len(path.encode()) <= 512
    write(api, scope, path, "literal")
    assert read(api, scope, path)["content"].endswith("\n\nliteral")
    assert memory_files(scope, bucket.SCENES) == [scene_prefix(scope) + path]
    assert [e["path"] for e in ls(api, scope)["entries"]] == [path]


@pytest.mark.parametrize(
    "prefix", ["/a", "a//", "a/../", "..", ".", "./a", "a/.x", "a\\", "a\x00", ".x", "a/./", "x" * 513, "//", "a//b/"]
)
@pytest.mark.parametrize("route", ["/v3/scenario/ls", "/v3/scenario/count"])
def test_bad_path_prefixes_are_400(api, scope, route, prefix):
    answer = api.post(route, scope.body(path_prefix=prefix))
    assert answer.status == 400 and answer.message.startswith("path_prefix: "), (prefix, answer.body)


@pytest.mark.parametrize("prefix", ["", "a", "a/", "a/b", "a.m", "%2e", "a/b/"])
def test_good_path_prefixes_are_accepted(api, scope, prefix):
    assert api.post("/v3/scenario/ls", scope.body(path_prefix=prefix)).status == 200


@pytest.mark.parametrize("path", ["", "/", "a", "a//", "a/../", "../", "/a/", "a\\/", ".a/", "a.txt", "a//b.md"])
def test_bad_rm_paths_are_400(api, scope, path):
    answer = api.post("/v3/scenario/rm", scope.body(path=path))
    assert answer.status == 400 and answer.message.startswith("path: "), (path, answer.body)


def test_path_is_required(api, scope):
    for route in ("/v3/scenario/read", "/v3/scenario/write", "/v3/scenario/rm"):
        answer = api.post(route, scope.body(content="c"))
        assert answer.status == 400 and answer.message.startswith("path: "), answer.body


# --- isolation ----------------------------------------------------------------------------------------


def test_l2_is_shared_by_the_users_of_one_agent(api, scope):
    write(api, scope, "shared.md", "for every user")
    colleague = type(scope)(scope.team_id, scope.agent_id, "someone-else")
    assert read(api, colleague, "shared.md")["content"].endswith("for every user")
    assert write(api, colleague, "shared.md", "edited")["version"] == 2
    assert read(api, scope, "shared.md")["content"].endswith("edited")
    assert ls(api, colleague)["total"] == 1


def test_l2_is_isolated_between_agents_and_teams(api, scope):
    write(api, scope, "own.md", "mine")
    other_agent = type(scope)(scope.team_id, scope.agent_id + "x", scope.user_id)
    other_team = type(scope)(scope.team_id + "x", scope.agent_id, scope.user_id)
    for other in (other_agent, other_team):
        assert read(api, other, "own.md")["content"] is None
        assert ls(api, other)["total"] == 0
        assert api.post("/v3/scenario/count", other.body()).data["count"] == 0
        assert api.post("/v3/scenario/rm", other.body(path="own.md")).data["deleted"] == 0
        assert write(api, other, "own.md", "theirs")["version"] == 1
    assert read(api, scope, "own.md")["content"].endswith("\n\nmine")
    assert read(api, scope, "own.md")["version"] == 1


def test_two_pairs_that_spell_one_memory_id_keep_their_own_files(api):
    base = make_scope().team_id
    first = type(make_scope())(f"{base}-b", "c", "u")
    second = type(make_scope())(base, "b-c", "u")
    assert first.memory_id == second.memory_id
    write(api, first, "f.md", "first pair")
    got = read(api, second, "f.md")
    assert got["content"] is None and got["version"] is None
    assert ls(api, second)["total"] == 0
    assert api.post("/v3/scenario/count", second.body()).data["count"] == 0
    assert api.post("/v3/scenario/rm", second.body(path="f.md")).data["deleted"] == 0
    assert api.post("/v3/core/read", second.body()).data["content"] is None
    assert memory_files(second) == []
    # the second pair writes its own (neither pair blocks the other)
    assert write(api, second, "f.md", "second pair")["version"] == 1
    assert api.post("/v3/core/write", second.body(content="persona")).status == 200
    assert read(api, second, "f.md")["content"].endswith("second pair")
    assert api.post("/v3/core/read", first.body()).data["content"] is None
    assert read(api, first, "f.md")["content"].endswith("first pair")


# --- concurrency ---------------------------------------------------------------------------------------


def test_concurrent_writes_to_one_path_get_distinct_versions(api, scope):
    write(api, scope, "warm.md")  # the asset exists; writers race on the file only

    def one(i):
        answer = api.post("/v3/scenario/write", scope.body(path="race.md", content=f"writer {i}", summary=f"s{i}"))
        assert answer.status == 200, answer.body
        return i, answer.data["version"]

    with ThreadPoolExecutor(max_workers=20) as pool:
        results = list(pool.map(one, range(40)))
    assert sorted(v for _, v in results) == list(range(1, 41))
    winner = next(i for i, v in results if v == 40)
    got = read(api, scope, "race.md")
    assert got["version"] == 40
    assert got["content"] == meta_block(40, got["created_at"], got["updated_at"], f"s{winner}") + f"writer {winner}"
    entry = next(e for e in ls(api, scope)["entries"] if e["path"] == "race.md")
    assert entry["version"] == 40 and entry["summary"] == f"s{winner}"


# --- properties ---------------------------------------------------------------------------------------

_ANY_CHAR = st.characters(exclude_categories=("Cs",))
_WORD = st.text(alphabet=st.characters(categories=("L", "N", "P", "S", "Zs")), min_size=1, max_size=6)
_SEGMENT = st.one_of(
    _WORD,
    _WORD,
    _WORD,
    st.text(alphabet=_ANY_CHAR, min_size=0, max_size=6),
    st.sampled_from(
        [
            ".",
            "..",
            "...",
            ".x",
            "%2e",
            "%2e%2e",
            "%2F",
            "%00",
            "a\\b",
            "\\",
            "\x00",
            "\x7f",
            "\x85",
            "~",
            " ",
            "-",
            "..md",
            "\ufeff",
            "\u2028",
            "\uffff",
            "+",
            "?#",
            "*",
        ]
    ),
)
_PATHS = st.builds(
    lambda lead, segments, tail: lead + "/".join(segments) + tail,
    st.sampled_from(["", "", "", "/"]),
    st.lists(_SEGMENT, min_size=1, max_size=4),
    st.sampled_from([".md"] * 6 + ["", "/", ".txt", "/.md"]),
)


def contract_allows(path: str) -> bool:
    """The rules for a file path (docs/API.md, "Paths"), written independently of the service's code."""
    if not path or len(path.encode("utf-8")) > 512 or path.startswith("/") or "\\" in path:
        return False
    if any(unicodedata.category(ch) == "Cc" for ch in path) or not path.endswith(".md"):
        return False
    return all(segment and not segment.startswith(".") for segment in path.split("/"))


def _all_keys():
    return set(s3_keys(""))


def test_paths_are_rejected_or_land_exactly_under_scene_blocks(api, stack):
    before = _all_keys()
    expected: set[str] = set()

    @settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
    @given(path=_PATHS)
    def check(path):
        scope = make_scope()
        answer = api.post("/v3/scenario/write", scope.body(path=path, content="p"))
        mine = team_files(scope)
        if not contract_allows(path):
            assert answer.status == 400 and answer.message.startswith("path: "), (path, answer.body)
            assert mine == []
            return
        assert answer.status == 200, (path, answer.body)
        key = scene_prefix(scope) + path
        assert mine == [key]
        expected.add(key)
        assert read(api, scope, path)["content"].endswith("\n\np")

    check()
    assert _all_keys() - before == expected


_SUMMARIES = st.one_of(
    st.none(), st.just(""), st.text(alphabet=st.characters(exclude_categories=("Cs", "Cc")), max_size=40)
)
_TEXT = st.text(alphabet=_ANY_CHAR, max_size=60)
_CONTENTS = st.one_of(
    _TEXT,
    st.builds(
        lambda block, gap, rest: START + block + END + gap + rest, _TEXT, st.sampled_from(["", "\n", "\n\n"]), _TEXT
    ),
    st.builds(lambda block, rest: START + block + "\n-----META-END-----" + rest, _TEXT, _TEXT),
    st.builds(lambda rest: START + "version: 7\nsummary: inner\nheat: 1" + END + "\n" + rest, _TEXT),
)
_counter = itertools.count()


def test_meta_round_trip(api, stack):
    scope = make_scope()

    @settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
    @given(content=_CONTENTS, summary=_SUMMARIES, second=st.one_of(st.none(), _CONTENTS))
    def check(content, summary, second):
        path = f"rt/{next(_counter)}.md"
        fields = {} if summary is None else {"summary": summary}
        written = write(api, scope, path, content, **fields)
        got = read(api, scope, path)
        assert got["version"] == written["version"] == 1
        assert got["content"] == meta_block(1, got["created_at"], got["updated_at"], summary) + strip_meta(content)
        keys, body = parse_meta(got["content"])
        assert keys["version"] == "1" and keys.get("summary") == (summary or None)
        assert body == strip_meta(content)
        assert got["summary"] == (summary or None)
        if second is not None:
            write(api, scope, path, second)  # no summary: the old one persists
            again = read(api, scope, path)
            assert again["version"] == 2 and again["created_at"] == got["created_at"]
            assert again["content"] == (
                meta_block(2, got["created_at"], again["updated_at"], summary) + strip_meta(second)
            )

    check()
