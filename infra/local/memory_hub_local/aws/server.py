"""The emulated AWS endpoint: moto behind a server that behaves like AWS where moto does not.

Per request, in order: refuse a ``Host`` that is not loopback and a request not signed by a known
key (``signing``: the signature is verified, as AWS verifies it); identify the caller by the access
key it signed with (each function has its
own, as each Lambda function has its own role); refuse what the caller's IAM policy (from the
template, SAM-expanded) does not allow, with AWS's AccessDenied; run any test hook (pause, fault);
then, holding the one lock that makes every emulated call atomic, refuse what AWS would refuse
(``faithful``) and let moto answer. A change is appended to the journal under that lock, and every
answer waits until the journal is on disk up to it (``journal``). Bedrock's models (``bedrock``,
``converse``) answer outside that lock. The control routes (``/_local/…``) take only the operator's
signature (``signing.control_check``), but ``GET /_local/health``."""

from __future__ import annotations

import ctypes
import gc
import json
import os
import subprocess
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from .. import http
from ..identity import Credentials
from . import bedrock, calls, converse, dispatch, faithful, moto_items, s3vectors, signing
from .hooks import Hooks, items_read
from .iam import OPERATOR, authorize, with_parameters
from .iam import Identity as Identity  # __main__ makes the identities
from .journal import KEPT_SERVICES, Journal, Record, encode, lock_data_dir, pause_point, replay, segment_path, segments
from .shapes import Call, Refusal
from .state import State, apply_writes, dynamodb_backend, s3_backend

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


def _fault(call: Call, fault: dict[str, Any]) -> Refusal:
    code, message = str(fault.get("code", "InternalServerError")), str(fault.get("message", "injected fault"))
    status = int(fault.get("status", 500))
    if call.service == "s3":
        return faithful.s3_error(code, message, status)
    if call.service in ("bedrock", "s3vectors"):
        return (bedrock.error if call.service == "bedrock" else s3vectors.error)(code, message, status)
    return faithful.dynamodb_error(code, message, status)


def _answer(refusal: Refusal) -> tuple[int, dict[str, str], bytes]:
    return refusal.status, {"Content-Type": refusal.content_type, **refusal.headers}, refusal.body


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

        self.parameters = converse.template_parameters()  # the template parameters the stack was started with
        if self.parameters:  # each function's policy as those parameters make it (conditions, model ids)
            identities = with_parameters(identities, state, region, self.parameters)
        self.state, self.region, self.identities, self.hooks = state, region, identities, hooks
        credentials = credentials or Credentials.from_environment()
        functions = [identity.name for identity in identities.values() if identity.name]
        self.verifier = signing.Verifier(credentials.principals(functions), region)
        self.app = DomainDispatcherApplication(create_backend_app)
        # moto's dispatcher works out the service of every request anew (a walk over all its
        # modules, ~1 ms); the service is known here, so each one's app is made once and called
        # (DynamoDB's handler is called without Flask: ``dynamodb_direct``).
        self.apps = {service: create_backend_app(service) for service in ("s3", "secretsmanager", "s3vectors")}
        self.bedrock_models = bedrock.served_models(state.cfn)
        self.converse_models = converse.served_models(state.cfn, self.parameters)
        self.schemas = faithful.Schemas(dynamodb_backend(region))
        self.journal: Journal | None = None
        self._compacting = threading.Lock()
        self._child: subprocess.Popen[bytes] | None = None
        self._data_lock = -1  # the data directory's lock, held while the process lives
        self._closing = False
        self._replayed_erasure = False  # the journal replayed at the start erased something

    # ---------------------------------------------------------------- one request
    def handle(
        self, method: str, raw_path: str, headers: dict[str, str], body: bytes, server_name: str, port: int
    ) -> tuple[int, dict[str, str], bytes]:
        lowered = {k.lower(): v for k, v in headers.items()}
        try:
            call, identity = self._caller(method, raw_path, lowered, body)
        except Refusal as refusal:  # unsigned or badly signed: nobody to hold to a policy, nothing to log
            return _answer(refusal)
        refused, spent, injected = None, 0.0, False
        try:
            authorize(call, identity)
            fault = self.hooks.before(call, identity.name) if self.hooks is not None else None
            if fault is not None:
                injected = True
                raise _fault(call, fault)
            if call.service == "bedrock":  # the models run outside the lock: they touch no state
                started = time.perf_counter()
                status, out_headers, out_body = self._bedrock(call, body)
                spent = (time.perf_counter() - started) * 1000
            else:
                status, out_headers, out_body, spent = self._moto_kept(
                    call, method, raw_path, headers, lowered, body, server_name, port
                )
        except Refusal as refusal:
            refused = refusal.code
            status, out_headers, out_body = _answer(refusal)
        if self.journal is not None:  # nothing is answered before what it may have seen is on disk
            self.journal.sync()
        if self.hooks is not None:
            read = items_read(call, status, out_body)
            self.hooks.record(call, identity.name, status, refused, spent, read, injected=injected)
        return status, out_headers, out_body

    def _caller(self, method: str, raw_path: str, lowered: dict[str, str], body: bytes) -> tuple[Call, Identity]:
        """The request described and who signed it, or the Refusal of a signature that does not
        hold — including one scoped to another service than the request's."""
        try:
            signed = self.verifier.verify(method, raw_path, lowered, body)
        except signing.Rejected as rejected:
            url = urlsplit(raw_path)
            raise signing.refusal(rejected, lowered, url.query, method, url.path) from None
        call = calls.parse(method, raw_path, lowered, body, self.region)
        if signing.SIGNING_NAMES.get(call.service, call.service) != signed.service:
            wrong = signing.Rejected("signature", f"Credential should be scoped to correct service: '{call.service}'.")
            raise signing.refusal(wrong, lowered, urlsplit(raw_path).query)
        return call, self.identities.get(signed.principal.access_key, OPERATOR)

    def _moto_kept(
        self,
        call: Call,
        method: str,
        raw_path: str,
        headers: dict[str, str],
        lowered: dict[str, str],
        body: bytes,
        server_name: str,
        port: int,
    ) -> tuple[int, dict[str, str], bytes, float]:
        """A request moto answers, under the lock, and its milliseconds (the wait for the lock left
        out); a write that succeeded is journaled before the lock is let go, so the journal's order
        is the order moto applied them in."""
        with LOCK:
            started = time.perf_counter()
            try:
                status, out_headers, out_body = self._moto(
                    call, method, raw_path, headers, lowered, body, server_name, port
                )
            finally:
                moto_items.pack_touched(changed=call.operation not in _READ_ONLY)
            spent = (time.perf_counter() - started) * 1000
            if status < 300 and self.journal is not None and _kept(call):
                meta = {"m": method, "p": raw_path, "h": headers, "n": server_name, "o": port}
                self.journal.append(encode({**meta, "x": _made_up(call)}, body))
                if _erases(call):
                    self.journal.note_erasure()
        return status, out_headers, out_body, spent

    def _bedrock(self, call: Call, body: bytes) -> tuple[int, dict[str, str], bytes]:
        """InvokeModel (the embedding model, here) or Converse (relayed to a language model)."""
        if call.operation == "Converse":
            return converse.converse(call.key or "", body, self.converse_models, self.region)
        if call.operation == "InvokeModel":
            return bedrock.invoke(call.key or "", body, self.bedrock_models, self.region)
        raise bedrock.error(
            "ValidationException", f"The local stack's Bedrock serves InvokeModel and Converse, not {call.operation}."
        )

    def _moto(
        self,
        call: Call,
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
        elif call.service == "s3vectors":
            try:
                body.decode("utf-8")
            except UnicodeDecodeError:  # moto decodes the body before anything else reads it
                raise s3vectors.error("ValidationException", "The request body is not UTF-8", 400) from None
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
        if call.service == "s3":
            out_headers = faithful.s3_cors(out_headers, call.bucket, s3_backend())
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
        environ = dispatch.wsgi_environ(method, raw_path, headers, body, server_name, port)
        if service == "dynamodb":
            return dispatch.dynamodb_direct(environ)
        return dispatch.through_flask(self.apps.get(service, self.app), environ)

    # ---------------------------------------------------------------- control (tests and operators)
    def control(self, method: str, path: str, query: dict[str, list[str]], body: bytes) -> tuple[int, Any]:
        parts = path.strip("/").split("/")[1:]  # after "_local"
        if parts == ["health"]:
            return 200, {"status": "ok"}
        if parts == ["snapshot"] and method == "POST":
            return 200, {"saved": self.compact()}
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

    # ---------------------------------------------------------------- persistence
    def recover(self) -> None:
        """At a start, after the snapshot is loaded: replay the journal on top of it, cut off a
        record a crash left torn, and open a new segment for what comes."""
        directory = self.state.data_dir
        if directory is None:
            return
        self._data_lock = lock_data_dir(directory)
        first = self.state.journal_start
        started, replayed = time.perf_counter(), []
        # A damaged journal (intact records after bytes that hold none) raises ``Damaged`` before
        # anything is applied or changed on disk: the stack does not start (see ``repair``).
        for number, records, kept, dropped in replay(directory, first, None, self.replay_one, repair=True):
            replayed.append((number, records, kept))
            if dropped:
                print(
                    f"journal.{number:08d}: dropped {dropped} bytes of a record cut short by a crash",
                    file=sys.stderr,
                    flush=True,
                )
        for number in segments(directory):
            if number < first:  # the snapshot holds it (a compaction ended before deleting it)
                segment_path(directory, number).unlink(missing_ok=True)
        self.journal = Journal(directory, max([first] + [n + 1 for n, _, _ in replayed]))
        for number, records, kept in replayed:
            self.journal.count_replayed(number, records, kept)
        if self._replayed_erasure:  # a stop or crash came before its compaction: it follows now
            self.journal.note_erasure()
        if replayed:
            print(
                f"journal: replayed {sum(r for _, r, _ in replayed)} changes in {time.perf_counter() - started:.1f} s",
                file=sys.stderr,
                flush=True,
            )
        if not self.state.snapshot_found:  # a first start: the generated secrets go to disk now
            self.state.save(self.journal.number)
            self.journal.forget_below(self.journal.number)
        gc.collect()  # cyclic garbage frozen now would never be freed (a start's boto3 sessions)
        gc.freeze()  # see _LONG_LIVED
        give_back_freed_memory()  # what loading the snapshot and replaying the journal freed

    def replay_one(self, record: Record) -> None:
        """Apply one journalled request as it was applied when it was received."""
        meta, body = record.meta, record.body
        headers: dict[str, str] = meta["h"]
        lowered = {k.lower(): v for k, v in headers.items()}
        call = calls.parse(meta["m"], meta["p"], lowered, body, self.region)
        self._replayed_erasure = self._replayed_erasure or _erases(call)
        writes = _plain_writes(call)
        if writes is not None:  # a put or delete that succeeded once succeeds again: no need for moto
            for table, (puts, deletes) in writes.items():
                apply_writes(dynamodb_backend(self.region).get_table(table), puts, deletes)
            return
        try:
            status, _, _ = self._moto(call, meta["m"], meta["p"], headers, lowered, body, meta["n"], int(meta["o"]))
        finally:
            moto_items.pack_touched(changed=True)
        if status >= 300:
            print(f"journal: a {call.operation} did not apply again ({status})", file=sys.stderr, flush=True)
            return
        _put_back(call, meta.get("x") or {})

    def compact(self) -> bool:
        """Fold the journal into a new snapshot without holding up requests: under the lock only
        the segment is switched; a child process replays the closed segments on the last snapshot."""
        directory = self.state.data_dir
        if directory is None or self.journal is None:
            return False
        with self._compacting:
            with LOCK:
                upto, erasure = self.journal.rotate()
            folded = False
            try:
                folded = self._fold_in(directory, upto)
            finally:
                if not folded:  # what it was to fold in, erasures included, is still on disk
                    self.journal.put_back_erasure(erasure)
            return folded

    def _fold_in(self, directory: Path, upto: int) -> bool:
        """The compaction child folds the segments below ``upto`` into the snapshot."""
        assert self.journal is not None
        started = time.perf_counter()
        command = [sys.executable, "-m", "memory_hub_local.aws", "--port", "0", "--region", self.region]
        command += ["--data-dir", str(directory), "--compact-upto", str(upto), "--parent", str(os.getpid())]
        self._child = subprocess.Popen(command, stdout=subprocess.DEVNULL)
        code = self._child.wait()
        self._child = None
        if code != 0:
            self.journal.compacted(time.perf_counter() - started)  # a failing one is not retried at once
            if not self._closing:  # a stop ends it on purpose: the journal still holds its part
                print(f"journal: a compaction failed (exit {code}); the journal is kept", file=sys.stderr, flush=True)
            return False
        self.journal.forget_below(upto)
        took = time.perf_counter() - started
        self.journal.compacted(took)
        gc.freeze()  # see _LONG_LIVED
        print(
            f"journal: segments below {upto} compacted into the snapshot in {took:.1f} s",
            file=sys.stderr,
            flush=True,
        )
        return True

    def compact_child(self, upto: int) -> int:
        """In the compaction child: the snapshot is loaded; replay segments below ``upto``, save."""
        directory = self.state.data_dir
        assert directory is not None
        for _ in replay(directory, self.state.journal_start, upto, self.replay_one, repair=False):
            pass
        pause_point(directory, "replayed")
        self.state.save(upto)
        pause_point(directory, "saved")
        return 0

    def keep_compacting(self, stop: threading.Event) -> None:
        """Compact whenever the journal has grown past its threshold, until ``stop``; give the
        memory freed since back to the system every TRIM_EVERY_S."""
        trimmed = time.monotonic()
        while not stop.wait(0.5):
            if time.monotonic() - trimmed > TRIM_EVERY_S:
                trimmed = time.monotonic()
                give_back_freed_memory()
            if self.journal is None or not self.journal.wants_compaction():
                continue
            try:
                if not self.compact():
                    stop.wait(5)
            except Exception:  # noqa: BLE001 - the journal is kept; the next attempt may succeed
                traceback.print_exc()
                stop.wait(5)

    def close(self) -> None:
        """At a stop: end a compaction under way (the journal still holds its part) and close the
        journal (it is on disk already)."""
        self._closing = True
        child = self._child
        if child is not None and child.poll() is None:
            child.kill()
            child.wait()
        if self.journal is not None:
            self.journal.close()


TRIM_EVERY_S = 30.0


def give_back_freed_memory() -> None:
    """glibc keeps what a process freed for its next allocations; ``malloc_trim`` returns the free
    pages to the system (~2 ms at 20,000 messages; it gave back 30 of 466 MiB after a start).
    Nothing where the C library is not glibc."""
    try:
        trim = ctypes.CDLL("libc.so.6").malloc_trim
    except (OSError, AttributeError):
        return
    trim(0)


# _LONG_LIVED: the account's items are many Python objects (20,000 messages: 3.3 million as moto
# holds them; packed, ~2 an item that the collector tracks: the item and its range key); a full
# collection of the cyclic garbage collector walks them all (~0.9 s at 3.3 million, every request
# waiting).
# They are freed by reference counting, so after a start and after each compaction the objects held
# so far are moved out of the collector's sight (gc.freeze): a collection walks what was written
# since the last compaction, not everything the account holds.


def _kept(call: Call) -> bool:
    return call.service in KEPT_SERVICES and call.operation not in _READ_ONLY


def _erases(call: Call) -> bool:
    """Whether a kept change deleted something (items, objects, vectors, a table or bucket): what it
    removed is still in the journal or the last snapshot until a compaction (ERASURE_QUIET_S)."""
    if call.operation.startswith("Delete") or call.operation == "BucketDelete":
        return True
    body = call.body if isinstance(call.body, dict) else {}
    if call.operation == "BatchWriteItem":
        return any("DeleteRequest" in r for rs in body.get("RequestItems", {}).values() for r in rs)
    if call.operation == "TransactWriteItems":
        return any("Delete" in entry for entry in body.get("TransactItems", []))
    return False


def _plain_writes(call: Call) -> dict[str, tuple[list[Any], list[Any]]] | None:
    """The items a DynamoDB request put and the keys it deleted, by table, when that is all it did
    (an UpdateItem needs moto to evaluate its expression: None)."""
    if call.service != "dynamodb" or not isinstance(call.body, dict):
        return None
    body = call.body
    writes: dict[str, tuple[list[Any], list[Any]]] = {}
    if call.operation == "PutItem":
        writes[body["TableName"]] = ([body["Item"]], [])
    elif call.operation == "DeleteItem":
        writes[body["TableName"]] = ([], [body["Key"]])
    elif call.operation == "BatchWriteItem":
        for table, requests in body.get("RequestItems", {}).items():
            puts = [r["PutRequest"]["Item"] for r in requests if "PutRequest" in r]
            writes[table] = (puts, [r["DeleteRequest"]["Key"] for r in requests if "DeleteRequest" in r])
    elif call.operation == "TransactWriteItems":
        for entry in body.get("TransactItems", []):
            kind, action = next(iter(entry.items()))
            if kind == "Update":
                return None
            puts, deletes = writes.setdefault(action["TableName"], ([], []))
            if kind == "Put":
                puts.append(action["Item"])
            elif kind == "Delete":
                deletes.append(action["Key"])
    else:
        return None
    return writes


def _vector_resource(call: Call) -> Any:
    buckets = [b for b in s3vectors.backend().vector_buckets.values() if b.vector_bucket_name == call.bucket]
    if not buckets or call.operation == "CreateVectorBucket":
        return buckets[0] if buckets else None
    return next((i for i in buckets[0].indexes.values() if i.index_name == call.key), None)


_NEW_OBJECT = ("PutObject", "CopyObject", "ObjectPost")  # ObjectPost: CompleteMultipartUpload


def _made_up(call: Call) -> dict[str, str]:
    """What moto made up for a change that a replay would make up differently: the time."""
    if call.service == "s3" and call.bucket and call.key and call.operation in _NEW_OBJECT:
        bucket = s3_backend().buckets.get(call.bucket)
        key = bucket.keys.get(call.key) if bucket is not None else None
        if key is not None and hasattr(key, "last_modified"):
            return {"last_modified": key.last_modified.isoformat()}
    if call.service == "s3vectors" and call.operation in ("CreateVectorBucket", "CreateIndex"):
        made = _vector_resource(call)
        if getattr(made, "creation_time", None) is not None:
            return {"creation_time": made.creation_time.isoformat()}
    return {}


def _put_back(call: Call, made_up: dict[str, str]) -> None:
    from datetime import datetime

    if "last_modified" in made_up and call.bucket and call.key:
        bucket = s3_backend().buckets.get(call.bucket)
        key = bucket.keys.get(call.key) if bucket is not None else None
        if key is not None:
            key.last_modified = datetime.fromisoformat(made_up["last_modified"])
    if "creation_time" in made_up:
        made = _vector_resource(call)
        if made is not None:
            made.creation_time = datetime.fromisoformat(made_up["creation_time"])


class AwsHandler(http.Handler):
    side: AwsSide
    max_body = 64 * 1024 * 1024
    drain_limit = 256 * 1024 * 1024  # a larger object is read to the end, so its error is received

    def _serve(self) -> None:
        try:
            body = self.read_body()
        except http.Malformed as exc:
            self.send(400, {"Content-Type": "text/plain"}, exc.message.encode(), close=True)
            return
        except http.TooLarge as exc:  # only an object can be this large (a DynamoDB request is <= 16 MB)
            too_large = faithful.s3_error(
                "EntityTooLarge",
                "Your proposed upload exceeds the maximum allowed object size (64 MiB on the local stack).",
                ProposedSize=str(exc.length),
                MaxSizeAllowed=str(self.max_body),
            )
            self.send(too_large.status, {"Content-Type": too_large.content_type}, too_large.body, close=True)
            return
        url = urlsplit(self.path)
        asked = self.headers.get("Host")
        if not signing.loopback_host(asked):
            lowered = {k.lower(): v for k, v in self.header_values().items()}
            message = f"Host {asked!r} is not served here: only a loopback address or localhost"
            answer = signing.refusal(signing.Rejected("host", message), lowered, url.query, self.command, url.path)
            self.send(answer.status, {"Content-Type": answer.content_type, **answer.headers}, answer.body)
            return
        if url.path.startswith("/_local/"):
            if self.headers.get("Origin") is not None:  # a web page's request: never the operator's
                self.send(403, {"Content-Type": "application/json"}, b'{"message": "no Origin header allowed"}')
                return
            if not (self.command in ("GET", "HEAD") and url.path == "/_local/health"):  # the one open route
                refused = signing.control_check(self.side.verifier, self.command, self.path, self.header_values(), body)
                if refused is not None:
                    self.send(refused.status, {"Content-Type": refused.content_type, **refused.headers}, refused.body)
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
