"""domain/transfer/profile.stored_scene: the META block of a scene file an import stores."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from memory_hub.clock import format_ms
from memory_hub.domain.meta import END, START, malformed, split
from memory_hub.domain.transfer import tree
from memory_hub.domain.transfer.profile import stored_scene

MS_2000, MS_2100 = 946_684_800_000, 4_102_444_800_000


def block(*lines: str, content: str = "body\n") -> str:
    return START + "\n".join(lines) + END + "\n" + content


def test_our_times_without_a_version_line_are_kept_at_version_1():
    keys, content = split(stored_scene(block("created_at: 2020-01-01T00:00:00.000Z", "foo: bar")))
    assert keys == {
        "version": "1",
        "created_at": "2020-01-01T00:00:00.000Z",
        "updated_at": "2020-01-01T00:00:00.000Z",
        "foo": "bar",
    }
    assert content == "body\n"


def test_an_update_time_alone_is_the_creation_time_too():
    keys, _ = split(stored_scene(block("updated_at: 2021-06-01T12:00:00+02:00")))
    assert (keys["created_at"], keys["updated_at"]) == ("2021-06-01T10:00:00.000Z", "2021-06-01T10:00:00.000Z")


@pytest.mark.parametrize(
    "line",
    [
        "created_at: yesterday",
        "created_at: 2026-01-01",
        "created_at: 2026-01-01T00:00:00",
        "created_at: 1767225600000",
        "updated_at: yesterday",
    ],
)
def test_a_time_of_ours_that_cannot_be_read_is_refused_with_or_without_a_version(line):
    for lines in ((line,), ("version: 2", line)):
        with pytest.raises(ValueError, match=r"^META (created|updated)_at must be an RFC 3339 time$"):
            stored_scene(block(*lines))


times = st.integers(MS_2000, MS_2100).map(format_ms)
others = st.dictionaries(
    st.sampled_from(["author", "heat", "created", "topic"]), st.from_regex(r"[a-z0-9]{1,12}", fullmatch=True)
)


@given(created=times, updated=times, other=others, versioned=st.booleans())
def test_times_and_other_keys_survive_and_a_second_pass_changes_nothing(created, updated, other, versioned):
    lines = (["version: 7"] if versioned else []) + [f"created_at: {created}", f"updated_at: {updated}"]
    lines += [f"{k}: {v}" for k, v in other.items()]
    stored = stored_scene(block(*lines))
    keys, content = split(stored)
    assert keys == {"version": "7" if versioned else "1", "created_at": created, "updated_at": updated, **other}
    assert content == "body\n"
    assert stored_scene(stored) == stored


@pytest.mark.parametrize(
    "lines,problem",
    [
        (["version: 3", "no colon line"], (3, "META line is not `key: value`")),
        (["version: 2", "created: 2020-01-01T00:00:00Z", "version: 5"], (4, "META key version given twice")),
        ([": no key"], (2, "META line is not `key: value`")),
    ],
)
def test_a_meta_line_that_would_be_guessed_at_is_refused_with_its_line(lines, problem):
    """An imported scene's META block is kept, not rewritten: a line that is not ``key: value``, or a
    key given twice, is the import's problem at its line (the block starts on line 1)."""
    assert malformed(block(*lines)) == problem
    with pytest.raises(tree.Malformed) as refused:
        tree.read({"scene_blocks/a.md": block(*lines).encode()}, tree.Selection())
    assert refused.value.problems == [f"scene_blocks/a.md:{problem[0]}: {problem[1]}"]


def test_a_clean_block_a_blank_line_and_no_block_are_fine():
    assert malformed(block("version: 1", "", "foo: bar")) is None
    assert malformed("no block at all\n") is None


def test_malformed_reads_a_line_as_split_does():
    """``a:b: c`` is the key ``a:b`` to ``split`` (``: `` first): beside ``a: d`` it is no repeat."""
    text = block("a:b: c", "a: d")
    assert malformed(text) is None and split(text)[0] == {"a:b": "c", "a": "d"}
