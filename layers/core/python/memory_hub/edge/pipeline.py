"""The request pipeline shared by every function.

``handle(resolve, event, context)`` runs the contract's checks in the contract's order, then hands
the cleaned event to the function's Powertools resolver. The key lookup starts first and runs in
the background while the body is checked and the route makes its first reads; every answer — error
or success — waits for it, so a bad key always wins with 401.

The order of the checks is ``conventions.CHECK_ORDER``, stated once: the OpenAPI document and
docs/API.md render it from there.
"""

from __future__ import annotations

import base64
import json
import time
import zlib
from collections.abc import Callable
from concurrent.futures import Future
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from ..clock import request_id as new_request_id
from ..domain.errors import Forbidden, Unauthenticated
from ..domain.keys import INVALID_KEY
from ..domain.principal import Principal
from ..domain.results import Answer
from ..domain.rules import free_id_problem, is_blank, team_or_agent_problem, trim
from ..domain.scope import Scope
from ..observability import count_request, logger, start_usage, stop_usage
from ..settings import MAX_BODY_BYTES
from . import auth
from .conventions import FREE_IDS, ISOLATION_HEADERS, MAX_JSON_DEPTH, OPTIONAL_IDS
from .errors import (
    BadRequest,
    MethodNotAllowed,
    MissingIsolation,
    PayloadTooLarge,
    RouteNotFound,
    UnsupportedEncoding,
    describe,
)
from .routes import ROUTES, Route, is_public

INVALID_JSON = "Invalid JSON body"


@dataclass
class Request:
    """What the edge learned about the current request. Routes read it (``current()``) and hand
    the domain only what it needs: the scope, an ``authorize`` callable, the request id."""

    request_id: str
    path: str
    route: Route | None
    headers: dict[str, str]
    principal_future: Future[Principal] | None = None
    scope: Scope | None = None
    named_team: str | None = None  # the team a route that names one acts on (``Route.names_team``)
    body: dict[str, Any] = field(default_factory=dict)
    _authorized: Principal | None = None

    def principal(self) -> Principal:
        if self.principal_future is None:
            raise Unauthenticated(INVALID_KEY)
        return self.principal_future.result()

    def authorize(self) -> Principal:
        """401 for a bad key, 403 for a role or team the key does not cover (checked once)."""
        if self._authorized is None:
            principal = self.principal()
            if self.route is not None and not principal.has_role(self.route.role):
                raise Forbidden(f"role {principal.role} may not call this route (needs {self.route.role})")
            if self.scope is not None:
                principal.require_team(self.scope.team_id)
            if self.named_team is not None:
                principal.require_team(self.named_team)
            self._authorized = principal
        return self._authorized

    def header(self, name: str) -> str | None:
        return self.headers.get(name)

    @property
    def isolated_scope(self) -> Scope:
        """The scope of an isolated route: the pipeline sets it before the route runs (a route that is
        not isolated has none; asking for it there is a programming error, answered 500)."""
        if self.scope is None:
            raise RuntimeError(f"{self.path}: no isolation scope (the route is not isolated)")
        return self.scope


_current: ContextVar[Request] = ContextVar("memory_hub_request")


def current() -> Request:
    return _current.get()


def _raw_body(event: dict[str, Any]) -> bytes:
    body = event.get("body") or ""
    if event.get("isBase64Encoded"):
        try:
            return base64.b64decode(body, validate=True)
        except ValueError:
            raise BadRequest(INVALID_JSON) from None
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


class _Overflow:
    """A JSON number beyond a finite double (``1e999``): reported with its field, in order."""

    def __init__(self, text: str) -> None:
        self.text = text


def _number(text: str) -> Any:
    value = float(text)
    return _Overflow(text) if value in (float("inf"), float("-inf")) else value


def _integer(text: str) -> Any:
    if len(text.lstrip("-")) > 309:  # beyond any finite double (and Python's int() digit limit)
        return _Overflow(text)
    value = int(text)
    try:
        float(value)
    except OverflowError:
        return _Overflow(text)
    return value


def _reject_constant(name: str) -> Any:
    raise ValueError(name)  # NaN, Infinity: not JSON (RFC 8259)


def _too_deep(value: Any) -> bool:
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_JSON_DEPTH:
            return True
        children = item.values() if isinstance(item, dict) else item
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return False


def parse_object(data: bytes) -> dict[str, Any]:
    try:
        value = json.loads(
            data.decode("utf-8"), parse_constant=_reject_constant, parse_float=_number, parse_int=_integer
        )
    except (ValueError, UnicodeDecodeError, RecursionError):
        raise BadRequest(INVALID_JSON) from None
    if not isinstance(value, dict) or _too_deep(value):
        raise BadRequest(INVALID_JSON)
    # json.loads lets "\ud800" escapes through as lone surrogates, which no UTF-8 store can hold;
    # only such escapes can produce them, so the check runs only when one may be present.
    if b"\\ud" in data or b"\\uD" in data:
        try:
            json.dumps(value, ensure_ascii=False, default=lambda o: None).encode("utf-8")
        except UnicodeEncodeError:
            raise BadRequest(INVALID_JSON) from None
    return value


def overflows(value: Any, path: str = "") -> list[str]:
    """Dotted paths of the numbers that do not fit a finite double."""
    if isinstance(value, _Overflow):
        return [path or "(root)"]
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in overflows(v, f"{path}.{k}" if path else str(k))]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in overflows(v, f"{path}.{i}" if path else str(i))]
    return []


# Free-form objects are stored as given: their nulls are data, not absent fields.
FREE_FORM = ("metadata",)


def drop_nulls(value: Any, keep: tuple[str, ...] = ()) -> Any:
    """A key whose value is null counts as absent, except the route's ``keep`` keys."""
    if isinstance(value, dict):
        return {k: v if k in FREE_FORM else drop_nulls(v) for k, v in value.items() if v is not None or k in keep}
    if isinstance(value, list):
        return [drop_nulls(v) for v in value]
    return value


def resolve_isolation(body: dict[str, Any], headers: dict[str, str]) -> Scope:
    values: dict[str, Any] = {}
    for name, header in ISOLATION_HEADERS.items():
        value = body.get(name)
        value = value if value is not None else headers.get(header)
        # a blank session or task id means none; a blank body value does not fall back to the header
        values[name] = None if name in OPTIONAL_IDS and isinstance(value, str) and is_blank(value) else value
    # absent or blank is missing (422); a value of another type is a format error (400, below)
    missing = [
        n
        for n in ("team_id", "agent_id", "user_id")
        if values[n] is None or (isinstance(values[n], str) and is_blank(values[n]))
    ]
    if missing:
        raise MissingIsolation("missing isolation fields: " + ", ".join(missing))
    problems: list[str] = []
    for name in ISOLATION_HEADERS:
        value = values[name]
        if value is None:
            continue
        if not isinstance(value, str):
            problems.append(f"{name}: must be a string")
            continue
        check = team_or_agent_problem if name in ("team_id", "agent_id") else free_id_problem
        problem = check(value)
        if not problem and name in FREE_IDS and trim(value) != value:  # "u1 " is never a user of its own
            problem = "must not have leading or trailing white space"
        if problem:
            problems.append(f"{name}: {problem}")
    if problems:
        raise BadRequest("; ".join(problems))
    return Scope(**values)


def without_blank_ids(body: dict[str, Any]) -> dict[str, Any]:
    """The body without blank session/task ids: they mean none, so the route's model never sees them."""
    return {k: v for k, v in body.items() if not (k in OPTIONAL_IDS and isinstance(v, str) and is_blank(v))}


def dumps(payload: Any) -> str:
    """Strict JSON (RFC 8259: no NaN or Infinity), UTF-8 as is."""
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def proxy(
    status: int,
    body: str,
    request_id: str,
    content_type: str = "application/json",
    headers: dict[str, str] | None = None,
) -> dict[str, Any]:
    return {
        "statusCode": status,
        "headers": {"Content-Type": content_type, "x-request-id": request_id, **(headers or {})},
        "body": body,
        "isBase64Encoded": False,
    }


def error_response(request: Request | None, exc: BaseException) -> dict[str, Any]:
    status, message, data, retryable = describe(exc)
    request_id = request.request_id if request else new_request_id()
    payload: dict[str, Any] = {"code": status, "message": message, "request_id": request_id}
    if data is not None:
        payload["data"] = data
    if retryable is not None:
        payload["retryable"] = retryable
    allow = {"Allow": exc.allow} if isinstance(exc, MethodNotAllowed) else None
    return proxy(status, dumps(payload), request_id, headers=allow)


def ok_body(data: Answer) -> str:
    """The envelope of a use case's answer (its fields as the answer's type states them)."""
    return dumps({"code": 0, "message": "ok", "request_id": current().request_id, "data": data.wire()})


def fail(request: Request, exc: BaseException) -> dict[str, Any]:
    """Answer an error — but only after the checks that come before it in the order above."""
    try:
        if not isinstance(exc, Unauthenticated):
            if isinstance(exc, (RouteNotFound, MethodNotAllowed)):
                request.principal()
            else:
                request.authorize()
    except Exception as earlier:  # noqa: BLE001 - an earlier check's answer wins
        exc = earlier
    status = describe(exc)[0]
    if status == 500:
        logger.exception("unhandled error", exc_info=exc)
    return error_response(request, exc)


def handle(
    resolve: Callable[[dict[str, Any], Any], dict[str, Any]],
    event: dict[str, Any],
    context: Any,
    public: Callable[[str], dict[str, Any] | None] | None = None,
) -> dict[str, Any]:
    """Run one API Gateway (REST, v1) proxy event through the pipeline and ``resolve``."""
    started = time.perf_counter()
    path = event.get("path") or "/"
    method = (event.get("httpMethod") or "").upper()
    headers = {str(k).lower(): str(v) for k, v in (event.get("headers") or {}).items() if v is not None}
    request = Request(new_request_id(), path, ROUTES.get(path), headers)
    token = _current.set(request)
    usage = start_usage()  # the DynamoDB units its calls consume, reported with its count
    logger.set_correlation_id(request.request_id)
    try:
        response = _handle(request, resolve, event, context, method, public)
    except Exception as exc:  # noqa: BLE001 - every error becomes an envelope
        response = fail(request, exc)
    finally:
        _current.reset(token)
    response.setdefault("headers", {})["x-request-id"] = request.request_id
    count_request(path if request.route is not None else "other", response["statusCode"])
    stop_usage(usage)
    logger.info(
        "request",
        extra={
            "path": path if request.route is not None else "other",
            "method": method,
            "status": response["statusCode"],
            "ms": round((time.perf_counter() - started) * 1000, 1),
        },
    )
    return response


def _handle(
    request: Request,
    resolve: Callable[..., dict[str, Any]],
    event: dict[str, Any],
    context: Any,
    method: str,
    public: Callable[[str], dict[str, Any] | None] | None,
) -> dict[str, Any]:
    if method in ("GET", "HEAD") and public is not None and is_public(request.path):
        answer = public(request.path)
        if answer is not None:
            return answer
        # an asset the console or docs do not have: 404, with no auth, as their assets
        return error_response(request, RouteNotFound(f"no route {request.path}"))
    request.principal_future = auth.start(request.headers)
    if request.route is None:
        if is_public(request.path):  # a known path, so another method is 405, not 404
            raise MethodNotAllowed(f"method {method} not allowed on {request.path} (use GET)", allow="GET, HEAD")
        raise RouteNotFound(f"no route {request.path}")
    if method != "POST":
        raise MethodNotAllowed(f"method {method} not allowed on {request.path} (use POST)", allow="POST")
    raw = _decode(_raw_body(event), request.headers.get("content-encoding"), MAX_BODY_BYTES)
    body = drop_nulls(parse_object(raw), request.route.nullable)
    if request.route.isolated:
        request.scope = resolve_isolation(body, request.headers)
        body = without_blank_ids(body)
    if request.route.names_team:  # a well-formed team is checked against the key before the fields
        team = body.get("team_id")
        request.named_team = team if isinstance(team, str) and not team_or_agent_problem(team) else None
    request.body = body
    bad_numbers = overflows(body)
    if bad_numbers:
        raise BadRequest("; ".join(f"{p}: must be a finite number" for p in bad_numbers))
    # Content-Type is not checked (a JSON body is enough): the resolver always sees the JSON already parsed.
    json_headers = {k: v for k, v in (event.get("headers") or {}).items() if str(k).lower() != "content-type"}
    json_headers["Content-Type"] = "application/json"
    clean = dict(
        event,
        body=dumps(body),
        isBase64Encoded=False,
        headers=json_headers,
        multiValueHeaders={k: [v] for k, v in json_headers.items()},
    )
    return resolve(clean, context)
