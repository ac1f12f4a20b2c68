"""What the bench measures over HTTP: per-route latency, AWS calls, sequential round trips and the
emulated-AWS floor; search and query at two memory sizes; throughput of 1 and 8 clients; and any
of these side by side with another v3 endpoint."""

from __future__ import annotations

import os
import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .cases import Case, Scope, Workload, messages
from .client import Hooks, Target
from .memory import KINDS, descendants, kind_of

ROUND_TRIP_S = 0.030  # the delay added to every AWS call to count the sequential ones


def p50(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


class CallLog:
    """The AWS calls the functions made, request by request (requests run one at a time)."""

    def __init__(self, hooks: Hooks) -> None:
        self.hooks = hooks
        self.seq = max((c["seq"] for c in hooks.calls(0)), default=0)

    def take(self) -> list[dict[str, Any]]:
        calls = self.hooks.calls(self.seq)
        if calls:
            self.seq = max(c["seq"] for c in calls)
        return [c for c in calls if c.get("function")]


def cpu_ms_by_kind(pids: set[int] | None = None) -> dict[str, float]:
    """CPU time (user + system, ms) the stack's processes have used so far, by kind: this process's
    descendants (``pids``: those only). /proc's clock ticks are 10 ms, so one request's figure is
    coarse; the bench reports the mean of many."""
    ticks = os.sysconf("SC_CLK_TCK")
    used = dict.fromkeys(KINDS, 0.0)
    for pid in descendants(os.getpid()) if pids is None else pids:
        try:
            with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        used[kind_of(pid)] += (int(fields[11]) + int(fields[12])) * 1000 / ticks  # utime + stime
    return used


@dataclass
class RouteRow:
    route: str
    p50_ms: float
    calls: float = float("nan")
    round_trips: float = float("nan")
    floor_ms: float = float("nan")
    items_read: float = float("nan")
    operations: str = ""
    function_cpu_ms: float = float("nan")  # mean CPU a request took in the function processes
    aws_cpu_ms: float = float("nan")  # … and in the emulated AWS side

    @property
    def overhead(self) -> float:
        return self.p50_ms / self.floor_ms if self.floor_ms else float("nan")


def _run(
    case: Case, target: Target, start: int, n: int, log: CallLog | None, cpu: dict[str, float] | None = None
) -> tuple[list[float], list[list[Any]]]:
    """Time requests start … start + n - 1 (with their AWS calls when ``log``; adding the CPU each
    took, by kind, to ``cpu`` when given: what ``case.before`` costs is left out)."""
    times, calls = [], []
    for i in range(start, start + n):
        case.before(i)
        if log is not None:
            log.take()
        used = cpu_ms_by_kind() if cpu is not None else {}
        elapsed, _ = target.post(case.route, case.body(i))
        if cpu is not None:
            for kind, ms in cpu_ms_by_kind().items():
                cpu[kind] += ms - used.get(kind, 0.0)
        times.append(elapsed)
        if log is not None:
            calls.append(log.take())
    return times, calls


def route(case: Case, target: Target, n: int, hooks: Hooks | None, log: CallLog | None) -> RouteRow:
    """One route: warm it, time ``n`` requests (with their AWS calls), then ``n`` more with every
    AWS call delayed by ROUND_TRIP_S: the extra time counts the sequential round trips."""
    _run(case, target, -2, 2, None)  # warm: the environment exists, the caches are filled
    cpu = dict.fromkeys(KINDS, 0.0)
    times, calls = _run(case, target, 0, n, log, cpu)
    row = RouteRow(case.route, p50(times), function_cpu_ms=cpu["functions"] / n, aws_cpu_ms=cpu["emulated AWS"] / n)
    if hooks is None or log is None:
        return row
    row.calls = p50([len(c) for c in calls])
    row.floor_ms = p50([sum(x["ms"] for x in c) for c in calls])
    row.items_read = p50([sum(x["read"] for x in c) for c in calls])
    operations: dict[str, int] = {}
    for call in calls[len(calls) // 2]:
        operations[call["operation"]] = operations.get(call["operation"], 0) + 1
    row.operations = ", ".join(f"{name} {count}" if count > 1 else name for name, count in operations.items())
    hook = hooks.delay_every_call(ROUND_TRIP_S)
    try:
        delayed, _ = _run(case, target, n, n, log)
    finally:
        hooks.remove(hook)
    row.round_trips = max(0.0, round((p50(delayed) - row.p50_ms) / (ROUND_TRIP_S * 1000), 1))
    return row


# ---------------------------------------------------------------- memory size


@dataclass
class SizeRow:
    what: str
    small: float
    large: float

    @property
    def ratio(self) -> float:
        return self.large / self.small if self.small else float("nan")


def seed_messages(target: Target, scope: Scope, total: int, matching: int, progress: Callable[[str], None]) -> None:
    """``total`` messages of one user, ``matching`` of them holding the rare word 'zebra'."""
    written = 0
    while written < total:
        batch = messages(min(100, total - written), "filler words about weather and travel plans")
        for i, message in enumerate(batch):
            if written + i < matching:
                message["content"] = f"the zebra crossing story {written + i}"
        target.post("/v3/conversation/add", scope.body(session_id=f"s{written // 1000}", messages=batch))
        written += len(batch)
        if written % 2000 == 0:
            progress(f"  seeded {written}/{total} messages")


def sizes(
    target: Target,
    log: CallLog | None,
    small: int,
    large: int,
    read_large: int,
    n: int,
    progress: Callable[[str], None],
) -> list[SizeRow]:
    """Search and newest-20 latency at ``small`` vs ``large`` messages, and the items a search
    reads at ``small`` vs ``read_large`` (same matches)."""
    few, many = Scope.fresh("small"), Scope.fresh("large")
    seed_messages(target, few, small, 10, progress)
    seed_messages(target, many, large, 10, progress)
    rows = []

    def timed(scope: Scope, path: str, body: dict[str, Any]) -> tuple[float, float]:
        target.post(path, scope.body(**body))  # warm
        times, reads = [], []
        for _ in range(n):
            if log is not None:
                log.take()
            elapsed, _ = target.post(path, scope.body(**body))
            times.append(elapsed)
            if log is not None:
                reads.append(sum(c["read"] for c in log.take()))
        return p50(times), p50(reads) if reads else float("nan")

    search = ("/v3/conversation/search", {"query": "zebra crossing", "limit": 10})
    query = ("/v3/conversation/query", {"limit": 20})
    search_small, read_small = timed(few, *search)
    search_large, _ = timed(many, *search)
    query_small, _ = timed(few, *query)
    query_large, _ = timed(many, *query)
    rows.append(SizeRow(f"conversation/search p50 ms, {small} vs {large} messages", search_small, search_large))
    rows.append(SizeRow(f"conversation/query newest 20 p50 ms, {small} vs {large}", query_small, query_large))
    if log is not None:
        seed_messages(target, many, read_large - large, 0, progress)
        _, read_large_items = timed(many, *search)
        rows.append(
            SizeRow(
                f"conversation/search items read, {small} vs {read_large} (10 matches)", read_small, read_large_items
            )
        )
    return rows


# ---------------------------------------------------------------- throughput


def pairs_per_second(target: Target, clients: int, seconds: float, pair: Callable[[Target, Scope, int], None]) -> float:
    """Write+read pairs per second of ``clients`` threads, each on its own memory, for ``seconds``."""
    scopes = [Scope.fresh(f"tp{c}") for c in range(clients)]
    # Warm as many environments as there are clients (one burst at once: as many cold starts as
    # Lambda would make), and create what each pair needs; none of it is timed.
    warmers = [threading.Thread(target=pair, args=(target, scope, -1)) for scope in scopes]
    for thread in warmers:
        thread.start()
    for thread in warmers:
        thread.join()
    done = [0] * clients
    stop = threading.Event()
    failures: list[BaseException] = []

    def client(index: int) -> None:
        i = 0
        try:
            while not stop.is_set():
                pair(target, scopes[index], i)
                done[index] += 1
                i += 1
        except BaseException as exc:  # noqa: BLE001 - reported after the run
            failures.append(exc)

    threads = [threading.Thread(target=client, args=(c,), daemon=True) for c in range(clients)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    time.sleep(seconds)
    stop.set()
    for thread in threads:
        thread.join(timeout=120)
    elapsed = time.perf_counter() - started
    if failures:
        raise failures[0]
    return sum(done) / elapsed


def scenario_pair(target: Target, scope: Scope, i: int) -> None:
    target.post("/v3/scenario/write", scope.body(path="pair.md", content=f"# Pair\nwrite {i}"))
    target.post("/v3/scenario/read", scope.body(path="pair.md"))


# ---------------------------------------------------------------- side by side


@dataclass
class CompareRow:
    route: str
    ours_ms: float
    theirs_ms: float

    @property
    def ratio(self) -> float:
        return self.ours_ms / self.theirs_ms if self.theirs_ms else float("nan")


def side_by_side(ours: Target, mine: Workload, theirs: Target, yours: Workload, n: int) -> list[CompareRow]:
    """The routes both serve, request by request alternately (the machine's state is shared)."""
    mine.seed()
    yours.seed()
    rows = []
    other_cases = yours.by_route()
    for case in mine.cases:
        other = other_cases.get(case.route)
        if other is None:
            continue
        _run(case, ours, -2, 2, None)
        _run(other, theirs, -2, 2, None)
        ours_ms: list[float] = []
        theirs_ms: list[float] = []
        for i in range(n):
            ours_ms += _run(case, ours, i, 1, None)[0]
            theirs_ms += _run(other, theirs, i, 1, None)[0]
        rows.append(CompareRow(case.route, p50(ours_ms), p50(theirs_ms)))
    return rows
