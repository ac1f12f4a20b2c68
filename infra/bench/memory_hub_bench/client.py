"""A lean HTTP client for the bench: one kept-alive connection per thread, JSON in and out, the
time of each request measured at the client (what a caller of the API waits)."""

from __future__ import annotations

import http.client
import json
import threading
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit


class BenchError(Exception):
    pass


@dataclass
class Target:
    """An endpoint that speaks the v3 wire format: ours, or any other (``--compare``)."""

    name: str
    url: str
    key: str
    service_id: str = "default"

    def __post_init__(self) -> None:
        parts = urlsplit(self.url)
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 80
        self.prefix = parts.path.rstrip("/")
        self._local = threading.local()

    def _connection(self) -> http.client.HTTPConnection:
        connection = getattr(self._local, "connection", None)
        if connection is None:
            connection = http.client.HTTPConnection(self.host, self.port, timeout=120)
            self._local.connection = connection
        return connection

    def post(self, path: str, body: dict[str, Any]) -> tuple[float, Any]:
        """(milliseconds, data) of one request; raises BenchError unless it answered code 0."""
        payload = json.dumps(body).encode()
        headers = {
            "Content-Type": "application/json",
            "Authorization": f"Bearer {self.key}",
            "x-tdai-service-id": self.service_id,
        }
        for attempt in (1, 2):  # a kept-alive connection the server closed is opened again, once
            connection = self._connection()
            started = time.perf_counter()
            try:
                connection.request("POST", self.prefix + path, payload, headers)
                response = connection.getresponse()
                raw = response.read()
            except (http.client.HTTPException, OSError):
                connection.close()
                self._local.connection = None
                if attempt == 2:
                    raise
                continue
            elapsed = (time.perf_counter() - started) * 1000
            if response.getheader("Connection", "").lower() == "close":
                connection.close()
                self._local.connection = None
            answer = json.loads(raw or b"null")
            if not isinstance(answer, dict) or answer.get("code") not in (0, None) or response.status >= 400:
                raise BenchError(f"{self.name} {path}: HTTP {response.status}: {str(answer)[:300]}")
            return elapsed, answer.get("data", answer)
        raise AssertionError("unreachable")


class Hooks:
    """The local stack's emulated AWS side: its call log and its delay hook (--test-hooks)."""

    def __init__(self, aws_url: str) -> None:
        self.target = Target("aws", aws_url, "")

    def _call(self, method: str, path: str, body: Any = None) -> Any:
        connection = http.client.HTTPConnection(self.target.host, self.target.port, timeout=60)
        try:
            connection.request(
                method,
                "/_local" + path,
                json.dumps(body).encode() if body is not None else None,
                {"Content-Type": "application/json"},
            )
            response = connection.getresponse()
            return json.loads(response.read() or b"null")
        finally:
            connection.close()

    def calls(self, since: int) -> list[dict[str, Any]]:
        return list(self._call("GET", f"/calls?since={since}")["calls"])

    def delay_every_call(self, seconds: float) -> int:
        spec: dict[str, Any] = {"match": {}, "action": "delay", "times": None, "delay_s": seconds}
        return int(self._call("POST", "/hooks", spec)["id"])

    def remove(self, hook_id: int) -> None:
        self._call("DELETE", f"/hooks/{hook_id}")
