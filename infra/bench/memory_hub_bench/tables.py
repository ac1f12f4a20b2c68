"""The tables of the sections ``__main__`` measures itself (routes, memory size, throughput, side by
side, cold start, resident memory), as Markdown, from their results as bench-results.json keeps
them: the bench prints them, and renders them into docs/performance.md (``docs``)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from .memory import KINDS, Growth, Sample

Say = Callable[[str], None]


def fmt(value: float, digits: int = 1) -> str:
    return "–" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.{digits}f}"


def routes(results: dict[str, Any], say: Say) -> None:
    say("### Per route (local stack)\n")
    say(
        "| route | p50 ms | AWS calls | sequential round trips | emulated AWS ms | p50 ÷ AWS | items read "
        "| CPU ms: function / emulated AWS | calls |"
    )
    say("|---|---:|---:|---:|---:|---:|---:|---:|---|")
    for r in results["routes"]:
        say(
            f"| `{r['route']}` | {fmt(r['p50_ms'])} | {fmt(r['calls'], 0)} | {fmt(r['round_trips'], 0)} | "
            f"{fmt(r['floor_ms'])} | {fmt(r['overhead'])} | {fmt(r['items_read'], 0)} | "
            f"{fmt(r['function_cpu_ms'])} / {fmt(r['aws_cpu_ms'])} | {r['operations']} |"
        )


def sizes(results: dict[str, Any], say: Say) -> None:
    say("\n### Memory size (local stack)\n")
    say("| measure | small | large | large ÷ small |")
    say("|---|---:|---:|---:|")
    for r in results["sizes"]:
        say(f"| {r['what']} | {fmt(r['small'])} | {fmt(r['large'])} | {fmt(r['ratio'], 2)} |")


def throughput(results: dict[str, Any], say: Say) -> None:
    say("\n### Throughput: scenario write+read pairs per second\n")
    say("| endpoint | 1 client | 8 clients | 8 ÷ 1 |")
    say("|---|---:|---:|---:|")
    for name, rate in results["throughput"].items():
        one, eight = rate["1"], rate["8"]
        say(f"| {name} | {fmt(one)} | {fmt(eight)} | {fmt(eight / one if one else math.nan, 2)} |")


def compare(results: dict[str, Any], say: Say) -> None:
    side = results["compare"]
    say(
        f"\n### Side by side with {side['url']} (p50 ms, alternating requests; ours: Embeddings {side['embeddings']})\n"
    )
    say("| route | Memory Hub | other | ratio |")
    say("|---|---:|---:|---:|")
    for r in side["rows"]:
        say(f"| `{r['route']}` | {fmt(r['ours_ms'])} | {fmt(r['theirs_ms'])} | {fmt(r['ratio'], 2)} |")


def cold(results: dict[str, Any], say: Say) -> None:
    say("\n### Cold start: importing the handler vs `import boto3` (fresh interpreter, median)\n")
    say("| function | import ms | import boto3 ms | ratio |")
    say("|---|---:|---:|---:|")
    for r in results["cold_start"]:
        say(f"| {r['function']} | {fmt(r['import_ms'], 0)} | {fmt(r['boto3_ms'], 0)} | {fmt(r['ratio'], 2)} |")
    say(f"\nLayer: {results['layer']}")


def memory(results: dict[str, Any], say: Say) -> None:
    kept = results["memory"]
    growth = Growth(Sample(**kept["start"]), Sample(**kept["warmed"]), Sample(**kept["end"]), float(kept["load_s"]))
    start, warmed, end = growth.start, growth.warmed, growth.end
    say("\n### Resident memory (local stack, RSS MiB)\n")
    say(
        f"| process kind | processes | at start | after {warmed.messages} messages | "
        f"after {end.messages} | MiB per 1,000 messages after the first {warmed.messages} |"
    )
    say("|---|---:|---:|---:|---:|---:|")
    for kind in KINDS:
        say(
            f"| {kind} | {end.processes[kind]} | {fmt(start.mib[kind], 0)} | {fmt(warmed.mib[kind], 0)} | "
            f"{fmt(end.mib[kind], 0)} | {fmt(growth.per_thousand(kind))} |"
        )
    processes = sum(end.processes.values())
    say(
        f"| whole stack | {processes} | {fmt(start.total, 0)} | {fmt(warmed.total, 0)} | {fmt(end.total, 0)} | "
        f"{fmt(growth.per_thousand())} |"
    )
    say(
        f"| whole stack, proportional set (PSS: a page shared by n processes counts 1/n in each) | {processes} | "
        f"{fmt(start.total_pss, 0)} | {fmt(warmed.total_pss, 0)} | {fmt(end.total_pss, 0)} | "
        f"{fmt(growth.per_thousand_pss())} |"
    )
    say(
        f"\nThe first {warmed.messages} messages are each process's first use of its routes "
        f"(imports, the embedding model's buffers): {fmt(growth.first_use(), 0)} MiB once. "
        f"The gateway's process (it runs the bench too, so not in the sum): {fmt(start.gateway_mib, 0)} → "
        f"{fmt(end.gateway_mib, 0)} MiB (PSS {fmt(end.gateway_pss_mib, 0)}); "
        f"loading took {growth.seconds:.0f} s."
    )
