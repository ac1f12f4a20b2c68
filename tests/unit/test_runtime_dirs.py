"""infra/local functions.runtime_dir: each stack's runtime-site folder is marked with its process,
and a start removes the folders of stacks that are gone (a killed stack cannot remove its own)."""

from __future__ import annotations

import os
import subprocess
import sys

from memory_hub_local.functions import RUNTIME_PREFIX, runtime_dir


def _gone_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def _folder(parent, name: str, owner: str | None):
    folder = parent / f"{RUNTIME_PREFIX}{name}"
    (folder / "site").mkdir(parents=True)
    if owner is not None:
        (folder / "owner").write_text(owner)
    return folder


def test_a_start_removes_the_folders_of_stacks_that_are_gone_and_nothing_else(tmp_path):
    gone = _folder(tmp_path, "gone", str(_gone_pid()))
    living = _folder(tmp_path, "living", str(os.getppid()))
    mine = _folder(tmp_path, "mine", str(os.getpid()))
    unmarked = _folder(tmp_path, "unmarked", None)
    garbled = _folder(tmp_path, "garbled", "not a pid")
    other = tmp_path / "something-else"
    other.mkdir()

    made = runtime_dir(tmp_path)

    assert not gone.exists()
    assert all(f.exists() for f in (living, mine, unmarked, garbled, other))
    assert made.name.startswith(RUNTIME_PREFIX)
    assert (made / "owner").read_text() == str(os.getpid())
