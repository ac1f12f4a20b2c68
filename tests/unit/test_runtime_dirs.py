"""infra/local functions.runtime_dir: each stack's runtime-site folder is marked with its process,
and a start removes the folders of stacks that are gone (a killed stack cannot remove its own)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

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


def test_an_environment_closes_its_pipes_once_however_often_it_is_closed(monkeypatch):
    """An invocation whose runtime exited closes its environment, and the pool closes it again as
    it takes it back: the second close must not close the numbers the pipes had (by then they may
    be another environment's pipes)."""
    from memory_hub_local import functions

    closed: list[int] = []
    real_close = os.close

    def recording(fd: int) -> None:
        closed.append(fd)
        real_close(fd)

    environment = functions.Environment.__new__(functions.Environment)
    read_end, write_end = os.pipe()
    environment._to_child, environment._from_child = write_end, read_end
    environment._open_fds = (write_end, read_end)
    environment._closing = threading.Lock()
    environment.process = subprocess.Popen([sys.executable, "-c", "pass"])
    monkeypatch.setattr(functions.os, "close", recording)
    environment.close()
    reused_read, reused_write = os.pipe()  # the numbers go to someone else
    environment.close()
    assert sorted(closed) == sorted([write_end, read_end])
    os.write(reused_write, b"x")  # still open: not closed by the second close
    assert os.read(reused_read, 1) == b"x"
    real_close(reused_read)
    real_close(reused_write)
