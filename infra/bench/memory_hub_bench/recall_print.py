"""The recall section's tables, as Markdown, from its results (what bench-results.json keeps): the
bench prints them, and renders them into docs/performance.md (``docs``)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # recall imports this module for its tables
    from .recall import Tally


def fmt(value: float, digits: int = 1) -> str:
    return "–" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.{digits}f}"


def pct(value: float) -> str:
    return "–" if math.isnan(value) else f"{100 * value:.1f}%"


Say = Callable[[str], None]


def print_kinds(tallies: list[Tally], say: Say) -> None:
    """hit@10 per question kind of these tallies (as ``kinds`` prints their rows)."""
    kinds([t.row() for t in tallies], say)


def kinds(rows: list[dict[str, Any]], say: Say) -> None:
    """hit@10 per question kind (LoCoMo's categories, LongMemEval's question types): a column per
    system, level and mode of the data set (and the questions of each kind, when the results kept
    them: older runs did not)."""
    for dataset in ("LoCoMo", "LongMemEval"):
        shown = [r for r in rows if r["dataset"] == dataset and r.get("hit@10_by_kind")]
        if not shown:
            continue
        names = sorted({k for r in shown for k in r["hit@10_by_kind"]})
        counted = all("kinds" in r for r in shown)
        say(f"\n### {dataset}: hit@10 by question kind\n")
        columns = " | ".join(f"{r['system']}, {r['level']}, {r['mode']}" for r in shown)
        say(f"| kind | questions | {columns} |" if counted else f"| kind | {columns} |")
        say(("|---|---:|" if counted else "|---|") + "---:|" * len(shown))
        for kind in names:
            asked = f" {max(r['kinds'].get(kind, [0, 0])[0] for r in shown)} |" if counted else ""
            rates = [_kind_rate(r, kind) for r in shown]
            say(f"| {kind} |{asked} " + " | ".join(pct(rate) for rate in rates) + " |")


def _rate(row: dict[str, Any], k: int) -> float:
    """hit@k of a row: from its counts (its rate is rounded), or its rate in results kept before them."""
    if "hits" not in row:
        return float(row[f"hit@{k}"])
    return row["hits"][str(k)] / row["questions"] if row["questions"] else math.nan


def _kind_rate(row: dict[str, Any], kind: str) -> float:
    if "kinds" not in row:
        return float(row["hit@10_by_kind"].get(kind, math.nan))
    asked, hits = row["kinds"].get(kind, [0, 0])
    return hits / asked if asked else math.nan


def render(result: dict[str, Any], say: Say) -> None:
    """The section's tables from its results (``recall.run``'s, as bench-results.json keeps them)."""
    say("\n### Recall on public data (hit@k: an evidence turn among the first k results, limit 10)\n")
    if result.get("vector_writes") == "Batched":
        say(
            "Run with `VectorWrites: Batched` (`--vector-writes Batched`): each write's vectors waited in "
            "DynamoDB until the queue's consumer put their 8-bit copies (within a second on the bench's stack).\n"
        )
    if result.get("vector_writes") == "Drained":
        say(
            "Run with the template's defaults, `VectorWrites: Batched` drained hourly (`--vector-writes Drained`): "
            "no drain ran (the bench holds the schedule), so each search read the newest 100 vectors of its user "
            "that waited in DynamoDB (8 bits a component) in each layer it searched, counted in its items read and "
            "read units at every size (~1.3 KB a row: about 33 strongly consistent read units a layer), and found "
            "by meaning those and the ones that writes past them put at once.\n"
        )
    for name, s in result["datasets"].items():
        say(
            f"- {name}: {s['corpora']} memories (users), {s['turns']} turns, {s['records']} L1 records, "
            f"{s['questions']} questions with evidence ({s['skipped_without_evidence']} without: skipped)"
        )
    say("")
    say(
        "| data set | level | system | mode → used | questions | hit@1 | hit@5 | hit@10 "
        "| p50 ms | p95 ms | items read p50 / p95 | DynamoDB read units p50 / p95 |"
    )
    say("|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    order = {"LoCoMo": 0, "LongMemEval": 1}
    rows = result["rows"]
    for r in sorted(rows, key=lambda r: (order.get(r["dataset"], 9), r["level"], r["system"].startswith("reference"))):
        mode = "–" if r["system"].startswith("reference") else f"{r['mode']} → {r['mode_used'] or 'not reported'}"
        say(
            f"| {r['dataset']} | {r['level']} | {r['system']} | {mode} | {r['questions']} | {pct(_rate(r, 1))} | "
            f"{pct(_rate(r, 5))} | {pct(_rate(r, 10))} | {fmt(r['p50_ms'])} | {fmt(r['p95_ms'])} | "
            f"{fmt(r['items_read_p50'], 0)} / {fmt(r['items_read_p95'], 0)} | "
            f"{fmt(r.get('read_units_p50', math.nan))} / {fmt(r.get('read_units_p95', math.nan))} |"
        )
    kinds(rows, say)
    if result["size"]:
        say("\n### Recall at 1x and 10x memory (LoCoMo, the same questions; 10x: other conversations, renamed)\n")
        say("| system | level | mode | measure | 1x | 10x | 10x ÷ 1x |")
        say("|---|---|---|---|---:|---:|---:|")
        for r in result["size"]:
            one, ten = r["1x"], r["10x"]
            size = f"{r['items_1x']} → {r['items_10x']} items, {r['questions']} questions"
            label = f"| {r['system']} | {r['level']} ({size}) | {r['mode']} |"
            for measure, key, digits in (
                ("items read p50", "items_read_p50", 0),
                ("items read p95", "items_read_p95", 0),
                ("DynamoDB read units p50", "read_units_p50", 1),
                ("DynamoDB read units p95", "read_units_p95", 1),
                ("p50 ms", "p50_ms", 1),
                ("p95 ms", "p95_ms", 1),
                ("hit@10", "hit@10", 3),
            ):
                a, b = float(one.get(key, math.nan)), float(ten.get(key, math.nan))  # a run of before: none
                if math.isnan(a) and math.isnan(b):
                    continue
                ratio = b / a if a and not math.isnan(a) else math.nan
                say(f"{label} {measure} | {fmt(a, digits)} | {fmt(b, digits)} | {fmt(ratio, 2)} |")
    for note in result["notes"]:
        say(f"\nNote: {note}")
