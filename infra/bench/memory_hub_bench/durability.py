"""Durability: the writes the local stack acknowledged, after a SIGKILL of the whole stack.

A stack of its own is started as ``make run`` starts one (``python -m memory_hub_local`` on a fresh
data directory, so every change goes to the journal and is on disk before it is answered; no test
hooks), in a process group of its own, its output in a file. Two rounds:

1. ``crash``: N ``conversation/add`` of one message each and N ``scenario/write`` of distinct files,
   each answered 200 (code 0) and recorded; right after the last answer SIGKILL goes to the whole
   group (gateway, emulated AWS side, functions). A stack is started again on the same directory,
   timed to its banner and to its first answer, and what it holds is counted: the acknowledged
   message ids among those ``conversation/query`` lists, the files ``scenario/read`` returns with
   the content written (and their version: 1 unless applied twice), and all the scope holds
   (``conversation/count``, ``scenario/ls``'s total).
2. ``crash during compaction``: on that restarted stack, a compaction is asked for as an operator
   asks for one (``POST /_local/snapshot`` on the AWS endpoint, signed with the operator's
   credentials the banner prints: the journal's segment is switched and a child process replays
   the closed ones onto the last snapshot and writes a new one). Once
   the child runs, writes are sent while it runs (up to N of each, at least one), and SIGKILL goes
   to the group right after the last answer. When the child ended before that, the compaction is
   let finish and another one asked for, with half as many writes as the last one outlived (three
   tries at most); where the compaction was at the kill is reported.
   A third start counts this round's writes and the first round's again, then stops as Ctrl-C does.

After each kill the journal's size on disk is read (segments, snapshot). Every process of every
stack started here is gone when this returns, whatever happened (SIGKILL to its group, then a wait
until no member is alive). Linux only (``/proc``, process groups)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memory_hub_local.aws import journal, state
from memory_hub_tools.transport import MemoryHubError, Transport

from .cases import Scope
from .client import BenchError, Operator, Target
from .memory import Process, command_line, processes

START_S = 180.0  # a start (replay included) that takes longer fails the section
ANSWER_S = 120.0  # likewise the first answer after the banner
GONE_S = 30.0  # how long a killed group's processes may take to go
POLL_S = 0.005
ADD = "conversation/add (1 message)"
WRITE = "scenario/write"
COMPACTION_CHILD = b"--compact-upto"  # in the compaction child's arguments (memory_hub_local.aws)
BANNER = {
    "api_url": re.compile(r"^\s+API\s+(http://\S+)", re.MULTILINE),
    "aws_url": re.compile(r"^\s+AWS endpoint\s+(http://\S+)", re.MULTILINE),
    "admin_key": re.compile(r"^\s+admin key\s+(\S+)", re.MULTILINE),
}
REPLAYED = re.compile(r"journal: replayed (\d+) changes")


# ---------------------------------------------------------------- what is counted (pure)


@dataclass
class Tally:
    """One kind of write in one round: how many were acknowledged, how many of those a restarted
    stack has, and how many the scope holds in all (acknowledged or not)."""

    what: str
    acknowledged: int
    present: int
    held: int
    applied_twice: int | None = None  # files read back at a version other than 1 (None: not known)

    @property
    def lost(self) -> int:
        return self.acknowledged - self.present


def tally(
    what: str, acknowledged: Collection[str], found: Collection[str], held: int, applied_twice: int | None = None
) -> Tally:
    """``acknowledged``: the ids (or paths) answered 200; ``found``: those a restarted stack has
    (anything else in it is not counted as present)."""
    wanted = set(acknowledged)
    return Tally(what, len(wanted), len(wanted & set(found)), held, applied_twice)


@dataclass
class Disk:
    """The data directory after a kill: journal segments, their bytes, the snapshot's bytes."""

    segments: int = 0
    journal_bytes: int = 0
    snapshot_bytes: int = 0

    @classmethod
    def read(cls, directory: Path) -> Disk:
        found = cls()
        for path in directory.iterdir():
            if journal.SEGMENT.match(path.name):
                found.segments += 1
                found.journal_bytes += path.stat().st_size
            elif path.name == state.SNAPSHOT:
                found.snapshot_bytes = path.stat().st_size
        return found


@dataclass
class Round:
    """A round: what was counted after its kill and restart, and how the kill and restart went."""

    name: str
    tallies: list[Tally]
    kill_ms: float  # the SIGKILL went this long after the last answer
    disk: Disk
    replayed: int  # changes the restart replayed from the journal
    banner_s: float  # from the restart's launch to its banner
    serving_s: float  # from the restart's launch to its first answer (200)
    compaction: str = ""  # where a compaction was at the kill, and how many were asked for (the second round)

    @property
    def lost(self) -> int:
        return sum(t.lost for t in self.tallies)

    def result(self) -> dict[str, Any]:
        """For bench-results.json."""
        return {
            "round": self.name,
            "writes": [
                {
                    "what": t.what,
                    "acknowledged": t.acknowledged,
                    "present": t.present,
                    "lost": t.lost,
                    "held": t.held,
                    "applied_twice": t.applied_twice,
                }
                for t in self.tallies
            ],
            "lost": self.lost,
            "kill_ms_after_last_answer": round(self.kill_ms, 2),
            "journal_segments": self.disk.segments,
            "journal_bytes": self.disk.journal_bytes,
            "snapshot_bytes": self.disk.snapshot_bytes,
            "replayed_changes": self.replayed,
            "restart_banner_s": round(self.banner_s, 2),
            "restart_first_answer_s": round(self.serving_s, 2),
            "compaction_at_kill": self.compaction or None,
        }


def table(rounds: list[Round]) -> list[str]:
    """The section's Markdown for these rounds (as ``lines`` writes their results)."""
    return lines([r.result() for r in rounds])


def lines(rounds: list[dict[str, Any]]) -> list[str]:
    """The section's Markdown from its rounds' results: what was kept, then how each kill and
    restart went."""
    out = [
        "| round | writes | acknowledged | present after restart | lost | the state holds | applied twice |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for r in rounds:
        for t in r["writes"]:
            twice = "–" if t["applied_twice"] is None else str(t["applied_twice"])
            out.append(
                f"| {r['round']} | {t['what']} | {t['acknowledged']} | {t['present']} | {t['lost']} | {t['held']} "
                f"| {twice} |"
            )
    out += [
        "",
        "| round | SIGKILL after the last answer ms | journal on disk KiB (segments) | snapshot KiB | "
        "changes replayed | restart to banner s | restart to first 200 s |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rounds:
        out.append(
            f"| {r['round']} | {r['kill_ms_after_last_answer']:.2f} | {r['journal_bytes'] / 1024:.0f} "
            f"({r['journal_segments']}) | {r['snapshot_bytes'] / 1024:.1f} | {r['replayed_changes']} | "
            f"{r['restart_banner_s']:.1f} | {r['restart_first_answer_s']:.1f} |"
        )
    out += [f"\n{r['round']}: {r['compaction_at_kill']}." for r in rounds if r["compaction_at_kill"]]
    return out


def render(result: dict[str, Any], say: Callable[[str], None]) -> None:
    """The section's tables from its results (``Durability.result``'s)."""
    say("\n### Durability: acknowledged writes after a SIGKILL of the whole stack (as `make run` starts it)\n")
    for line in lines(result["rounds"]):
        say(line)
    if result.get("leftovers"):
        say(f"\nProcesses of the stacks still alive at the end: {result['leftovers']}")


def banner(output: str) -> dict[str, str] | None:
    """The API URL, the AWS endpoint and the admin key, once the banner is whole (the blank line
    after it printed); None before."""
    key = BANNER["admin_key"].search(output)
    if key is None or "\n\n" not in output[key.end() :]:
        return None
    found = {name: m.group(1) for name, pattern in BANNER.items() if (m := pattern.search(output))}
    return found if len(found) == len(BANNER) else None


EXPORTED = re.compile(r"^\s+export (AWS_[A-Z_]+)=(\S+)", re.MULTILINE)


def exported(output: str) -> dict[str, str]:
    """The AWS environment a banner tells the operator to export (the operator's credentials)."""
    return {m.group(1): m.group(2) for m in EXPORTED.finditer(output)}


def replayed(output: str) -> int:
    """The changes a start replayed from the journal, as its output says (0: none said)."""
    return sum(int(m.group(1)) for m in REPLAYED.finditer(output))


# ---------------------------------------------------------------- a stack in a process group of its own


@dataclass
class Launched:
    """A local stack started as ``make run`` starts one, the leader of a process group of its own
    (its id is the leader's pid): the gateway, and below it the emulated AWS side (and its
    compaction child) and the functions."""

    process: subprocess.Popen[bytes]
    output: Path
    began: float
    api_url: str = ""
    aws_url: str = ""
    admin_key: str = ""
    banner_s: float = 0.0

    def text(self) -> str:
        return self.output.read_text(encoding="utf-8", errors="replace")

    def members(self) -> list[int]:
        """The group's processes still alive (a zombie is dead, only not reaped yet)."""
        return [p.pid for p in processes() if p.group == self.process.pid and p.state != "Z"]

    def kill(self) -> float:
        """SIGKILL to the whole group, as in a crash; returns when none of it is alive (the time
        the signal went, perf_counter)."""
        sent = time.perf_counter()
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.process.wait()
        deadline = time.monotonic() + GONE_S
        while self.members() and time.monotonic() < deadline:
            time.sleep(0.02)
        return sent

    def stop(self) -> None:
        """SIGTERM to the group (as Ctrl-C stops ``make run``), then SIGKILL to what is left."""
        try:
            os.killpg(self.process.pid, signal.SIGTERM)
            self.process.wait(timeout=120)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            pass
        self.kill()

    def target(self) -> Target:
        return Target("memory-hub", self.api_url, self.admin_key)

    def first_answer(self, target: Target, scope: Scope) -> float:
        """Seconds from the launch to the first 200 (a count in ``scope``)."""
        deadline = time.monotonic() + ANSWER_S
        while True:
            try:
                target.post("/v3/conversation/count", scope.body())
                return time.perf_counter() - self.began
            except (BenchError, MemoryHubError):
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)


def launch(data: Path, output: Path) -> Launched:
    """Start a stack on ``data`` (free ports) and wait for its banner; a stack that exits or prints
    no banner in time is killed and fails the section, its output said."""
    from memory_hub_local.stack import held_port

    command = [sys.executable, "-m", "memory_hub_local", "--data-dir", str(data)]
    for flag in ("--port", "--lambda-port", "--aws-port"):
        command += [flag, str(held_port())]
    environment = {k: v for k, v in os.environ.items() if not k.startswith("MEMORY_HUB_TEST_")}
    with open(output, "wb") as out:
        began = time.perf_counter()
        process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=environment,
            start_new_session=True,
        )
    launched = Launched(process, output, began)
    try:
        deadline = time.monotonic() + START_S
        while (found := banner(launched.text())) is None:
            if process.poll() is not None or time.monotonic() > deadline:
                state = f"exited (code {process.returncode})" if process.returncode is not None else "printed no banner"
                raise BenchError(f"durability: the stack {state}:\n{launched.text()[-3000:]}")
            time.sleep(POLL_S)
    except BaseException:
        launched.kill()
        raise
    launched.banner_s = time.perf_counter() - began
    launched.api_url, launched.aws_url, launched.admin_key = found["api_url"], found["aws_url"], found["admin_key"]
    return launched


@contextmanager
def running(data: Path, output: Path, leftovers: list[int]) -> Iterator[Launched]:
    """A stack for the ``with`` block, killed at its end whatever happened (a no-op when it was
    killed or stopped already); its processes still alive then go to ``leftovers``."""
    launched = launch(data, output)
    try:
        yield launched
    finally:
        launched.kill()
        leftovers += launched.members()


# ---------------------------------------------------------------- writes and counts


@dataclass
class Written:
    """What one round sent in its own scope and was answered 200: message ids and files."""

    tag: str
    scope: Scope = field(init=False)
    messages: list[str] = field(default_factory=list)
    files: dict[str, str] = field(default_factory=dict)  # path -> content
    last_answer: float = 0.0  # perf_counter

    def __post_init__(self) -> None:
        self.scope = Scope.fresh("durable")

    def write(self, target: Target) -> None:
        """One conversation/add of one message and one scenario/write of a new file."""
        i = len(self.files)
        message = {"role": "user", "content": f"durability {self.tag}: message {i}"}
        _, added = target.post("/v3/conversation/add", self.scope.body(session_id=self.tag, messages=[message]))
        self.messages += added["accepted_ids"]
        path, content = f"durability/{self.tag}/{i}.md", f"# Durability\n{self.tag}: file {i}"
        target.post("/v3/scenario/write", self.scope.body(path=path, content=content))
        self.files[path] = content
        self.last_answer = time.perf_counter()


def count(target: Target, written: Written, what: str = "") -> list[Tally]:
    """What a restarted stack has of ``written``, and what its scope holds in all."""
    s = written.scope
    stored: set[str] = set()
    offset = 0
    while True:
        _, page = target.post("/v3/conversation/query", s.body(limit=100, offset=offset))
        stored |= {m["id"] for m in page["messages"]}
        offset += len(page["messages"])
        if not page["messages"] or offset >= page["total"]:
            break
    _, messages = target.post("/v3/conversation/count", s.body())
    present, twice = [], 0
    for path, content in written.files.items():
        _, read = target.post("/v3/scenario/read", s.body(path=path))
        if read["content"] is not None and read["content"].endswith(content):
            present.append(path)
            twice += int(read["version"] != 1)
    _, files = target.post("/v3/scenario/ls", s.body(limit=1))
    return [
        tally(ADD + what, written.messages, stored, messages["total"]),
        tally(WRITE + what, written.files, present, files["total"], twice),
    ]


# ---------------------------------------------------------------- the compaction an operator asks for


class Compaction:
    """``POST /_local/snapshot`` on the AWS endpoint, in a thread (it answers when the compaction
    is done), and its child process, once seen."""

    def __init__(self, launched: Launched, data: Path) -> None:
        self.launched, self.data = launched, data
        self.answer: Any = None
        self.child = 0
        self._snapshot = _identity(data / state.SNAPSHOT)
        self._thread = threading.Thread(target=self._ask, daemon=True, name="compaction")
        self._thread.start()

    def _ask(self) -> None:
        try:
            operator = Operator.of(exported(self.launched.text()))
            reply = operator.send(Transport(self.launched.aws_url, timeout=600), "POST", "/_local/snapshot", b"{}")
            self.answer = reply.body
        except MemoryHubError as exc:  # the kill cut it short
            self.answer = f"no answer ({exc})"
        except KeyError as exc:
            self.answer = f"not asked: the banner printed no {exc} to sign with"

    def wait_for_child(self, timeout: float = 60.0) -> bool:
        """True once the compaction child runs; False when the compaction answered first."""
        deadline = time.monotonic() + timeout
        while self._thread.is_alive() and time.monotonic() < deadline:
            for pid in self.launched.members():
                if COMPACTION_CHILD in command_line(pid):
                    self.child = pid
                    return True
            time.sleep(POLL_S)
        return False

    def child_alive(self) -> bool:
        if not self.child:
            return False
        try:
            return Process.parse(self.child, Path(f"/proc/{self.child}/stat").read_text()).state != "Z"
        except OSError:
            return False

    def where(self) -> str:
        """Where the compaction is now (called right before the kill)."""
        if not self.child_alive():
            return "after its child ended"
        if _identity(self.data / state.SNAPSHOT) != self._snapshot:
            return "while its child ran, the new snapshot written"
        if any(self.data.glob(".state-*.tmp")):
            return "while its child ran, writing the new snapshot"
        return "while its child ran, before it wrote the new snapshot"

    def join(self) -> None:
        self._thread.join(timeout=30)


def _identity(path: Path) -> tuple[int, int]:
    """A file's inode and modification time ((0, 0) when missing): a snapshot renamed over the
    old one has another."""
    try:
        stat = path.stat()
    except OSError:
        return 0, 0
    return stat.st_ino, stat.st_mtime_ns


# ---------------------------------------------------------------- the rounds


@dataclass
class Durability:
    n: int
    rounds: list[Round]
    leftovers: list[int]  # processes of the stacks still alive at the end (should be none)

    def result(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "rounds": [r.result() for r in self.rounds],
            "lost": sum(r.lost for r in self.rounds),
            "leftover_processes": len(self.leftovers),
            "leftovers": self.leftovers,
        }


def restarted(
    name: str, killed: tuple[float, Disk], launched: Launched, counted: Callable[[Target], list[Tally]], where: str = ""
) -> Round:
    """The round ``killed`` (how long after the last answer, the disk then) ended, counted on
    the stack started after it."""
    target = launched.target()
    serving = launched.first_answer(target, Scope.fresh("probe"))
    return Round(
        name, counted(target), killed[0], killed[1], replayed(launched.text()), launched.banner_s, serving, where
    )


def crash(launched: Launched, written: Written, data: Path) -> tuple[float, Disk]:
    """SIGKILL to the whole stack; how long after the last answer it went, and the disk then."""
    sent = launched.kill()
    return (sent - written.last_answer) * 1000, Disk.read(data)


def during_compaction(
    launched: Launched, data: Path, written: Written, n: int, progress: Callable[[str], None]
) -> tuple[tuple[float, Disk], str]:
    """Writes while a compaction's child runs, then SIGKILL right after the last answer; the
    kill (as ``crash`` says it) and where the compaction was then."""
    target = launched.target()
    budget = n
    for asked in range(1, 4):
        compaction = Compaction(launched, data)
        if not compaction.wait_for_child():
            progress(f"durability: the compaction ended before its child was seen ({compaction.answer})")
        sent = 0
        while sent < budget:
            written.write(target)
            sent += 1
            if not compaction.child_alive():
                break
        if compaction.child_alive() or asked == 3:
            break
        compaction.join()  # it ended before the last answer: let it finish, ask again with fewer writes
        progress(f"durability: the compaction outlived {sent - 1} pairs of writes; asking for another")
        budget = max(1, (sent - 1) // 2)
    where = compaction.where()
    killed = crash(launched, written, data)
    compaction.join()
    return killed, f"the SIGKILL landed {where} (compaction {asked} asked for)"


def measure(n: int, progress: Callable[[str], None]) -> Durability:
    leftovers: list[int] = []
    rounds: list[Round] = []
    with tempfile.TemporaryDirectory(prefix="memory-hub-bench-durability-") as scratch:
        data, logs = Path(scratch) / "state", Path(scratch)
        first_writes, during = Written("crash"), Written("compaction")
        with running(data, logs / "start-1.log", leftovers) as first:
            target = first.target()
            for _ in range(n):
                first_writes.write(target)
            killed = crash(first, first_writes, data)
        progress(f"durability: {n} + {n} writes acknowledged, SIGKILL {killed[0]:.1f} ms after the last; restarting")
        with running(data, logs / "start-2.log", leftovers) as second:
            rounds.append(restarted("crash", killed, second, lambda t: count(t, first_writes)))
            progress("durability: a compaction asked for; writes while it runs, then SIGKILL")
            killed, where = during_compaction(second, data, during, n, progress)
        progress(f"durability: {where}; restarting")
        with running(data, logs / "start-3.log", leftovers) as third:

            def both(target: Target) -> list[Tally]:
                return count(target, during) + count(target, first_writes, ", round 1's again")

            rounds.append(restarted("crash during compaction", killed, third, both, where))
            third.stop()
    return Durability(n, rounds, leftovers)
