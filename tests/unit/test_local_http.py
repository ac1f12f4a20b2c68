"""memory_hub_local/http.py: a peer that hangs up is not printed as the server's fault; a fault is.

socketserver calls ``handle_error`` from within the ``except`` that caught what a request's
handler raised; so does this test (the unit tier opens no socket)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from memory_hub_local.http import Handler, Server


@pytest.fixture
def server() -> Iterator[Server]:
    unbound = Server(("127.0.0.1", 0), Handler, bind_and_activate=False)
    yield unbound
    unbound.server_close()


def _printed_for(server: Server, raised: Exception, capsys: pytest.CaptureFixture[str]) -> str:
    try:
        raise raised
    except Exception:
        server.handle_error(None, ("127.0.0.1", 50000))
    return capsys.readouterr().err


@pytest.mark.parametrize(
    "raised",
    [
        ConnectionResetError(104, "Connection reset by peer"),
        BrokenPipeError(32, "Broken pipe"),
        ConnectionAbortedError(103, "Software caused connection abort"),
    ],
    ids=lambda e: type(e).__name__,
)
def test_a_peer_that_hung_up_prints_nothing(
    server: Server, raised: Exception, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _printed_for(server, raised, capsys) == ""


def test_a_fault_of_the_server_is_still_printed(server: Server, capsys: pytest.CaptureFixture[str]) -> None:
    printed = _printed_for(server, ValueError("a fault of the server's own"), capsys)
    assert "Traceback" in printed and "ValueError: a fault of the server's own" in printed
