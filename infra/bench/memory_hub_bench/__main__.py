"""``make bench`` (``python -m memory_hub_bench``): the README's performance tables, measured.

Starts the local stack (ephemeral, with the emulated AWS side's call log) and prints, as Markdown:

1. every route: p50 latency at the client, AWS calls, sequential AWS round trips (every call
   delayed by 30 ms in a second pass: the extra time ÷ 30 ms), the emulated-AWS floor (the time
   the emulated AWS side spent on the request's calls), the overhead ratio p50 ÷ floor, and the
   mean CPU a request took in the function processes and in the emulated AWS side (/proc);
2. memory size: search and newest-20 latency at a small vs a large memory, and the DynamoDB items
   a search reads (same matches);
3. throughput: scenario write+read pairs per second with 1 and with 8 clients;
4. cold start per function vs ``import boto3``, and the layer's size;
   resident memory of a stack of its own (as ``make run`` starts it) at start, after a warm-up and
   after storing LoCoMo turns, per process kind and per 1,000 messages after the warm-up
   (``memory``; ``--memory-messages N`` for more than the default);
   durability: acknowledged writes a stack of its own still has after a SIGKILL of its whole
   process group, once right after the last answer and once during a compaction, and how long
   the restart took (``durability``);
5. with ``--compare URL --compare-key KEY``: the v3 routes side by side with that endpoint,
   request by request alternately, with ratios (and its throughput);
6. recall on public data with labelled evidence (LoCoMo, LongMemEval): hit@1/5/10 of L0 and L1
   search beside a textbook BM25 reference, latency, and items read at 1x and 10x memory
   (``--recall-only`` runs just this; ``--mode`` sends a search mode; see ``recall``);
7. formation: a stack of its own forms memory from LoCoMo (the scripted model, or a real one with
   ``--formation-url``): model calls, tokens and cost per 1,000 messages, records formed, dropped
   entries, lag; the formed records scored against LoCoMo's observations (``--formation-only``
   runs just this; see ``formation``);
8. cost: per route, the calls to every service, DynamoDB read and write units (as AWS counts them),
   S3 request classes, S3 Vectors, Bedrock tokens, Lambda requests and billed duration, and $ per
   1M operations at list prices (``prices``); the monthly cost of a stated workload beside the
   peers' list prices (``--cost-only`` runs just this; see ``cost``).

``--quick`` runs it all with fewer requests and smaller memories (sections 1–5 in under two
minutes, durability aside: it starts three stacks, about a minute more; memory after 300
messages instead of 6,000; durability with 30 writes of each kind instead of 200; recall on 2
LoCoMo conversations and 2 LongMemEval users, its 10x pass on 60 questions; formation on 2
LoCoMo conversations).
Results also go to ``bench-results.json``. Nothing here is a test: it measures and reports."""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from . import coldstart, cost, durability, formation, measure, memory, recall
from .cases import FileMaker, Scope, cases
from .client import Hooks, Operator, Target

RESULTS = Path("bench-results.json")
BENCH_KEY = "mhk_000000000000_bench-bootstrap-admin-key-0123456789"


def _fmt(value: float, digits: int = 1) -> str:
    return "–" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.{digits}f}"


def _say(text: str = "") -> None:
    print(text, flush=True)


def _progress(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def tdai_file_maker(data_dir: Path) -> FileMaker:
    """Put scene files where TencentDB's gateway keeps them (its scenario/write only updates)."""

    def make(scope: Scope, files: dict[str, str]) -> None:
        profile = data_dir / "profiles" / quote(f"team:{scope.team}|agent:{scope.agent}", safe="") / "scene_blocks"
        for path, content in files.items():
            target = profile / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(content, encoding="utf-8")

    return make


@dataclass
class Run:
    """One bench run: its settings, its endpoints, and what it found (for bench-results.json)."""

    args: argparse.Namespace
    ours: Target
    theirs: Target | None
    hooks: Hooks
    log: measure.CallLog
    results: dict[str, Any]

    @property
    def n(self) -> int:
        return 5 if self.args.quick else 15

    @property
    def sizes(self) -> tuple[int, int, int]:
        return (100, 1000, 1000) if self.args.quick else (100, 3000, 10_000)

    @property
    def messages(self) -> int:
        return self.args.memory_messages or (300 if self.args.quick else 6000)

    @property
    def seconds(self) -> float:
        return 4.0 if self.args.quick else 15.0

    @property
    def file_maker(self) -> FileMaker | None:
        return tdai_file_maker(self.args.compare_data_dir) if self.args.compare_data_dir else None


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="memory_hub_bench", description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer requests, smaller memories (< 2 minutes)")
    parser.add_argument("--compare", metavar="URL", help="another v3 endpoint to run the same HTTP workload against")
    parser.add_argument("--compare-key", metavar="KEY", default="", help="its API key")
    parser.add_argument("--compare-service-id", default="default")
    parser.add_argument(
        "--compare-data-dir",
        type=Path,
        default=None,
        help="TencentDB gateway: its data.baseDir, to put the scene files its scenario/write updates "
        "(without it, the scenario routes and the pair throughput are left out of the comparison)",
    )
    parser.add_argument(
        "--skip", action="append", default=[], choices=SECTIONS, help="leave a section out (repeatable)"
    )
    parser.add_argument(
        "--memory-messages",
        type=int,
        metavar="N",
        help="memory: store N messages (default 6,000; 300 with --quick; past LoCoMo's 5,882, as new users)",
    )
    parser.add_argument(
        "--embeddings",
        choices=("Enabled", "Disabled"),
        default="Enabled",
        help="the template's Embeddings parameter for the stack the routes, sizes, throughput and compare "
        "sections use (Disabled: no Bedrock or S3 Vectors call, search by words alone — like for like with "
        "a peer run without embeddings)",
    )
    parser.add_argument("--recall-only", action="store_true", help="run only the recall section")
    parser.add_argument("--cost-only", action="store_true", help="run only the cost section")
    parser.add_argument(
        "--mode",
        action="append",
        default=[],
        choices=recall.MODES,
        help="recall: send this search mode (repeatable; default: none, the server's default)",
    )
    _formation_flags(parser)
    args = parser.parse_args(argv)
    if args.recall_only:
        args.skip = [name for name in SECTIONS if name != "recall"]
    if args.formation_only:
        args.skip = [name for name in SECTIONS if name != "formation"]
    if args.cost_only:
        args.skip = [name for name in SECTIONS if name != "cost"]
    return args


def _formation_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--formation-only", action="store_true", help="run only the formation section")
    parser.add_argument(
        "--formation-url",
        metavar="URL",
        help="formation: a real OpenAI-compatible model's base URL (e.g. http://127.0.0.1:11434/v1) instead of "
        "the scripted one; its records are scored against LoCoMo's observations (MEMORY_HUB_LLM_TIMEOUT_S, "
        "120 s by default, bounds each call)",
    )
    parser.add_argument("--formation-model", metavar="NAME", default="", help="formation: the model name sent there")
    parser.add_argument("--formation-key", metavar="KEY", default="", help="formation: its bearer token, if any")
    parser.add_argument(
        "--formation-conversations",
        type=int,
        metavar="N",
        help="formation: the first N LoCoMo conversations (default all 10; 2 with --quick)",
    )
    parser.add_argument(
        "--formation-layers",
        action="append",
        choices=("records", "all"),
        help="formation: the layers settings to run, each on a stack of its own (repeatable; default records; "
        "all: scenes and a persona too, their calls counted apart)",
    )


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    from memory_hub_local.stack import Stack

    key = os.environ.setdefault("MEMORY_HUB_BOOTSTRAP_ADMIN_KEY", BENCH_KEY)
    began = time.perf_counter()
    results: dict[str, Any] = {
        "quick": args.quick,
        "embeddings": args.embeddings,
        "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    with open(os.devnull, "wb") as quiet:
        stack = Stack.with_hooks(quiet, args.embeddings)
        stack.start()
        try:
            assert stack.pool is not None
            stack.pool.warm(each=2)
            hooks = Hooks(stack.aws_url, Operator.of(stack.aws_environment()))
            theirs = (
                Target("compare", args.compare, args.compare_key, args.compare_service_id) if args.compare else None
            )
            run = Run(args, Target("memory-hub", stack.api_url, key), theirs, hooks, measure.CallLog(hooks), results)
            for name, section in SECTION_RUNNERS.items():
                if name not in args.skip:
                    section(run)
        finally:
            stack.stop()
    results["seconds"] = round(time.perf_counter() - began, 1)
    RESULTS.write_text(json.dumps(results, indent=2, default=str) + "\n")
    _say(f"\n({results['seconds']} s; results also in {RESULTS})")
    return 0


def routes_section(run: Run) -> None:
    _progress(
        f"routes: {run.n} requests each, then {run.n} with every AWS call delayed {measure.ROUND_TRIP_S * 1000:.0f} ms"
    )
    workload = cases(run.ours, ours=True)
    workload.seed()
    rows = [measure.route(case, run.ours, run.n, run.hooks, run.log) for case in workload.cases]
    run.results["routes"] = [asdict(r) | {"overhead": r.overhead} for r in rows]
    _say("### Per route (local stack)\n")
    _say(
        "| route | p50 ms | AWS calls | sequential round trips | emulated AWS ms | p50 ÷ AWS | items read "
        "| CPU ms: function / emulated AWS | calls |"
    )
    _say("|---|---:|---:|---:|---:|---:|---:|---:|---|")
    for r in rows:
        _say(
            f"| `{r.route}` | {_fmt(r.p50_ms)} | {_fmt(r.calls, 0)} | {_fmt(r.round_trips, 0)} | "
            f"{_fmt(r.floor_ms)} | {_fmt(r.overhead)} | {_fmt(r.items_read, 0)} | "
            f"{_fmt(r.function_cpu_ms)} / {_fmt(r.aws_cpu_ms)} | {r.operations} |"
        )


def sizes_section(run: Run) -> None:
    small, large, read_large = run.sizes
    _progress(f"memory size: {small} vs {large} messages (items read: vs {read_large})")
    rows = measure.sizes(run.ours, run.log, small, large, read_large, run.n, _progress)
    run.results["sizes"] = [asdict(r) | {"ratio": r.ratio} for r in rows]
    _say("\n### Memory size (local stack)\n")
    _say("| measure | small | large | large ÷ small |")
    _say("|---|---:|---:|---:|")
    for r in rows:
        _say(f"| {r.what} | {_fmt(r.small)} | {_fmt(r.large)} | {_fmt(r.ratio, 2)} |")


def throughput_section(run: Run) -> None:
    _progress(f"throughput: 1 and 8 clients, {run.seconds:.0f} s each")
    table: dict[str, tuple[float, float]] = {}
    maker = run.file_maker
    for target in (run.ours, run.theirs):
        if target is None or (target is run.theirs and maker is None):
            continue  # another gateway's scenario/write cannot create the pair's file
        pair = _pair_with_files(maker) if target is run.theirs and maker is not None else measure.scenario_pair
        table[target.name] = (
            measure.pairs_per_second(target, 1, run.seconds, pair),
            measure.pairs_per_second(target, 8, run.seconds, pair),
        )
    run.results["throughput"] = {name: {"1": one, "8": eight} for name, (one, eight) in table.items()}
    _say("\n### Throughput: scenario write+read pairs per second\n")
    _say("| endpoint | 1 client | 8 clients | 8 ÷ 1 |")
    _say("|---|---:|---:|---:|")
    for name, (one, eight) in table.items():
        _say(f"| {name} | {_fmt(one)} | {_fmt(eight)} | {_fmt(eight / one if one else math.nan, 2)} |")


def compare_section(run: Run) -> None:
    if run.theirs is None:
        return
    _progress(f"side by side with {run.theirs.url}")
    maker = run.file_maker
    files_too = maker is not None
    rows = measure.side_by_side(
        run.ours,
        cases(run.ours, ours=False, files_too=files_too),
        run.theirs,
        cases(run.theirs, ours=False, make_files=maker, files_too=files_too),
        run.n,
    )
    run.results["compare"] = [asdict(r) | {"ratio": r.ratio} for r in rows]
    _say(
        f"\n### Side by side with {run.theirs.url} (p50 ms, alternating requests; "
        f"ours: Embeddings {run.args.embeddings})\n"
    )
    _say("| route | Memory Hub | other | ratio |")
    _say("|---|---:|---:|---:|")
    for r in rows:
        _say(f"| `{r.route}` | {_fmt(r.ours_ms)} | {_fmt(r.theirs_ms)} | {_fmt(r.ratio, 2)} |")


def cold_section(run: Run) -> None:
    runs = 3 if run.args.quick else 7
    _progress(f"cold start: {runs} runs per function, interleaved with import boto3")
    rows = coldstart.cold_starts(runs)
    layer = coldstart.layer_size()
    run.results["cold_start"] = [asdict(r) | {"ratio": r.ratio} for r in rows]
    run.results["layer"] = layer
    _say("\n### Cold start: importing the handler vs `import boto3` (fresh interpreter, median)\n")
    _say("| function | import ms | import boto3 ms | ratio |")
    _say("|---|---:|---:|---:|")
    for r in rows:
        _say(f"| {r.function} | {_fmt(r.import_ms, 0)} | {_fmt(r.boto3_ms, 0)} | {_fmt(r.ratio, 2)} |")
    _say(f"\nLayer: {layer}")


def memory_section(run: Run) -> None:
    _progress(f"memory: a stack of its own, RSS at start and after {run.messages} LoCoMo messages")
    growth = memory.measure(run.messages, run.ours.key, _progress)
    run.results["memory"] = {
        "messages": growth.end.messages,
        "warm_up_messages": growth.warmed.messages,
        "load_s": round(growth.seconds, 1),
        "start": asdict(growth.start),
        "warmed": asdict(growth.warmed),
        "end": asdict(growth.end),
        "first_use_mib": round(growth.first_use(), 1),
        "mib_per_1000": round(growth.per_thousand(), 1),
        "pss_mib_per_1000": round(growth.per_thousand_pss(), 1),
    }
    _say("\n### Resident memory (local stack, RSS MiB)\n")
    _say(
        f"| process kind | processes | at start | after {growth.warmed.messages} messages | "
        f"after {growth.end.messages} | MiB per 1,000 messages after the first {growth.warmed.messages} |"
    )
    _say("|---|---:|---:|---:|---:|---:|")
    for kind in memory.KINDS:
        _say(
            f"| {kind} | {growth.end.processes[kind]} | {_fmt(growth.start.mib[kind], 0)} | "
            f"{_fmt(growth.warmed.mib[kind], 0)} | {_fmt(growth.end.mib[kind], 0)} | "
            f"{_fmt(growth.per_thousand(kind))} |"
        )
    _say(
        f"| whole stack | {sum(growth.end.processes.values())} | {_fmt(growth.start.total, 0)} | "
        f"{_fmt(growth.warmed.total, 0)} | {_fmt(growth.end.total, 0)} | {_fmt(growth.per_thousand())} |"
    )
    _say(
        f"| whole stack, proportional set (PSS: a page shared by n processes counts 1/n in each) | "
        f"{sum(growth.end.processes.values())} | {_fmt(growth.start.total_pss, 0)} | "
        f"{_fmt(growth.warmed.total_pss, 0)} | {_fmt(growth.end.total_pss, 0)} | "
        f"{_fmt(growth.per_thousand_pss())} |"
    )
    _say(
        f"\nThe first {growth.warmed.messages} messages are each process's first use of its routes "
        f"(imports, the embedding model's buffers): {_fmt(growth.first_use(), 0)} MiB once. "
        f"The gateway's process (it runs the bench too, so not in the sum): {_fmt(growth.start.gateway_mib, 0)} → "
        f"{_fmt(growth.end.gateway_mib, 0)} MiB (PSS {_fmt(growth.end.gateway_pss_mib, 0)}); "
        f"loading took {growth.seconds:.0f} s."
    )


def durability_section(run: Run) -> None:
    n = 30 if run.args.quick else 200
    _progress(f"durability: a stack of its own, {n} + {n} acknowledged writes, SIGKILL, restart (twice)")
    found = durability.measure(n, _progress)
    run.results["durability"] = found.result()
    _say("\n### Durability: acknowledged writes after a SIGKILL of the whole stack (as `make run` starts it)\n")
    for line in durability.table(found.rounds):
        _say(line)
    if found.leftovers:
        _say(f"\nProcesses of the stacks still alive at the end: {found.leftovers}")


def recall_section(run: Run) -> None:
    config = recall.settings(run.args.quick, run.args.mode)
    _progress("recall: public data with labelled evidence, over HTTP")
    run.results["recall"] = recall.run(run.ours, run.log, run.theirs, config, _say, _progress)


def formation_section(run: Run) -> None:
    config = formation.settings(run.args.quick, run.args.embeddings, run.ours.key, run.args)
    _progress(f"formation: a stack of its own, LoCoMo formed by {config.model_label}")
    run.results["formation"] = formation.run(config, _say, _progress)


def cost_section(run: Run) -> None:
    _progress(f"cost: every route, {run.n} requests each (and {run.n} with every AWS call delayed), at list prices")
    rows, stored = cost.measure_routes(cases(run.ours, ours=True), run.ours, run.n, run.hooks, run.log, _progress)
    run.results["cost"] = cost.report(rows, stored, _say)


def _pair_with_files(make_files: FileMaker) -> Callable[[Target, Scope, int], None]:
    def pair(target: Target, scope: Scope, i: int) -> None:
        if i < 0:
            make_files(scope, {"pair.md": "# Pair"})
        measure.scenario_pair(target, scope, i)

    return pair


SECTION_RUNNERS: dict[str, Callable[[Run], None]] = {
    "routes": routes_section,
    "sizes": sizes_section,
    "throughput": throughput_section,
    "compare": compare_section,
    "cold": cold_section,
    "memory": memory_section,
    "durability": durability_section,
    "recall": recall_section,
    "formation": formation_section,
    "cost": cost_section,
}
SECTIONS = list(SECTION_RUNNERS)

if __name__ == "__main__":
    sys.exit(main())
