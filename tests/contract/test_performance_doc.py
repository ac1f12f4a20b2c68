"""docs/performance.md's generated sections are the bench's record rendered: what is between a
``<!-- bench:NAME:begin -->`` / ``<!-- bench:NAME:end -->`` pair is what the bench's renderer makes of
the section's results in ``infra/bench/memory_hub_bench/performance.json``, so a hand edit inside
the markers, or a record a run changed and did not render, fails here (``make docs-perf`` renders
the doc again from the record)."""

from __future__ import annotations

import copy
import re

import pytest
from memory_hub_bench import docs


@pytest.fixture(scope="module")
def page() -> str:
    return docs.DOC.read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def record() -> dict:
    return docs.load_record()


def test_the_generated_sections_are_the_record_rendered(page: str, record: dict):
    rendered = docs.rewrite(page, record)
    stale = [
        name
        for name in docs.check_markers(page)
        if _between(page, name) != _between(rendered, name)  # which pair, to say so
    ]
    assert rendered == page, (
        f"docs/performance.md's generated sections {stale} are not the record rendered: "
        "edit the bench (or run it), not the tables; `make docs-perf` renders them from the record"
    )


def test_every_section_of_the_bench_has_its_place_and_the_record_has_results(page: str, record: dict):
    assert sorted(docs.check_markers(page)) == sorted(docs.SECTIONS)
    assert docs.unplaced(page, record) == []
    assert record["sections"], "the record holds at least one section's results"
    for name, entry in record["sections"].items():
        assert name in docs.SECTIONS and entry["run"].get("at"), name
        assert set(entry["results"]) == set(docs.SECTIONS[name].keys), name
        assert docs.markdown(name, record).startswith("**"), f"{name}: its lead line names the run"


def test_a_hand_edit_inside_the_markers_or_an_unrendered_run_is_caught(page: str, record: dict):
    name = next(iter(record["sections"]))
    inside = _between(page, name)
    edited = page.replace(inside, inside.replace("|---|", "|---|\n| a row by hand |", 1))
    assert edited != page and docs.rewrite(edited, record) == page  # rendering puts back what the record says
    newer = copy.deepcopy(record)
    newer["sections"][name]["run"]["at"] = "2099-01-01T00:00:00Z"
    assert docs.rewrite(page, newer) != page  # a record that changed shows in the page once rendered
    # a run of other sections leaves this section's markers alone, hand edit and all
    others = [n for n in docs.SECTIONS if n != name]
    assert docs.rewrite(edited, record, only=others) == edited


def test_a_section_without_results_keeps_its_markers_empty(page: str, record: dict):
    empty = [n for n in docs.SECTIONS if n not in record["sections"]]
    for name in empty:
        assert _between(page, name) == "\n", f"{name}: no results in the record, nothing between its markers"
    assert docs.block("routes", {"sections": {}}) == "<!-- bench:routes:begin -->\n<!-- bench:routes:end -->"


@pytest.mark.parametrize(
    "text",
    [
        "<!-- bench:routes:begin -->\n",  # no end
        "<!-- bench:routes:begin -->\n<!-- bench:cost:end -->\n",  # another section's end
        "<!-- bench:nothing:begin -->\n<!-- bench:nothing:end -->\n",  # no such section
        "<!-- bench:cost:begin -->\n<!-- bench:cost:end -->\n<!-- bench:cost:begin -->\n<!-- bench:cost:end -->\n",
        "<!-- bench:cost:begin -->\n<!-- bench:routes:begin -->\n<!-- bench:routes:end -->\n<!-- bench:cost:end -->",
    ],
)
def test_markers_that_do_not_pair_up_are_refused(text: str):
    with pytest.raises(docs.MarkerError):
        docs.rewrite(text, {"sections": {}})


def test_a_run_replaces_the_sections_it_ran_and_keeps_the_others():
    record = {"sections": {"cost": {"run": {"at": "old"}, "results": {"cost": {"old": 1}}}}}
    run = {"at": "2026-12-05T10:00:00Z", "quick": True, "embeddings": "Enabled", "argv": ["--quick"]}
    merged = docs.merge(record, run | {"cold_start": [], "layer": "x", "recall": {"new": 1}, "seconds": 3})
    assert merged == ["cold", "recall"]
    assert list(record["sections"]) == ["cold", "recall", "cost"]  # the order the bench runs them
    assert record["sections"]["cost"]["results"] == {"cost": {"old": 1}}
    assert record["sections"]["recall"] == {
        "run": {"at": "2026-12-05T10:00:00Z", "quick": True, "embeddings": "Enabled", "argv": ["--quick"]},
        "results": {"recall": {"new": 1}},
    }
    assert docs.provenance(record["sections"]["recall"]["run"]) == '`make bench ARGS="--quick"`, 2026-12-05 10:00 UTC'


def test_the_flags_a_page_shows_hold_no_key_nor_local_path():
    argv = ["--compare", "http://127.0.0.1:8420", "--compare-key", "s3cret", "--compare-data-dir=/home/me/x"]
    shown = docs.shown_argv([*argv, "--formation-key=k2", "--quick"])
    assert shown == [
        "--compare",
        "http://127.0.0.1:8420",
        "--compare-key",
        "KEY",
        "--compare-data-dir=DIR",
        "--formation-key=KEY",
        "--quick",
    ]


def _between(text: str, name: str) -> str:
    found = re.search(rf"<!-- bench:{name}:begin -->(.*?)<!-- bench:{name}:end -->", text, re.S)
    assert found is not None, f"no bench:{name} markers"
    return found.group(1)
