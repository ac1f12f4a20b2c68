"""Fault injection at the AWS boundary for the unit tier: botocore event hooks on the process's own
clients (``memory_hub.storage.aws``). A ``before-call`` handler that returns ``(http, parsed)`` is
the answer botocore hands back instead of sending the request (as ``botocore.stub.Stubber`` does),
so the code under test sees exactly what it would see from AWS, error classes included."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from botocore.awsrequest import AWSResponse


def answer(status: int, parsed: dict[str, Any]) -> tuple[AWSResponse, dict[str, Any]]:
    """What a ``before-call`` handler returns to stand in for AWS's answer."""
    parsed = {**parsed, "ResponseMetadata": {"HTTPStatusCode": status, "HTTPHeaders": {}, "RetryAttempts": 0}}
    return AWSResponse("https://unit.test/", status, {}, None), parsed


def error(status: int, code: str, message: str = "injected", **extra: Any) -> tuple[AWSResponse, dict[str, Any]]:
    return answer(status, {"Error": {"Code": code, "Message": message}, **extra})


@contextmanager
def hook(client: Any, event: str, handler: Callable[..., Any]) -> Iterator[None]:
    """``handler`` on ``event`` of ``client`` for the duration of the block."""
    client.meta.events.register(event, handler)
    try:
        yield
    finally:
        client.meta.events.unregister(event, handler)


class Calls:
    """A ``before-call`` handler that records every call's API parameters (thread-safe) and answers
    the n-th call with ``answers[n]`` when there is one (None: let the call through)."""

    def __init__(self, *answers: Any) -> None:
        self.answers = list(answers)
        self.params: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    def __call__(self, params: dict[str, Any] | None = None, context: dict[str, Any] | None = None, **_: Any) -> Any:
        with self._lock:
            index = len(self.params)
            self.params.append(dict(params or {}))  # a copy: later handlers rewrite the original
        if index < len(self.answers):
            reply = self.answers[index]
            if isinstance(reply, BaseException):
                raise reply
            return reply
        return None

    def __len__(self) -> int:
        return len(self.params)
