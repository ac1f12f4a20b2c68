"""``make bench`` (``python -m memory_hub_bench``): the README's performance tables, measured.

Starts the local stack (ephemeral, with the emulated AWS side's call log) and prints, as Markdown:

1. every route: p50 latency at the client, AWS calls, sequential AWS round trips (every call
   delayed by 30 ms in a second pass: the extra time ÷ 30 ms), the emulated-AWS floor (the time
   the emulated AWS side spent on the request's calls) and the overhead ratio p50 ÷ floor;
2. memory size: search and newest-20 latency at a small vs a large memory, and the DynamoDB items
   a search reads (same matches);
3. throughput: scenario write+read pairs per second with 1 and with 8 clients;
4. cold start per function vs ``import boto3``, and the layer's size;
5. with ``--compare URL --compare-key KEY``: the v3 routes side by side with that endpoint,
   request by request alternately, with ratios (and its throughput).

``--quick`` runs it all in under two minutes with fewer requests and smaller memories. Results also
go to ``bench-results.json``. Nothing here is a test: it measures and reports."""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any
from urllib.parse import quote

from . import coldstart, measure
from .cases import Scope, cases
from .client import Hooks, Target

RESULTS = Path("bench-results.json")


def _fmt(value: float, digits: int = 1) -> str:
    return "–" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.{digits}f}"


def _say(text: str = "") -> None:
    print(text, flush=True)


def _progress(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def tdai_file_maker(data_dir: Path):
    """Put scene files where TencentDB's gateway keeps them (its scenario/write only updates)."""

    def make(scope: Scope, files: dict[str, str]) -> None:
        profile = data_dir / "profiles" / quote(f"team:{scope.team}|agent:{scope.agent}", safe="") / "scene_blocks"
        for path, content in files.items():
            target = profile / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(content, encoding="utf-8")

    return make


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="memory_hub_bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer requests, smaller memories (< 2 minutes)")
    parser.add_argument("--compare", metavar="URL", help="another v3 endpoint to run the same HTTP workload against")
    parser.add_argument("--compare-key", metavar="KEY", default="", help="its API key")
    parser.add_argument("--compare-service-id", default="default")
    parser.add_argument(
        "--compare-data-dir",
        type=Path,
        default=None,
        help="TencentDB gateway: its data.baseDir, to put the scene files its scenario/write "
        "updates (without it, scenario/write is left out of the comparison)",
    )
    parser.add_argument(
        "--skip",
        action="append",
        default=[],
        choices=["routes", "sizes", "throughput", "cold"],
        help="leave a section out",
    )
    args = parser.parse_args(argv)
    quick = args.quick
    n = 5 if quick else 15
    small, large, read_large = (100, 1000, 1000) if quick else (100, 3000, 10_000)
    seconds = 4.0 if quick else 15.0
    results: dict[str, Any] = {"quick": quick, "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}

    from memory_hub_local.stack import Stack

    os.environ.setdefault("MEMORY_HUB_BOOTSTRAP_ADMIN_KEY", "mhk_000000000000_bench-bootstrap-admin-key-0123456789")
    began = time.perf_counter()
    with open(os.devnull, "wb") as quiet:
        stack = Stack(port=0, lambda_port=0, aws_port=0, data_dir=None, test_hooks=True, log=quiet)
        stack.start()
        try:
            ours = Target("memory-hub", stack.api_url, os.environ["MEMORY_HUB_BOOTSTRAP_ADMIN_KEY"])
            hooks = Hooks(stack.aws_url)
            stack.pool.warm(each=2) if stack.pool else None
            log = measure.CallLog(hooks)
            theirs = (
                Target("compare", args.compare, args.compare_key, args.compare_service_id) if args.compare else None
            )
            _report(args, ours, theirs, hooks, log, n, (small, large, read_large), seconds, results)
        finally:
            stack.stop()
    results["seconds"] = round(time.perf_counter() - began, 1)
    RESULTS.write_text(json.dumps(results, indent=2, default=str) + "\n")
    _say(f"\n({results['seconds']} s; results also in {RESULTS})")
    return 0


def _report(
    args: argparse.Namespace,
    ours: Target,
    theirs: Target | None,
    hooks: Hooks,
    log: measure.CallLog,
    n: int,
    size: tuple[int, int, int],
    seconds: float,
    results: dict[str, Any],
) -> None:
    if "routes" not in args.skip:
        _progress(
            f"routes: {n} requests each, then {n} with every AWS call delayed {measure.ROUND_TRIP_S * 1000:.0f} ms"
        )
        workload = cases(ours, ours=True)
        workload.seed()
        rows = [measure.route(case, ours, n, hooks, log) for case in workload.cases]
        results["routes"] = [asdict(r) | {"overhead": r.overhead} for r in rows]
        _say("### Per route (local stack)\n")
        _say(
            "| route | p50 ms | AWS calls | sequential round trips | emulated AWS ms | p50 ÷ AWS | items read | calls |"
        )
        _say("|---|---:|---:|---:|---:|---:|---:|---|")
        for r in rows:
            _say(
                f"| `{r.route}` | {_fmt(r.p50_ms)} | {_fmt(r.calls, 0)} | {_fmt(r.round_trips, 0)} | "
                f"{_fmt(r.floor_ms)} | {_fmt(r.overhead)} | {_fmt(r.items_read, 0)} | {r.operations} |"
            )
    if "sizes" not in args.skip:
        small, large, read_large = size
        _progress(f"memory size: {small} vs {large} messages (items read: vs {read_large})")
        rows = measure.sizes(ours, log, small, large, read_large, n, _progress)
        results["sizes"] = [asdict(r) | {"ratio": r.ratio} for r in rows]
        _say("\n### Memory size (local stack)\n")
        _say("| measure | small | large | large ÷ small |")
        _say("|---|---:|---:|---:|")
        for r in rows:
            _say(f"| {r.what} | {_fmt(r.small)} | {_fmt(r.large)} | {_fmt(r.ratio, 2)} |")
    if "throughput" not in args.skip:
        _progress(f"throughput: 1 and 8 clients, {seconds:.0f} s each")
        table = {}
        for target in [t for t in (ours, theirs) if t is not None]:
            if target is theirs and args.compare_data_dir is None:
                continue  # its scenario/write cannot create the pair's file
            pair = measure.scenario_pair
            if target is theirs:
                pair = _pair_with_files(tdai_file_maker(args.compare_data_dir))
            one = measure.pairs_per_second(target, 1, seconds, pair)
            eight = measure.pairs_per_second(target, 8, seconds, pair)
            table[target.name] = (one, eight)
        results["throughput"] = {k: {"1": v[0], "8": v[1]} for k, v in table.items()}
        _say("\n### Throughput: scenario write+read pairs per second\n")
        _say("| endpoint | 1 client | 8 clients | 8 ÷ 1 |")
        _say("|---|---:|---:|---:|")
        for name, (one, eight) in table.items():
            _say(f"| {name} | {_fmt(one)} | {_fmt(eight)} | {_fmt(eight / one if one else math.nan, 2)} |")
    if theirs is not None:
        _progress(f"side by side with {theirs.url}")
        maker = tdai_file_maker(args.compare_data_dir) if args.compare_data_dir else None
        files_too = maker is not None
        rows = measure.side_by_side(
            ours,
            cases(ours, ours=False, files_too=files_too),
            theirs,
            cases(theirs, ours=False, make_files=maker, files_too=files_too),
            n,
        )
        results["compare"] = [asdict(r) | {"ratio": r.ratio} for r in rows]
        _say(f"\n### Side by side with {theirs.url} (p50 ms, alternating requests)\n")
        _say("| route | Memory Hub | other | ratio |")
        _say("|---|---:|---:|---:|")
        for r in rows:
            _say(f"| `{r.route}` | {_fmt(r.ours_ms)} | {_fmt(r.theirs_ms)} | {_fmt(r.ratio, 2)} |")
    if "cold" not in args.skip:
        runs = 3 if args.quick else 7
        _progress(f"cold start: {runs} runs per function, interleaved with import boto3")
        rows = coldstart.cold_starts(runs)
        layer = coldstart.layer_size()
        results["cold_start"] = [asdict(r) | {"ratio": r.ratio} for r in rows]
        results["layer"] = layer
        _say("\n### Cold start: importing the handler vs `import boto3` (fresh interpreter, median)\n")
        _say("| function | import ms | import boto3 ms | ratio |")
        _say("|---|---:|---:|---:|")
        for r in rows:
            _say(f"| {r.function} | {_fmt(r.import_ms, 0)} | {_fmt(r.boto3_ms, 0)} | {_fmt(r.ratio, 2)} |")
        _say(f"\nLayer: {layer}")


def _pair_with_files(make_files):
    def pair(target: Target, scope: Scope, i: int) -> None:
        if i < 0:
            make_files(scope, {"pair.md": "# Pair"})
        measure.scenario_pair(target, scope, i)

    return pair


if __name__ == "__main__":
    sys.exit(main())
