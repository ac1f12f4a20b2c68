"""Test hooks at the AWS boundary (enabled with ``--test-hooks``): every call is recorded (who,
what, which IAM actions, the status), and a hook can pause matching calls until released — to run
an interleaving on purpose — or answer them with an AWS error instead of doing them (fault
injection). Nothing inside a function is patched: the function sees exactly what AWS would send."""

from __future__ import annotations

import itertools
import json
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from . import moto_capacity
from .shapes import Call

MAX_CALLS = 200_000


def items_read(call: Call, status: int, body: bytes) -> int:
    """How many items a DynamoDB read evaluated (what read capacity pays for)."""
    if (
        call.service != "dynamodb"
        or status != 200
        or call.operation not in ("Query", "Scan", "GetItem", "BatchGetItem", "TransactGetItems")
    ):
        return 0
    answer = json.loads(body or b"{}")
    if call.operation in ("Query", "Scan"):
        return int(answer.get("ScannedCount", answer.get("Count", 0)))
    if call.operation == "GetItem":
        return int("Item" in answer)
    if call.operation == "BatchGetItem":
        return sum(len(items) for items in answer.get("Responses", {}).values())
    return len(answer.get("Responses", []))


@dataclass
class Hook:
    id: int
    match: dict[str, Any]
    action: str  # pause | fail | delay
    times: int | None = 1  # None = every matching call
    error: dict[str, Any] = field(default_factory=dict)
    delay_s: float = 0.0
    hits: int = 0
    paused: int = 0
    released: threading.Event = field(default_factory=threading.Event)
    arrived: threading.Condition = field(default_factory=threading.Condition)

    def matches(self, call: Call, function: str | None) -> bool:
        if self.times is not None and self.hits >= self.times:
            return False
        m = self.match
        if "function" in m and m["function"] != function:
            return False
        if "operation" in m and m["operation"] != call.operation:
            return False
        if "table" in m and m["table"] not in call.tables:
            return False
        if "key_contains" in m:  # a string, or a list of strings the key must all contain
            wanted = m["key_contains"] if isinstance(m["key_contains"], list) else [m["key_contains"]]
            if call.key is None or not all(part in call.key for part in wanted):
                return False
        if "action" in m and not any(action == m["action"] for action, _ in call.actions):
            return False
        return "body_contains" not in m or m["body_contains"] in repr(call.body)

    def state(self) -> dict[str, Any]:
        return {"id": self.id, "hits": self.hits, "paused": self.paused, "released": self.released.is_set()}


class Hooks:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._hooks: dict[int, Hook] = {}
        self._ids = itertools.count(1)
        self.calls: list[dict[str, Any]] = []
        self._sequence = itertools.count(1)

    def add(self, spec: dict[str, Any]) -> Hook:
        with self._lock:
            hook = Hook(
                next(self._ids),
                dict(spec.get("match", {})),
                spec.get("action", "pause"),
                spec.get("times", 1),
                dict(spec.get("error", {})),
                float(spec.get("delay_s", 0.0)),
            )
            self._hooks[hook.id] = hook
            return hook

    def get(self, hook_id: int) -> Hook | None:
        return self._hooks.get(hook_id)

    def remove(self, hook_id: int) -> None:
        with self._lock:
            hook = self._hooks.pop(hook_id, None)
        if hook is not None:
            hook.released.set()

    def clear(self) -> None:
        with self._lock:
            hooks, self._hooks = list(self._hooks.values()), {}
        for hook in hooks:
            hook.released.set()

    def before(self, call: Call, function: str | None) -> dict[str, Any] | None:
        """Run the hooks a call matches: pauses wait here; a fault is returned (to answer with)."""
        with self._lock:
            matching = [h for h in self._hooks.values() if h.matches(call, function)]
            for hook in matching:
                hook.hits += 1
        for hook in matching:
            if hook.action == "pause":
                with hook.arrived:
                    hook.paused += 1
                    hook.arrived.notify_all()
                hook.released.wait(timeout=120)
            elif hook.action == "fail":
                return hook.error or {"status": 500, "code": "InternalServerError", "message": "injected"}
            elif hook.action == "delay":  # a network round trip's worth, outside the lock
                time.sleep(hook.delay_s)
        return None

    def wait_paused(self, hook_id: int, timeout: float) -> bool:
        hook = self._hooks.get(hook_id)
        if hook is None:
            return False
        with hook.arrived:
            return hook.arrived.wait_for(lambda: hook.paused > 0, timeout=timeout)

    def record(
        self,
        call: Call,
        function: str | None,
        status: int,
        refused: str | None = None,
        ms: float = 0.0,
        read: int = 0,
        *,
        injected: bool = False,
    ) -> None:
        """One call as answered; ``injected``: the refusal was a test's fault hook, not the AWS side.
        A DynamoDB call carries the capacity it consumed (``moto_capacity``: this thread's last
        request, failures included), what the bench prices."""
        consumed = moto_capacity.take_last() if call.service == "dynamodb" else None
        entry = {
            "seq": next(self._sequence),
            "function": function,
            "status": status,
            "refused": refused,
            "ms": round(ms, 3),
            "read": read,
            "injected": injected,
            "capacity": consumed,
            **call.describe(),
        }
        with self._lock:
            self.calls.append(entry)
            if len(self.calls) > MAX_CALLS:
                del self.calls[: MAX_CALLS // 10]

    def since(self, seq: int) -> list[dict[str, Any]]:
        with self._lock:
            return [c for c in self.calls if c["seq"] > seq]
