"""The cost section's tables (Markdown), printed from its results (``cost.report``'s): what they
show is all in the results, so a record renders the same after prices.py changes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .cost import BATCH_SIZE, DRAIN_ROUND, SEARCH, puts_per_add
from .cost_cases import ONE_MESSAGE_ADD


def _fmt(value: float, digits: int = 1) -> str:
    return f"{value:,.{digits}f}"


def _calls(calls: dict[str, float]) -> str:
    return ", ".join(f"{service} {count:.3g}" for service, count in sorted(calls.items(), key=lambda kv: -kv[1]))


def render(result: dict[str, Any], say: Callable[[str], None]) -> None:
    """The cost tables (Markdown) from the section's results (``report``'s)."""
    checked = result["prices_checked"]
    say(f"\n### Cost at list prices (us-east-1, on-demand; prices of {checked}: memory_hub_bench/prices.py)\n")
    say(
        "| route | AWS calls a request | DynamoDB RRU / WRU | S3 PUT / GET | S3 Vectors put / query | Bedrock tokens "
        "| Lambda requests / billed ms | $ per 1M | $ per 1M, 6M vectors in the memory | largest, $ per 1M |"
    )
    say("|---|---|---:|---:|---:|---:|---:|---:|---:|---|")
    for r in result["routes"]:
        largest = ", ".join(f"{name} {usd * 1e6:,.1f}" for name, usd in r["largest"])
        say(
            f"| `{r['route']}` | {_calls(r['calls'])} | {_fmt(r['rru'])} / {_fmt(r['wru'])} | {_fmt(r['s3_put'])} / "
            f"{_fmt(r['s3_get'])} | {_fmt(r['vector_puts'])} / {_fmt(r['vector_queries'])} | {_fmt(r['tokens'], 0)} | "
            f"{_fmt(r['lambda_requests'])} / {r['billed_ms']} | {_fmt(r['usd_per_million'])} | "
            f"{_fmt(r['usd_per_million_6m_vectors'])} | {largest} |"
        )
    bill, w = result["month"], result["workload"]
    say(
        f"\n**A month** of {w['users']:,} users each adding {w['adds']} one-message turns and searching "
        f"{w['searches']} times, kept {w['months_kept']} months (steady state: {w['turns_held']:,} turns held in one "
        f"memory, its users in {w.get('groups', 1)} groups: a search reads an index of "
        f"{w.get('group_index', w['turns_held']):,} vectors): requests ${bill['requests_usd']:,.0f}, "
        f"storage ${bill['storage_usd']:,.0f} "
        f"(DynamoDB {bill['bytes_per_message']:,.0f} bytes a stored turn, measured; vectors {w['vector_bytes']:,} "
        f"bytes), **${bill['total']:,.0f} a month**"
        + (f" — its adds priced as the `{bill['add']}` row (the template's default)" if "add" in bill else "")
        + (
            f"{',' if 'add' in bill else ' —'} its searches as the `{bill['search']}` row; with formation on, "
            f"records make each search one vector query more (the `{bill.get('records_search', SEARCH)}` row): "
            f"${bill['with_records']:,.0f}.\n"
            if "with_records" in bill
            else ".\n"
        )
    )
    by_groups = result.get("search_by_groups")
    if by_groups:
        say(
            f"The month's search (`{bill['search']}`) at 6 million vectors in the memory, by `VectorGroups`: "
            + ", ".join(f"{g} → ${usd:,.1f}" for g, usd in by_groups.items())
            + " per 1M (at most 160,000 ÷ groups memories of users in every group).\n"
        )
    _batched_lines(result, say)
    erasure = result.get("erasure_per_item")
    if erasure:
        say(
            "Erasure, DynamoDB write units a stored item: "
            + ", ".join(f"`{route}` {units:.1f}" for route, units in erasure.items())
            + " (an erasure's fixed part — by id, its audit event with the event's two index entries and the "
            "user's counter, in the transaction that erases, billed twice; a clear's, the epoch's move — is shared "
            "by what it erases; one item alone bears it all).\n"
        )
    say("| the same workload on | $ a month | prices used |")
    say("|---|---:|---|")
    say(f"| Memory Hub (this table) | ${bill['total']:,.0f} | the rows above |")
    for peer, usd, basis in result["peers"]:
        say(f"| {peer} | {usd} | {basis} |")
    say(f"\nPrices not confirmed on {checked} (shown as last published): {'; '.join(result['unverified'])}.")


def _batched_lines(result: dict[str, Any], say: Callable[[str], None]) -> None:
    """The lines under the month on batched writes: the default's sharing, and the add's price by
    drain period and event-source window."""
    w = result["workload"]
    immediate = result.get("month_immediate")
    if immediate:
        groups = w.get("groups", 16)
        window = (
            f"the {immediate['window_s']} s window"  # a record of before the drain
            if "window_s" in immediate
            else f"the {immediate['drain_minutes']} minutes between drains"
        )
        say(
            f"The default `VectorWrites: Batched`: the month's rate brings {immediate['adds_per_batch']:.1f} adds "
            f"to one memory in {window}, a PutVectors for each group of users among them, "
            f"{puts_per_add(immediate['adds_per_batch'], groups):.2f} an add "
            f"({immediate['adds_per_put_here']:.1f} adds a put here, at the bench's pace). With "
            f"`VectorWrites: Immediate` (every add its own PutVectors: the "
            f"`{ONE_MESSAGE_ADD}` row): **${immediate['total']:,.0f} a month**.\n"
        )
    batched = result.get("month_batched")  # a record of before 2026-12-05: Immediate was the default
    if batched:
        say(
            f"With `VectorWrites: Batched` (its one-message add's row: the month's rate brings "
            f"{batched['adds_per_batch']:.1f} adds to one memory in the {batched['window_s']} s window, "
            f"a PutVectors for each group of users among them, "
            f"{puts_per_add(batched['adds_per_batch'], w.get('groups', 1)):.2f} an add; "
            f"{batched['adds_per_put_here']:.1f} here, at the bench's pace): **${batched['total']:,.0f} a month**.\n"
        )
    by_window = result.get("batched_add_by_window")
    if by_window:
        say(
            "Its one-message add by `VectorDrainMinutes` (min) and, with that 0, by `VectorBatchSeconds` (s) (adds a "
            "batch gathers at the month's rate; PutVectors an add): "
            + ", ".join(f"{_window(w)} ({b:.1f}; {puts:.2f}) → ${usd:,.1f}" for w, (b, puts, usd) in by_window.items())
            + f" per 1M (an event source's batch ends at {BATCH_SIZE} messages, a drain's round at {DRAIN_ROUND}; an "
            "item is found by meaning from the next request either way: its vector waits in DynamoDB until it is put)"
            + _record_line(result.get("batched_record_add_by_window"))
            + ".\n"
        )


def _record_line(by_window: dict[str, list[float]] | None) -> str:
    """``atomic/add``'s batched prices by window, at the same rate, for the sentence above."""
    if not by_window:
        return ""
    prices_ = ", ".join(f"{_window(w)} → ${usd:,.1f}" for w, (_, _, usd) in by_window.items())
    return f"; `/v3/atomic/add`, the same way: {prices_}"


def _window(name: str) -> str:
    """A window's name as the report prints it (a record of before the drain names seconds alone)."""
    return f"{name} s" if name.isdigit() else name
