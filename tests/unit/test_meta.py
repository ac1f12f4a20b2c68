"""domain/meta.py: the META block that heads every stored scenario file."""

from __future__ import annotations

from hypothesis import example, given, settings
from hypothesis import strategies as st
from memory_hub.domain.meta import END, START, render, split, strip

STAMP = "2026-11-29T10:00:00.000Z"
LATER = "2026-11-29T11:00:00.000Z"
OWN = ("version", "created_at", "updated_at", "summary")


def test_render_layout():
    text = render(
        version=3,
        created_at=STAMP,
        updated_at=LATER,
        summary="a summary",
        previous={"author": "bob", "version": "1", "summary": "old"},
        content="# Title\nbody",
    )
    assert text == (
        "-----META-START-----\n"
        "version: 3\n"
        f"created_at: {STAMP}\n"
        f"updated_at: {LATER}\n"
        "summary: a summary\n"
        "author: bob\n"
        "-----META-END-----\n"
        "\n"
        "# Title\nbody"
    )


def test_render_without_summary_has_no_summary_line():
    text = render(version=1, created_at=STAMP, updated_at=STAMP, summary=None, previous={}, content="x")
    assert "summary" not in text
    assert render(version=1, created_at=STAMP, updated_at=STAMP, summary="", previous={}, content="x") == text


def test_split_reads_keys_in_file_order_and_the_content():
    stored = START + "version: 2\nzeta: 1\nalpha:no-space\nversion: 9\n: nameless\nbare" + END + "\ncontent\n"
    keys, content = split(stored)
    assert list(keys.items()) == [("version", "2"), ("zeta", "1"), ("alpha", "no-space"), ("bare", "")]
    assert content == "content\n"


def test_split_value_keeps_everything_after_the_first_colon_space():
    keys, _ = split(START + "summary: a: b: c\nurl: http://x" + END)
    assert keys == {"summary": "a: b: c", "url": "http://x"}


def test_split_without_a_block_is_all_content():
    for stored in [
        "",
        "plain",
        "\n" + START + "v: 1" + END,
        " -----META-START-----\nv: 1" + END,
        START + "never terminated\n-----META-END-----",
        "-----META-START-----\r\n" + END,
    ]:
        assert split(stored) == ({}, stored)
        assert strip(stored) == stored


def test_empty_block_shares_the_start_newline():
    assert split("-----META-START-----\n-----META-END-----\nrest") == ({}, "rest")
    assert split(START + END + "\nrest") == ({}, "rest")


def test_only_one_newline_after_the_terminator_is_dropped():
    assert strip(START + "v: 1" + END + "body") == "body"
    assert strip(START + "v: 1" + END + "\nbody") == "body"
    assert strip(START + "v: 1" + END + "\n\nbody") == "\nbody"
    assert strip(START + "v: 1" + END + "\n") == ""


def test_strip_removes_only_the_first_block():
    second = START + "v: 2" + END + "\ninner"
    assert strip(START + "v: 1" + END + "\n" + second) == second


# ---------------------------------------------------------------- properties

# META lines: a key is a non-empty line part without ": " (as split reads it); values are one line.
LINE = st.text(alphabet=st.characters(blacklist_characters="\n", blacklist_categories=("Cs",)), max_size=20)
KEY = LINE.filter(lambda k: k != "" and ": " not in k and not k.endswith(":") and ":" not in k[:1])
VALUE = LINE
CONTENT = st.one_of(
    st.text(max_size=200),
    st.lists(st.sampled_from(["\n", "x", START, END, "-----META-END-----", ": "]), max_size=10).map("".join),
)


@settings(max_examples=250)
@given(
    version=st.integers(1, 10**6),
    summary=st.one_of(st.none(), LINE),
    previous=st.dictionaries(st.one_of(KEY, st.sampled_from(OWN)), VALUE, max_size=5),
    content=CONTENT,
)
@example(version=1, summary=None, previous={}, content=START + "v: 1" + END + "\nnested")
@example(version=1, summary=None, previous={}, content="\n\nleading newlines")
def test_render_then_split_round_trip(version, summary, previous, content):
    text = render(
        version=version, created_at=STAMP, updated_at=LATER, summary=summary, previous=previous, content=content
    )
    keys, rest = split(text)
    assert rest == content
    expected = {"version": str(version), "created_at": STAMP, "updated_at": LATER}
    if summary:
        expected["summary"] = summary
    expected.update({k: v for k, v in previous.items() if k not in OWN})
    assert keys == expected
    assert list(keys) == list(expected)


@settings(max_examples=200)
@given(content=CONTENT, summaries=st.lists(st.one_of(st.none(), LINE), min_size=1, max_size=4))
def test_read_modify_write_never_nests_blocks(content, summaries):
    """A client reads the stored file (block included) and writes it back: one block, same content."""
    stored = render(version=1, created_at=STAMP, updated_at=STAMP, summary=None, previous={}, content=content)
    for round_, summary in enumerate(summaries, start=2):
        previous, _ = split(stored)
        written = stored  # what the client sends back: the whole file it read
        stored = render(
            version=round_,
            created_at=STAMP,
            updated_at=LATER,
            summary=summary,
            previous=previous,
            content=strip(written),
        )
        assert split(stored)[1] == content
        assert strip(stored) == content
    assert stored == render(
        version=len(summaries) + 1,
        created_at=STAMP,
        updated_at=LATER,
        summary=summaries[-1],
        previous=split(stored)[0],
        content=content,
    )


@settings(max_examples=250)
@given(block=st.text(max_size=40), rest=st.text(max_size=40))
@example(block="", rest="\n\nx")
@example(block="v: 1", rest=END + "\ny")
def test_strip_stops_at_the_first_terminator_plus_one_newline(block, rest):
    stored = START + block + END + rest
    terminator = stored.find(END, len(START) - 1)
    if terminator != len(START) + len(block):
        return  # the block text itself holds a terminator; the next test covers that
    expected = rest[1:] if rest.startswith("\n") else rest
    assert strip(stored) == expected


@settings(max_examples=150)
@given(before=st.text(alphabet="ab\n:", max_size=10), after=st.text(max_size=20))
def test_strip_never_reaches_past_the_first_terminator(before, after):
    stored = START + before + END + after
    first = stored.find(END, len(START) - 1)
    stripped = strip(stored)
    tail = stored[first + len(END) :]
    assert stripped == (tail[1:] if tail.startswith("\n") else tail)
    assert stored.endswith(stripped)
