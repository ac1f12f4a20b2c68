"""``make bench``: AWS calls per route, sequential round trips, latency, import times, scale.

Not a test: it measures and prints (and writes bench-results.json). Every AWS call is counted
with botocore event hooks (``before-call`` / ``after-call``). To see which calls overlap, each
call is given a simulated network round trip (``--rtt``, slept *outside* the emulator's lock);
the longest chain of non-overlapping calls is the request's number of sequential round trips.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from typing import Any, Callable

ADMIN = "mhk_000000000000_bench-bootstrap-admin-key-0123456789"


class Recorder:
    """Counts AWS calls and their (start, end) times while ``active``."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.calls: list[tuple[str, float, float]] = []
        self.scanned = 0  # DynamoDB items read by Query/Scan (ScannedCount): what AWS bills and waits on
        self.active = False
        self.rtt = 0.0

    def before_call(self, model: Any = None, context: Any = None, **_: Any) -> None:
        if context is not None:
            context["bench_start"] = time.perf_counter()

    def before_send(self, **_: Any) -> None:
        if self.active and self.rtt:
            time.sleep(self.rtt)

    def after_call(self, model: Any = None, context: Any = None, parsed: Any = None, **_: Any) -> None:
        if self.active and context is not None and "bench_start" in context:
            name = f"{model.service_model.service_name}.{model.name}"
            with self.lock:
                self.calls.append((name, context["bench_start"], time.perf_counter()))
                if isinstance(parsed, dict):
                    self.scanned += int(parsed.get("ScannedCount") or 0)

    def install(self) -> None:
        from botocore import handlers

        handlers.BUILTIN_HANDLERS.insert(0, ("before-call", self.before_call))
        handlers.BUILTIN_HANDLERS.insert(0, ("before-send", self.before_send))
        handlers.BUILTIN_HANDLERS.append(("after-call", self.after_call))

    def take(self) -> list[tuple[str, float, float]]:
        with self.lock:
            calls, self.calls = self.calls, []
        return calls

    def take_scanned(self) -> int:
        with self.lock:
            scanned, self.scanned = self.scanned, 0
        return scanned


def chain_depth(calls: list[tuple[str, float, float]]) -> int:
    """Longest chain of calls each starting after the previous one ended."""
    ordered = sorted(calls, key=lambda c: c[2])
    best: list[int] = []
    for i, (_, start, _end) in enumerate(ordered):
        best.append(1 + max((best[j] for j in range(i) if ordered[j][2] <= start), default=0))
    return max(best, default=0)


class Bench:
    def __init__(self) -> None:
        self.recorder = Recorder()
        self.recorder.install()  # before any client exists
        os.environ["MEMORY_HUB_BOOTSTRAP_ADMIN_KEY"] = ADMIN
        from .emulator import FunctionPool, Stack
        from .gateway import Router

        self.stack = Stack.start(admin_key=ADMIN)
        self.rank_ms = 0.0
        from memory_hub import search

        ranker = search.rank

        def timed_rank(*args: Any, **kwargs: Any) -> Any:  # relevance ranking's own CPU time
            started = time.perf_counter()
            try:
                return ranker(*args, **kwargs)
            finally:
                self.rank_ms += (time.perf_counter() - started) * 1000

        search.rank = timed_rank
        # a clear that hands its purge on: keep the continuation here and run it in clear_at_scale
        from memory_hub import clear

        self.continuations: list[dict[str, Any]] = []
        clear.invoke_async = self.continuations.append
        self.pool = FunctionPool(self.stack.template)
        self.router = Router(self.stack)

    def post(self, path: str, body: dict[str, Any], headers: dict[str, str] | None = None) -> dict[str, Any]:
        from .gateway import api_event

        function, resource = self.router.match(path)  # type: ignore[misc]
        all_headers = {"Authorization": f"Bearer {ADMIN}", "x-tdai-service-id": "default", **(headers or {})}
        result = self.pool.invoke(function, api_event("POST", path, all_headers, json.dumps(body).encode(), None,
                                                      resource))
        answer = json.loads(result["body"])
        if answer.get("code") != 0:
            raise RuntimeError(f"{path}: {answer}")
        return answer["data"]

    def measure(self, path: str, make_body: Callable[[int], dict[str, Any]], runs: int,
                key: str | None = None) -> dict[str, Any]:
        latencies, counts, depths, scanned, ranking = [], [], [], [], []
        names: Counter[str] = Counter()
        for i in range(runs):
            body = make_body(i)
            self.recorder.take()
            self.recorder.take_scanned()
            self.rank_ms = 0.0
            self.recorder.active = True
            started = time.perf_counter()
            self.post(path, body, {"Authorization": f"Bearer {key}"} if key else None)
            latencies.append((time.perf_counter() - started) * 1000)
            self.recorder.active = False
            calls = self.recorder.take()
            scanned.append(self.recorder.take_scanned())
            ranking.append(self.rank_ms)
            counts.append(len(calls))
            depths.append(chain_depth(calls))
            names.update(c[0] for c in calls)
        latencies.sort()
        return {"route": path, "runs": runs, "aws_calls": statistics.median(counts),
                "round_trips": statistics.median(depths),
                "calls": {n: round(c / runs, 2) for n, c in sorted(names.items())},
                "items_read": statistics.median(scanned), "rank_ms": round(statistics.median(ranking), 1),
                "p50_ms": round(statistics.median(latencies), 1),
                "p95_ms": round(latencies[max(0, int(len(latencies) * 0.95) - 1)], 1)}


def _scope() -> dict[str, str]:
    s = uuid.uuid4().hex[:8]
    return {"team_id": f"bench{s}", "agent_id": f"agent{s}", "user_id": "user-1"}


def routes(bench: Bench, runs: int) -> list[dict[str, Any]]:
    s = _scope()
    memory_id = f"chat_memory-{s['team_id']}-{s['agent_id']}"
    reader = bench.post("/v3/admin/keys/create", {"role": "writer", "team_ids": [s["team_id"]]})["api_key"]
    bench.post("/v3/scenario/write", {**s, "path": "warm.md", "content": "x"})
    out = []

    def m(path: str, make: Callable[[int], dict[str, Any]], key: str | None = reader) -> None:
        out.append(bench.measure(path, make, runs, key))
        print(json.dumps(out[-1]), flush=True)

    m("/v3/scenario/write", lambda i: {**s, "path": f"notes/{i % 5}.md", "content": "text " * 50, "summary": "s"})
    m("/v3/scenario/read", lambda i: {**s, "path": f"notes/{i % 5}.md"})
    m("/v3/scenario/ls", lambda i: {**s, "path_prefix": "notes/"})
    m("/v3/scenario/count", lambda i: {**s})
    m("/v3/core/write", lambda i: {**s, "content": f"persona {i}"})
    m("/v3/core/read", lambda i: {**s})
    m("/v3/conversation/add", lambda i: {**s, "session_id": "s1", "messages": [
        {"role": "user", "content": f"hello {i} about paris"}, {"role": "assistant", "content": "ok"}]})
    m("/v3/conversation/query", lambda i: {**s, "limit": 20})
    m("/v3/conversation/count", lambda i: {**s})
    m("/v3/conversation/search", lambda i: {**s, "query": "paris"})
    m("/v3/atomic/add", lambda i: {**s, "content": f"fact {i}"})
    m("/v3/atomic/query", lambda i: {**s})
    m("/v3/atomic/search", lambda i: {**s, "query": "fact"})
    atoms = bench.post("/v3/atomic/query", {**s, "limit": 100})["items"]
    m("/v3/atomic/update", lambda i: {**s, "id": atoms[i % len(atoms)]["id"], "tags": [f"t{i}"]})
    m("/v3/atomic/delete", lambda i: {**s, "ids": [atoms[i % len(atoms)]["id"]]})
    msgs = bench.post("/v3/conversation/query", {**s, "limit": 100})["messages"]
    m("/v3/conversation/delete", lambda i: {**s, "message_ids": [msgs[i % len(msgs)]["id"]]})
    m("/v3/scenario/rm", lambda i: {**s, "path": f"notes/{i % 5}.md"})
    m("/v3/memory/get", lambda i: {"memory_id": memory_id}, key=None)
    m("/v3/audit/query", lambda i: {"memory_id": memory_id}, key=None)
    m("/v3/chat-memory/clear", lambda i: {"memory_ids": [memory_id]}, key=None)
    return out


def import_times(repeats: int = 5) -> dict[str, float]:
    """Median fresh-interpreter import time of each handler module, next to ``import boto3``."""
    from .template import load

    def timed(code: str) -> float:
        samples = []
        for _ in range(repeats):
            out = subprocess.run([sys.executable, "-c", f"import time; t=time.perf_counter(); {code}; "
                                  "print(time.perf_counter()-t)"], capture_output=True, text=True, check=True,
                                 env={**os.environ, "AWS_DEFAULT_REGION": "us-east-1"})
            samples.append(float(out.stdout.strip().splitlines()[-1]) * 1000)
        return round(statistics.median(samples), 1)

    times = {"import boto3": timed("import boto3")}
    for function in load().functions.values():
        path = function.code_uri / "app.py"
        times[function.logical_id] = timed(
            "import importlib.util as u; s=u.spec_from_file_location('h', %r); m=u.module_from_spec(s); "
            "s.loader.exec_module(m)" % str(path))
    return times


def _seed_messages(bench: Bench, s: dict[str, str], n: int) -> None:
    for start in range(0, n, 100):
        bench.post("/v3/conversation/add", {**s, "session_id": f"s{start % 7}", "messages": [
            {"role": "user", "content": f"message {i} about topic {i % 13} and city {i % 29}"}
            for i in range(start, min(n, start + 100))]})


def scale(bench: Bench, quick: bool) -> dict[str, Any]:
    results: dict[str, Any] = {}
    big = 2_000 if quick else 20_000
    for size in (100, big):
        s = _scope()
        _seed_messages(bench, s, size)
        results[f"query_newest_20_of_{size}"] = bench.measure("/v3/conversation/query", lambda i: {**s, "limit": 20},
                                                              10)
        print(json.dumps(results[f"query_newest_20_of_{size}"]), flush=True)
    small = results["query_newest_20_of_100"]["p50_ms"]
    results["query_ratio"] = round(results[f"query_newest_20_of_{big}"]["p50_ms"] / small, 2)
    for size in (100, 1_000) if quick else (1_000, 10_000):
        s = _scope()
        for i in range(size):
            bench.post("/v3/atomic/add", {**s, "content": f"record {i} likes topic {i % 50} in city {i % 17}"})
        results[f"atomic_search_{size}"] = bench.measure("/v3/atomic/search", lambda i: {**s, "query": "topic 7"}, 5)
        print(json.dumps(results[f"atomic_search_{size}"]), flush=True)
    return results


def _clear_one(bench: Bench, l0: int, l1: int, files: int) -> dict[str, Any]:
    s = _scope()
    _seed_messages(bench, s, l0)
    for i in range(l1):
        bench.post("/v3/atomic/add", {**s, "content": f"record {i}"})
    for i in range(files):
        bench.post("/v3/scenario/write", {**s, "path": f"scenes/{i // 100}/{i}.md", "content": f"scene {i}"})
    memory_id = f"chat_memory-{s['team_id']}-{s['agent_id']}"
    result = bench.measure("/v3/chat-memory/clear", lambda i: {"memory_ids": [memory_id]}, 1)
    counts = bench.post("/v3/memory/get", {"memory_id": memory_id})["counts"]
    # DynamoDB keys: L0 messages, L1 records and their natural-key guards, scene index entries
    # (counters are a handful more); S3: the scene files, 1,000 per DeleteObjects
    minimum = -(-(l0 + 2 * l1 + files) // 25) + -(-files // 1000)
    result.update({"l0": l0, "l1": l1, "files": files, "minimum_calls": minimum, "counts_after": counts,
                   "purge_pending": bool(bench.continuations)})
    if bench.continuations:  # the asynchronous rest, as the self-invocation would run it
        bench.recorder.take()
        bench.recorder.active = True
        started, invocations = time.perf_counter(), 0
        while bench.continuations:
            bench.pool.invoke("ClearFunction", bench.continuations.pop())
            invocations += 1
        bench.recorder.active = False
        calls = Counter(c[0] for c in bench.recorder.take())
        result["continuation"] = {"invocations": invocations, "wall_s": round(time.perf_counter() - started, 1),
                                  "calls": dict(sorted(calls.items()))}
    print(json.dumps(result), flush=True)
    return result


def clear_at_scale(bench: Bench, quick: bool) -> dict[str, Any]:
    """The contract's synchronous size (10,000 items, 1,000 files), then the issue's 20k/5k/2k."""
    if quick:
        return {"contract_size": _clear_one(bench, 800, 200, 100), "large": _clear_one(bench, 2_000, 500, 200)}
    return {"contract_size": _clear_one(bench, 8_000, 2_000, 1_000), "large": _clear_one(bench, 20_000, 5_000, 2_000)}


def cleanup_at_scale(bench: Bench, quick: bool) -> dict[str, Any]:
    memories, per = (100, 100) if quick else (1_000, 100)
    old = "2020-01-01T00:00:00Z"
    for m in range(memories):
        s = _scope()
        bench.post("/v3/conversation/add", {**s, "session_id": "s", "messages": [
            {"role": "user", "content": f"m{i}", "timestamp": old} for i in range(per)]})
        bench.post("/v3/memory/update", {"memory_id": f"chat_memory-{s['team_id']}-{s['agent_id']}",
                                         "retention_days": 30})
    bench.recorder.take()
    bench.recorder.active = True
    started = time.perf_counter()
    runs, report = 0, {"done": False}
    while not report["done"] and runs < 50:
        report = bench.pool.invoke("CleanupFunction", {"source": "aws.events"})
        runs += 1
    bench.recorder.active = False
    calls = bench.recorder.take()
    result = {"memories": memories, "items_per_memory": per, "invocations": runs, "aws_calls": len(calls),
              "wall_s": round(time.perf_counter() - started, 1), "l0_deleted": report.get("l0_deleted")}
    print(json.dumps(result), flush=True)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="memory-hub bench", description=__doc__)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--rtt", type=float, default=0.0,
                        help="simulated seconds per AWS round trip (to count sequential round trips)")
    parser.add_argument("--quick", action="store_true", help="smaller scale sections")
    parser.add_argument("--only", choices=["routes", "imports", "scale", "clear", "cleanup"], action="append")
    parser.add_argument("--out", default="bench-results.json")
    args = parser.parse_args(argv)
    sections = args.only or ["imports", "routes", "scale", "clear", "cleanup"]
    results: dict[str, Any] = {}
    if "imports" in sections:
        results["imports_ms"] = import_times()
        print(json.dumps(results["imports_ms"]), flush=True)
    bench = Bench()
    if "routes" in sections:
        results["routes"] = routes(bench, args.runs)
        bench.recorder.rtt = args.rtt or 0.02
        results["round_trips_at_20ms_rtt"] = {r["route"]: r["round_trips"] for r in routes(bench, 3)}
        bench.recorder.rtt = 0.0
        print(json.dumps(results["round_trips_at_20ms_rtt"]), flush=True)
    if "scale" in sections:
        results["scale"] = scale(bench, args.quick)
    if "clear" in sections:
        results["clear"] = clear_at_scale(bench, args.quick)
    if "cleanup" in sections:
        results["cleanup"] = cleanup_at_scale(bench, args.quick)
    with open(args.out, "w") as handle:
        json.dump(results, handle, indent=1)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
