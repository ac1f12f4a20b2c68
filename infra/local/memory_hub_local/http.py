"""The HTTP/1.1 server every port of the local stack runs on.

Compared with the standard library's defaults it: accepts a backlog of 128 connections; keeps
connections alive; turns off Nagle's algorithm and writes each response in one send (no
delayed-ACK stall of ~40 ms per response); reads bodies strictly — a malformed Content-Length,
both Content-Length and Transfer-Encoding, bad chunking, or a body shorter than announced is a
``Malformed`` request, answered by the caller and then the connection is closed; and decodes
header values as UTF-8 (API Gateway passes them on as UTF-8, not Latin-1)."""

from __future__ import annotations

import re
import socket
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MAX_CHUNK_LINE = 1024
_LENGTH = re.compile(rb"[0-9]{1,19}")
_CHUNK = re.compile(rb"([0-9A-Fa-f]{1,16})(;[^\r\n]*)?")
READ_TIMEOUT_S = 30.0


class Malformed(Exception):
    """The request's framing is broken: nothing of it may be processed."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.message, self.status = message, status


class TooLarge(Exception):
    def __init__(self, length: int, drained: bool) -> None:
        super().__init__(length)
        self.length, self.drained = length, drained


class Server(ThreadingHTTPServer):
    request_queue_size = 128
    daemon_threads = True
    allow_reuse_address = True

    def get_request(self) -> tuple[socket.socket, Any]:
        connection, address = super().get_request()
        connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return connection, address

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A peer that hung up (a keep-alive connection closed as its process stopped, a caller
        killed mid-request) is no fault of the server's: nothing is printed. Anything else is
        printed as socketserver prints it."""
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


class Handler(BaseHTTPRequestHandler):
    server: Server  # every handler here serves a Server (TCP: its address is (host, port))
    protocol_version = "HTTP/1.1"
    server_version = "MemoryHubLocal/2"
    max_body = 10 * 1024 * 1024  # what the caller accepts; beyond it: TooLarge
    drain_limit = 64 * 1024 * 1024  # a larger announced body is not read at all

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def setup(self) -> None:
        super().setup()
        self.connection.settimeout(READ_TIMEOUT_S)

    def header_values(self) -> dict[str, str]:
        """Header names and values, values decoded as UTF-8 where they are (else as sent)."""
        found: dict[str, str] = {}
        for name, value in self.headers.items():
            raw = value.encode("latin-1", "replace")
            try:
                value = raw.decode("utf-8")
            except UnicodeDecodeError:
                pass
            found[name] = value
        return found

    def read_body(self) -> bytes:
        """The request body, framed strictly (see the module docstring)."""
        length = self.headers.get_all("Content-Length") or []
        encoding = [e.strip().lower() for v in self.headers.get_all("Transfer-Encoding") or [] for e in v.split(",")]
        if length and encoding:
            raise Malformed("Content-Length and Transfer-Encoding together")
        if encoding:
            if encoding != ["chunked"]:
                raise Malformed(f"Transfer-Encoding {', '.join(encoding)} is not supported")
            return self._chunked()
        if not length:
            return b""
        if len(set(length)) != 1 or not _LENGTH.fullmatch(length[0].strip().encode()):
            raise Malformed("Content-Length: invalid")
        size = int(length[0])
        if size > self.max_body:
            drained = size <= self.drain_limit and self._drain(size)
            raise TooLarge(size, drained)
        return self._exactly(size)

    def _exactly(self, size: int) -> bytes:
        try:
            data = self.rfile.read(size)
        except TimeoutError:
            raise Malformed("body shorter than its Content-Length") from None
        if len(data) != size:
            raise Malformed("body shorter than its Content-Length")
        return data

    def _drain(self, size: int) -> bool:
        left = size
        try:
            while left:
                chunk = self.rfile.read(min(left, 1 << 20))
                if not chunk:
                    return False
                left -= len(chunk)
        except TimeoutError:
            return False
        return True

    def _line(self) -> bytes:
        line = self.rfile.readline(MAX_CHUNK_LINE + 1)
        if len(line) > MAX_CHUNK_LINE or not line.endswith(b"\r\n"):
            raise Malformed("bad chunked encoding")
        return line[:-2]

    def _chunked(self) -> bytes:
        body = bytearray()
        try:
            while True:
                match = _CHUNK.fullmatch(self._line())
                if not match:
                    raise Malformed("bad chunked encoding")
                size = int(match.group(1), 16)
                if size == 0:
                    while self._line():  # trailers, up to the empty line
                        pass
                    return bytes(body)
                if len(body) + size > self.max_body:
                    raise TooLarge(len(body) + size, False)
                chunk = self.rfile.read(size)
                if len(chunk) != size or self.rfile.read(2) != b"\r\n":
                    raise Malformed("bad chunked encoding")
                body += chunk
        except TimeoutError:
            raise Malformed("bad chunked encoding") from None

    def send(self, status: int, headers: dict[str, str], body: bytes, *, close: bool = False) -> None:
        """The whole response in one write."""
        reason = self.responses.get(status, ("",))[0]
        lines = [f"HTTP/1.1 {status} {reason}"]
        for name, value in headers.items():
            if name.lower() not in ("content-length", "connection", "transfer-encoding", "date", "server"):
                lines.append(f"{name}: {value}")
        # A HEAD answer has no body but tells the length the GET would have (S3's HeadObject does).
        given = next((v for k, v in headers.items() if k.lower() == "content-length"), None)
        length = given if self.command == "HEAD" and given is not None else str(len(body))
        lines.append(f"Content-Length: {length}")
        lines.append(f"Date: {self.date_time_string()}")
        if close:
            lines.append("Connection: close")
            self.close_connection = True
        head = ("\r\n".join(lines) + "\r\n\r\n").encode("utf-8")
        self.wfile.write(head + (body if self.command != "HEAD" else b""))
        self.wfile.flush()


def serve(server: Server) -> threading.Thread:
    thread = threading.Thread(target=server.serve_forever, daemon=True, name=f"http-{server.server_address[1]}")
    thread.start()
    return thread
