"""AWS clients, created lazily once per process, with botocore's standard retries."""

from __future__ import annotations

import threading
from concurrent.futures import Future, ThreadPoolExecutor
from functools import lru_cache
from typing import Any, Callable, TypeVar

from ..settings import get_settings

T = TypeVar("T")

RETRIES = {"mode": "standard", "max_attempts": 4}


@lru_cache(maxsize=None)
def client(service: str) -> Any:
    """One botocore client per service (thread-safe, shared by the pool below)."""
    import boto3
    from botocore.config import Config

    session = boto3.session.Session()
    config = Config(retries=RETRIES, max_pool_connections=16, connect_timeout=3, read_timeout=20,
                    tcp_keepalive=True)
    return session.client(service, region_name=get_settings().region, config=config)


def s3() -> Any:
    return client("s3")


_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _executor() -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=16, thread_name_prefix="aws")
        return _pool


def submit(fn: Callable[..., T], *args: Any, **kwargs: Any) -> Future[T]:
    """Start an AWS call in the background (the round trips of a request overlap)."""
    return _executor().submit(fn, *args, **kwargs)


def gather(*calls: Callable[[], Any]) -> list[Any]:
    """Run independent calls at once; return their results in order, re-raising the first error."""
    if len(calls) == 1:
        return [calls[0]()]
    futures = [submit(call) for call in calls[1:]]
    first = calls[0]()
    return [first] + [f.result() for f in futures]
