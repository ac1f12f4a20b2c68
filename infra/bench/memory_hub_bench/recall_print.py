"""The recall section's tables (printed as Markdown, as docs/recall.md shows them)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # recall imports this module for its tables
    from .recall import Settings, Tally


def fmt(value: float, digits: int = 1) -> str:
    return "–" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.{digits}f}"


def pct(value: float) -> str:
    return "–" if math.isnan(value) else f"{100 * value:.1f}%"


def print_kinds(tallies: list[Tally], say: Callable[[str], None]) -> None:
    """hit@10 per question kind (LoCoMo's categories, LongMemEval's question types): a column per
    system, level and mode of the data set."""
    for dataset in ("LoCoMo", "LongMemEval"):
        shown = [t for t in tallies if t.dataset == dataset and t.kinds]
        if not shown:
            continue
        kinds = sorted({k for t in shown for k in t.kinds})
        say(f"\n### {dataset}: hit@10 by question kind\n")
        say("| kind | questions | " + " | ".join(f"{t.system}, {t.level}, {t.mode}" for t in shown) + " |")
        say("|---|---:|" + "---:|" * len(shown))
        for kind in kinds:
            asked = max(t.kinds.get(kind, [0, 0])[0] for t in shown)
            rates = [t.kinds[kind][1] / t.kinds[kind][0] if t.kinds.get(kind, [0])[0] else math.nan for t in shown]
            say(f"| {kind} | {asked} | " + " | ".join(pct(r) for r in rates) + " |")


def print_tables(
    summary: dict[str, dict[str, int]],
    tallies: list[Tally],
    size_rows: list[dict[str, Any]],
    notes: list[str],
    config: Settings,
    say: Callable[[str], None],
) -> None:
    say("\n### Recall on public data (hit@k: an evidence turn among the first k results, limit 10)\n")
    for name, s in summary.items():
        say(
            f"- {name}: {s['corpora']} memories (users), {s['turns']} turns, {s['records']} L1 records, "
            f"{s['questions']} questions with evidence ({s['skipped_without_evidence']} without: skipped)"
        )
    say("")
    say(
        "| data set | level | system | mode → used | questions | hit@1 | hit@5 | hit@10 "
        "| p50 ms | p95 ms | items read p50 / p95 |"
    )
    say("|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|")
    order = {"LoCoMo": 0, "LongMemEval": 1}
    for t in sorted(tallies, key=lambda t: (order.get(t.dataset, 9), t.level, t.system.startswith("reference"))):
        row = t.row()
        mode = "–" if t.system.startswith("reference") else f"{t.mode} → {t.mode_used or 'not reported'}"
        say(
            f"| {t.dataset} | {t.level} | {t.system} | {mode} | {t.questions} | {pct(t.rate(1))} | {pct(t.rate(5))} | "
            f"{pct(t.rate(10))} | {fmt(row['p50_ms'])} | {fmt(row['p95_ms'])} | "
            f"{fmt(row['items_read_p50'], 0)} / {fmt(row['items_read_p95'], 0)} |"
        )
    print_kinds(tallies, say)
    if size_rows:
        say("\n### Recall at 1x and 10x memory (LoCoMo, the same questions; 10x: other conversations, renamed)\n")
        say("| system | level | mode | measure | 1x | 10x | 10x ÷ 1x |")
        say("|---|---|---|---|---:|---:|---:|")
        for r in size_rows:
            one, ten = r["1x"], r["10x"]
            size = f"{r['items_1x']} → {r['items_10x']} items, {r['questions']} questions"
            label = f"| {r['system']} | {r['level']} ({size}) | {r['mode']} |"
            for measure, key, digits in (
                ("items read p50", "items_read_p50", 0),
                ("items read p95", "items_read_p95", 0),
                ("p50 ms", "p50_ms", 1),
                ("p95 ms", "p95_ms", 1),
                ("hit@10", "hit@10", 3),
            ):
                a, b = float(one[key]), float(ten[key])
                if math.isnan(a) and math.isnan(b):
                    continue
                ratio = b / a if a and not math.isnan(a) else math.nan
                say(f"{label} {measure} | {fmt(a, digits)} | {fmt(b, digits)} | {fmt(ratio, 2)} |")
    for note in notes:
        say(f"\nNote: {note}")
