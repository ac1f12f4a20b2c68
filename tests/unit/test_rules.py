"""domain/rules.py: team/agent ids, free ids, blanks and trimming, id lists, paths."""

from __future__ import annotations

import string
import sys
import unicodedata

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from memory_hub.domain.rules import (
    MAX_ID_CHARS,
    MAX_PATH_BYTES,
    TEAM_AGENT_RULE,
    WHITE_SPACE,
    clean_ids,
    free_id_problem,
    has_control,
    is_blank,
    path_problem,
    team_or_agent_problem,
    trim,
)

TEAM_CHARS = string.ascii_letters + string.digits + "._@-"
CONTROL = [chr(c) for c in [*range(0x00, 0x20), *range(0x7F, 0xA0)]]
# Unicode 15.1's White_Space property, written out (PropList.txt), independent of the code under test.
UNICODE_WHITE_SPACE = {
    chr(c)
    for c in [
        *range(0x09, 0x0E),
        0x20,
        0x85,
        0xA0,
        0x1680,
        *range(0x2000, 0x200B),
        0x2028,
        0x2029,
        0x202F,
        0x205F,
        0x3000,
    ]
}


# ---------------------------------------------------------------- team_id / agent_id


@pytest.mark.parametrize(
    "value", ["a", "A", "0", "_", "@", "-", "team-1", "a.b", "a" * 64, "-" + "." * 63, "user@example.com"]
)
def test_team_agent_accepts(value):
    assert team_or_agent_problem(value) is None


@pytest.mark.parametrize(
    "value", ["", "a" * 65, ".hidden", "a b", "a/b", "a:b", "a#b", "é", "ａ", "a\n", "\na", "a\x1f", "٣", "a\u200b"]
)
def test_team_agent_rejects(value):
    assert team_or_agent_problem(value) == TEAM_AGENT_RULE


@settings(max_examples=200)
@given(st.text(alphabet=TEAM_CHARS + " é\n/:", max_size=70))
def test_team_agent_property(value):
    expected = 1 <= len(value) <= 64 and not value.startswith(".") and all(ch in TEAM_CHARS for ch in value)
    assert (team_or_agent_problem(value) is None) == expected


# ---------------------------------------------------------------- user_id / session_id / task_id


@pytest.mark.parametrize(
    "value",
    ["u", "x" * MAX_ID_CHARS, "😀" * MAX_ID_CHARS, "用户 1", " padded ", "a\u200bb", "\ufeff", "\u00a0", "\u3000"],
)
def test_free_id_accepts(value):
    assert free_id_problem(value) is None


def test_free_id_length_counts_code_points_not_bytes():
    assert free_id_problem("😀" * MAX_ID_CHARS) is None  # 1,024 UTF-8 bytes
    assert free_id_problem("😀" * (MAX_ID_CHARS + 1)) == "must be 1-256 characters"
    assert free_id_problem("x" * (MAX_ID_CHARS + 1)) == "must be 1-256 characters"
    assert free_id_problem("") == "must be 1-256 characters"


@pytest.mark.parametrize("control", CONTROL, ids=lambda c: f"U+{ord(c):04X}")
def test_free_id_rejects_every_control_character(control):
    assert unicodedata.category(control) == "Cc"
    assert has_control(control)
    assert free_id_problem(f"a{control}b") == "must not contain control characters"


def test_has_control_ignores_format_and_private_use():
    assert not has_control("a\u200b\u200e\ufeff\ue000\U0010fffd")


@settings(max_examples=150)
@given(st.text(alphabet=st.characters(blacklist_categories=("Cc", "Cs")), min_size=1, max_size=MAX_ID_CHARS))
def test_free_id_property(value):
    assert free_id_problem(value) is None


# ---------------------------------------------------------------- blanks


def test_white_space_table_is_unicode_white_space():
    assert WHITE_SPACE == UNICODE_WHITE_SPACE


def test_white_space_differs_from_isspace_only_by_information_separators():
    isspace = {chr(c) for c in range(sys.maxunicode + 1) if chr(c).isspace()}
    assert isspace - WHITE_SPACE == {"\x1c", "\x1d", "\x1e", "\x1f"}
    assert WHITE_SPACE - isspace == set()


@pytest.mark.parametrize("text", ["", " ", "   ", "\t\r\n", "\u3000", "\u00a0\u2028\u2029", "\x85", "\u205f"])
def test_is_blank(text):
    assert is_blank(text)


@pytest.mark.parametrize("text", ["\x1f", "\x1c", " \x1e ", "\u200b", "\ufeff", "\u180e", "a", " a "])
def test_is_not_blank(text):
    assert not is_blank(text)


@pytest.mark.parametrize(
    ("raw", "trimmed"),
    [
        ("  a b  ", "a b"),
        ("\u3000a\u3000", "a"),
        ("\t\n a\n", "a"),
        ("\x1fa\x1f", "\x1fa\x1f"),  # information separators are controls, not blanks
        ("\u200ba\u200b", "\u200ba\u200b"),
        ("\u00a0\u2000x y\u205f", "x y"),
        ("   ", ""),
    ],
)
def test_trim(raw, trimmed):
    assert trim(raw) == trimmed


@settings(max_examples=150)
@given(st.text(alphabet=st.sampled_from([*sorted(WHITE_SPACE), "a", "\x1f", "\u200b", "中"]), max_size=20))
def test_trim_strips_exactly_white_space(text):
    result = trim(text)
    assert result in text
    assert result == "" or (result[0] not in WHITE_SPACE and result[-1] not in WHITE_SPACE)
    start = text.find(result) if result else len(text)
    assert all(ch in WHITE_SPACE for ch in text[:start])
    assert all(ch in WHITE_SPACE for ch in text[start + len(result) :])
    assert is_blank(text) == (result == "")


# ---------------------------------------------------------------- clean_ids


def test_clean_ids_trims_drops_blanks_dedups_in_first_seen_order():
    raw = [" b ", "a", "", "   ", "\u3000", "b", "c\u3000", "a ", "\x1f", "c"]
    assert clean_ids(raw) == ["b", "a", "c", "\x1f"]
    assert clean_ids(None) == []
    assert clean_ids([]) == []


@settings(max_examples=150)
@given(st.lists(st.text(alphabet=" \u3000\tabc\x1f", max_size=4), max_size=12))
def test_clean_ids_property(raw):
    result = clean_ids(raw)
    expected: list[str] = []
    for value in raw:
        value = trim(value)
        if value and value not in expected:
            expected.append(value)
    assert result == expected
    assert len(set(result)) == len(result)
    assert all(v and not is_blank(v) and trim(v) == v for v in result)


# ---------------------------------------------------------------- paths


@pytest.mark.parametrize(
    ("path", "kind"),
    [
        ("a.md", "file"),
        ("dir/sub/file.md", "file"),
        ("a..b.md", "file"),
        ("名前/ファイル.md", "file"),
        ("", "prefix"),
        ("dir", "prefix"),
        ("dir/", "prefix"),
        ("dir/sub/", "prefix"),
        ("dir/x.md", "prefix"),
        ("a.md", "rm"),
        ("dir/", "rm"),
        ("dir/sub/", "rm"),
        ("a b/c d.md", "file"),
    ],
)
def test_path_accepts(path, kind):
    assert path_problem(path, kind=kind) is None


@pytest.mark.parametrize(
    ("path", "kind", "problem"),
    [
        ("", "file", "must not be empty"),
        ("", "rm", "must not be empty"),
        ("a", "file", "must end in .md"),
        ("a.MD", "file", "must end in .md"),
        ("dir/", "file", "must not contain an empty segment"),
        ("a", "rm", "must be a .md file or a folder ending in /"),
        ("/a.md", "file", "must be relative (no leading /)"),
        ("/", "prefix", "must be relative (no leading /)"),
        ("a//b.md", "file", "must not contain an empty segment"),
        ("a//", "prefix", "must not contain an empty segment"),
        ("dir//", "rm", "must not contain an empty segment"),
        ("../a.md", "file", "must not contain . or .. segments"),
        ("a/../b.md", "file", "must not contain . or .. segments"),
        ("./a.md", "file", "must not contain . or .. segments"),
        ("a/./", "prefix", "must not contain . or .. segments"),
        ("..", "prefix", "must not contain . or .. segments"),
        ("../", "rm", "must not contain . or .. segments"),
        (".hidden.md", "file", "segments must not start with ."),
        ("a/.git/", "prefix", "segments must not start with ."),
        ("a\\b.md", "file", "must not contain a backslash"),
        ("a\x1fb.md", "file", "must not contain control characters"),
        ("a\x7f.md", "file", "must not contain control characters"),
        ("a\n.md", "file", "must not contain control characters"),
    ],
)
def test_path_rejects(path, kind, problem):
    assert path_problem(path, kind=kind) == problem


def _boundary(unit: str, tail: str) -> str:
    """A path of exactly 512 UTF-8 bytes made mostly of ``unit`` (multi-byte) characters."""
    body_bytes = MAX_PATH_BYTES - len(tail.encode())
    count, rest = divmod(body_bytes, len(unit.encode()))
    return unit * count + "a" * rest + tail


@pytest.mark.parametrize("unit", ["a", "é", "中", "😀"])
@pytest.mark.parametrize(("kind", "tail"), [("file", ".md"), ("prefix", "/"), ("rm", "/")])
def test_path_limit_is_512_utf8_bytes_exactly(unit, kind, tail):
    path = _boundary(unit, tail)
    assert len(path.encode("utf-8")) == MAX_PATH_BYTES
    assert path_problem(path, kind=kind) is None
    longer = "a" + path
    assert len(longer.encode("utf-8")) == MAX_PATH_BYTES + 1
    assert path_problem(longer, kind=kind) == "must be at most 512 bytes"


def test_path_limit_counts_bytes_not_characters():
    accepted = "中" * 169 + "ab.md"  # 174 characters, 512 bytes
    refused = "中" * 170 + ".md"  # 173 characters, 513 bytes
    assert path_problem(accepted, kind="file") is None
    assert path_problem(refused, kind="file") == "must be at most 512 bytes"
    assert path_problem("😀" * 128 + ".md", kind="file") == "must be at most 512 bytes"  # 131 chars, 515 bytes


SEGMENT_PIECES = st.sampled_from(
    ["a", "b", ".", "..", "", " ", "中", "😀", ".md", "md", "x.md", "\\", "\x1f", "\u3000", "é" * 60]
)


@settings(max_examples=300)
@given(
    st.lists(SEGMENT_PIECES, max_size=6).map(lambda parts: "".join(parts)),
    st.lists(st.sampled_from(["", "/", "//", "./", "../", "a/"]), max_size=4),
    st.sampled_from(["file", "prefix", "rm"]),
)
@example("a/../b.md", [], "file")
@example("a/.//b/", [], "rm")
def test_accepted_paths_are_always_safe(body, joins, kind):
    path = body
    for join in joins:
        path = join + path + join
    if path_problem(path, kind=kind) is not None:
        return
    assert len(path.encode("utf-8")) <= MAX_PATH_BYTES
    if kind == "prefix" and path == "":
        return
    assert path
    assert not path.startswith("/")
    assert "//" not in path
    assert "\\" not in path
    assert not has_control(path)
    folder = kind != "file" and path.endswith("/")
    segments = (path[:-1] if folder else path).split("/")
    assert all(s not in ("", ".", "..") and not s.startswith(".") for s in segments)
    if kind == "file":
        assert path.endswith(".md")
    if kind == "rm":
        assert path.endswith((".md", "/"))


VALID_SEGMENT = st.text(
    alphabet=st.characters(blacklist_categories=("Cc", "Cs"), blacklist_characters="/\\"), min_size=1, max_size=12
).filter(lambda s: not s.startswith("."))


@settings(max_examples=200)
@given(
    st.lists(VALID_SEGMENT, min_size=1, max_size=5),
    st.sampled_from(["..", ".", "", ".x"]),
    st.integers(min_value=0, max_value=5),
)
def test_valid_paths_pass_and_one_bad_segment_fails(segments, bad, at):
    file_path = "/".join(segments) + ".md"
    folder = "/".join(segments) + "/"
    if len(file_path.encode("utf-8")) > MAX_PATH_BYTES:
        return
    assert path_problem(file_path, kind="file") is None
    assert path_problem(file_path, kind="rm") is None
    assert path_problem(folder, kind="prefix") is None
    assert path_problem(folder, kind="rm") is None
    broken = [*segments[:at], bad, *segments[at:]]
    assert path_problem("/".join(broken) + ".md", kind="file") is not None
