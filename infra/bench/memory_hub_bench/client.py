"""The bench's view of an endpoint: the tools' transport (one kept-alive connection per thread),
each round trip timed at the client (what a caller of the API waits), its ``data`` returned."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from memory_hub_tools.transport import Transport

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


class Hooks:
    """The local stack's emulated AWS side: its call log and its delay hook (--test-hooks)."""

    def __init__(self, aws_url: str) -> None:
        self.transport = Transport(aws_url, timeout=60)

    def _call(self, method: str, path: str, body: Any = None) -> Any:
        payload = None if body is None else Transport.encode(body)
        return self.transport.send(method, "/_local" + path, payload, {"Content-Type": "application/json"}).body

    def calls(self, since: int) -> list[dict[str, Any]]:
        return list(self._call("GET", f"/calls?since={since}")["calls"])

    def delay_every_call(self, seconds: float) -> int:
        spec: dict[str, Any] = {"match": {}, "action": "delay", "times": None, "delay_s": seconds}
        return int(self._call("POST", "/hooks", spec)["id"])

    def remove(self, hook_id: int) -> None:
        self._call("DELETE", f"/hooks/{hook_id}")
