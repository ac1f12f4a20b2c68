"""How a request reaches moto once the emulated AWS side has admitted it: a WSGI environ built from
the request as it came off the wire, then moto's Flask app for the service, or for DynamoDB moto's
handler itself (``dynamodb_direct``)."""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any
from urllib.parse import unquote_to_bytes, urlsplit


def wsgi_environ(
    method: str, raw_path: str, headers: dict[str, str], body: bytes, server_name: str, port: int
) -> dict[str, Any]:
    """The WSGI environ of one request as it came off the wire (the path undecoded in ``RAW_URI``)."""
    url = urlsplit(raw_path)
    environ: dict[str, Any] = {
        "REQUEST_METHOD": method,
        "SCRIPT_NAME": "",
        "PATH_INFO": unquote_to_bytes(url.path).decode("latin-1"),
        "QUERY_STRING": url.query,
        "REQUEST_URI": raw_path,
        "RAW_URI": raw_path,
        "SERVER_NAME": server_name,
        "SERVER_PORT": str(port),
        "SERVER_PROTOCOL": "HTTP/1.1",
        "CONTENT_LENGTH": str(len(body)),
        "wsgi.version": (1, 0),
        "wsgi.url_scheme": "http",
        "wsgi.input": io.BytesIO(body),
        "wsgi.errors": io.StringIO(),
        "wsgi.multithread": True,
        "wsgi.multiprocess": False,
        "wsgi.run_once": False,
    }
    for name, value in headers.items():
        key = name.upper().replace("-", "_")
        if key == "CONTENT_TYPE":
            environ["CONTENT_TYPE"] = value
        elif key != "CONTENT_LENGTH":
            environ[f"HTTP_{key}"] = value
    return environ


def through_flask(app: Callable[..., Any], environ: dict[str, Any]) -> tuple[int, dict[str, str], bytes]:
    """What one of moto's Flask apps answers."""
    started: dict[str, Any] = {}

    def start_response(status: str, response_headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
        started["status"], started["headers"] = int(status.split(" ", 1)[0]), response_headers
        return lambda data: None  # WSGI's write(): moto never calls it

    chunks = app(environ, start_response)
    try:
        out = b"".join(chunks)
    finally:
        getattr(chunks, "close", lambda: None)()
    return started["status"], dict(started["headers"]), out


def dynamodb_direct(environ: dict[str, Any]) -> tuple[int, dict[str, str], bytes]:
    """A DynamoDB request answered by moto's handler without Flask around it: what moto's Flask app
    does for DynamoDB (its request class, its handler, its HTTP errors as their responses), plus
    the one header Flask's CORS extension adds to every answer. Flask's URL map, request context and
    response object cost ~0.3 ms a call and hold no DynamoDB behaviour: every DynamoDB request is a
    POST to ``/``, told apart by ``X-Amz-Target``. A contract test sends ~230 requests (errors
    among them) both ways and compares status, headers and body."""
    from moto.dynamodb.responses import DynamoHandler
    from moto.moto_server.werkzeug_app import BackendRequest
    from werkzeug.exceptions import HTTPException

    request = BackendRequest(environ)
    try:
        status, headers, content = DynamoHandler.dispatch(request, request.raw_url, dict(request.headers))
    except HTTPException as exc:
        status, headers, content = exc.code or 500, dict(exc.get_headers()), exc.get_body()
    headers = {**headers, "Access-Control-Allow-Origin": "*"}
    return int(status), headers, content.encode("utf-8") if isinstance(content, str) else bytes(content)
