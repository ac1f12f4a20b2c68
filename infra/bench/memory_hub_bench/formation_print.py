"""The formation section's tables, as Markdown, from its results (what bench-results.json keeps):
the bench prints them, and renders them into docs/performance.md (``docs``)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from .formation_watch import FULL, IDLE


def _n(value: Any, digits: int = 1) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if isinstance(value, int):
        return f"{value:,}"
    return f"{value:,.{digits}f}"


def _pct(value: float) -> str:
    return "–" if math.isnan(value) else f"{100 * value:.1f}%"


def _usd(value: float) -> str:
    return "–" if math.isnan(value) else f"${value:.5f}"


def _rows(p: dict[str, Any], priced: str) -> list[tuple[str, str]]:
    """(measure, value) of one pass."""
    calls = p["calls"]
    records, extra, every = calls["records (save_memories)"], calls["scenes and persona"], calls["all calls"]
    rows = [
        ("messages stored (user-role)", f"{_n(p['messages'])} ({_n(p['user_messages'])})"),
        ("model calls per 1,000 messages: records (`save_memories`)", _n(records["calls_per_1000"])),
        ("model calls per 1,000 messages: scenes and persona", _n(extra["calls_per_1000"])),
        ("input tokens per 1,000 messages", _n(every["input_tokens_per_1000"], 0)),
        ("output tokens per 1,000 messages", _n(every["output_tokens_per_1000"], 0)),
        ("input characters per 1,000 messages (texts + tool definitions)", _n(every["input_chars_per_1000"], 0)),
        ("output characters per 1,000 messages (text + tool arguments)", _n(every["output_chars_per_1000"], 0)),
        (f"cost per 1,000 messages at {priced}'s list price", _usd(every["cost_usd_per_1000"])),
        ("  of which scenes and persona", _usd(extra["cost_usd_per_1000"])),
        ("records formed per 1,000 messages", _n(p["records_per_1000"])),
        ("entries dropped", _n(p["dropped"])),
    ]
    paced = p["paced"]
    for lag, which in ((p["lag"], "all conversations at once"), (paced["lag"], f"paced, {paced['sessions']} sessions")):
        for kind in (FULL, IDLE):
            row = lag[kind]
            label = f"lag p50 / p95 s, {which}: message in a {kind} ({_n(row['cited'])} of {_n(row['messages'])} cited)"
            seen = f"{_n(row['seen_p50_s'])} / {_n(row['seen_p95_s'])} seen"
            written = f"{_n(row['written_p50_s'])} / {_n(row['written_p95_s'])} written"
            rows.append((label, f"{seen}; {written}"))
    rows.append(
        (
            f"paced: partial-batch messages cited more than {p['idle_s']} + 60 s after their add (the idle bound)",
            f"{_n(paced['lag'][IDLE]['written_after_idle_plus_60_s'])} of {_n(paced['lag'][IDLE]['cited'])}",
        )
    )
    rows += [
        ("messages no record cites", _n(p["not_cited"])),
        ("model time per call p50 s", _n(p["model_seconds_p50"], 3)),
        ("storing / forming after the last add (s)", f"{_n(p['store_s'])} / {_n(p['settle_s'])}"),
    ]
    if p["missed_by_polling"] or p["poll_failures"]:
        rows.append(
            (
                "messages first seen cited by the final read; failed polls",
                f"{p['missed_by_polling']}; {p['poll_failures']}",
            )
        )
    if p["paused_users"] or p["last_errors"] or not p["settled"]:
        rows.append(("paused users; errors; settled", f"{p['paused_users']}; {p['last_errors'][:3]}; {p['settled']}"))
    return rows


def render(result: dict[str, Any], say: Callable[[str], None]) -> None:
    """The section's tables from its results (``formation.run``'s)."""
    print_section(result["passes"], result["score"], result["price"], result["scripted"], say)


def print_section(passes: list[dict[str, Any]], score: dict[str, Any], price: dict[str, Any], scripted: bool,
                  say: Callable[[str], None]) -> None:  # fmt: skip
    """The section's tables: one column per layers setting, then the score (when there is one)."""
    if not passes:
        return
    first = passes[0]
    say(f"\n### Memory formation (local stack; model: {first['model']})\n")
    say(
        f"- {first['users']} LoCoMo conversations (one user each) stored through `conversation/add` as the recall "
        f"section stores them; `FormationBatch` {first['batch']} (the template's default), "
        f"`FormationIdleSeconds` {first['idle_s']}, `Embeddings` {first['embeddings']}; a stack of its own per "
        "layers setting."
    )
    say(
        f"- Lag: from the add's answer to a record citing the message — *seen* by polling each user's "
        f"`atomic/query` every {first['poll_s']:g} s (a round took p50 {_n(first['poll_round_p50_s'], 2)} s, "
        f"p95 {_n(first['poll_round_p95_s'], 2)} s: the resolution), and *written* (the record's `updated_at`). "
        "*All conversations at once*: stored back to back as the recall section stores them (a backlog: what "
        "is measured is how fast the stack forms it); *paced*: afterwards, the first conversation's first "
        f"{first['paced']['sessions']} sessions again as a user of their own, each session added once the one "
        f"before is formed, the stack otherwise idle (polled every {first['paced']['poll_s']:g} s)."
    )
    if scripted:
        say(
            "- The scripted model counts a token per 4 characters of the JSON it is sent and writes one record per "
            "user-role message: tokens and records here are the interface's overhead, not a real model's."
        )
    say("")
    say("| measure | " + " | ".join(f"formation `{p['layers']}`" for p in passes) + " |")
    say("|---|" + "---:|" * len(passes))
    table = [_rows(p, price["model"]) for p in passes]
    for i, (label, _) in enumerate(table[0]):
        say(f"| {label} | " + " | ".join(rows[i][1] for rows in table) + " |")
    say(
        f"\nPrice: {price['model']}, on-demand us-east-1, ${price['input_per_1k_tokens_usd']:.5f} per 1,000 input "
        f"tokens and ${price['output_per_1k_tokens_usd']:.5f} per 1,000 output tokens ({price['source']})."
    )
    if score:
        _print_score(score, say)


def _print_score(score: dict[str, Any], say: Callable[[str], None]) -> None:
    say(
        f"\n#### Formed records against LoCoMo's observations (cosine ≥ {score['threshold']}, all-MiniLM-L6-v2; "
        f"model: {score['model']})\n"
    )
    if score.get("scripted"):
        say(
            "The scripted model's records are the user-role messages themselves: a sanity check of the scoring, "
            "not a measure of formation.\n"
        )
    say("| measure | value |")
    say("|---|---:|")
    say(f"| observations / formed records | {_n(score['observations'])} / {_n(score['records'])} |")
    say(f"| recall-like: observations with a record that says it | {_pct(score['recall_lenient'])} |")
    say(f"| recall-like, strict: … and cites one of its turns | {_pct(score['recall_strict'])} |")
    say(f"| precision-like: records an observation says | {_pct(score['precision_lenient'])} |")
    say(f"| precision-like, strict: … and names one of its turns | {_pct(score['precision_strict'])} |")
    say(f"| provenance: best-matching record cites the observation's turns | {_pct(score['provenance'])} |")
    say(f"| best cosine per observation, p50 | {_n(score['best_cosine_p50'], 3)} |")
