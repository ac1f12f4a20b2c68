"""The formation bench's pure parts: scoring formed records against observations (a hand-made
input, a bag-of-words embedder), which batch a message falls in, the lag figures, the price, and
what the counting relay counts of the scripted model's answers (in process; no network)."""

from __future__ import annotations

import json
import math
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from memory_hub_bench import formation, formation_meter
from memory_hub_bench.cases import Scope
from memory_hub_bench.datasets import Corpus, Record, Turn
from memory_hub_bench.formation_score import Fact, score
from memory_hub_bench.formation_watch import FULL, IDLE, Sent, Stored, batch_kinds, first_sessions
from memory_hub_bench.recall import Loaded
from memory_hub_local import scripted_llm

VOCABULARY = ("cat", "dog", "tea", "paris", "guitar", "run")


def bag_of_words(texts: list[str]) -> np.ndarray:
    """A stand-in embedder: one dimension per vocabulary word, L2-normalised (a text without any:
    the zero vector, cosine 0 with everything)."""
    rows = np.array([[float(word in text.lower().split()) for word in VOCABULARY] for text in texts])
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    return rows / np.maximum(norms, 1e-12)


def fact(user: str, text: str, *turns: str) -> Fact:
    return Fact(user, text, frozenset(turns))


def test_scoring_counts_meaning_and_provenance_per_user() -> None:
    observations = [
        fact("u1", "cat", "D1:1"),  # said by r1, which cites its turn
        fact("u1", "dog", "D1:2"),  # said by r2, which cites another turn
        fact("u1", "tea", "D1:3"),  # no record says it
        fact("u2", "cat", "D1:1"),  # u1's record says it: another user's never counts
    ]
    records = [
        fact("u1", "cat", "D1:1"),
        fact("u1", "dog", "D1:9"),
        fact("u1", "guitar", "D1:3"),  # cites tea's turn, says something else
        fact("u2", "paris", "D1:1"),  # cites u2's cat turn, says something else
    ]
    result = score(observations, records, bag_of_words, threshold=0.5).figures()
    assert (result["observations"], result["records"]) == (4, 4)
    assert result["recall_lenient"] == 0.5  # cat, dog of u1
    assert result["recall_strict"] == 0.25  # cat of u1 alone
    assert result["precision_lenient"] == 0.5  # r1, r2
    assert result["precision_strict"] == 0.25  # r1
    assert result["provenance"] == 0.5  # of the 2 best matches at >= 0.5, r1 cites its turn
    assert result["threshold"] == 0.5


def test_closeness_is_the_threshold_inclusive_and_empty_sides_score_nothing() -> None:
    half = [fact("u", "cat dog", "a")]  # cosine with "cat": 1/sqrt(2) = 0.707
    assert score(half, [fact("u", "cat", "a")], bag_of_words, threshold=0.7).found == 1
    assert score(half, [fact("u", "cat", "a")], bag_of_words, threshold=0.71).found == 0
    nothing = score(half, [], bag_of_words).figures()
    assert nothing["recall_lenient"] == 0.0 and math.isnan(nothing["precision_lenient"])
    assert math.isnan(nothing["provenance"]) and nothing["best_cosine_p50"] == 0.0
    assert math.isnan(score([], [], bag_of_words).figures()["recall_strict"])


def turns(session: str, n: int) -> list[Turn]:
    return [Turn(f"{session}:{i}", session, "user", f"text {i}", "2023-05-08T13:56:00Z") for i in range(n)]


def test_a_message_is_in_a_full_batch_below_its_session_s_last_multiple_of_the_batch() -> None:
    kinds = batch_kinds(turns("s1", 23) + turns("s2", 7) + turns("s3", 10), 10)
    assert [kinds[f"s1:{i}"] for i in (0, 19, 20, 22)] == [FULL, FULL, IDLE, IDLE]
    assert {kinds[f"s2:{i}"] for i in range(7)} == {IDLE}
    assert {kinds[f"s3:{i}"] for i in range(10)} == {FULL}


def test_lags_by_batch_kind_and_the_idle_bound() -> None:
    stored = Stored()
    stored.sent = {
        "m1": Sent("u", "D1:1", "user", FULL, 100.0),
        "m2": Sent("u", "D1:2", "user", FULL, 100.0),
        "m3": Sent("u", "D1:3", "user", IDLE, 100.0),
        "m4": Sent("u", "D1:4", "assistant", IDLE, 100.0),  # never cited
    }
    watcher = SimpleNamespace(
        seen={"m1": 103.0, "m2": 120.0, "m3": 190.0}, written={"m1": 102.5, "m2": 119.0, "m3": 170.0}
    )
    lags = formation.lags(stored, watcher, 5)  # type: ignore[arg-type]
    full, idle = lags[FULL], lags[IDLE]
    assert (full["messages"], full["cited"], full["seen_p50_s"], full["seen_p95_s"]) == (2, 2, 3.0, 20.0)
    assert (full["written_p50_s"], full["written_p95_s"]) == (2.5, 19.0)
    assert (idle["messages"], idle["cited"], idle["written_p50_s"]) == (2, 1, 70.0)
    assert idle["written_after_idle_plus_60_s"] == 1  # 70 s > 5 + 60 s
    assert full["written_after_idle_plus_60_s"] == 0


def test_the_paced_probe_takes_the_first_sessions() -> None:
    kept = first_sessions(turns("s1", 3) + turns("s2", 2) + turns("s3", 1), 2)
    assert [t.key for t in kept] == ["s1:0", "s1:1", "s1:2", "s2:0", "s2:1"]
    assert len(first_sessions(turns("s1", 3), None)) == 3


def test_formed_records_are_mapped_to_the_data_set_s_turns() -> None:
    corpus = Corpus("conv-1", turns("D1", 2), [], [Record("Ann adopted a cat.", frozenset({"D1:0"}), "session_1")])
    loaded = Loaded(corpus, Scope("t", "a", "u"), messages={"msg-1": frozenset({"D1:0"}), "msg-2": frozenset({"D1:1"})})
    stored = Stored(loaded={"u": loaded})
    items: list[dict[str, Any]] = [
        {"formed": True, "content": "Ann has a cat", "source_message_ids": ["msg-1", "msg-2"]},
        {"formed": False, "content": "written by a client", "source_message_ids": ["msg-1"]},
    ]
    done = SimpleNamespace(stored=stored, formed={"u": items})
    observations, formed = formation.facts(done)  # type: ignore[arg-type]
    assert observations == [Fact("u", "Ann adopted a cat.", frozenset({"D1:0"}))]
    assert formed == [Fact("u", "Ann has a cat", frozenset({"D1:0", "D1:1"}))]


def test_cost_is_nova_lite_s_list_price_per_thousand_tokens() -> None:
    assert formation.cost(1_000_000, 0) == pytest.approx(0.06)
    assert formation.cost(0, 1_000_000) == pytest.approx(0.24)
    assert formation.PRICE_MODEL == "amazon.nova-lite-v1:0"


def test_the_relay_counts_calls_as_the_model_reports_them() -> None:
    model = scripted_llm.ScriptedModel()  # in process: what the relay would be answered
    usage = formation_meter.Usage()
    tool = {"type": "function", "function": {"name": "save_memories", "parameters": {"type": "object"}}}
    conversation = {"messages": [{"id": "m1", "role": "user", "content": "I like tea", "context": False}]}
    text = f"Form memories.\n<conversation>\n{json.dumps(conversation)}\n</conversation>"
    body = {
        "model": "scripted",
        "messages": [{"role": "user", "content": text}],
        "tools": [tool],
        "tool_choice": {"type": "function", "function": {"name": "save_memories"}},
    }
    hello = {"messages": [{"role": "user", "content": "hello"}]}
    for request in (body, hello):
        answer = model.complete(request)
        usage.count(request, answer.status, json.dumps(answer.body).encode(), 0.25)
    usage.count(hello, 503, b'{"error": {}}', 0.1)
    call = model.complete(body).body["choices"][0]["message"]["tool_calls"][0]["function"]
    assert json.loads(call["arguments"])["memories"][0]["content"] == "The user said: I like tea"
    stats = model.stats()
    assert dict(usage.calls) == {"save_memories": 1, "-": 2} and usage.estimated == 0 and usage.errors["-"] == 1
    assert usage.total(usage.input_tokens) + tokens_of(body) == stats["prompt_tokens"]  # the third call: not relayed
    assert usage.input_chars["save_memories"] == len(text) + len(json.dumps([tool]))
    assert usage.output_chars["save_memories"] == len(call["arguments"])
    assert usage.output_chars["-"] == len("OK.")
    assert usage.summary(("save_memories",))["calls"] == 1 and usage.seconds == [0.25, 0.25]


def tokens_of(request: dict[str, Any]) -> int:
    return scripted_llm.tokens_of(json.dumps(request["messages"]) + json.dumps(request.get("tools") or []))


def test_a_reply_without_usage_is_estimated_and_a_failure_counted() -> None:
    usage = formation_meter.Usage()
    reply = {"choices": [{"message": {"content": "x" * 10}}]}
    usage.add("write_scene", 41, reply, 0.5)
    usage.add("write_scene", 8, None, 0.1)
    assert usage.estimated == 1 and usage.errors["write_scene"] == 1 and usage.calls["write_scene"] == 2
    assert (usage.input_tokens["write_scene"], usage.output_tokens["write_scene"]) == (11, 3)
    assert usage.seconds == [0.5]
