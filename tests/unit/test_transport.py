"""The tools' transport and the envelope reader, in process: what goes on the wire for a request
(URL, headers, body) and what a reply becomes. The connection is a stand-in that records what it
was sent and answers what the test gives it (the unit tier has no network)."""

from __future__ import annotations

import gzip
import http.client
import json
import re
from typing import Any

import pytest
from memory_hub_tools.client import ApiError, MemoryHubClient, data_of, memory_id_for
from memory_hub_tools.transport import ConfigError, Headers, Reply, Transport, TransportError


class FakeResponse:
    def __init__(self, status: int, body: bytes, headers: list[tuple[str, str]], will_close: bool = False) -> None:
        self.status, self.body, self.headers, self.will_close = status, body, headers, will_close

    def read(self) -> bytes:
        return self.body

    def getheaders(self) -> list[tuple[str, str]]:
        return self.headers


class FakeConnection:
    """Answers each request with the next of ``replies`` (an exception is raised instead)."""

    def __init__(self, replies: list[FakeResponse | BaseException]) -> None:
        self.replies, self.sent, self.closed = list(replies), [], 0

    def request(self, method: str, target: str, body: bytes | None, headers: dict[str, Any]) -> None:
        self.sent.append((method, target, body, dict(headers)))
        if isinstance(self.replies[0], BaseException):
            raise self.replies.pop(0)

    def getresponse(self) -> FakeResponse:
        reply = self.replies.pop(0)
        assert isinstance(reply, FakeResponse)
        return reply

    def close(self) -> None:
        self.closed += 1


def wired(transport: Transport, connection: FakeConnection, reused: bool = False) -> FakeConnection:
    """Make ``transport`` send over ``connection`` (as if used before, when ``reused``)."""
    uses = iter([reused])
    transport._connections.get = lambda: (connection, next(uses, False))  # type: ignore[method-assign]
    transport._connections.drop = connection.close  # type: ignore[method-assign]
    return connection


def envelope(code: int = 0, data: Any = None, **extra: Any) -> bytes:
    return json.dumps({"code": code, "message": "ok" if code == 0 else "no", "request_id": "r1", "data": data, **extra})


def test_a_post_carries_the_service_id_the_key_and_the_body_as_utf8_json():
    transport = Transport("http://127.0.0.1:3000/stage/", "mhk_key", "svc")
    connection = wired(transport, FakeConnection([FakeResponse(200, envelope(data={"a": 1}).encode(), [])]))
    reply = transport.post("/v3/core/read", {"text": "Zoë"}, idempotency_key="k-1")
    ((method, target, body, headers),) = connection.sent
    assert (method, target) == ("POST", "/stage/v3/core/read")
    assert json.loads(body) == {"text": "Zoë"} and "Zoë".encode() in body
    assert headers["x-tdai-service-id"] == "svc" and headers["Authorization"] == "Bearer mhk_key"
    assert headers["Idempotency-Key"] == "k-1" and headers["Content-Type"] == "application/json"
    assert reply.status == 200 and reply.succeeded and reply.body["data"] == {"a": 1}


def test_ascii_json_escapes_what_utf8_would_send_raw_and_gzip_compresses():
    transport = Transport("http://h", "k", ascii_json=True)
    connection = wired(transport, FakeConnection([FakeResponse(200, b"{}", [])]))
    transport.post("/p", {"text": "Zoë \ud800"}, gzip=True)
    ((_, _, body, headers),) = connection.sent
    assert headers["Content-Encoding"] == "gzip"
    assert gzip.decompress(body) == b'{"text": "Zo\\u00eb \\ud800"}'


def test_no_key_sends_no_authorization_and_a_caller_header_wins():
    transport = Transport("http://h", None)
    assert transport.headers() == {"x-tdai-service-id": "default"}
    connection = wired(transport, FakeConnection([FakeResponse(401, b"{}", [])]))
    transport.post("/p", None, {"x-tdai-service-id": "other"}, query={"Action": ["DeleteUserMemory"]})
    ((_, target, body, headers),) = connection.sent
    assert target == "/p?Action=DeleteUserMemory" and body == b"{}" and headers["x-tdai-service-id"] == "other"


def test_send_goes_as_given_with_a_query_and_a_utf8_header_and_an_empty_post_has_a_length():
    transport = Transport("http://h")
    connection = wired(transport, FakeConnection([FakeResponse(405, b"not json", []), FakeResponse(200, b"", [])]))
    reply = transport.send("GET", "/a b/ü", None, {"X-Name": "Zoë"}, {"q": ["1", "2"]})
    assert reply.status == 405 and reply.body == "not json" and not reply.is_json and reply.envelope is None
    transport.send("POST", "/p", None)
    (_, target, body, headers), (_, _, _, post_headers) = connection.sent
    assert target == "/a%20b/%C3%BC?q=1&q=2" and body is None
    assert headers == {"X-Name": "Zoë".encode()} and "Content-Length" not in headers
    assert post_headers == {"Content-Length": "0"}


def test_reply_headers_keep_their_names_and_are_found_in_any_case():
    headers = Headers([("Content-Type", "application/json"), ("Set-Cookie", "a"), ("set-cookie", "b")])
    assert list(headers) == ["Content-Type", "Set-Cookie"]
    assert headers["content-type"] == headers.get("CONTENT-TYPE") == "application/json"
    assert headers["Set-Cookie"] == "a, b" and "x-request-id" not in headers and headers.get("x", "-") == "-"
    with pytest.raises(KeyError):
        headers["x-request-id"]


def test_a_kept_alive_connection_the_server_closed_is_opened_again_once():
    transport = Transport("http://h")
    stale = FakeConnection([http.client.RemoteDisconnected("closed"), FakeResponse(200, b"{}", [])])
    wired(transport, stale, reused=True)
    assert transport.send("GET", "/p").status == 200 and len(stale.sent) == 2 and stale.closed == 1


def test_a_refused_connection_is_a_transport_error_naming_the_endpoint():
    transport = Transport("http://127.0.0.1:9")
    wired(transport, FakeConnection([ConnectionRefusedError(111, "Connection refused")]))
    with pytest.raises(TransportError, match=r"^cannot reach http://127\.0\.0\.1:9: .*Connection refused"):
        transport.send("GET", "/p")


@pytest.mark.parametrize("endpoint", ["localhost:3000", "ftp://h", "http://", "http://h:0", "http://h:x"])
def test_an_endpoint_that_is_no_http_url_is_a_config_error(endpoint):
    with pytest.raises(ConfigError, match=re.escape(f"invalid endpoint '{endpoint.rstrip('/')}'")):
        Transport(endpoint)


def test_the_envelope_gives_data_or_an_api_error_or_a_transport_error():
    assert data_of(Reply(200, Headers(), envelope(data=[1]).encode()), "/p", "http://h") == [1]
    with pytest.raises(ApiError) as raised:
        data_of(Reply(409, Headers(), envelope(409, {"x": 1}, retryable=True).encode()), "/p", "http://h")
    error = raised.value
    assert (error.code, error.data, error.request_id, error.retryable, error.path) == (409, {"x": 1}, "r1", True, "/p")
    with pytest.raises(ApiError, match=r"^502 "):  # an error status with code 0 is still an error
        data_of(Reply(502, Headers(), envelope().encode()), "/p", "http://h")
    with pytest.raises(TransportError, match="without a JSON envelope"):
        data_of(Reply(200, Headers(), b"<html>"), "/p", "http://h")
    with pytest.raises(TransportError, match="without an envelope"):
        data_of(Reply(200, Headers(), b"[1]"), "/p", "http://h")


def test_the_client_checks_key_and_headers_before_sending():
    with pytest.raises(ConfigError, match="no API key"):
        MemoryHubClient("http://h", api_key="").call("/p")
    with pytest.raises(ConfigError, match="printable ASCII"):
        MemoryHubClient("http://h", api_key="k", service_id="sérvice").call("/p")
    client = MemoryHubClient("http://h", api_key="k")
    assert client.transport() is client.transport()
    client.api_key = "k2"
    assert client.transport().key == "k2"


def test_memory_ids_are_the_runtimes():
    assert memory_id_for("team-a", "agent") == "chat_memory-team-a-agent"
