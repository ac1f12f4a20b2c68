"""A local API Gateway (REST, proxy integration) and Lambda Invoke API over the emulator.

Routes come from template.yaml: an exact path first, then the ``/{proxy+}`` catch-all. Each HTTP
request becomes a real API Gateway v1 proxy event; bodies are passed base64-encoded, as the
deployed API does with ``BinaryMediaTypes: */*``.
"""

from __future__ import annotations

import base64
import json
import os
import threading
import re
import time
import traceback
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from .emulator import AWS_LOCK, FunctionPool, Stack

GATEWAY_MAX_BODY = 10 * 1024 * 1024  # API Gateway's own payload limit


class Router:
    def __init__(self, stack: Stack) -> None:
        self.exact: dict[str, tuple[str, str]] = {}
        self.proxy: tuple[str, str] | None = None
        for function in stack.template.functions.values():
            for path, _method in function.routes:
                if path.endswith("{proxy+}"):
                    self.proxy = (function.logical_id, path)
                else:
                    self.exact[path] = (function.logical_id, path)

    def match(self, path: str) -> tuple[str, str] | None:
        return self.exact.get(path) or self.proxy


def api_event(method: str, path: str, headers: dict[str, str], body: bytes | None,
              query: dict[str, list[str]] | None = None, resource: str | None = None) -> dict[str, Any]:
    """A REST API (payload v1) proxy event, as API Gateway sends it to Lambda."""
    query = query or {}
    resource = resource or path
    request_id = str(uuid.uuid4())
    return {
        "resource": resource,
        "path": path,
        "httpMethod": method,
        "headers": dict(headers),
        "multiValueHeaders": {k: [v] for k, v in headers.items()},
        "queryStringParameters": {k: v[-1] for k, v in query.items()} or None,
        "multiValueQueryStringParameters": query or None,
        "pathParameters": {"proxy": path.lstrip("/")} if resource.endswith("{proxy+}") else None,
        "stageVariables": None,
        "requestContext": {
            "resourcePath": resource, "httpMethod": method, "path": f"/v1{path}", "stage": "v1",
            "requestId": request_id, "extendedRequestId": request_id, "accountId": "000000000000",
            "apiId": "local", "protocol": "HTTP/1.1", "requestTimeEpoch": int(time.time() * 1000),
            "identity": {"sourceIp": "127.0.0.1", "userAgent": headers.get("User-Agent")},
        },
        "body": base64.b64encode(body).decode() if body else None,
        "isBase64Encoded": bool(body),
    }


class _Handler(BaseHTTPRequestHandler):
    server_version = "MemoryHubLocal/1"
    protocol_version = "HTTP/1.1"
    pool: FunctionPool
    router: Router

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        pass

    def _read_body(self) -> bytes:
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            chunks = []
            while True:
                size = int(self.rfile.readline().strip().split(b";")[0] or b"0", 16)
                if size == 0:
                    self.rfile.readline()
                    break
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
            return b"".join(chunks)
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _send(self, status: int, headers: dict[str, str], body: bytes) -> None:
        self.send_response(status)
        for name, value in headers.items():
            if name.lower() not in ("content-length", "connection", "transfer-encoding"):
                self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":  # a body after HEAD would be read as the next response on the connection
            self.wfile.write(body)

    def _gateway_error(self, status: int, message: str) -> None:
        payload = {"code": status, "message": message, "request_id": "req-" + uuid.uuid4().hex[:16]}
        self._send(status, {"Content-Type": "application/json"}, json.dumps(payload).encode())


class ApiHandler(_Handler):
    def _serve(self) -> None:
        body = self._read_body()
        url = urlsplit(self.path)
        path = unquote(url.path) or "/"
        if len(body) > GATEWAY_MAX_BODY:
            self._gateway_error(413, "body: larger than the gateway's limit")
            return
        target = self.router.match(path)
        if target is None:
            self._gateway_error(404, f"no route {path}")
            return
        function, resource = target
        headers = {k: v for k, v in self.headers.items()}
        event = api_event(self.command, path, headers, body, parse_qs(url.query), resource)
        try:
            result = self.pool.invoke(function, event)
        except Exception:  # the function crashed: API Gateway answers 502
            traceback.print_exc()
            self._gateway_error(502, "Internal server error")
            return
        payload = result.get("body") or ""
        raw = base64.b64decode(payload) if result.get("isBase64Encoded") else payload.encode("utf-8")
        out_headers = dict(result.get("headers") or {})
        for name, values in (result.get("multiValueHeaders") or {}).items():
            out_headers[name] = ", ".join(values)
        self._send(int(result.get("statusCode", 200)), out_headers, raw)

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = do_OPTIONS = _serve


_INVOKE = re.compile(r"^/2015-03-31/functions/([^/]+)/invocations$")


class InvokeHandler(_Handler):
    """``POST /2015-03-31/functions/<name>/invocations`` like ``sam local start-lambda``."""

    def do_POST(self) -> None:  # noqa: N802 - stdlib naming
        body = self._read_body()
        match = _INVOKE.match(urlsplit(self.path).path)
        name = unquote(match.group(1)).rsplit(":", 1)[-1] if match else ""
        if name not in self.pool.template.functions:
            payload = {"Type": "User", "message": f"Function not found: {name}"}
            self._send(404, {"Content-Type": "application/json",
                             "x-amzn-ErrorType": "ResourceNotFoundException"}, json.dumps(payload).encode())
            return
        if (self.headers.get("X-Amz-Invocation-Type") or "").lower() == "event":
            # asynchronous invocation: accepted now, run in the background (as Lambda queues it)
            event = json.loads(body or b"{}")
            threading.Thread(target=self._run_async, args=(name, event), daemon=True).start()
            self._send(202, {"X-Amz-Executed-Version": "$LATEST"}, b"")
            return
        try:
            event = json.loads(body or b"{}")
            result = self.pool.invoke(name, event)
            self._send(200, {"Content-Type": "application/json", "X-Amz-Executed-Version": "$LATEST"},
                       json.dumps(result).encode())
        except Exception as exc:  # reported like Lambda's unhandled function error
            traceback.print_exc()
            payload = {"errorMessage": str(exc), "errorType": type(exc).__name__}
            self._send(200, {"Content-Type": "application/json", "X-Amz-Function-Error": "Unhandled"},
                       json.dumps(payload).encode())


    def _run_async(self, name: str, event: dict[str, Any]) -> None:
        try:
            self.pool.invoke(name, event)
        except Exception:  # Lambda would retry twice, then drop it; the purge record outlives it
            traceback.print_exc()


def _server(handler: type[_Handler], port: int, pool: FunctionPool, router: Router | None) -> ThreadingHTTPServer:
    attrs = {"pool": pool, "router": router}
    server = ThreadingHTTPServer(("127.0.0.1", port), type(handler.__name__, (handler,), attrs))
    server.daemon_threads = True
    return server


def aws_server(port: int) -> Any:
    """moto's own endpoint, sharing the in-process state, every call under the same lock."""
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
    from werkzeug.serving import make_server

    app = DomainDispatcherApplication(create_backend_app)

    def locked(environ: Any, start_response: Any) -> Any:
        with AWS_LOCK:
            return list(app(environ, start_response))

    return make_server("127.0.0.1", port, locked, threaded=True, request_handler=MotoRequestHandler)


def serve(stack: Stack, port: int, lambda_port: int, aws_port: int) -> list[Any]:
    """Start the three servers in background threads; returns them (call shutdown() to stop).

    Functions that invoke other functions (a clear handing its purge on) reach this Invoke API
    through botocore's per-service endpoint setting, exactly as their code runs on AWS."""
    os.environ["AWS_ENDPOINT_URL_LAMBDA"] = f"http://127.0.0.1:{lambda_port}"

    pool = FunctionPool(stack.template)
    servers = [_server(ApiHandler, port, pool, Router(stack)), _server(InvokeHandler, lambda_port, pool, None),
               aws_server(aws_port)]
    for server in servers:
        threading.Thread(target=server.serve_forever, daemon=True).start()
    return servers
