"""The recall benchmark's pure parts: reading the shipped data sets, mapping ids back to turns,
hit@k, the BM25 reference, and the ``mode`` fallback (a fake endpoint; no network, no stack)."""

from __future__ import annotations

import math
from typing import Any

import pytest
from memory_hub_bench import recall, recall_print
from memory_hub_bench.cases import Scope
from memory_hub_bench.client import BenchError, Target
from memory_hub_bench.datasets import (
    Corpus,
    Question,
    Record,
    Turn,
    dia_ids,
    load_locomo,
    load_longmemeval,
    locomo_corpus,
    locomo_time,
    longmemeval_corpus,
    longmemeval_time,
)


def test_dates_of_both_data_sets_read_as_utc() -> None:
    assert locomo_time("1:56 pm on 8 May, 2023").isoformat() == "2023-05-08T13:56:00+00:00"
    assert locomo_time("12:09 am on 13 September, 2023").isoformat() == "2023-09-13T00:09:00+00:00"
    assert longmemeval_time("2023/05/20 (Sat) 02:21").isoformat() == "2023-05-20T02:21:00+00:00"


def test_evidence_entries_name_every_dialogue_id_they_hold() -> None:
    assert dia_ids(["D1:3", "D2:4; D2:5"]) == ["D1:3", "D2:4", "D2:5"]
    assert dia_ids("D10:1,D10:2") == ["D10:1", "D10:2"]
    assert dia_ids(["D", ""]) == []


def _conversation() -> dict[str, Any]:
    return {
        "speaker_a": "Ann",
        "speaker_b": "Bob",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [
            {"speaker": "Ann", "dia_id": "D1:1", "text": "I adopted a cat."},
            {"speaker": "Bob", "dia_id": "D1:2", "text": "Look!", "blip_caption": "a dog on a beach"},
        ],
        "session_2_date_time": "9:00 am on 9 May, 2023",
        "session_2": [{"speaker": "Bob", "dia_id": "D2:1", "text": "My dog swims."}],
        "session_3_date_time": "9:00 am on 10 May, 2023",  # a date without turns: no session
        "session_1_observation": {
            "Ann": [["Ann adopted a cat.", "D1:1"], ["Ann likes tea.", "D9:9"]],
            "Bob": [["Bob has a dog.", ["D1:2", "D2:1"]]],
        },
    }


def test_a_locomo_conversation_becomes_turns_records_and_questions() -> None:
    qa = [
        {"question": "What pet did Ann adopt?", "evidence": ["D1:1"], "category": 4},
        {"question": "Unanswerable?", "evidence": [], "category": 5},
        {"question": "Names no turn?", "evidence": ["D7:7"], "category": 1},
        {"question": "Where does the dog swim?", "evidence": ["D2:1; D1:2"], "category": 2},
    ]
    corpus = locomo_corpus("conv-x", _conversation(), qa)
    assert [(t.key, t.session, t.role) for t in corpus.turns] == [
        ("D1:1", "session_1", "user"),
        ("D1:2", "session_1", "assistant"),
        ("D2:1", "session_2", "assistant"),
    ]
    assert corpus.turns[0].content == "Ann: I adopted a cat."
    assert corpus.turns[1].content == "Bob: Look! [photo: a dog on a beach]"
    assert [t.timestamp for t in corpus.turns] == [
        "2023-05-08T13:56:00Z",
        "2023-05-08T13:56:30Z",
        "2023-05-09T09:00:00Z",
    ]
    assert [(q.evidence, q.kind) for q in corpus.questions] == [
        (frozenset({"D1:1"}), "category 4"),
        (frozenset({"D2:1", "D1:2"}), "category 2"),
    ]
    assert corpus.skipped == 2
    # An observation whose source names no turn is not a record.
    assert corpus.records == [
        Record("Ann adopted a cat.", frozenset({"D1:1"}), "session_1"),
        Record("Bob has a dog.", frozenset({"D1:2", "D2:1"}), "session_1"),
    ]
    assert corpus.speakers == ("Ann", "Bob")


Session = tuple[str, str, list[dict[str, Any]]]


def _instance(qid: str, sessions: list[Session]) -> dict[str, Any]:
    return {
        "question_id": qid,
        "question_type": "single-session-user",
        "question": f"question {qid}?",
        "haystack_session_ids": [s[0] for s in sessions],
        "haystack_dates": [s[1] for s in sessions],
        "haystack_sessions": [s[2] for s in sessions],
    }


def test_longmemeval_instances_share_one_memory_in_time_order() -> None:
    late: Session = ("s-late", "2023/05/21 (Sun) 10:00", [{"role": "user", "content": "x", "has_answer": True}])
    early: Session = (
        "s-early",
        "2023/05/20 (Sat) 02:21",
        [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b", "has_answer": True}],
    )
    corpus = longmemeval_corpus(
        "lme-1",
        [
            _instance("q1", [late, early]),
            _instance("q2", [early]),  # the same session again: stored once
            _instance("q3", [("s3", "2023/05/22 (Mon) 00:00", [{"role": "user", "content": "none"}])]),
        ],
    )
    assert [(t.key, t.role, t.timestamp) for t in corpus.turns] == [
        ("s-early#0", "user", "2023-05-20T02:21:00Z"),
        ("s-early#1", "assistant", "2023-05-20T02:21:30Z"),
        ("s-late#0", "user", "2023-05-21T10:00:00Z"),
        ("s3#0", "user", "2023-05-22T00:00:00Z"),
    ]
    assert [(q.id, q.evidence) for q in corpus.questions] == [
        ("q1", frozenset({"s-late#0", "s-early#1"})),
        ("q2", frozenset({"s-early#1"})),
    ]
    assert corpus.skipped == 1


def test_the_shipped_data_sets_load_whole() -> None:
    locomo = load_locomo()
    assert len(locomo.corpora) == 10
    assert sum(len(c.turns) for c in locomo.corpora) == 5882
    assert sum(len(c.questions) for c in locomo.corpora) + locomo.skipped == 1986
    assert all(c.records for c in locomo.corpora)
    assert [c.name for c in load_locomo(limit=2).corpora] == ["conv-26", "conv-30"]
    lme = load_longmemeval()
    assert len(lme.corpora) == 6
    assert sum(len(c.questions) for c in lme.corpora) == 90
    assert lme.skipped == 0
    assert len(load_longmemeval(limit=2).corpora) == 2


def test_stemmed_analysis_drops_stop_words_and_stems() -> None:
    assert recall.stemmed("What did Caroline's dogs do when running?") == ["carolin", "dog", "run"]
    assert recall.words("Caroline's DOGS_run 2023") == ["caroline", "s", "dogs", "run", "2023"]


def test_bm25_scores_as_the_textbook_formula() -> None:
    docs = ["cat sat", "dog dog ran", "cat and dog"]
    index = recall.BM25(docs, recall.words)
    n, avg = 3, (2 + 3 + 3) / 3

    def term(tf: int, df: int, length: int) -> float:
        idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
        return idf * tf * 2.2 / (tf + 1.2 * (1 - 0.75 + 0.75 * length / avg))

    scores = index.scores("dog dog")  # a repeated query term counts once
    assert scores[1] == pytest.approx(term(2, 2, 3))
    assert scores[2] == pytest.approx(term(1, 2, 3))
    assert 0 not in scores
    assert index.rank("dog", 10) == [1, 2]
    assert index.rank("cat dog", 1) == [2]
    assert index.rank("zebra", 10) == []


def test_hit_at_k_counts_the_first_result_naming_evidence() -> None:
    evidence = frozenset({"D1:3", "D2:1"})
    assert recall.first_hit([{"D9:9"}, set(), {"D2:1"}], evidence) == 3
    assert recall.first_hit([frozenset({"D1:1", "D1:3"})], evidence) == 1
    assert recall.first_hit([{"D9:9"}], evidence) is None
    tally = recall.Tally("d", "L0 messages", "s")
    for rank in (1, 3, 7, None):
        tally.add(rank, ms=10.0)
    assert [tally.rate(k) for k in recall.KS] == [0.25, 0.5, 0.75]
    row = tally.row()
    assert (row["hit@1"], row["hit@5"], row["hit@10"], row["questions"]) == (0.25, 0.5, 0.75, 4)
    assert recall.percentile([5.0, 1.0, 3.0, 2.0, 4.0], 0.5) == 3.0
    assert recall.percentile(list(range(1, 101)), 0.95) == 95
    assert math.isnan(recall.percentile([], 0.5))


def test_hit_at_10_is_kept_per_question_kind_and_printed_per_data_set() -> None:
    tally = recall.Tally("LoCoMo", "L0 messages", "s")
    for rank, kind in ((1, "category 2"), (None, "category 2"), (12, "category 4"), (10, "category 4")):
        tally.add(rank, kind=kind)
    assert tally.row()["hit@10_by_kind"] == {"category 2": 0.5, "category 4": 0.5}
    lines: list[str] = []
    recall_print.print_kinds([tally, recall.Tally("LongMemEval", "L0 messages", "s")], lines.append)
    table = "\n".join(lines)
    assert "### LoCoMo: hit@10 by question kind" in table and "LongMemEval" not in table
    assert "| category 2 | 2 | 50.0% |" in table and "| category 4 | 2 | 50.0% |" in table


def test_each_question_knows_when_it_is_asked() -> None:
    from memory_hub_bench.datasets import load_longmemeval

    lme = load_longmemeval(limit=1)
    assert all(q.asked and q.asked.endswith("Z") for c in lme.corpora for q in c.questions)


def _turns(session: str, n: int) -> list[Turn]:
    return [Turn(f"{session}:{i}", session, "user", f"text {i}", "2023-01-01T00:00:00Z") for i in range(n)]


def test_batches_keep_to_one_session_and_at_most_100() -> None:
    sizes = [(len(b), b[0].session) for b in recall.batches(_turns("a", 150) + _turns("b", 3))]
    assert sizes == [(100, "a"), (50, "a"), (3, "b")]


def test_distractors_are_renamed_and_kept_apart() -> None:
    base = Corpus("conv-1", _turns("s", 2), [], [Record("Ann r", frozenset({"s:0"}), "s")], ("Ann", "Bob"))
    other_turns = [Turn(f"D1:{i}", "session_1", "user", f"Cy: hi Dee {i}, Cyril", "t") for i in range(5)]
    other = Corpus(
        "conv-2", other_turns, [], [Record("Cy met Dee", frozenset({"D1:0"}), "session_1")] * 3, ("Cy", "Dee")
    )
    turns, records = recall.distractors(base, [other], 2)
    assert len(turns) == 4 and len(records) == 2
    assert turns[0] == Turn("x-conv-2-D1:0", "x-conv-2-session_1", "user", "Ann: hi Bob 0, Cyril", "t")
    assert records[0] == Record("Ann met Bob", frozenset({"x-conv-2-D1:0"}), "x-conv-2-session_1")


class FakeTarget(Target):
    """Answers searches from a script; refuses ``mode`` like an older server when told to."""

    def __init__(self, refuse_mode: bool) -> None:
        super().__init__("fake", "http://127.0.0.1:9", "")
        self.refuse_mode = refuse_mode
        self.bodies: list[dict[str, Any]] = []

    def post(self, path: str, body: dict[str, Any]) -> tuple[float, Any]:
        self.bodies.append(body)
        if "mode" in body and self.refuse_mode:
            raise BenchError("fake /v3/conversation/search: HTTP 400: mode")
        if "boom" in body["query"]:
            raise BenchError("fake /v3/conversation/search: HTTP 504: timeout")
        ids = ["msg-b", "msg-a"] if "pet" in body["query"] else []
        data: dict[str, Any] = {"messages": [{"id": i} for i in ids]}
        if "mode" in body:
            data["mode_used"] = "keyword"
        return 5.0, data


@pytest.mark.parametrize("refuse", [False, True])
def test_questions_map_ids_back_to_turns_and_mode_falls_back(refuse: bool) -> None:
    target = FakeTarget(refuse_mode=refuse)
    endpoint = recall.Endpoint(target, None, "team")
    corpus = Corpus(
        "c",
        [],
        [Question("q1", "which pet?", frozenset({"D1:1"}), "k"), Question("q2", "other", frozenset({"D1:1"}), "k")],
    )
    loaded = recall.Loaded(corpus, Scope("team", "recall", "u"), {"msg-a": frozenset({"D1:1"})})
    tally = recall.questions_pass(endpoint, [loaded], "L0 messages", "d", "hybrid")
    assert (tally.questions, tally.hits[1], tally.hits[5]) == (2, 0, 1)
    assert all(b["limit"] == 10 and b["user_id"] == "u" for b in target.bodies)
    if refuse:
        assert endpoint.no_mode and tally.mode == "hybrid (refused: none sent)"
        assert "mode" not in target.bodies[-1] and tally.mode_used == ""
        assert endpoint.notes == ["fake: `mode` refused (400); asked without it"]
    else:
        assert target.bodies[-1]["mode"] == "hybrid" and tally.mode_used == "keyword"


def test_a_search_that_keeps_failing_is_retried_then_counted_as_a_miss(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(recall, "RETRY_SECONDS", 0.0)
    target = FakeTarget(refuse_mode=False)
    endpoint = recall.Endpoint(target, None, "team")
    questions = [Question("q1", "boom", frozenset({"D1:1"}), "k"), Question("q2", "pet", frozenset({"D1:1"}), "k")]
    loaded = recall.Loaded(Corpus("c", [], questions), Scope("team", "recall", "u"), {"msg-a": frozenset({"D1:1"})})
    tally = recall.questions_pass(endpoint, [loaded], "L0 messages", "d", None)
    assert (tally.questions, tally.failed, tally.hits[5], len(tally.latencies)) == (2, 1, 1, 1)
    assert sum(1 for b in target.bodies if b["query"] == "boom") == 1 + recall.RETRIES
    assert endpoint.retries == recall.RETRIES


def test_a_recall_run_says_when_its_writes_were_batched() -> None:
    """``--vector-writes Batched`` runs the section with the template's default and the rendered
    section says so; a run of before (no such key) or of Immediate renders as it did."""
    from memory_hub_bench.__main__ import parse

    assert parse(["--recall-only", "--vector-writes", "Batched"]).vector_writes == "Batched"
    assert parse(["--recall-only"]).vector_writes == "Immediate"
    empty = {"datasets": {}, "rows": [], "size": [], "notes": []}
    for result, shown in (
        (empty | {"vector_writes": "Batched"}, True),
        (empty, False),
        (empty | {"vector_writes": "Immediate"}, False),
    ):
        lines: list[str] = []
        recall_print.render(result, lines.append)
        assert any("`VectorWrites: Batched`" in line for line in lines) is shown


class _Log:
    """A call log that answers each search with two DynamoDB calls: 3 items in 1.0 read unit, 2 in 4.5."""

    def take(self) -> list[dict[str, Any]]:
        return [
            {"service": "dynamodb", "read": 3, "capacity": [{"TableName": "t", "ReadCapacityUnits": 1.0}]},
            {"service": "dynamodb", "read": 2, "capacity": [{"TableName": "t", "ReadCapacityUnits": 4.5}]},
            {"service": "s3vectors", "read": 0, "capacity": None},
        ]


def test_a_search_counts_its_items_and_its_read_units_and_the_tables_print_both() -> None:
    endpoint = recall.Endpoint(FakeTarget(refuse_mode=False), _Log(), "team")  # type: ignore[arg-type]
    questions = [Question("q1", "pet", frozenset({"D1:1"}), "k")]
    loaded = recall.Loaded(Corpus("c", [], questions), Scope("team", "recall", "u"), {"msg-a": frozenset({"D1:1"})})
    row = recall.questions_pass(endpoint, [loaded], "L0 messages", "d", None).row()
    assert (row["items_read_p50"], row["read_units_p50"]) == (5, 5.5)
    size = {"system": "s", "level": "L0", "mode": "m", "items_1x": 1, "items_10x": 10, "questions": 1}
    lines: list[str] = []
    result = {
        "rows": [row],
        "notes": [],
        "datasets": {},
        "size": [{**size, "1x": row, "10x": {**row, "read_units_p50": 11.0}}],
    }
    recall_print.render(result, lines.append)
    assert "| s | L0 (1 → 10 items, 1 questions) | m | DynamoDB read units p50 | 5.5 | 11.0 | 2.00 |" in lines
    assert any(line.startswith("| d | L0 messages |") and line.endswith("| 5 / 5 | 5.5 / 5.5 |") for line in lines)
    before = {k: v for k, v in row.items() if not k.startswith("read_units")}  # a record of before has none
    lines.clear()
    recall_print.render({**result, "rows": [before], "size": [{**size, "1x": before, "10x": before}]}, lines.append)
    assert not any("read units p50 |" in line for line in lines) and any("items read p50" in line for line in lines)
    assert any(line.startswith("| d | L0 messages |") and line.endswith("| 5 / 5 | – / – |") for line in lines)
