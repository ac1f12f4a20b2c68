"""One logger and one metrics emitter for every function. Correlation id = request id; never
bodies or content. Metrics are CloudWatch EMF lines (no API call): per route and status class, one
``Requests`` count and the DynamoDB read and write units the request consumed
(``DynamoDBReadUnits``, ``DynamoDBWriteUnits``), so a dashboard or alarm needs no log parsing and
a route's bill can be read off CloudWatch.

A request's usage is bound to its context (``start_usage``) rather than to its thread: the local
stack serves requests in threads, and a request's own AWS calls may run on the storage layer's
pool (``storage.concurrency`` runs them in the caller's context)."""

from __future__ import annotations

import threading
from contextvars import ContextVar, Token
from dataclasses import dataclass, field

from aws_lambda_powertools import Logger
from aws_lambda_powertools.metrics import EphemeralMetrics, MetricUnit

logger = Logger(service="memory-hub")


@dataclass
class Usage:
    """What one request consumed of DynamoDB, added up as its calls answer (from several threads)."""

    read_units: float = 0.0
    write_units: float = 0.0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add(self, read_units: float, write_units: float) -> None:
        with self._lock:
            self.read_units += read_units
            self.write_units += write_units


_usage: ContextVar[Usage | None] = ContextVar("memory_hub_usage", default=None)


def start_usage() -> Token[Usage | None]:
    """A fresh usage for the request starting in this context (``stop_usage`` with the token ends it)."""
    return _usage.set(Usage())


def stop_usage(token: Token[Usage | None]) -> None:
    _usage.reset(token)


def current_usage() -> Usage | None:
    return _usage.get()


def add_capacity(read_units: float, write_units: float) -> None:
    """Units a DynamoDB call consumed, added to the current request's usage (none outside a request)."""
    usage = _usage.get()
    if usage is not None:
        usage.add(read_units, write_units)


def count_request(route: str, status: int) -> None:
    # ephemeral: no state shared between requests (the local stack runs them in threads)
    metrics = EphemeralMetrics(namespace="MemoryHub", service="memory-hub")
    metrics.add_dimension(name="route", value=route)
    metrics.add_dimension(name="status", value=f"{status // 100}xx")
    metrics.add_metric(name="Requests", unit=MetricUnit.Count, value=1)
    usage = _usage.get()
    if usage is not None:
        metrics.add_metric(name="DynamoDBReadUnits", unit=MetricUnit.Count, value=usage.read_units)
        metrics.add_metric(name="DynamoDBWriteUnits", unit=MetricUnit.Count, value=usage.write_units)
    metrics.flush_metrics()


def count_event(name: str, value: int = 1) -> None:
    """A count of something that happened off the request path (embeddings queued or refused, …)."""
    metrics = EphemeralMetrics(namespace="MemoryHub", service="memory-hub")
    metrics.add_metric(name=name, unit=MetricUnit.Count, value=value)
    metrics.flush_metrics()
