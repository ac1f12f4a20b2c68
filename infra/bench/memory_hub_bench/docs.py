"""docs/performance.md's generated sections: the bench's own tables, rendered from its results.

Each section of the bench has one pair of markers in docs/performance.md,
``<!-- bench:NAME:begin -->`` … ``<!-- bench:NAME:end -->``; what is between them is written
here, from the section's results, by the renderer that prints the section's tables during a run
(so the doc shows what a run printed, with its first heading turned into a lead line that says
which run it was). Everything outside the markers is written by hand.

The results come from **the record**, ``performance.json`` beside this module (bench-results.json,
at the repository's root, is not committed: it keeps the last run only). The record holds each
section's results from the last run that ran it, with that run's date and flags; a run merges the
sections it ran into it and rewrites only their markers. ``python -m memory_hub_bench
--render-docs`` (``make docs-perf``) renders every section again from the record without running
anything (``--from bench-results.json``: take the sections a saved run holds into the record
first). tests/contract/test_performance_doc.py holds docs/performance.md to the record."""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import cost_print, durability, formation_print, recall_print, tables, text_search

ROOT = Path(__file__).resolve().parents[3]
DOC = ROOT / "docs" / "performance.md"
RECORD = Path(__file__).with_name("performance.json")

Say = Callable[[str], None]


@dataclass(frozen=True)
class Section:
    keys: tuple[str, ...]  # what the section puts in bench-results.json
    render: Callable[[dict[str, Any], Say], None]  # its tables, from a results dict holding those keys


# In the order a run runs them (``__main__.SECTION_RUNNERS``).
SECTIONS: dict[str, Section] = {
    "routes": Section(("routes",), tables.routes),
    "sizes": Section(("sizes",), tables.sizes),
    "throughput": Section(("throughput",), tables.throughput),
    "compare": Section(("compare",), tables.compare),
    "cold": Section(("cold_start", "layer"), tables.cold),
    "memory": Section(("memory",), tables.memory),
    "durability": Section(("durability",), lambda results, say: durability.render(results["durability"], say)),
    "recall": Section(("recall",), lambda results, say: recall_print.render(results["recall"], say)),
    "text-search": Section(("text_search",), lambda results, say: text_search.render(results["text_search"], say)),
    "formation": Section(("formation",), lambda results, say: formation_print.render(results["formation"], say)),
    "cost": Section(("cost",), lambda results, say: cost_print.render(results["cost"], say)),
}

MARK = re.compile(r"<!-- bench:([\w-]+):(begin|end) -->")
PAIR = re.compile(r"<!-- bench:([\w-]+):begin -->(.*?)<!-- bench:\1:end -->", re.S)
HEADING = re.compile(r"^#{1,6} +(.+?)\s*$")
SECRET_FLAGS = ("--compare-key", "--formation-key")
LOCAL_FLAGS = ("--compare-data-dir",)


class MarkerError(ValueError):
    """docs/performance.md's markers do not pair up, or name no section of the bench."""


def as_saved(results: dict[str, Any]) -> dict[str, Any]:
    """``results`` as bench-results.json gives them back (tuples as lists, keys as strings, NaN kept):
    what is printed during a run is what renders from the record later."""
    loaded: dict[str, Any] = json.loads(dumps(results))
    return loaded


def dumps(data: Any) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n"


def has(name: str, results: dict[str, Any]) -> bool:
    return all(key in results for key in SECTIONS[name].keys)


def show(name: str, results: dict[str, Any], say: Say) -> None:
    """Print a section's tables from a run's results, as the record will hold them."""
    if has(name, results):
        SECTIONS[name].render(as_saved(results), say)


def shown_argv(argv: list[str]) -> list[str]:
    """A run's flags as the doc shows them: keys and local paths left out."""
    shown: list[str] = []
    hide = None
    for arg in argv:
        flag, eq, _ = arg.partition("=")
        if hide is not None:
            shown.append(hide)
            hide = None
        elif flag in SECRET_FLAGS + LOCAL_FLAGS:
            placeholder = "KEY" if flag in SECRET_FLAGS else "DIR"
            if eq:
                shown.append(f"{flag}={placeholder}")
            else:
                shown.append(flag)
                hide = placeholder
        else:
            shown.append(arg)
    return shown


# ---------------------------------------------------------------- the record


def load_record(path: Path = RECORD) -> dict[str, Any]:
    if not path.exists():
        return {"sections": {}}
    record: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return record


def save_record(record: dict[str, Any], path: Path = RECORD) -> None:
    path.write_text(dumps(record), encoding="utf-8")


def merge(record: dict[str, Any], results: dict[str, Any]) -> list[str]:
    """Put every section ``results`` (a run's, as bench-results.json holds them) has into the
    record, with the run's date and flags; the names of those sections."""
    run = {key: results[key] for key in ("at", "quick", "embeddings", "argv") if results.get(key) is not None}
    found = [name for name in SECTIONS if has(name, results)]
    sections = record.setdefault("sections", {})
    for name in found:
        sections[name] = {"run": run, "results": {key: results[key] for key in SECTIONS[name].keys}}
    record["sections"] = {name: sections[name] for name in SECTIONS if name in sections}
    return found


# ---------------------------------------------------------------- the doc


def provenance(run: dict[str, Any]) -> str:
    at = str(run.get("at", ""))
    when = f"{at[:10]} {at[11:16]} UTC" if len(at) >= 16 else "an undated run"
    if "argv" in run:
        flags = shlex.join(run["argv"])
        how = f'`make bench ARGS="{flags}"`' if flags else "`make bench`"
    else:  # a bench-results.json from before the flags were kept
        how = "a `--quick` run of `make bench`" if run.get("quick") else "a run of `make bench`"
        if run.get("embeddings") == "Disabled":
            how += " (Embeddings Disabled)"
    return f"{how}, {when}"


def markdown(name: str, record: dict[str, Any]) -> str:
    """What goes between a section's markers: its tables as a run printed them, the first heading
    turned into a lead line naming the run, the others at the doc's third level ("" when the record
    has no results of the section)."""
    entry = record.get("sections", {}).get(name)
    if entry is None:
        return ""
    printed: list[str] = []
    SECTIONS[name].render(entry["results"], printed.append)
    lines = "\n".join(printed).strip("\n").split("\n")
    lead = False
    for i, line in enumerate(lines):
        heading = HEADING.match(line)
        if heading is None:
            continue
        title = heading.group(1)
        if not lead:
            lines[i] = f"**{title}** — measured by {provenance(entry['run'])}."
            lead = True
        else:
            lines[i] = f"### {title}"
    return re.sub(r"\n{3,}", "\n\n", "\n".join(line.rstrip() for line in lines))


def block(name: str, record: dict[str, Any]) -> str:
    body = markdown(name, record)
    inner = f"\n\n{body}\n\n" if body else "\n"
    return f"<!-- bench:{name}:begin -->{inner}<!-- bench:{name}:end -->"


def check_markers(text: str) -> list[str]:
    """The sections the doc has a place for, in its order; MarkerError when a marker is unpaired,
    nested, repeated or names no section."""
    pairs = list(PAIR.finditer(text))
    names = [m.group(1) for m in pairs]
    for m in pairs:
        if MARK.search(m.group(2)):
            raise MarkerError(f"a marker inside bench:{m.group(1)}'s pair")
    if len(MARK.findall(text)) != 2 * len(pairs):
        raise MarkerError("a bench marker without its pair (each begin needs its end, same name, in that order)")
    unknown = [n for n in names if n not in SECTIONS]
    if unknown:
        raise MarkerError(f"markers of no section of the bench: {unknown} (sections: {list(SECTIONS)})")
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise MarkerError(f"sections with more than one pair of markers: {repeated}")
    return names


def rewrite(text: str, record: dict[str, Any], only: Collection[str] | None = None) -> str:
    """``text`` with the generated sections rendered from the record (``only``: just these; the
    others are left as they are)."""
    check_markers(text)

    def replace(m: re.Match[str]) -> str:
        name = m.group(1)
        return m.group(0) if only is not None and name not in only else block(name, record)

    return PAIR.sub(replace, text)


def unplaced(text: str, record: dict[str, Any]) -> list[str]:
    """Sections the record has results of and the doc has no markers for."""
    placed = set(check_markers(text))
    return [name for name in record.get("sections", {}) if name not in placed]


def render(record: dict[str, Any], only: Collection[str] | None = None, doc: Path = DOC) -> list[str]:
    """Rewrite the doc's generated sections (``only``: just these); the sections that had results
    and no place in the doc."""
    text = doc.read_text(encoding="utf-8")
    rendered = rewrite(text, record, only)
    if rendered != text:
        doc.write_text(rendered, encoding="utf-8")
    return [name for name in unplaced(text, record) if only is None or name in only]
