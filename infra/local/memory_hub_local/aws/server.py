"""The emulated AWS endpoint: moto behind a server that behaves like AWS where moto does not.

Per request, in order: refuse a ``Host`` that is not loopback and a request not signed by a known
key (``signing``: the signature is verified, as AWS verifies it); identify the caller by the access
key it signed with (each function has its
own, as each Lambda function has its own role); refuse what the caller's IAM policy (from the
template, SAM-expanded) does not allow, with AWS's AccessDenied; run any test hook (pause, fault);
then, holding the one lock that makes every emulated call atomic, refuse what AWS would refuse
(``faithful``) and let moto answer. Changes mark the state for the next snapshot."""

from __future__ import annotations

import io
import json
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qs, unquote_to_bytes, urlsplit

from .. import http
from ..identity import Credentials
from . import bedrock, calls, faithful, s3vectors, signing
from .hooks import Hooks
from .state import State, dynamodb_backend, s3_backend

LOCK = threading.RLock()
_READ_ONLY = {
    "GetItem",
    "Query",
    "Scan",
    "BatchGetItem",
    "DescribeTable",
    "ListTables",
    "TransactGetItems",
    "GetObject",
    "HeadObject",
    "ListObjectsV2",
    "ListObjects",
    "HeadBucket",
    "ListBuckets",
    "GetSecretValue",
    "DescribeSecret",
    "ListSecrets",
    "DescribeTimeToLive",
    "InvokeModel",
    "GetVectorBucket",
    "ListVectorBuckets",
    "GetIndex",
    "ListIndexes",
    "GetVectors",
    "ListVectors",
    "QueryVectors",
}


class Identity:
    """Who signed a request: a function of the template (restricted to its policy) or an operator."""

    def __init__(self, name: str | None, allows: Callable[[str, str], bool] | None) -> None:
        self.name, self._allows = name, allows

    def allows(self, action: str, resource: str) -> bool:
        return self._allows is None or self._allows(action, resource)


OPERATOR = Identity(None, None)


def _denied(call: calls.Call, identity: Identity, action: str, resource: str) -> faithful.Refusal:
    message = (
        f"User: arn:aws:sts::123456789012:assumed-role/{identity.name}Role/{identity.name} is not "
        f"authorized to perform: {action} on resource: {resource} because no identity-based policy "
        f"allows the {action} action"
    )
    if call.service == "s3":
        return faithful.s3_error("AccessDenied", message, 403)
    if call.service in ("bedrock", "s3vectors"):
        return (bedrock.error if call.service == "bedrock" else s3vectors.error)("AccessDeniedException", message, 403)
    body = json.dumps({"__type": "com.amazon.coral.service#AccessDeniedException", "Message": message}).encode()
    return faithful.Refusal(
        400, body, "application/x-amz-json-1.0", {"x-amzn-ErrorType": "AccessDeniedException"}, "AccessDeniedException"
    )


def _fault(call: calls.Call, fault: dict[str, Any]) -> faithful.Refusal:
    code, message = str(fault.get("code", "InternalServerError")), str(fault.get("message", "injected fault"))
    status = int(fault.get("status", 500))
    if call.service == "s3":
        return faithful.s3_error(code, message, status)
    if call.service in ("bedrock", "s3vectors"):
        return (bedrock.error if call.service == "bedrock" else s3vectors.error)(code, message, status)
    return faithful.dynamodb_error(code, message, status)


def _items_read(call: calls.Call, status: int, body: bytes) -> int:
    """How many items a DynamoDB read evaluated (what read capacity pays for)."""
    if (
        call.service != "dynamodb"
        or status != 200
        or call.operation not in ("Query", "Scan", "GetItem", "BatchGetItem", "TransactGetItems")
    ):
        return 0
    answer = json.loads(body or b"{}")
    if call.operation in ("Query", "Scan"):
        return int(answer.get("ScannedCount", answer.get("Count", 0)))
    if call.operation == "GetItem":
        return int("Item" in answer)
    if call.operation == "BatchGetItem":
        return sum(len(items) for items in answer.get("Responses", {}).values())
    return len(answer.get("Responses", []))


class AwsSide:
    def __init__(
        self,
        state: State,
        region: str,
        identities: dict[str, Identity],
        hooks: Hooks | None,
        credentials: Credentials | None = None,
    ) -> None:
        from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app

        self.state, self.region, self.identities, self.hooks = state, region, identities, hooks
        credentials = credentials or Credentials.from_environment()
        functions = [identity.name for identity in identities.values() if identity.name]
        self.verifier = signing.Verifier(credentials.principals(functions), region)
        self.app = DomainDispatcherApplication(create_backend_app)
        # moto's dispatcher works out the service of every request anew (a walk over all its
        # modules, ~1 ms); the service is known here, so each one's app is made once and called.
        self.apps = {
            service: create_backend_app(service) for service in ("dynamodb", "s3", "secretsmanager", "s3vectors")
        }
        self.bedrock_models = bedrock.served_models(state.cfn)
        self.schemas = faithful.Schemas(dynamodb_backend(region))

    # ---------------------------------------------------------------- one request
    def handle(
        self, method: str, raw_path: str, headers: dict[str, str], body: bytes, server_name: str, port: int
    ) -> tuple[int, dict[str, str], bytes]:
        lowered = {k.lower(): v for k, v in headers.items()}
        try:
            signed = self.verifier.verify(method, raw_path, lowered, body)
        except signing.Rejected as rejected:
            answer = signing.refusal(rejected, lowered, urlsplit(raw_path).query)
            return answer.status, {"Content-Type": answer.content_type, **answer.headers}, answer.body
        call = calls.parse(method, raw_path, lowered, body, self.region)
        if signing.SIGNING_NAMES.get(call.service, call.service) != signed.service:
            wrong = signing.Rejected("signature", f"Credential should be scoped to correct service: '{call.service}'.")
            answer = signing.refusal(wrong, lowered, urlsplit(raw_path).query)
            return answer.status, {"Content-Type": answer.content_type, **answer.headers}, answer.body
        identity = self.identities.get(signed.principal.access_key, OPERATOR)
        refused, spent = None, 0.0
        try:
            for action, resource in call.actions:
                if not identity.allows(action, resource):
                    raise _denied(call, identity, action, resource)
            if self.hooks is not None:
                fault = self.hooks.before(call, identity.name)
                if fault is not None:
                    raise _fault(call, fault)
            if call.service == "bedrock":  # the model runs outside the lock: it touches no state
                started = time.perf_counter()
                status, out_headers, out_body = bedrock.invoke(call.key or "", body, self.bedrock_models)
                spent = (time.perf_counter() - started) * 1000
            else:
                with LOCK:
                    started = time.perf_counter()
                    status, out_headers, out_body = self._moto(
                        call, method, raw_path, headers, lowered, body, server_name, port
                    )
                    spent = (time.perf_counter() - started) * 1000
                    if status < 300 and call.operation not in _READ_ONLY:
                        self.state.dirty.set()
        except faithful.Refusal as refusal:
            refused = refusal.code
            status, out_headers, out_body = (
                refusal.status,
                {"Content-Type": refusal.content_type, **refusal.headers},
                refusal.body,
            )
        if self.hooks is not None:
            self.hooks.record(call, identity.name, status, refused, spent, _items_read(call, status, out_body))
        return status, out_headers, out_body

    def _moto(
        self,
        call: calls.Call,
        method: str,
        raw_path: str,
        headers: dict[str, str],
        lowered: dict[str, str],
        body: bytes,
        server_name: str,
        port: int,
    ) -> tuple[int, dict[str, str], bytes]:
        changed: list[str] = []
        if call.service == "dynamodb":
            faithful.check_dynamodb(call, self.schemas)
        elif call.service == "s3":
            faithful.check_s3(call, lowered, body, s3_backend())
            if call.operation == "DeleteObjects" and call.bucket:
                body, changed = faithful.delete_objects_preconditions(body, call.bucket, s3_backend())
                if changed and b"<Key>" not in body:
                    return 200, {"Content-Type": "application/xml"}, faithful.add_precondition_errors(b"", changed)
            if call.operation == "ListObjectsV2":
                path, _, query = raw_path.partition("?")
                raw_path = f"{path}?{faithful.cap_list_page(query)}"
        status, out_headers, out_body = self._wsgi(call.service, method, raw_path, headers, body, server_name, port)
        if changed and status == 200:
            out_body = faithful.add_precondition_errors(out_body, changed)
        return status, out_headers, out_body

    def _wsgi(
        self,
        service: str,
        method: str,
        raw_path: str,
        headers: dict[str, str],
        body: bytes,
        server_name: str,
        port: int,
    ) -> tuple[int, dict[str, str], bytes]:
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
        started: dict[str, Any] = {}

        def start_response(status: str, response_headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
            started["status"], started["headers"] = int(status.split(" ", 1)[0]), response_headers
            return lambda data: None  # WSGI's write(): moto never calls it

        chunks = self.apps.get(service, self.app)(environ, start_response)
        try:
            out = b"".join(chunks)
        finally:
            getattr(chunks, "close", lambda: None)()
        return started["status"], dict(started["headers"]), out

    # ---------------------------------------------------------------- control (tests and operators)
    def control(self, method: str, path: str, query: dict[str, list[str]], body: bytes) -> tuple[int, Any]:
        parts = path.strip("/").split("/")[1:]  # after "_local"
        if parts == ["health"]:
            return 200, {"status": "ok"}
        if parts == ["snapshot"] and method == "POST":
            self.snapshot()
            return 200, {"saved": self.state.path is not None}
        if self.hooks is None:
            return 404, {"message": "test hooks are off (start the stack with --test-hooks)"}
        if parts == ["hooks"] and method == "POST":
            return 200, self.hooks.add(json.loads(body or b"{}")).state()
        if parts == ["hooks"] and method == "DELETE":
            self.hooks.clear()
            return 200, {"cleared": True}
        if len(parts) >= 2 and parts[0] == "hooks":
            hook = self.hooks.get(int(parts[1]))
            if hook is None:
                return 404, {"message": "no such hook"}
            if parts[2:] == ["wait"]:
                timeout = float((query.get("timeout") or ["10"])[0])
                return 200, dict(hook.state(), waited=self.hooks.wait_paused(hook.id, timeout))
            if parts[2:] == ["release"]:
                hook.released.set()
                return 200, hook.state()
            if method == "DELETE":
                self.hooks.remove(hook.id)
                return 200, hook.state()
            return 200, hook.state()
        if parts == ["calls"]:
            return 200, {"calls": self.hooks.since(int((query.get("since") or ["0"])[0]))}
        return 404, {"message": "no such control route"}

    def snapshot(self) -> None:
        if self.state.path is None:
            return
        with LOCK:
            self.state.dirty.clear()
            data = self.state.capture()
        self.state.save(data)

    def keep_saving(self, stop: threading.Event, every_s: float = 2.0) -> None:
        """Save a snapshot a little after changes stop arriving, until ``stop``."""
        while not stop.is_set():
            if self.state.dirty.wait(timeout=0.5) and not stop.wait(every_s):
                try:
                    self.snapshot()
                except Exception:  # noqa: BLE001 - a failed save is retried at the next change
                    traceback.print_exc()


class AwsHandler(http.Handler):
    side: AwsSide
    max_body = 64 * 1024 * 1024

    def _serve(self) -> None:
        try:
            body = self.read_body()
        except (http.Malformed, http.TooLarge) as exc:
            self.send(400, {"Content-Type": "text/plain"}, str(exc).encode(), close=True)
            return
        url = urlsplit(self.path)
        asked = self.headers.get("Host")
        if not signing.loopback_host(asked):
            lowered = {k.lower(): v for k, v in self.header_values().items()}
            message = f"Host {asked!r} is not served here: only a loopback address or localhost"
            answer = signing.refusal(signing.Rejected("host", message), lowered, url.query)
            self.send(answer.status, {"Content-Type": answer.content_type, **answer.headers}, answer.body)
            return
        if url.path.startswith("/_local/"):
            if self.headers.get("Origin") is not None:  # a web page's request: never the operator's
                self.send(403, {"Content-Type": "application/json"}, b'{"message": "no Origin header allowed"}')
                return
            status, payload = self.side.control(self.command, url.path, parse_qs(url.query), body)
            self.send(status, {"Content-Type": "application/json"}, json.dumps(payload).encode())
            return
        host, port = self.server.server_address[:2]
        try:
            status, headers, out = self.side.handle(
                self.command, self.path, self.header_values(), body, str(host), int(port)
            )
        except Exception:  # noqa: BLE001 - moto itself failed: AWS would answer 500
            traceback.print_exc()
            status, headers, out = 500, {"Content-Type": "text/plain"}, b"InternalFailure"
        self.send(status, headers, out)

    do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = do_PATCH = _serve  # noqa: N815 - http.server names


def make_server(side: AwsSide, port: int) -> http.Server:
    return http.Server(("127.0.0.1", port), type("Aws", (AwsHandler,), {"side": side}))
