"""One request to the Memory Hub API and its reply, as they go on the wire (standard library only).

The one place that builds the API's URLs and request headers (``x-tdai-service-id``, the key's
``Authorization: Bearer``, ``Idempotency-Key``, ``Content-Encoding: gzip``) and decodes replies.
Three callers share it:

* :class:`memory_hub_tools.client.MemoryHubClient` (the CLI, the MCP server) — typed methods per
  route on top, raising ``ApiError`` on an error envelope;
* the bench — one kept-alive connection per thread, each round trip timed at the client;
* the API tests — any method, any bytes, any headers, to assert statuses and headers as sent.

:meth:`Transport.send` never raises for an HTTP status: a 4xx/5xx is a :class:`Reply` like a 200.
It raises :class:`TransportError` when no reply came (refused, reset, timed out) and
:class:`ConfigError` when the endpoint is not an ``http(s)://host[:port]`` URL.
"""

from __future__ import annotations

import gzip as gzip_codec
import http.client
import json
import threading
import time
import urllib.parse
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

DEFAULT_ENDPOINT = "http://127.0.0.1:3000"
DEFAULT_SERVICE_ID = "default"
DEFAULT_TIMEOUT = 30.0
SERVICE_HEADER = "x-tdai-service-id"
# What http.client would refuse in a request target, quoted; everything else is sent as given.
_PATH_SAFE = "!#$%&'()*+,/:;=?@[]~"


class MemoryHubError(Exception):
    """Anything that kept a request from getting an answer from the API."""


class ConfigError(MemoryHubError):
    """The client is missing something it needs (e.g. the API key), or the endpoint is no URL."""


class TransportError(MemoryHubError):
    """The endpoint could not be reached, or answered something that is not the envelope."""


class Headers(dict[str, str]):
    """A reply's headers, named as the server sent them and looked up in any case (a repeated
    header's values joined by ``", "``)."""

    def __init__(self, pairs: Iterable[tuple[str, str]] = ()) -> None:
        super().__init__()
        for name, value in pairs:
            known = self._name(name)
            if known is None:
                super().__setitem__(name, value)
            else:
                super().__setitem__(known, f"{super().__getitem__(known)}, {value}")

    def _name(self, name: str) -> str | None:
        if super().__contains__(name):
            return name
        lowered = name.lower()
        return next((k for k in self.keys() if k.lower() == lowered), None)

    def __getitem__(self, name: str) -> str:
        known = self._name(name)
        if known is None:
            raise KeyError(name)
        return super().__getitem__(known)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self._name(name) is not None

    def get(self, name: str, default: Any = None) -> Any:
        known = self._name(name)
        return default if known is None else super().__getitem__(known)


@dataclass(frozen=True)
class Reply:
    """One HTTP reply: its status, headers, bytes, the decoded body (JSON, else text) and the
    milliseconds from sending the request to the last byte of the reply."""

    status: int
    headers: Headers
    raw: bytes
    elapsed_ms: float = 0.0
    body: Any = field(init=False)
    is_json: bool = field(init=False)

    def __post_init__(self) -> None:
        try:
            body, is_json = json.loads(self.raw.decode("utf-8")), True
        except (UnicodeDecodeError, ValueError):
            body, is_json = self.raw.decode("utf-8", errors="replace"), False
        object.__setattr__(self, "body", body)
        object.__setattr__(self, "is_json", is_json)

    @property
    def envelope(self) -> dict[str, Any] | None:
        """The body when it is the API's envelope (an object with a ``code``), else ``None``."""
        return self.body if isinstance(self.body, dict) and "code" in self.body else None

    @property
    def succeeded(self) -> bool:
        """A 2xx whose envelope says ``code`` 0."""
        envelope = self.envelope
        return self.status < 400 and envelope is not None and envelope.get("code") == 0


class _Connections:
    """One kept-alive connection to the endpoint per thread."""

    def __init__(self, scheme: str, host: str, port: int | None, timeout: float) -> None:
        self.scheme, self.host, self.port, self.timeout = scheme, host, port, timeout
        self._local = threading.local()

    def get(self) -> tuple[http.client.HTTPConnection, bool]:
        """This thread's connection, and whether it was used before (the server may have closed it)."""
        connection: http.client.HTTPConnection | None = getattr(self._local, "connection", None)
        if connection is not None:
            return connection, True
        kind = http.client.HTTPSConnection if self.scheme == "https" else http.client.HTTPConnection
        connection = kind(self.host, self.port, timeout=self.timeout)
        self._local.connection = connection
        return connection, False

    def drop(self) -> None:
        connection = getattr(self._local, "connection", None)
        if connection is not None:
            connection.close()
        self._local.connection = None


def _split(endpoint: str) -> tuple[str, str, int | None, str]:
    """(scheme, host, port, path prefix) of an ``http(s)://host[:port][/prefix]`` endpoint."""
    try:
        parts = urllib.parse.urlsplit(endpoint)
        port = parts.port
    except ValueError:
        parts, port = None, None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname or port == 0:
        raise ConfigError(f"invalid endpoint {endpoint!r}: expected http(s)://host[:port], e.g. {DEFAULT_ENDPOINT}")
    return parts.scheme, parts.hostname, port, parts.path.rstrip("/")


def _header_value(value: str | bytes) -> str | bytes:
    """Header values go as given; a non-ASCII text value goes as its UTF-8 bytes."""
    return value.encode("utf-8") if isinstance(value, str) and not value.isascii() else value


class Transport:
    """Requests to one endpoint with one key and service id (``key=None``: no ``Authorization``).

    JSON bodies go as UTF-8; ``ascii_json`` escapes every non-ASCII character instead (the tests
    use it: a lone surrogate then still makes a body, and a body's size does not depend on it)."""

    def __init__(
        self,
        endpoint: str,
        key: str | None = None,
        service_id: str = DEFAULT_SERVICE_ID,
        timeout: float = DEFAULT_TIMEOUT,
        *,
        ascii_json: bool = False,
        _connections: _Connections | None = None,
    ) -> None:
        self.endpoint = endpoint.rstrip("/")
        self.key, self.service_id, self.timeout, self.ascii_json = key, service_id, timeout, ascii_json
        scheme, host, port, self.prefix = _split(self.endpoint)
        self._connections = _connections or _Connections(scheme, host, port, timeout)

    def with_key(self, key: str | None, service_id: str | None = None) -> Transport:
        """The same endpoint (and connections) with another key or service id."""
        return Transport(
            self.endpoint,
            key,
            self.service_id if service_id is None else service_id,
            self.timeout,
            ascii_json=self.ascii_json,
            _connections=self._connections,
        )

    def headers(self, *, idempotency_key: str | None = None, gzip: bool = False) -> dict[str, str]:
        """The headers of an API request: the service id, the key, and the optional ones."""
        headers = {SERVICE_HEADER: self.service_id}
        if self.key is not None:
            headers["Authorization"] = f"Bearer {self.key}"
        if idempotency_key is not None:
            headers["Idempotency-Key"] = idempotency_key
        if gzip:
            headers["Content-Encoding"] = "gzip"
        return headers

    def post(
        self,
        path: str,
        body: Any = None,
        headers: Mapping[str, str] | None = None,
        *,
        idempotency_key: str | None = None,
        gzip: bool = False,
        query: Mapping[str, str | list[str]] | None = None,
    ) -> Reply:
        """POST ``body`` (``None``: ``{}``) as JSON with the API's headers (``headers`` win)."""
        payload = self.encode({} if body is None else body, ascii_only=self.ascii_json)
        if gzip:
            payload = gzip_codec.compress(payload)
        sent = {"Content-Type": "application/json", "Accept": "application/json"}
        sent |= self.headers(idempotency_key=idempotency_key, gzip=gzip)
        return self.send("POST", path, payload, {**sent, **(headers or {})}, query)

    @staticmethod
    def encode(body: Any, *, ascii_only: bool = False) -> bytes:
        """A request body as the clients send it: JSON in UTF-8."""
        return json.dumps(body, ensure_ascii=ascii_only).encode("utf-8")

    def send(
        self,
        method: str,
        path: str,
        body: bytes | None = None,
        headers: Mapping[str, str | bytes] | None = None,
        query: Mapping[str, str | list[str]] | None = None,
    ) -> Reply:
        """One request exactly as given (no header added but ``Host`` and ``Content-Length``)."""
        target = urllib.parse.quote(self.prefix + path, safe=_PATH_SAFE)
        if query:
            target += ("&" if "?" in target else "?") + urllib.parse.urlencode(query, doseq=True)
        sent = {name: _header_value(value) for name, value in (headers or {}).items()}
        if body is None and method.upper() not in ("GET", "HEAD") and "content-length" not in map(str.lower, sent):
            sent["Content-Length"] = "0"
        for attempt in (1, 2):
            connection, reused = self._connections.get()
            started = time.perf_counter()
            try:
                connection.request(method, target, body, sent)
                response = connection.getresponse()
                raw = response.read()
            except (ConnectionError, http.client.BadStatusLine) as exc:
                self._connections.drop()
                if attempt == 1 and reused:  # a kept-alive connection the server had closed: once more
                    continue
                raise self._unreachable(exc) from exc
            except (OSError, http.client.HTTPException) as exc:
                self._connections.drop()
                raise self._unreachable(exc) from exc
            elapsed = (time.perf_counter() - started) * 1000
            if response.will_close:
                self._connections.drop()
            return Reply(response.status, Headers(response.getheaders()), raw, elapsed)
        raise AssertionError("unreachable")

    def _unreachable(self, exc: BaseException) -> TransportError:
        reason = str(exc) or exc.__class__.__name__
        return TransportError(f"cannot reach {self.endpoint}: {reason}")

    def close(self) -> None:
        """Close this thread's connection (the next request opens another)."""
        self._connections.drop()
