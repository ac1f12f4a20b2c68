"""The local stack holds the free ports it picks until its servers have bound them
(``stack.reserve_port``): a port only looked up and released was taken by another socket in the
seconds before the server bound it, under a loaded test run (382 API tests erred so, once). While
held, no other socket gets the port; the stack's own server, which sets SO_REUSEADDR as well, binds
and listens there beside the reservation."""

from __future__ import annotations

import errno
import socket
import threading
import urllib.request

import pytest
from memory_hub_local import http
from memory_hub_local.stack import held_port, reserve_port


class _Hello(http.Handler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "5")
        self.end_headers()
        self.wfile.write(b"hello")


def test_a_reserved_port_is_taken_by_its_server_and_by_nothing_else():
    held = reserve_port()
    port = held.getsockname()[1]
    try:
        with socket.socket() as other, pytest.raises(OSError) as taken:
            other.bind(("127.0.0.1", port))  # another socket, no SO_REUSEADDR: refused
        assert taken.value.errno == errno.EADDRINUSE
        others = []
        for _ in range(200):  # nor does any bind to port 0 land on it
            sock = socket.socket()
            sock.bind(("127.0.0.1", 0))
            others.append(sock)
        assert port not in {s.getsockname()[1] for s in others}
        for sock in others:
            sock.close()
        server = http.Server(("127.0.0.1", port), _Hello)  # the stack's server binds beside it
        threading.Thread(target=server.serve_forever, daemon=True).start()
        held.close()
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5) as answer:
            assert answer.read() == b"hello"
        server.shutdown()
        server.server_close()
    finally:
        held.close()


def test_a_held_port_stays_reserved_while_servers_come_and_go_on_it():
    """``held_port`` is for a server another process starts (a test's ``make run``): it keeps the
    reservation, so the port is the server's across a restart and nobody else's in between."""
    port = held_port()
    for _ in range(2):  # a start, a stop, a start again on the same port
        server = http.Server(("127.0.0.1", port), _Hello)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5) as answer:
            assert answer.read() == b"hello"
        server.shutdown()
        server.server_close()
        with socket.socket() as other, pytest.raises(OSError) as taken:
            other.bind(("127.0.0.1", port))  # still reserved once its server is gone
        assert taken.value.errno == errno.EADDRINUSE
