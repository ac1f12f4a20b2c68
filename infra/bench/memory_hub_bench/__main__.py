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
Results also go to ``bench-results.json`` (this run's), and the sections a run ran to the record
``memory_hub_bench/performance.json`` and their generated sections in docs/performance.md (``docs``;
``--no-docs`` leaves both as they are). ``--render-docs`` runs nothing: it renders
docs/performance.md's generated sections again from the record (``--from FILE``: after taking the
sections a saved bench-results.json holds into it). Nothing here is a test: it measures and reports."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from . import coldstart, cost, docs, durability, formation, measure, memory, recall, text_search
from .cases import FileMaker, Scope, cases
from .client import Hooks, Operator, Target

RESULTS = Path("bench-results.json")
BENCH_KEY = "mhk_000000000000_bench-bootstrap-admin-key-0123456789"


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
    vectors_batched: Callable[[bool], None] | None = None  # VectorWrites Batched on or off (our stack)

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
    parser.add_argument(
        "--vector-writes",
        choices=("Immediate", "Batched", "Drained"),
        default="Immediate",
        help="recall: the VectorWrites its writes and searches run with (the local stack's default, Immediate, "
        "or Batched: vectors wait in DynamoDB until the queue's consumer, here within a second, puts their 8-bit "
        "copies; or Drained, the template's defaults: Batched with an hourly drain, which the bench's stack "
        "never runs, however long the bench takes, so every vector a search finds by meaning waited, or was "
        "put by a write past what a search reads of them; a search reads its user's waiting vectors of each "
        "layer it asks, up to 100, at every size of the memory)",
    )
    parser.add_argument(
        "--word-index",
        choices=("Postings", "Vectors"),
        default=None,
        help="the template's WordIndex for the stack (default: the template's): where its memories' messages "
        "are indexed by words — postings in DynamoDB, or their terms with their vectors in S3 Vectors",
    )
    parser.add_argument("--recall-only", action="store_true", help="run only the recall section")
    parser.add_argument("--cost-only", action="store_true", help="run only the cost section")
    parser.add_argument(
        "--text-search-only", action="store_true", help="run only the section on S3 Vectors' own text search"
    )
    parser.add_argument(
        "--mode",
        action="append",
        default=[],
        choices=recall.MODES,
        help="recall: send this search mode (repeatable; default: none, the server's default)",
    )
    _formation_flags(parser)
    _docs_flags(parser)
    args = parser.parse_args(argv)
    if args.source is not None and not args.render_docs:
        parser.error("--from goes with --render-docs")
    if args.recall_only:
        args.skip = [name for name in SECTIONS if name != "recall"]
    if args.formation_only:
        args.skip = [name for name in SECTIONS if name != "formation"]
    if args.cost_only:
        args.skip = [name for name in SECTIONS if name != "cost"]
    if args.text_search_only:
        args.skip = [name for name in SECTIONS if name != "text-search"]
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


def _docs_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--no-docs",
        action="store_true",
        help="leave the record (memory_hub_bench/performance.json) and docs/performance.md as they are "
        "(bench-results.json is still written)",
    )
    parser.add_argument(
        "--render-docs",
        action="store_true",
        help="run nothing: render docs/performance.md's generated sections again from the record",
    )
    parser.add_argument(
        "--from",
        dest="source",
        type=Path,
        metavar="FILE",
        help="with --render-docs: first take the sections a saved run's results (a bench-results.json) hold "
        "into the record",
    )


def render_docs(source: Path | None, only: list[str] | None = None) -> int:
    """Merge ``source`` (a bench-results.json) into the record, if given, and render the doc."""
    record = docs.load_record()
    if source is not None:
        taken = docs.merge(record, json.loads(source.read_text(encoding="utf-8")))
        if not taken:
            _progress(f"{source}: no section of the bench in it")
            return 1
        docs.save_record(record)
        only = taken if only is None else only
        _progress(f"record: {', '.join(taken)} from {source}")
    try:
        left_out = docs.render(record, only)
    except docs.MarkerError as error:
        _progress(f"{docs.DOC}: {error}")
        return 1
    rendered = [name for name in (only if only is not None else record["sections"]) if name not in left_out]
    _progress(f"{docs.DOC.relative_to(docs.ROOT)}: rendered {', '.join(rendered) or 'nothing'}")
    if left_out:
        _progress(
            f"  no <!-- bench:NAME:begin --> … <!-- bench:NAME:end --> markers for {', '.join(left_out)}: "
            "add a pair where those tables belong, then make docs-perf"
        )
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    if args.render_docs:
        return render_docs(args.source)
    from memory_hub_local.stack import Stack

    key = os.environ.setdefault("MEMORY_HUB_BOOTSTRAP_ADMIN_KEY", BENCH_KEY)
    began = time.perf_counter()
    results: dict[str, Any] = {
        "quick": args.quick,
        "embeddings": args.embeddings,
        "word_index": args.word_index or "template",
        "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "argv": docs.shown_argv(sys.argv[1:] if argv is None else argv),
    }
    with open(os.devnull, "wb") as quiet:
        if args.vector_writes == "Drained":  # the template's defaults, the hourly drain held for the whole run
            stack = Stack.with_hooks(
                quiet,
                args.embeddings,
                vectors_batched_s=300,
                vectors_drain_min=60,
                fire_schedules=False,
                word_index=args.word_index,
            )
        else:
            stack = Stack.with_hooks(quiet, args.embeddings, word_index=args.word_index)
        stack.start()
        try:
            assert stack.pool is not None
            stack.pool.warm(each=2)
            hooks = Hooks(stack.aws_url, Operator.of(stack.aws_environment()))
            theirs = (
                Target("compare", args.compare, args.compare_key, args.compare_service_id) if args.compare else None
            )
            run = Run(args, Target("memory-hub", stack.api_url, key), theirs, hooks, measure.CallLog(hooks), results)
            pool, batched = stack.pool, {"MemoryFunction": {"VECTOR_WRITES": "Batched"}}
            run.vectors_batched = lambda on: pool.restart(batched if on else {})
            for name, section in SECTION_RUNNERS.items():
                if name not in args.skip:
                    section(run)
                    docs.show(name, results, _say)
        finally:
            stack.stop()
    results["seconds"] = round(time.perf_counter() - began, 1)
    RESULTS.write_text(docs.dumps(results))
    _say(f"\n({results['seconds']} s; results also in {RESULTS})")
    if args.no_docs:
        return 0
    record = docs.load_record()
    ran = docs.merge(record, docs.as_saved(results))
    docs.save_record(record)
    return render_docs(None, ran)


# Each section measures and keeps its results in run.results; main prints its tables from them
# (docs.SECTIONS: the same renderer writes them into docs/performance.md).


def routes_section(run: Run) -> None:
    _progress(
        f"routes: {run.n} requests each, then {run.n} with every AWS call delayed {measure.ROUND_TRIP_S * 1000:.0f} ms"
    )
    workload = cases(run.ours, ours=True)
    workload.seed()
    rows = [measure.route(case, run.ours, run.n, run.hooks, run.log) for case in workload.cases]
    run.results["routes"] = [asdict(r) | {"overhead": r.overhead} for r in rows]


def sizes_section(run: Run) -> None:
    small, large, read_large = run.sizes
    _progress(f"memory size: {small} vs {large} messages (items read: vs {read_large})")
    rows = measure.sizes(run.ours, run.log, small, large, read_large, run.n, _progress)
    run.results["sizes"] = [asdict(r) | {"ratio": r.ratio} for r in rows]


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
    run.results["compare"] = {
        "url": run.theirs.url,
        "embeddings": run.args.embeddings,
        "rows": [asdict(r) | {"ratio": r.ratio} for r in rows],
    }


def cold_section(run: Run) -> None:
    runs = 3 if run.args.quick else 7
    _progress(f"cold start: {runs} runs per function, interleaved with import boto3")
    rows = coldstart.cold_starts(runs)
    run.results["cold_start"] = [asdict(r) | {"ratio": r.ratio} for r in rows]
    run.results["layer"] = coldstart.layer_size()


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


def durability_section(run: Run) -> None:
    n = 30 if run.args.quick else 200
    _progress(f"durability: a stack of its own, {n} + {n} acknowledged writes, SIGKILL, restart (twice)")
    run.results["durability"] = durability.measure(n, _progress).result()


def recall_section(run: Run) -> None:
    config = recall.settings(run.args.quick, run.args.mode)
    switch = run.vectors_batched if run.args.vector_writes == "Batched" else None
    _progress(f"recall: public data with labelled evidence, over HTTP (VectorWrites {run.args.vector_writes})")
    if switch is not None:
        switch(True)
    try:
        run.results["recall"] = recall.run(run.ours, run.log, run.theirs, config, _progress)
    finally:
        if switch is not None:
            switch(False)
    run.results["recall"]["vector_writes"] = run.args.vector_writes


def text_search_section(run: Run) -> None:
    _progress("text search: S3 Vectors' own BM25 and hybrid queries on the recall section's data, in this process")
    run.results["text_search"] = text_search.run(run.args.quick, _progress)


def formation_section(run: Run) -> None:
    config = formation.settings(run.args.quick, run.args.embeddings, run.ours.key, run.args)
    _progress(f"formation: a stack of its own, LoCoMo formed by {config.model_label}")
    run.results["formation"] = formation.run(config, _progress)


def cost_section(run: Run) -> None:
    _progress(f"cost: every route, {run.n} requests each (and {run.n} with every AWS call delayed), at list prices")
    rows, stored, seen = cost.measure_routes(
        cases(run.ours, ours=True), run.ours, run.n, run.hooks, run.log, _progress, run.vectors_batched
    )
    run.results["cost"] = cost.report(rows, stored, seen)


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
    "text-search": text_search_section,
    "formation": formation_section,
    "cost": cost_section,
}
SECTIONS = list(SECTION_RUNNERS)
assert list(docs.SECTIONS) == SECTIONS, "docs.SECTIONS renders every section, in the order they run"

if __name__ == "__main__":
    sys.exit(main())
