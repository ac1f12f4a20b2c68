"""The request pipeline shared by every function (§1).

``handle(app, event, context)`` runs the contract's checks in the contract's order, then hands the
cleaned event to the function's Powertools resolver. The key lookup starts first and runs in the
background while the body is checked and the route prefetches its data; every answer — error or
success — waits for it, so a bad key always wins with 401.

Order: service id / key 401 → path 404 / method 405 → role 403 → size 413 → encoding 415 →
JSON 400 → isolation 422 → isolation format 400 → team 403 → fields 400 → domain errors.
"""

from __future__ import annotations

import base64
import json
import time
import zlib
from concurrent.futures import Future
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Callable

from .auth import INVALID_KEY, Principal, bearer_token, bootstrap_principal, check_service, lookup_principal
from .clock import request_id as new_request_id
from .errors import (
    ApiError,
    BadRequest,
    MethodNotAllowed,
    NotFound,
    PayloadTooLarge,
    Unauthorized,
    Unprocessable,
    UnsupportedEncoding,
)
from .observability import count_request, logger
from .routes import PUBLIC_GET, ROUTES, Route
from .rules import free_id_problem, team_or_agent_problem
from .settings import get_settings

INVALID_JSON = "Invalid JSON body"
_ISOLATION_HEADERS = {
    "team_id": "x-tdai-team-id",
    "agent_id": "x-tdai-agent-id",
    "user_id": "x-tdai-user-id",
    "session_id": "x-tdai-session-id",
    "task_id": "x-tdai-task-id",
}


@dataclass(frozen=True)
class Isolation:
    team_id: str
    agent_id: str
    user_id: str
    session_id: str | None = None
    task_id: str | None = None

    @property
    def memory_id(self) -> str:
        return memory_id_of(self.team_id, self.agent_id)


def memory_id_of(team_id: str, agent_id: str) -> str:
    return f"chat_memory-{team_id}-{agent_id}"


@dataclass
class RequestContext:
    """What the edge learned about the current request; read by routes via ``current()``."""

    request_id: str
    path: str
    route: Route | None
    headers: dict[str, str]
    principal_future: Future[Principal] | None = None
    isolation: Isolation | None = None
    body: dict[str, Any] = field(default_factory=dict)
    _checked: bool = False

    def principal(self) -> Principal:
        if self.principal_future is None:
            raise Unauthorized(INVALID_KEY)
        return self.principal_future.result()

    def check_access(self) -> Principal:
        """401 for a bad key, 403 for a role or team the key does not cover. Idempotent."""
        principal = self.principal()
        if not self._checked:
            if self.route is not None:
                principal.require_role(self.route.role)
            if self.isolation is not None:
                principal.require_team(self.isolation.team_id)
            self._checked = True
        return principal

    def header(self, name: str) -> str | None:
        return self.headers.get(name)


_current: ContextVar[RequestContext] = ContextVar("memory_hub_request")


def current() -> RequestContext:
    return _current.get()


def _done(value: Principal | None = None, error: BaseException | None = None) -> Future[Principal]:
    future: Future[Principal] = Future()
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(value)  # type: ignore[arg-type]
    return future


def _start_auth(headers: dict[str, str]) -> Future[Principal]:
    """Resolve the caller in the background; the service id is checked first (cheap, local)."""
    try:
        check_service(headers.get("x-tdai-service-id"))
    except Unauthorized as exc:
        return _done(error=exc)
    token = bearer_token(headers.get("authorization"))
    if token is None:
        return _done(error=Unauthorized(INVALID_KEY))
    principal = bootstrap_principal(token)
    if principal is not None:
        return _done(principal)
    from .dal.aws import submit

    return submit(lookup_principal, token)


def _raw_body(event: dict[str, Any]) -> bytes:
    body = event.get("body") or ""
    if event.get("isBase64Encoded"):
        return base64.b64decode(body)
    return body.encode("utf-8") if isinstance(body, str) else bytes(body)


def _decode(raw: bytes, encoding: str | None, limit: int) -> bytes:
    if len(raw) > limit:
        raise PayloadTooLarge(f"body: larger than {limit} bytes")
    encoding = (encoding or "identity").strip().lower()
    if encoding in ("", "identity"):
        return raw
    if encoding not in ("gzip", "x-gzip"):
        raise UnsupportedEncoding(f"Content-Encoding: {encoding} is not supported (gzip or identity)")
    # A gzip stream may hold several members (RFC 1952); a cut-off one is an error, not a shorter body.
    decoded = bytearray()
    rest = raw
    while rest:
        decoder = zlib.decompressobj(wbits=31)
        try:
            decoded += decoder.decompress(rest, limit + 1 - len(decoded))
        except zlib.error:
            raise BadRequest("body: invalid gzip data") from None
        if len(decoded) > limit:
            raise PayloadTooLarge(f"body: larger than {limit} bytes after decoding")
        if not decoder.eof:
            raise BadRequest("body: invalid gzip data")
        rest = decoder.unused_data
    return bytes(decoded)


def _reject_constant(name: str) -> Any:
    raise ValueError(name)


# Deeper bodies would exhaust the recursion of the parser and of every walk over the body (a 500);
# no route's schema nests more than a few levels.
MAX_JSON_DEPTH = 100


def _too_deep(value: Any) -> bool:
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_JSON_DEPTH:
            return True
        children = item.values() if isinstance(item, dict) else item
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return False


def _parse_object(data: bytes) -> dict[str, Any]:
    try:
        value = json.loads(data.decode("utf-8"), parse_constant=_reject_constant)
    except (ValueError, UnicodeDecodeError, RecursionError):
        raise BadRequest(INVALID_JSON) from None
    if not isinstance(value, dict) or _too_deep(value):
        raise BadRequest(INVALID_JSON)
    # json.loads lets "\ud800" escapes through as lone surrogates, which no UTF-8 store can hold;
    # only such escapes can produce them, so the check runs only when one may be present.
    if b"\\ud" in data or b"\\uD" in data:
        try:
            json.dumps(value, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            raise BadRequest(INVALID_JSON) from None
    return value


# Free-form objects are stored as given: their nulls are data, not absent fields.
FREE_FORM = ("metadata",)


def drop_nulls(value: Any, keep: tuple[str, ...] = ()) -> Any:
    """A key whose value is null counts as absent (§1), except the route's ``keep`` keys."""
    if isinstance(value, dict):
        return {k: v if k in FREE_FORM else drop_nulls(v) for k, v in value.items() if v is not None or k in keep}
    if isinstance(value, list):
        return [drop_nulls(v) for v in value]
    return value


def resolve_isolation(body: dict[str, Any], headers: dict[str, str]) -> Isolation:
    values: dict[str, Any] = {}
    for name, header in _ISOLATION_HEADERS.items():
        value = body.get(name)
        values[name] = value if value is not None else headers.get(header)
    # absent or blank is missing (422); a value of another type is a format error (400, below)
    missing = [n for n in ("team_id", "agent_id", "user_id")
               if values[n] is None or (isinstance(values[n], str) and not values[n].strip())]
    if missing:
        raise Unprocessable("missing isolation fields: " + ", ".join(missing))
    problems: list[str] = []
    for name in _ISOLATION_HEADERS:
        value = values[name]
        if value is None:
            continue
        if not isinstance(value, str):
            problems.append(f"{name}: must be a string")
            continue
        check = team_or_agent_problem if name in ("team_id", "agent_id") else free_id_problem
        problem = check(value)
        if problem:
            problems.append(f"{name}: {problem}")
    if problems:
        raise BadRequest("; ".join(problems))
    return Isolation(**values)


def error_response(ctx: RequestContext | None, exc: ApiError) -> dict[str, Any]:
    payload: dict[str, Any] = {"code": exc.status, "message": exc.message,
                               "request_id": ctx.request_id if ctx else new_request_id()}
    if exc.data is not None:
        payload["data"] = exc.data
    if exc.retryable is not None:
        payload["retryable"] = exc.retryable
    return _proxy(exc.status, payload, payload["request_id"])


def _proxy(status: int, payload: Any, request_id: str, content_type: str = "application/json") -> dict[str, Any]:
    body = payload if isinstance(payload, str) else json.dumps(payload, ensure_ascii=False,
                                                                separators=(",", ":"))
    return {"statusCode": status, "headers": {"Content-Type": content_type, "x-request-id": request_id},
            "body": body, "isBase64Encoded": False}


def ok_body(data: Any) -> str:
    ctx = current()
    return json.dumps({"code": 0, "message": "ok", "request_id": ctx.request_id, "data": data},
                      ensure_ascii=False, separators=(",", ":"))


def _fail(ctx: RequestContext, exc: ApiError) -> dict[str, Any]:
    """Answer an error, but only after the checks that come before it in §1's order."""
    try:
        if not isinstance(exc, Unauthorized):
            ctx.check_access() if not isinstance(exc, (NotFound, MethodNotAllowed)) else ctx.principal()
    except ApiError as earlier:
        exc = earlier
    return error_response(ctx, exc)


def handle(resolve: Callable[[dict[str, Any], Any], dict[str, Any]], event: dict[str, Any],
           context: Any, public: Callable[[str], dict[str, Any] | None] | None = None) -> dict[str, Any]:
    """Run one API Gateway (REST, v1) proxy event through the pipeline and ``resolve``."""
    started = time.perf_counter()
    path = event.get("path") or "/"
    method = (event.get("httpMethod") or "").upper()
    headers = {str(k).lower(): str(v) for k, v in (event.get("headers") or {}).items() if v is not None}
    ctx = RequestContext(new_request_id(), path, ROUTES.get(path), headers)
    token = _current.set(ctx)
    logger.set_correlation_id(ctx.request_id)
    try:
        response = _handle(ctx, resolve, event, context, method, public)
    except ApiError as exc:
        response = _fail(ctx, exc)
    except Exception:
        logger.exception("unhandled error", extra={"path": path})
        response = error_response(ctx, ApiError("Internal server error", retryable=True))
    finally:
        _current.reset(token)
    response.setdefault("headers", {})["x-request-id"] = ctx.request_id
    count_request(path if ctx.route is not None else "unknown", response["statusCode"])
    logger.info("request", extra={"path": path, "method": method, "status": response["statusCode"],
                                  "ms": round((time.perf_counter() - started) * 1000, 1)})
    return response


def _handle(ctx: RequestContext, resolve: Callable[..., dict[str, Any]], event: dict[str, Any], context: Any,
            method: str, public: Callable[[str], dict[str, Any] | None] | None) -> dict[str, Any]:
    if method == "GET" and public is not None:
        answer = public(ctx.path)
        if answer is not None:
            return answer
    ctx.principal_future = _start_auth(ctx.headers)
    if ctx.route is None:
        if ctx.path in PUBLIC_GET:  # a known path, so another method is 405, not 404 (§1)
            raise MethodNotAllowed(f"method {method} not allowed on {ctx.path} (use GET)")
        raise NotFound(f"no route {ctx.path}")
    if method != "POST":
        raise MethodNotAllowed(f"method {method} not allowed on {ctx.path} (use POST)")
    limit = get_settings().max_body_bytes
    raw = _decode(_raw_body(event), ctx.headers.get("content-encoding"), limit)
    body = drop_nulls(_parse_object(raw), ctx.route.nullable)
    ctx.body = body
    if ctx.route.isolated:
        ctx.isolation = resolve_isolation(body, ctx.headers)
    # Content-Type is not checked (§1): the resolver always sees the JSON we already parsed.
    json_headers = {k: v for k, v in (event.get("headers") or {}).items() if k.lower() != "content-type"}
    json_headers["Content-Type"] = "application/json"
    clean = dict(event, body=json.dumps(body, ensure_ascii=False), isBase64Encoded=False, headers=json_headers,
                 multiValueHeaders={k: [v] for k, v in json_headers.items()})
    return resolve(clean, context)
