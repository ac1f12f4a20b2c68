"""The template's schedules, fired as EventBridge fires them (moto fires none): each function's
enabled ``Schedule`` event of a ``rate(…)`` expression invokes it with the event's ``Input`` (or
EventBridge's scheduled event) once a period, the first a period after the stack starts. A ``cron(…)``
expression is not fired here (``memory-hub cleanup`` runs the cleanup at once). A run that fails is
logged; the next comes a period later, as Lambda's retries aside it would on AWS."""

from __future__ import annotations

import logging
import re
import threading
from dataclasses import dataclass
from typing import Any

from .functions import FunctionPool
from .template import Deployment

log = logging.getLogger("memory_hub_local.schedules")

_RATE = re.compile(r"rate\(\s*(\d+)\s+(minute|minutes|hour|hours|day|days)\s*\)")
_UNIT_S = {"minute": 60, "hour": 3_600, "day": 86_400}


def period_s(expression: str) -> float | None:
    """The seconds between runs of a ``rate(N unit)`` expression; None for any other (``cron(…)``)."""
    matched = _RATE.fullmatch(expression.strip())
    if not matched or int(matched.group(1)) < 1:
        return None
    return float(int(matched.group(1)) * _UNIT_S[matched.group(2).rstrip("s")])


def scheduled_event() -> dict[str, Any]:
    """EventBridge's event for a schedule without an ``Input``."""
    return {"source": "aws.events", "detail-type": "Scheduled Event", "detail": {}}


@dataclass
class Timer:
    function: str  # logical id
    period_s: float
    event: dict[str, Any]
    pool: FunctionPool
    stopping: threading.Event
    runs: int = 0
    thread: threading.Thread | None = None

    def start(self) -> Timer:
        self.thread = threading.Thread(target=self._run, daemon=True, name=f"schedule-{self.function}")
        self.thread.start()
        return self

    def _run(self) -> None:
        while not self.stopping.wait(self.period_s):
            self.fire()

    def fire(self) -> None:
        self.runs += 1
        try:
            outcome = self.pool.invoke(self.function, self.event)
        except Exception:  # the schedule outlives a run that could not even start, as EventBridge's does
            log.exception("scheduled run of %s could not run", self.function)
            return
        if outcome.error is not None:
            log.warning("scheduled run of %s failed", self.function)


def start(deployment: Deployment, pool: FunctionPool) -> list[Timer]:
    stopping = threading.Event()
    timers: list[Timer] = []
    for logical_id, function in deployment.functions.items():
        for schedule in function.schedules:
            period = period_s(schedule.expression)
            if period is None:
                log.info("%s: %s is not fired locally", logical_id, schedule.expression)
                continue
            timers.append(Timer(logical_id, period, schedule.event or scheduled_event(), pool, stopping).start())
    return timers


def stop(timers: list[Timer], wait_s: float = 2.0) -> None:
    """No run starts from here on; one running is waited for ``wait_s`` at most (it fails once the
    stack's function environments are closed)."""
    for timer in timers:
        timer.stopping.set()
    for timer in timers:
        if timer.thread is not None:
            timer.thread.join(wait_s)
