"""Resident memory of the local stack as it grows: RSS at start and after N stored messages.

A stack of its own is started as ``make run`` starts one (a data directory, so the journal and its
compactions run; no test hooks), every function warmed once; then LoCoMo turns (``infra/bench/data``)
go in through ``/v3/conversation/add``, one conversation per user, in batches of one session's
consecutive turns. RSS is read from ``/proc/<pid>/status`` (VmRSS) for every process the stack
started, grouped by kind: the emulated AWS side (with a compaction child, when one is running) and
the function processes; their proportional sets (PSS, ``/proc/<pid>/smaps_rollup``) too, since a sum
of RSS counts the pages the processes share (the interpreter, its libraries) once per process. The
process that runs the gateway also runs the bench, so it is reported apart and left out of the
stack's sum. Linux only (``/proc``)."""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from .cases import Scope
from .client import Target
from .datasets import Turn, load_locomo

KINDS = ("emulated AWS", "functions")
BATCH = 100  # turns per conversation/add (one session's consecutive turns)


def _field_kib(path: str, name: str) -> int:
    """One ``Name:  N kB`` line of a /proc file, 0 when the process has gone."""
    try:
        for line in Path(path).read_text().splitlines():
            if line.startswith(name):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def rss_kib(pid: int) -> int:
    """The process's resident set (KiB), 0 when it has gone."""
    return _field_kib(f"/proc/{pid}/status", "VmRSS:")


def pss_kib(pid: int) -> int:
    """The process's proportional set (KiB): its private pages, plus each page it shares with other
    processes divided by how many map it (the interpreter, numpy's and pydantic's libraries are
    mapped by every process of the stack, and RSS counts them in each). 0 when it has gone."""
    return _field_kib(f"/proc/{pid}/smaps_rollup", "Pss:")


@dataclass(frozen=True)
class Process:
    """One line of ``/proc/<pid>/stat``, the fields read here."""

    pid: int
    state: str  # R, S, D, Z (a zombie: dead, not reaped yet), …
    parent: int
    group: int  # the process group

    @classmethod
    def parse(cls, pid: int, stat: str) -> Process:
        state, parent, group = stat.rsplit(")", 1)[1].split()[:3]  # the name, in (), may hold anything
        return cls(pid, state, int(parent), int(group))


def processes() -> list[Process]:
    """Every process on the machine now."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            found.append(Process.parse(int(entry.name), (entry / "stat").read_text()))
        except OSError:
            continue
    return found


def command_line(pid: int) -> bytes:
    """The process's arguments joined by spaces (empty when it has gone)."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
    except OSError:
        return b""


def descendants(root: int) -> set[int]:
    """Every process below ``root`` (children, their children, …)."""
    parents: dict[int, list[int]] = {}
    for process in processes():
        parents.setdefault(process.parent, []).append(process.pid)
    found: set[int] = set()
    todo = [root]
    while todo:
        for child in parents.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def kind_of(pid: int) -> str:
    return "emulated AWS" if b"memory_hub_local.aws" in command_line(pid) else "functions"


@dataclass
class Sample:
    """RSS (MiB) by kind, the number of processes of each, and the gateway's process apart."""

    messages: int
    mib: dict[str, float] = field(default_factory=dict)
    processes: dict[str, int] = field(default_factory=dict)
    gateway_mib: float = 0.0
    pss_mib: dict[str, float] = field(default_factory=dict)  # the same processes' proportional sets
    gateway_pss_mib: float = 0.0

    @property
    def total(self) -> float:
        return sum(self.mib.values())

    @property
    def total_pss(self) -> float:
        return sum(self.pss_mib.values())


def sample(messages: int, before: set[int]) -> Sample:
    """RSS of the processes started since ``before`` was taken (this process's descendants)."""
    found = Sample(messages, {kind: 0.0 for kind in KINDS}, {kind: 0 for kind in KINDS})
    found.pss_mib = {kind: 0.0 for kind in KINDS}
    for pid in sorted(descendants(os.getpid()) - before):
        kib = rss_kib(pid)
        if kib:
            kind = kind_of(pid)
            found.mib[kind] += kib / 1024
            found.pss_mib[kind] += pss_kib(pid) / 1024
            found.processes[kind] += 1
    found.gateway_mib = rss_kib(os.getpid()) / 1024
    found.gateway_pss_mib = pss_kib(os.getpid()) / 1024
    return found


def turns(limit: int) -> list[tuple[Scope, list[Turn]]]:
    """``limit`` LoCoMo turns, by conversation, each conversation one user; past LoCoMo's 5,882
    turns its conversations come again, each time as new users."""
    corpora = [corpus.turns for corpus in load_locomo().corpora if corpus.turns]
    taken: list[tuple[Scope, list[Turn]]] = []
    left = limit
    while left > 0 and corpora:
        conversation = corpora[len(taken) % len(corpora)]
        taken.append((Scope.fresh("mem"), conversation[:left]))
        left -= len(taken[-1][1])
    return taken


def split(
    conversations: list[tuple[Scope, list[Turn]]], first: int
) -> tuple[list[tuple[Scope, list[Turn]]], list[tuple[Scope, list[Turn]]]]:
    """The conversations cut in two: the first ``first`` turns, and the rest (a conversation cut
    in two stays one user)."""
    head: list[tuple[Scope, list[Turn]]] = []
    tail: list[tuple[Scope, list[Turn]]] = []
    for scope, conversation in conversations:
        taken = conversation[: max(first, 0)]
        first -= len(taken)
        if taken:
            head.append((scope, taken))
        if len(taken) < len(conversation):
            tail.append((scope, conversation[len(taken) :]))
    return head, tail


def load(target: Target, conversations: list[tuple[Scope, list[Turn]]], progress: Callable[[str], None]) -> int:
    stored = 0
    for scope, conversation in conversations:
        batch: list[Turn] = []
        for turn in [*conversation, None]:
            if batch and (turn is None or turn.session != batch[0].session or len(batch) == BATCH):
                messages = [{"role": t.role, "content": t.content, "timestamp": t.timestamp} for t in batch]
                target.post("/v3/conversation/add", scope.body(session_id=batch[0].session, messages=messages))
                stored += len(batch)
                batch = []
            if turn is not None:
                batch.append(turn)
        progress(f"memory: {stored} messages stored")
    return stored


def settled(messages: int, before: set[int], timeout_s: float = 300.0) -> Sample:
    """A sample taken when no compaction child runs (it holds a second copy of the account while it
    folds the journal into a snapshot, then exits), or after ``timeout_s`` whatever runs."""
    deadline = time.monotonic() + timeout_s
    found = sample(messages, before)
    while found.processes["emulated AWS"] > 1 and time.monotonic() < deadline:
        time.sleep(1)
        found = sample(messages, before)
    return found


WARM_UP = 200  # messages stored before the warmed sample: every route's first use (imports, buffers) paid


@dataclass
class Growth:
    start: Sample
    warmed: Sample  # after the first WARM_UP messages
    end: Sample
    seconds: float

    def first_use(self, kind: str | None = None) -> float:
        """MiB the first WARM_UP messages added (most of it each process's first use of its routes)."""
        return _grown(self.start, self.warmed, kind)

    def per_thousand(self, kind: str | None = None) -> float:
        """MiB per 1,000 messages stored after the warm-up: what the stack grows as its memory grows."""
        stored = self.end.messages - self.warmed.messages
        return _grown(self.warmed, self.end, kind) / max(stored, 1) * 1000

    def per_thousand_pss(self) -> float:
        """The whole stack's proportional set, MiB per 1,000 messages after the warm-up."""
        stored = self.end.messages - self.warmed.messages
        return (self.end.total_pss - self.warmed.total_pss) / max(stored, 1) * 1000


def _grown(first: Sample, then: Sample, kind: str | None) -> float:
    return then.total - first.total if kind is None else then.mib[kind] - first.mib[kind]


def measure(
    limit: int, key: str, progress: Callable[[str], None], settle_s: float = 2.0, keep: Path | None = None
) -> Growth:
    """Start a stack like ``make run``'s, sample it, store WARM_UP LoCoMo turns, sample, store the
    rest up to ``limit``, sample again (``keep``: the data directory to use and leave behind, for a
    look at what it holds)."""
    from memory_hub_local.stack import Stack

    before = descendants(os.getpid())
    warm_up, rest = split(turns(limit), min(WARM_UP, limit // 2))
    with tempfile.TemporaryDirectory(prefix="memory-hub-bench-memory-") as data, open(os.devnull, "wb") as quiet:
        # every function keeps its one warmed environment to the end (none retired when idle): the
        # stack's ceiling at one environment a function
        stack = Stack(
            port=0, lambda_port=0, aws_port=0, data_dir=keep or Path(data), log=quiet, warm=False, idle_retire_s=0
        )
        stack.start()
        try:
            assert stack.pool is not None
            stack.pool.warm(each=1)
            time.sleep(settle_s)  # the embedding model loads beside start-up
            start = sample(0, before)
            target = Target("memory-hub", stack.api_url, key)
            began = time.perf_counter()
            stored = load(target, warm_up, progress)
            time.sleep(settle_s)
            warmed = settled(stored, before)
            stored += load(target, rest, progress)
            seconds = time.perf_counter() - began
            time.sleep(settle_s)
            end = settled(stored, before)
        finally:
            stack.stop()
    return Growth(start, warmed, end, seconds)
