"""The local stack fires the template's schedules as EventBridge would (moto fires none): a
``rate(…)`` schedule that the parameters enable invokes its function with the event's ``Input``
once a period; a disabled one (the embedding drain with ``VectorDrainMinutes`` 0, or with
``VectorWrites`` Immediate) and a ``cron(…)`` one are not fired; the queue's event source is on
exactly when the drain is off."""

from __future__ import annotations

import copy
import threading
import time
from typing import Any

import pytest
from memory_hub_local import event_sources, schedules
from memory_hub_local.template import deploy, load_raw

SECRETS = {"TokenSecret": "arn:aws:secretsmanager:us-east-1:000000000000:secret:t", "LlmApiKey": "arn:x"}


@pytest.mark.parametrize(
    ("expression", "seconds"),
    [
        ("rate(1 minute)", 60.0),
        ("rate(15 minutes)", 900.0),
        ("rate( 2 hours )", 7200.0),
        ("rate(1 day)", 86400.0),
        ("rate(0 minutes)", None),
        ("cron(0 3 * * ? *)", None),
        ("rate(5 seconds)", None),
    ],
)
def test_a_rate_expression_gives_its_period(expression, seconds):
    assert schedules.period_s(expression) == seconds


def _deployment(**parameters: str) -> Any:
    return deploy("us-east-1", SECRETS, parameters)


def _drain(deployment: Any) -> list[Any]:
    return list(deployment.functions["EmbedFunction"].schedules)


def test_the_drain_is_scheduled_only_with_vector_drain_minutes_and_its_queue_is_never_polled():
    drained = _deployment(VectorWrites="Batched", VectorDrainMinutes="30")
    [drain] = _drain(drained)
    assert (schedules.period_s(drain.expression), drain.event) == (1800.0, {"drain": True})
    environment = drained.functions["MemoryFunction"].environment
    assert environment["VECTOR_QUEUE_URL"] and environment["VECTOR_QUEUE_URL"] != environment["EMBED_QUEUE_URL"]
    polled = {s.queue_url for s in event_sources.sources(drained) if s.function == "EmbedFunction"}
    assert polled == {environment["EMBED_QUEUE_URL"]}, "what a write could not embed: within minutes"
    for parameters in ({"VectorWrites": "Batched", "VectorDrainMinutes": "0"}, {"VectorWrites": "Immediate"}):
        deployment = _deployment(**parameters)
        assert _drain(deployment) == [], parameters
        assert deployment.functions["MemoryFunction"].environment["VECTOR_QUEUE_URL"] == "", parameters
        queues = {s.queue_url for s in event_sources.sources(deployment) if s.function == "EmbedFunction"}
        assert len(queues) == 2, "no drain: VectorQueue's own event source takes what is left in it"


def test_a_mapping_that_is_off_polls_nothing(monkeypatch):
    deployment = _deployment()
    raw = copy.deepcopy(load_raw())
    raw["Resources"]["EmbedFunction"]["Properties"]["Events"]["Queue"]["Properties"]["Enabled"] = False
    monkeypatch.setattr(event_sources, "load_raw", lambda: raw)
    assert "EmbedFunction" not in {s.function for s in event_sources.sources(deployment)}


class _Pool:
    def __init__(self) -> None:
        self.invoked: list[tuple[str, Any]] = []
        self.fired = threading.Event()

    def invoke(self, name: str, event: Any) -> Any:
        self.invoked.append((name, event))
        self.fired.set()
        return type("Invocation", (), {"error": None})()


def test_a_timer_invokes_its_function_with_the_schedules_event_once_a_period():
    pool, stopping = _Pool(), threading.Event()
    timer = schedules.Timer("EmbedFunction", 0.05, {"drain": True}, pool, stopping)  # type: ignore[arg-type]
    timer.start()
    assert pool.fired.wait(5), "the timer never fired"
    time.sleep(0.2)
    stopping.set()
    assert pool.invoked[0] == ("EmbedFunction", {"drain": True})
    assert 2 <= timer.runs == len(pool.invoked), "once a period, not once"
    count = len(pool.invoked)
    time.sleep(0.2)
    assert len(pool.invoked) <= count + 1, "a stopped timer fires no more"


def test_a_run_that_cannot_start_leaves_the_schedule_firing():
    class Broken(_Pool):
        def invoke(self, name: str, event: Any) -> Any:
            super().invoke(name, event)
            raise BrokenPipeError("the environment died")

    pool, stopping = Broken(), threading.Event()
    timer = schedules.Timer("EmbedFunction", 0.05, {"drain": True}, pool, stopping).start()  # type: ignore[arg-type]
    time.sleep(0.3)
    schedules.stop([timer])
    assert len(pool.invoked) >= 2, "it fired again after a run raised"
    assert timer.thread is not None and not timer.thread.is_alive(), "stop waited for it"
