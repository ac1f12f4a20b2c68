"""One logger and one metrics emitter for every function. Correlation id = request id; never
bodies or content. Metrics are CloudWatch EMF lines (no API call): one ``Requests`` count per
route and status class, so a dashboard or alarm needs no log parsing."""

from __future__ import annotations

from aws_lambda_powertools import Logger
from aws_lambda_powertools.metrics import EphemeralMetrics, MetricUnit

logger = Logger(service="memory-hub")


def count_request(route: str, status: int) -> None:
    # ephemeral: no state shared between requests (the local stack runs them in threads)
    metrics = EphemeralMetrics(namespace="MemoryHub", service="memory-hub")
    metrics.add_dimension(name="route", value=route)
    metrics.add_dimension(name="status", value=f"{status // 100}xx")
    metrics.add_metric(name="Requests", unit=MetricUnit.Count, value=1)
    metrics.flush_metrics()


def count_event(name: str, value: int = 1) -> None:
    """A count of something that happened off the request path (embeddings queued or refused, …)."""
    metrics = EphemeralMetrics(namespace="MemoryHub", service="memory-hub")
    metrics.add_metric(name=name, unit=MetricUnit.Count, value=value)
    metrics.flush_metrics()
