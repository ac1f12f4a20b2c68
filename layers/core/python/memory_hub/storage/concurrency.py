"""Overlapping independent AWS calls of one request (its round trips run side by side)."""

from __future__ import annotations

import contextvars
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

T = TypeVar("T")

_pool: ThreadPoolExecutor | None = None
_lock = threading.Lock()
WORKERS = 16


def _executor() -> ThreadPoolExecutor:
    global _pool
    with _lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="aws")
        return _pool


def submit(fn: Callable[..., T], *args: Any, **kwargs: Any) -> Future[T]:
    """Start ``fn`` in the background; ``.result()`` waits for it (and re-raises its error). It runs
    in a copy of the caller's context, so what it does counts for the request that asked
    (``observability``'s usage: the DynamoDB units a request consumed)."""
    return _executor().submit(contextvars.copy_context().run, fn, *args, **kwargs)


def parallel(*calls: Callable[[], Any]) -> list[Any]:
    """Run independent calls at once; their results in order. The first error is re-raised after
    every call has finished, so no call outlives the request that made it."""
    if len(calls) == 1:
        return [calls[0]()]
    futures = [submit(call) for call in calls[1:]]
    try:
        first = calls[0]()
    finally:
        results = [_settle(f) for f in futures]
    for _, error in results:
        if error is not None:
            raise error
    return [first] + [value for value, _ in results]


def _settle(future: Future[Any]) -> tuple[Any, BaseException | None]:
    try:
        return future.result(), None
    except BaseException as exc:  # noqa: BLE001 - handed back to the caller in order
        return None, exc


def in_batches(items: list[T], size: int) -> list[list[T]]:
    return [items[i : i + size] for i in range(0, len(items), size)]


def for_each(fn: Callable[[T], Any], items: list[T], *, width: int = 8) -> list[Any]:
    """``fn`` over ``items``, at most ``width`` at a time; results in order."""
    results: list[Any] = []
    for start in range(0, len(items), width):
        results += parallel(*[lambda item=item: fn(item) for item in items[start : start + width]])
    return results


@dataclass(frozen=True)
class Deadline:
    """A point in time a long piece of work must stop at (a request's budget)."""

    at: float

    @classmethod
    def after(cls, seconds: float) -> Deadline:
        return cls(time.monotonic() + seconds)

    def passed(self) -> bool:
        return time.monotonic() >= self.at
