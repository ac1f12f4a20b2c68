"""Field rules are stated once (``domain/fields.py``, ``domain/rules.py``): the console, the CLI and
the MCP server read them from there and write none of their numbers, patterns or the memory-id
formula again (the console gets them from ``/console/rules.js``, which the API renders)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from memory_hub.domain import fields, rules
from memory_hub.domain.scope import MEMORY_PREFIX

ROOT = Path(__file__).resolve().parents[2]
CONSOLE = ROOT / "layers" / "core" / "python" / "memory_hub" / "edge" / "static" / "console"
TOOLS = ROOT / "infra" / "tools" / "memory_hub_tools"
READERS = sorted(
    [*CONSOLE.glob("*.js"), CONSOLE / "index.html", *(TOOLS / "cli").glob("*.py"), TOOLS / "mcp_server.py"]
)
# The limits long enough to be unmistakable (20 tags and 64-character tags look like any other number).
LIMITS = (
    fields.MESSAGE_CHARS,
    fields.BACKGROUND_CHARS,
    fields.METADATA_BYTES,
    fields.SUMMARY_CHARS,
    fields.TEXT_CHARS,
    rules.MAX_ID_CHARS,
    rules.MAX_PATH_BYTES,
)


def _spellings(number: int) -> set[str]:
    return {str(number), f"{number:,}", f"{number:_}"}


def _written(spelled: str, text: str) -> bool:
    """``spelled`` stands in ``text`` as a number of its own (not a part of a longer one)."""
    return re.search(rf"(?<![\w.,]){re.escape(spelled)}(?![\w,])", text) is not None


@pytest.mark.parametrize("path", READERS, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_reader_of_the_rules_writes_a_limit_again(path):
    text = path.read_text(encoding="utf-8")
    for limit in LIMITS:
        for spelled in _spellings(limit):
            assert not _written(spelled, text), (path.name, spelled)


@pytest.mark.parametrize("path", sorted(CONSOLE.iterdir()), ids=lambda p: p.name)
def test_the_console_writes_no_pattern_nor_the_memory_id_formula(path):
    text = path.read_text(encoding="utf-8")
    for pattern in (fields.TEAM_PATTERN, fields.TYPE_PATTERN, fields.NO_CONTROL_PATTERN, fields.TIME_PATTERN):
        assert pattern not in text and pattern.strip("^$") not in text, (path.name, pattern)
    assert MEMORY_PREFIX not in text, path.name


def test_the_check_would_catch_a_repeated_limit():
    """The test above is live: the numbers it looks for are the rules' own and it finds them."""
    assert fields.MESSAGE_CHARS in LIMITS
    sample = f"content (1-{fields.MESSAGE_CHARS} chars), summary up to {fields.SUMMARY_CHARS:,}"
    found = {spelled for limit in LIMITS for spelled in _spellings(limit) if _written(spelled, sample)}
    assert found == {str(fields.MESSAGE_CHARS), f"{fields.SUMMARY_CHARS:,}"}
