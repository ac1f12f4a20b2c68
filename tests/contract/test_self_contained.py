"""The repository explains itself: no tracked text file points at a document that is not in it
(section signs of an outside contract, or notes kept beside the repository). A rule is stated
where it is enforced, or in docs/RULES.md and docs/API.md."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# Written with escapes so that this file does not match itself.
OUTSIDE = re.compile(r"\u00a7[0-9]|CONTRACT\.md|\.\./shared/|STYLE\.md|DESIGN\.md")


def _tracked() -> list[str]:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True)
    return [p for p in listed.stdout.decode().split("\0") if p and "egg-info/" not in p]


def _text(path: Path) -> str | None:
    """The file's text, or None for a binary file (or one the working tree lacks)."""
    try:
        raw = path.read_bytes()
    except (FileNotFoundError, IsADirectoryError):
        return None
    if b"\0" in raw[:8192]:
        return None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return None


def test_no_tracked_file_points_outside_the_repository():
    found = []
    for path in _tracked():
        text = _text(ROOT / path)
        if text is None:
            continue
        for number, line in enumerate(text.splitlines(), 1):
            match = OUTSIDE.search(line)
            if match:
                found.append(f"{path}:{number}: {match.group(0)}")
    assert not found, "state the rule in the repository instead:\n" + "\n".join(found)
