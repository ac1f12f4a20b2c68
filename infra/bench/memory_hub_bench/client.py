"""The bench's view of an endpoint: the tools' transport (one kept-alive connection per thread),
each round trip timed at the client (what a caller of the API waits), its ``data`` returned."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

from memory_hub_tools.transport import Reply, Transport

TIMEOUT = 120.0


class BenchError(Exception):
    pass


@dataclass
class Target:
    """An endpoint that speaks the v3 wire format: ours, or any other (``--compare``)."""

    name: str
    url: str
    key: str
    service_id: str = "default"
    transport: Transport = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.transport = Transport(self.url, self.key, self.service_id, TIMEOUT, ascii_json=True)

    def post(self, path: str, body: dict[str, Any]) -> tuple[float, Any]:
        """(milliseconds, data) of one request; raises BenchError unless it answered code 0. An
        endpoint compared with ours may answer without the envelope: its body is then the data."""
        reply = self.transport.post(path, body)
        answer = reply.body
        if not isinstance(answer, dict) or answer.get("code") not in (0, None) or reply.status >= 400:
            raise BenchError(f"{self.name} {path}: HTTP {reply.status}: {str(answer)[:300]}")
        return reply.elapsed_ms, answer.get("data", answer)


@dataclass(frozen=True)
class Operator:
    """The local stack's operator credentials (what ``make run`` prints), which the control routes
    of its AWS endpoint (``/_local/…``) require: each request signed with Signature Version 4."""

    access_key: str
    secret: str
    region: str = "us-east-1"

    @classmethod
    def of(cls, environment: dict[str, str]) -> Operator:
        """From a stack's AWS environment (``Stack.aws_environment()``, or the banner's exports)."""
        return cls(
            environment["AWS_ACCESS_KEY_ID"],
            environment["AWS_SECRET_ACCESS_KEY"],
            environment.get("AWS_DEFAULT_REGION") or "us-east-1",
        )

    def send(
        self,
        transport: Transport,
        method: str,
        path: str,
        body: bytes | None = None,
        query: dict[str, str] | None = None,
    ) -> Reply:
        """One control request, signed (``path`` under ``/_local``)."""
        from botocore.auth import SigV4Auth
        from botocore.awsrequest import AWSRequest
        from botocore.credentials import Credentials

        headers = {"Content-Type": "application/json"}
        request = AWSRequest(method, f"{transport.endpoint}{path}", headers, body or b"", params=query or {})
        SigV4Auth(Credentials(self.access_key, self.secret), "local", self.region).add_auth(request)
        target = f"{path}?{urlencode(query)}" if query else path
        return transport.send(method, target, body, dict(request.headers.items()))


class Hooks:
    """The local stack's emulated AWS side: its call log and its delay hook (--test-hooks)."""

    def __init__(self, aws_url: str, operator: Operator) -> None:
        self.transport = Transport(aws_url, timeout=60)
        self.operator = operator

    def _call(self, method: str, path: str, body: Any = None) -> Any:
        payload = None if body is None else Transport.encode(body)
        return self.operator.send(self.transport, method, "/_local" + path, payload).body

    def calls(self, since: int) -> list[dict[str, Any]]:
        payload = self.operator.send(self.transport, "GET", "/_local/calls", None, {"since": str(since)}).body
        return list(payload["calls"])

    def delay_every_call(self, seconds: float) -> int:
        spec: dict[str, Any] = {"match": {}, "action": "delay", "times": None, "delay_s": seconds}
        return int(self._call("POST", "/hooks", spec)["id"])

    def remove(self, hook_id: int) -> None:
        self._call("DELETE", f"/hooks/{hook_id}")
