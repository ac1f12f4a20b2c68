"""API Gateway (REST, proxy integration) and the Lambda Invoke API, over the function pool.

Routes come from the template: an exact path first, then ``/{proxy+}``. Each HTTP request becomes
a REST API (payload v1) proxy event, its body base64-encoded as the deployed API does with
``BinaryMediaTypes: */*``. What API Gateway answers itself (no route, a body over 10 MiB, a function
that failed) uses the envelope and carries an ``x-request-id``, as the template's gateway responses
do. A request whose framing is broken is answered 400 before anything else and reaches no function;
so is a request the HTTP layer cannot take (headers too large: 431, a request line too long: 414),
as an envelope too, never an HTML page.

The path is percent-decoded segment by segment: an encoded slash (``%2F``) is part of a segment, not a
separator, so ``/v3/conversation%2Fquery`` is no route (the function answers 404), as on API Gateway.

The Lambda Invoke API takes unsigned requests, as ``sam local start-lambda`` does, but only from a
local program: the ``Host`` must be loopback or ``localhost`` (a web page that rebinds its name to
127.0.0.1 sends its own), no ``Origin`` header may be present (a browser adds it to a cross-origin
request) and the body must be JSON or absent (a form a web page posts cross-origin is not): 403
otherwise, before any function runs."""

from __future__ import annotations

import base64
import json
import re
import threading
import time
import traceback
import uuid
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from . import http
from .aws.signing import loopback_host
from .functions import FunctionPool
from .identity import access_key_of

GATEWAY_MAX_BODY = 10 * 1024 * 1024  # API Gateway's payload limit
ASYNC_PAYLOAD_LIMIT = 256 * 1024
SYNC_PAYLOAD_LIMIT = 6 * 1024 * 1024


_ENCODED_SLASH = re.compile(r"(%2[Ff])")


def decoded_path(raw: str) -> str:
    """The request path percent-decoded, except ``%2F``: an encoded slash stays ``%2F``."""
    return "".join("%2F" if i % 2 else unquote(part) for i, part in enumerate(_ENCODED_SLASH.split(raw))) or "/"


def _request_id() -> str:
    return "req-" + uuid.uuid4().hex[:16]


class Router:
    def __init__(self, pool: FunctionPool) -> None:
        self.exact: dict[str, tuple[str, str]] = {}
        self.proxy: tuple[str, str] | None = None
        for function in pool.deployment.functions.values():
            for path, _method in function.routes:
                if path.endswith("{proxy+}"):
                    self.proxy = (function.logical_id, path)
                else:
                    self.exact[path] = (function.logical_id, path)

    def match(self, path: str) -> tuple[str, str] | None:
        return self.exact.get(path) or self.proxy


def api_event(
    method: str,
    path: str,
    headers: dict[str, str],
    body: bytes | None,
    query: dict[str, list[str]] | None = None,
    resource: str | None = None,
) -> dict[str, Any]:
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
            "resourcePath": resource,
            "httpMethod": method,
            "path": f"/v1{path}",
            "stage": "v1",
            "requestId": request_id,
            "extendedRequestId": request_id,
            "accountId": "123456789012",
            "apiId": "local",
            "protocol": "HTTP/1.1",
            "requestTimeEpoch": int(time.time() * 1000),
            "identity": {"sourceIp": "127.0.0.1", "userAgent": headers.get("User-Agent")},
        },
        "body": base64.b64encode(body).decode() if body else None,
        "isBase64Encoded": bool(body),
    }


def _envelope(status: int, message: str, **extra: Any) -> tuple[dict[str, str], bytes]:
    request_id = _request_id()
    payload = {"code": status, "message": message, "request_id": request_id, **extra}
    return {"Content-Type": "application/json", "x-request-id": request_id}, json.dumps(payload).encode()


class ApiHandler(http.Handler):
    pool: FunctionPool
    router: Router
    max_body = GATEWAY_MAX_BODY

    def _refuse(self, status: int, message: str, *, close: bool = False, **extra: Any) -> None:
        headers, body = _envelope(status, message, **extra)
        self.send(status, headers, body, close=close)

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """What the HTTP layer refuses before a request is whole (headers too large, a request line
        too long, a malformed request line): the envelope, and the connection is closed."""
        reason = {431: "request headers: too large", 414: "request line: too long"}.get(code)
        if reason:
            self._skip_headers()
        self._refuse(code, reason or f"malformed request: {message or 'bad request line'}", close=True)

    def _skip_headers(self, limit: int = 1 << 20) -> None:
        """Read what is left of the headers (up to ``limit`` bytes) so that closing the connection
        does not reset it before the client has read the answer."""
        left = limit
        try:
            self.connection.settimeout(1.0)
            while left > 0:
                line = self.rfile.readline(min(left, 1 << 16))
                if line in (b"", b"\r\n", b"\n"):
                    return
                left -= len(line)
        except OSError:
            return

    def _serve(self) -> None:
        try:
            body = self.read_body()
        except http.Malformed as exc:
            self._refuse(400, f"malformed request: {exc.message}", close=True)
            return
        except http.TooLarge as exc:
            self._refuse(413, f"body: larger than {GATEWAY_MAX_BODY} bytes", close=not exc.drained)
            return
        url = urlsplit(self.path)
        path = decoded_path(url.path)
        target = self.router.match(path)
        if target is None:
            self._refuse(404, f"no route {path}")
            return
        function, resource = target
        event = api_event(
            self.command, path, self.header_values(), body, parse_qs(url.query, keep_blank_values=True), resource
        )
        outcome = self.pool.invoke(function, event)
        if outcome.error is not None:  # the function failed: API Gateway answers 502 (504 on a timeout)
            timeout = outcome.error.get("errorType") == "Sandbox.Timedout"
            self._refuse(
                504 if timeout else 502, "Gateway timeout" if timeout else "Internal server error", retryable=True
            )
            return
        result = outcome.result if isinstance(outcome.result, dict) else {}
        payload = result.get("body") or ""
        raw = base64.b64decode(payload) if result.get("isBase64Encoded") else str(payload).encode("utf-8")
        headers = dict(result.get("headers") or {})
        for name, values in (result.get("multiValueHeaders") or {}).items():
            headers[name] = ", ".join(values)
        self.send(int(result.get("statusCode", 200)), headers, raw)

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = do_OPTIONS = _serve  # noqa: N815 - http.server

    def __getattr__(self, name: str) -> Any:
        """Any other method (``TRACE``, ``PROPFIND``, a lower-case ``post``) is served too, as API
        Gateway's catch-all route sends it to the functions: the key is checked first, then the
        method (405) — not http.server's 501."""
        if name.startswith("do_"):
            return self._serve
        raise AttributeError(name)


# The content types a browser sends cross-origin without a preflight (a form's): never a local program's.
_INVOKE = re.compile(r"^/2015-03-31/functions/([^/]+)/invocations$")
_CREDENTIAL = re.compile(r"Credential=([^/,\s]+)/")
INVOCATION_TYPES = ("Event", "RequestResponse", "DryRun")  # X-Amz-Invocation-Type, as Lambda spells them


class _Refused(Exception):
    """What the Invoke API answers instead of running the function: status, error type, message."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code = status, code


def _not_json(constant: str) -> Any:
    """``NaN`` and ``Infinity``, which Python's parser takes and JSON does not have."""
    raise ValueError(f"{constant} is not JSON")


class InvokeHandler(http.Handler):
    """``POST /2015-03-31/functions/<name>/invocations``, as ``sam local start-lambda`` serves it."""

    pool: FunctionPool
    max_body = SYNC_PAYLOAD_LIMIT

    def _json(self, status: int, payload: Any, **headers: str) -> None:
        self.send(status, {"Content-Type": "application/json", **headers}, json.dumps(payload).encode())

    def _refuse(self, status: int, error_type: str, message: str, *, close: bool = False) -> None:
        """An error as Lambda's Invoke API words one (``close``: nothing after it on the connection
        is read as a request)."""
        self.send(
            status,
            {"Content-Type": "application/json", "x-amzn-ErrorType": error_type},
            json.dumps({"Type": "User", "message": message}).encode(),
            close=close,
        )

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """What the HTTP layer refuses before a request is whole: a JSON error, never HTML."""
        self.close_connection = True
        self.send(
            code,
            {"Content-Type": "application/json"},
            json.dumps({"Type": "User", "message": message or "bad request"}).encode(),
            close=True,
        )

    def _foreign(self) -> str | None:
        """Why this request may come from a web page rather than a local program (or None)."""
        host = self.headers.get("Host")
        if not loopback_host(host):
            return f"Host {host!r} is not served here: only a loopback address or localhost"
        if self.headers.get("Origin") is not None:  # a browser sends it with every cross-origin POST
            return "a request with an Origin header (from a web page) is not served here"
        return None  # the body must then be JSON, whatever its Content-Type says (``_checked``)

    def do_POST(self) -> None:  # noqa: N802 - stdlib naming
        foreign = self._foreign()
        if foreign is not None:
            self._refuse(403, "AccessDeniedException", foreign, close=True)
            return
        try:
            body = self.read_body()
        except http.Malformed as exc:  # nothing after a broken framing is a request of its own
            message = f"malformed request: {exc.message}"
            self._refuse(400, "InvalidRequestContentException", message, close=True)
            return
        except http.TooLarge as exc:
            message = f"Request must be smaller than {SYNC_PAYLOAD_LIMIT} bytes for the InvokeFunction operation"
            self._refuse(413, "RequestTooLargeException", message, close=not exc.drained)
            return
        try:
            name, invocation, event = self._checked(body)
        except _Refused as refused:
            self._refuse(refused.status, refused.code, str(refused))
            return
        if invocation == "DryRun":  # the parameters and the caller's permission hold: nothing runs
            self.send(204, {"X-Amz-Executed-Version": "$LATEST"}, b"")
        elif invocation == "Event":
            threading.Thread(target=self._later, args=(name, event), daemon=True).start()
            self.send(202, {"X-Amz-Executed-Version": "$LATEST"}, b"")
        else:
            outcome = self.pool.invoke(name, event)
            if outcome.error is not None:
                self._json(
                    200, outcome.error, **{"X-Amz-Function-Error": "Unhandled", "X-Amz-Executed-Version": "$LATEST"}
                )
            else:
                self._json(200, outcome.result, **{"X-Amz-Executed-Version": "$LATEST"})

    def _checked(self, body: bytes) -> tuple[str, str, Any]:
        """The function to run (its logical id), the invocation type and the event, or ``_Refused``
        as Lambda refuses: an unknown type, an unknown function, a caller without the permission,
        a payload that is not JSON or too large for an asynchronous invocation."""
        invocation = self.headers.get("X-Amz-Invocation-Type") or "RequestResponse"
        if invocation not in INVOCATION_TYPES:
            raise _Refused(
                400,
                "ValidationException",
                f"1 validation error detected: Value '{invocation}' at 'invocationType' failed to satisfy "
                f"constraint: Member must satisfy enum value set: [{', '.join(INVOCATION_TYPES)}]",
            )
        match = _INVOKE.match(urlsplit(self.path).path)
        function = self.pool.function(unquote(match.group(1))) if match else None
        if function is None:
            name = unquote(match.group(1)) if match else self.path
            raise _Refused(404, "ResourceNotFoundException", f"Function not found: {name}")
        caller = _CREDENTIAL.search(self.headers.get("Authorization", ""))
        if caller:  # a function calling another (or itself) needs lambda:InvokeFunction on it
            invoker = next(
                (f for f in self.pool.deployment.functions.values() if access_key_of(f.logical_id) == caller.group(1)),
                None,
            )
            arn = self.pool.deployment.arns[function.logical_id]
            if invoker is not None and not invoker.allows("lambda:InvokeFunction", arn):
                raise _Refused(
                    403,
                    "AccessDeniedException",
                    f"{invoker.logical_id} is not authorized to perform: lambda:InvokeFunction on resource: {arn}",
                )
        try:
            event = json.loads(body or b"{}", parse_constant=_not_json)
        except ValueError:  # not a local program's JSON event (a web page's form, say): refused
            raise _Refused(
                403, "AccessDeniedException", "Could not parse request body into json: the payload must be JSON"
            ) from None
        if invocation == "Event" and len(body) > ASYNC_PAYLOAD_LIMIT:
            raise _Refused(
                413,
                "RequestTooLargeException",
                f"Request must be smaller than {ASYNC_PAYLOAD_LIMIT} bytes for the InvokeAsync operation",
            )
        return function.logical_id, invocation, event

    def _later(self, name: str, event: Any) -> None:
        try:
            outcome = self.pool.invoke(name, event)
            if outcome.error is not None:  # Lambda would retry twice; the purge record outlives it
                print(f"asynchronous {name} failed: {outcome.error.get('errorMessage')}", flush=True)
        except Exception:  # noqa: BLE001
            traceback.print_exc()


def make_servers(pool: FunctionPool, port: int, lambda_port: int) -> list[http.Server]:
    api = http.Server(("127.0.0.1", port), type("Api", (ApiHandler,), {"pool": pool, "router": Router(pool)}))
    invoke = http.Server(("127.0.0.1", lambda_port), type("Invoke", (InvokeHandler,), {"pool": pool}))
    return [api, invoke]
