"""One logger for every function. Correlation id = request id; never bodies or content."""

from __future__ import annotations

from aws_lambda_powertools import Logger

logger = Logger(service="memory-hub")
