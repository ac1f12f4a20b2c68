"""The two shapes every part of the emulated AWS passes around: a request as the server described
it (``Call``: its service, operation, caller and the IAM actions it needs) and what AWS answers
instead of doing one (``Refusal``).

They live apart from the modules that make them (``calls`` and ``vector_calls`` describe requests;
``faithful``, ``bedrock`` and ``converse`` refuse them) so that those modules import this one and
never each other in a circle."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Call:
    service: str
    operation: str
    access_key: str | None
    actions: list[tuple[str, str]] = field(default_factory=list)
    body: Any = None  # parsed JSON (DynamoDB, Secrets Manager) or None
    bucket: str | None = None
    key: str | None = None
    tables: list[str] = field(default_factory=list)

    def describe(self) -> dict[str, Any]:
        return {
            "service": self.service,
            "operation": self.operation,
            "actions": [list(a) for a in self.actions],
            "tables": self.tables,
            "bucket": self.bucket,
            "key": self.key,
        }


class Refusal(Exception):
    """What AWS answers instead of doing the request."""

    def __init__(
        self, status: int, body: bytes, content_type: str, headers: dict[str, str] | None = None, code: str = ""
    ):
        super().__init__(body[:200])
        self.status, self.body, self.content_type = status, body, content_type
        self.headers = headers or {}
        self.code = code
