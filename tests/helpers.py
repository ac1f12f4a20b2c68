"""What the test tiers share: an HTTP client for the API, scopes, AWS clients for the emulated
account, and the test hooks of the emulated AWS side (pause a call, inject a fault, list calls)."""

from __future__ import annotations

import gzip
import io
import json
import os
import signal
import subprocess
import sys
import tarfile
import threading
import time
import urllib.parse
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests
from memory_hub_tools.client import memory_id_for
from memory_hub_tools.transport import Transport

ADMIN_KEY = "mhk_000000000000_test-bootstrap-admin-key-0123456789"
SERVICE_ID = "default"
BUCKET = "memory-hub-local"
# The local stack names each table after its logical id in template.yaml.
TABLES = {
    "assets": "AssetsTable",
    "items": "ItemsTable",
    "scenes": "ScenesTable",
    "keys": "KeysTable",
    "audit": "AuditTable",
    "idempotency": "IdempotencyTable",
}


@dataclass
class Answer:
    status: int
    body: Any
    headers: dict[str, str]
    raw: bytes = b""

    @property
    def data(self) -> Any:
        return self.body.get("data") if isinstance(self.body, dict) else None

    @property
    def message(self) -> str:
        return self.body.get("message", "") if isinstance(self.body, dict) else ""


class Api:
    """Requests to the local stack's API Gateway, through the tools' transport (the one place that
    builds the API's headers and reads its replies): any status comes back as an :class:`Answer`."""

    def __init__(
        self,
        base_url: str,
        key: str | None = ADMIN_KEY,
        service_id: str = SERVICE_ID,
        lambda_url: str | None = None,
        transport: Transport | None = None,
    ) -> None:
        self.base_url, self.key, self.service_id = base_url.rstrip("/"), key, service_id
        self.transport = transport or Transport(self.base_url, key, service_id, timeout=120, ascii_json=True)
        self.lambda_url = lambda_url

    def with_key(self, key: str | None) -> Api:
        return Api(self.base_url, key, self.service_id, self.lambda_url, self.transport.with_key(key, self.service_id))

    def auth_headers(self) -> dict[str, str]:
        return self.transport.headers()

    def raw(
        self,
        method: str,
        path: str,
        body: bytes | None,
        headers: dict[str, str] | None = None,
        query: dict[str, list[str]] | None = None,
    ) -> Answer:
        reply = self.transport.send(method, path, body, headers, query)
        return Answer(reply.status, reply.body, reply.headers, reply.raw)

    def post(
        self,
        path: str,
        body: Any = None,
        headers: dict[str, str] | None = None,
        query: dict[str, list[str]] | None = None,
    ) -> Answer:
        reply = self.transport.post(path, body, headers, query=query)
        return Answer(reply.status, reply.body, reply.headers, reply.raw)

    def invoke(self, function: str, event: Any) -> Any:
        """Invoke a function of the stack directly (the Lambda Invoke API); its result."""
        assert self.lambda_url is not None
        reply = Transport(self.lambda_url, timeout=900).send(
            "POST", f"/2015-03-31/functions/{function}/invocations", json.dumps(event).encode()
        )
        if reply.headers.get("X-Amz-Function-Error"):
            raise AssertionError(f"{function} failed: {reply.body}")
        return reply.body


def eventually(
    check: Callable[[], Any], what: str | Callable[[], str], timeout: float = 60.0, every: float = 0.2
) -> Any:
    """Poll ``check`` until it returns something truthy (returned), for at most ``timeout`` seconds:
    the one bounded wait of the suite for work another process finishes (an asynchronous purge, a
    job, a vector). Nothing is timed: the bound only turns a hang into a failure saying ``what``."""
    deadline = time.monotonic() + timeout
    while True:
        found = check()
        if found:
            return found
        if time.monotonic() >= deadline:
            raise AssertionError(what() if callable(what) else what)
        time.sleep(every)


def launch(
    command: list[str], cwd: Path, timeout: float, **environment: str
) -> tuple[subprocess.Popen[str], list[str]]:
    """Start ``make run`` or ``memory-hub local`` in a process group of its own, with none of this
    session's AWS_/MEMORY_HUB_ variables (plus ``environment``), and read its banner up to the blank
    line that ends it; the process and the banner's lines. A stack that exits or prints no banner
    within ``timeout`` seconds fails the test (its output said).

    The stack dies with this process, however it ends (a SIGKILL of the test run included): the
    started process gets SIGTERM when this one is gone (Linux's parent-death signal, set before it
    runs the command; ``make`` passes the SIGTERM on to the stack), and the stack itself ends when
    its parent is gone (``MEMORY_HUB_DIE_WITH_PARENT``). Call it from the test's own thread: the
    parent-death signal follows the thread that started the process."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "MEMORY_HUB_"))}
    process = subprocess.Popen(
        command,
        cwd=cwd,
        env={**env, "MEMORY_HUB_DIE_WITH_PARENT": "1", **environment},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
        preexec_fn=die_with_parent(),
    )
    lines: list[str] = []
    deadline = time.monotonic() + timeout
    assert process.stdout is not None
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            raise AssertionError(f"the stack exited: {''.join(lines)}")
        lines.append(line)
        if line.strip() == "" and any("admin key" in x for x in lines):
            _drain(process)
            return process, lines
    os.killpg(process.pid, signal.SIGKILL)
    raise AssertionError(f"the stack did not start: {''.join(lines)}")


_AFTER_BANNER: dict[int, tuple[threading.Thread, list[str]]] = {}


def _drain(process: subprocess.Popen[str]) -> None:
    """Read what the stack prints after its banner as it prints it, kept for ``output_after``. The
    pipe holds 64 KiB: unread, a stack that logs more (a long import's lines) blocks in its next
    write — a request then hangs until its client gives up."""
    assert process.stdout is not None
    stream, kept = process.stdout, []

    def read() -> None:
        for line in stream:
            kept.append(line)

    reader = threading.Thread(target=read, daemon=True, name=f"stack-{process.pid}-output")
    reader.start()
    _AFTER_BANNER[process.pid] = (reader, kept)


def output_after(process: subprocess.Popen[str], timeout: float) -> str:
    """Wait up to ``timeout`` seconds for a stack ``launch`` started to exit (``TimeoutExpired``
    if it does not); everything it printed after its banner."""
    process.wait(timeout=timeout)
    reader, kept = _AFTER_BANNER.pop(process.pid)
    reader.join(timeout)  # the pipe closes when the last process holding it is gone
    return "".join(kept)


def die_with_parent() -> Callable[[], None] | None:
    """A ``preexec_fn`` that has the started process get SIGTERM when this process ends (Linux's
    ``prctl(PR_SET_PDEATHSIG)``, kept across ``exec``); None elsewhere. The C function is looked up
    here, before the fork: the child only calls it."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    prctl = ctypes.CDLL(None, use_errno=True).prctl
    parent, term = os.getpid(), int(signal.SIGTERM)

    def child() -> None:
        prctl(1, term)  # PR_SET_PDEATHSIG
        if os.getppid() != parent:  # this process ended before the signal was asked for
            os._exit(1)

    return child


def ok(answer: Answer) -> Any:
    assert answer.status == 200, answer.body
    assert answer.body["code"] == 0, answer.body
    return answer.data


@dataclass
class Scope:
    team_id: str
    agent_id: str
    user_id: str

    @property
    def memory_id(self) -> str:
        return memory_id_for(self.team_id, self.agent_id)

    def body(self, **fields: Any) -> dict[str, Any]:
        return {"team_id": self.team_id, "agent_id": self.agent_id, "user_id": self.user_id, **fields}

    @property
    def prefix(self) -> str:
        """The memory's folder in the bucket, as the runtime names it (``memory_hub.storage.bucket``)."""
        from memory_hub.storage import bucket

        return bucket.prefix(self.team_id, self.agent_id)


def make_scope() -> Scope:
    suffix = uuid.uuid4().hex[:10]
    return Scope(f"team{suffix}", f"agent{suffix}", f"user-{suffix}")


# ---------------------------------------------------------------- the emulated account


_CLIENTS: dict[tuple[str, ...], Any] = {}
_CLIENTS_LOCK = threading.Lock()


def aws_client(service: str, environment: Mapping[str, str] | None = None) -> Any:
    """A client of the stack the environment points at now (or of the stack whose AWS environment
    is given). One is made per service and stack (its endpoint and credentials) and kept: making a
    client reads botocore's JSON models again in a fresh session (~0.1 s of CPU), which the API
    tier's table walks and polls once paid thousands of times. boto3's default session would keep
    the first stack's credentials."""
    import boto3

    source = os.environ if environment is None else environment
    aws = dict(sorted((k, v) for k, v in source.items() if k.startswith("AWS_")))
    key = (service, *(f"{k}={v}" for k, v in aws.items()))
    given: dict[str, Any] = {}
    if environment is not None:  # else botocore reads the same names from the environment
        given = {
            "endpoint_url": aws.get("AWS_ENDPOINT_URL"),
            "aws_access_key_id": aws.get("AWS_ACCESS_KEY_ID"),
            "aws_secret_access_key": aws.get("AWS_SECRET_ACCESS_KEY"),
        }
    with _CLIENTS_LOCK:
        if key not in _CLIENTS:
            region = aws.get("AWS_DEFAULT_REGION", "us-east-1")
            _CLIENTS[key] = boto3.session.Session().client(service, region_name=region, **given)
        return _CLIENTS[key]


def s3_keys(prefix: str) -> list[str]:
    """The keys of the bucket's live objects under ``prefix``, in key order."""
    found = []
    for page in aws_client("s3").get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix):
        found += [o["Key"] for o in page.get("Contents", [])]
    return found


def s3_body(key: str) -> bytes:
    """The body of the bucket's live object ``key``."""
    return bytes(aws_client("s3").get_object(Bucket=BUCKET, Key=key)["Body"].read())


def memory_files(scope: Scope, folder: str = "") -> list[str]:
    """The keys of the scope's memory's files, or of those in one of its folders: a name of
    ``memory_hub.storage.bucket`` (``EXPORTS``, ``IMPORTS``, ``PERSONA_BACKUPS``, ``SCENES``, …)."""
    return s3_keys(scope.prefix + folder)


def export_archives(scope: Scope) -> list[str]:
    """The keys of the scope's memory's export archives (its exports' marker left out)."""
    from memory_hub.storage import bucket

    marker = bucket.export_marker(scope.team_id, scope.agent_id)
    return [key for key in memory_files(scope, bucket.EXPORTS) if key != marker]


def scan(table: str, where: str | None = None, values: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """Every item of ``table`` (strongly consistent), or those matching the filter expression
    ``where`` (its ``values``: the expression's attribute values)."""
    kept = {"FilterExpression": where, "ExpressionAttributeValues": values} if where else {}
    items = []
    for page in aws_client("dynamodb").get_paginator("scan").paginate(TableName=table, ConsistentRead=True, **kept):
        items += page.get("Items", [])
    return items


def partition(table: str, pk: str, sk_prefix: str | None = None) -> list[dict[str, Any]]:
    """Every item of one partition of ``table`` (strongly consistent), or those whose sort key
    starts with ``sk_prefix``; keys as the runtime spells them (``memory_hub.storage.layout``)."""
    condition, values = "pk = :pk", {":pk": {"S": pk}}
    if sk_prefix is not None:
        condition, values = condition + " AND begins_with(sk, :sk)", {**values, ":sk": {"S": sk_prefix}}
    pages = (
        aws_client("dynamodb")
        .get_paginator("query")
        .paginate(
            TableName=table, KeyConditionExpression=condition, ExpressionAttributeValues=values, ConsistentRead=True
        )
    )
    return [item for page in pages for item in page.get("Items", [])]


def pair_assets(memory_id: str) -> list[dict[str, Any]]:
    """The asset items of the pairs under ``memory_id`` (an asset of the earlier design aside)."""
    from memory_hub.storage.assets import PAIR_PREFIX

    return partition(TABLES["assets"], memory_id, PAIR_PREFIX)


def epoch_of(scope: Scope) -> int:
    """The content epoch of the scope's pair's asset."""
    from memory_hub.storage.assets import pair_sk

    [asset] = [a for a in pair_assets(scope.memory_id) if a["sk"]["S"] == pair_sk(scope.team_id, scope.agent_id)]
    return int(asset["epoch"]["N"])


# ---------------------------------------------------------------- what storage holds: the erasure scan
# Erasure is a promise about storage, which the API cannot show: the API tier reads it here, every
# table of the account, every version of every object of every bucket (unpacked when it is an
# archive) and every vector of every vector bucket, with every key as the runtime spells it.

STORES = ("tables", "files", "vectors")


def stored_vectors(environment: Mapping[str, str] | None = None) -> dict[str, list[tuple[str, str, dict[str, Any]]]]:
    """Every vector of every vector bucket: key -> [(bucket, index, metadata)] (of the stack whose
    AWS environment is given, else of the one the environment points at)."""
    client = aws_client("s3vectors", environment)
    found: dict[str, list[tuple[str, str, dict[str, Any]]]] = {}
    for bucket in client.list_vector_buckets()["vectorBuckets"]:
        name = bucket["vectorBucketName"]
        for page in client.get_paginator("list_indexes").paginate(vectorBucketName=name):
            for index in page["indexes"]:
                for vpage in client.get_paginator("list_vectors").paginate(
                    vectorBucketName=name, indexName=index["indexName"], returnMetadata=True
                ):
                    for v in vpage["vectors"]:
                        found.setdefault(v["key"], []).append((name, index["indexName"], v.get("metadata", {})))
    return found


def _strings(value: Any) -> Iterator[str]:
    """Every string in ``value`` (an item, metadata) as it is stored, not escaped as JSON would:
    mapping keys and values, list members, numbers as text, binary values read as bodies are."""
    if isinstance(value, dict):
        for key, inner in value.items():
            yield str(key)
            yield from _strings(inner)
    elif isinstance(value, list | tuple | set | frozenset):
        for inner in value:
            yield from _strings(inner)
    elif isinstance(value, bytes | bytearray):
        yield _readable(bytes(value))
    elif value is not None:
        yield str(value)


def _readable(body: bytes) -> str:
    """An object's body as text: gzip unpacked, and a tar archive (an export, an import's upload)
    as its members' names and contents; what is neither is read as it is."""
    if body[:2] == b"\x1f\x8b":
        try:
            body = gzip.decompress(body)
        except (OSError, EOFError):
            pass
    try:
        with tarfile.open(fileobj=io.BytesIO(body)) as archive:
            parts = []
            for member in archive.getmembers():
                parts.append(member.name)
                extracted = archive.extractfile(member) if member.isfile() else None
                if extracted is not None:
                    parts.append(_readable(extracted.read()))
            return "\n".join(parts)
    except (tarfile.TarError, OSError, EOFError):
        return body.decode("utf-8", "replace")


def _stored_files(under: str) -> list[str]:
    client, parts = aws_client("s3"), []
    for bucket in [b["Name"] for b in client.list_buckets().get("Buckets", [])]:
        for page in client.get_paginator("list_object_versions").paginate(Bucket=bucket, Prefix=under):
            parts += [marker["Key"] for marker in page.get("DeleteMarkers", [])]
            for version in page.get("Versions", []):
                extra = {"VersionId": version["VersionId"]} if version.get("VersionId") not in (None, "null") else {}
                stored = client.get_object(Bucket=bucket, Key=version["Key"], **extra)
                parts += [version["Key"], _readable(stored["Body"].read()), *_strings(stored.get("Metadata", {}))]
    return parts


def _every_table() -> list[str]:
    return [
        name for page in aws_client("dynamodb").get_paginator("list_tables").paginate() for name in page["TableNames"]
    ]


def stored_text(stores: Iterable[str] = STORES, *, tables: Iterable[str] | None = None, under: str = "") -> str:
    """What storage holds, as one text of every stored string (one a line, unescaped). ``stores``
    among :data:`STORES`: ``tables``, the items of ``tables`` (table names; None: every table of
    the account); ``files``, every version of every object under ``under`` in every bucket (its key,
    its body — unpacked when an archive — and its metadata) and the keys of delete markers;
    ``vectors``, every vector's key, bucket, index and metadata."""
    stores = set(stores)
    assert stores <= set(STORES), stores
    parts = []
    if "tables" in stores:
        for table in _every_table() if tables is None else tables:
            parts += _strings(scan(table))
    if "files" in stores:
        parts += _stored_files(under)
    if "vectors" in stores:
        parts += _strings(stored_vectors())
    return "\n".join(parts)


def term_digests(texts: Iterable[str]) -> list[str]:
    """The digests under which the search index stores the terms of ``texts``."""
    from memory_hub.analysis import tokenize
    from memory_hub.storage.layout import term_digest

    return sorted({term_digest(token) for text in texts for token in tokenize(text)})


def traces_of(
    markers: Iterable[str],
    stores: Iterable[str] = STORES,
    *,
    terms: bool = True,
    tables: Iterable[str] | None = None,
    under: str = "",
) -> list[str]:
    """The markers still found in storage (:func:`stored_text`'s, with the same choices) and, with
    ``terms``, the digests of their terms the search index keys its postings by; sorted. ``[]``:
    nothing of them is left."""
    markers = list(markers)
    text = stored_text(stores, tables=tables, under=under)
    return sorted({s for s in [*markers, *(term_digests(markers) if terms else [])] if s in text})


# The operator credentials of each stack this process started (its AWS endpoint → key, secret,
# region): what the control routes of its emulated AWS side (/_local/…) must be signed with.
_OPERATORS: dict[str, tuple[str, str, str]] = {}


class Control:
    """Requests to the control routes (``/_local/…``) of a stack's emulated AWS side, signed with
    Signature Version 4 by its operator credentials (``Stack.aws_environment()``) as that port
    requires (``GET /_local/health`` alone takes unsigned requests)."""

    def __init__(self, aws_url: str, operator: tuple[str, str, str] | None = None, timeout: float = 150) -> None:
        self.aws_url = aws_url.rstrip("/")
        found = operator or _OPERATORS.get(self.aws_url) or _operator_from_environment(self.aws_url)
        if found is None:
            raise AssertionError(f"no operator credentials known for {aws_url}: start it with helpers.local_stack")
        self.operator = found
        self.transport = Transport(self.aws_url, timeout=timeout)

    @classmethod
    def of(cls, stack: Any) -> Control:
        environment = stack.aws_environment()
        key, secret = environment["AWS_ACCESS_KEY_ID"], environment["AWS_SECRET_ACCESS_KEY"]
        return cls(stack.aws_url, (key, secret, environment["AWS_DEFAULT_REGION"]))

    def signed_headers(
        self, method: str, path: str, body: bytes | None, query: dict[str, str] | None
    ) -> dict[str, str]:
        """The headers of ``method path`` signed (SigV4, botocore's signer) by the operator."""
        from botocore.auth import SigV4Auth
        from botocore.awsrequest import AWSRequest
        from botocore.credentials import Credentials

        key, secret, region = self.operator
        request = AWSRequest(
            method, self.aws_url + path, {"Content-Type": "application/json"}, body or b"", params=query or {}
        )
        SigV4Auth(Credentials(key, secret), "local", region).add_auth(request)
        return dict(request.headers.items())

    def send(self, method: str, path: str, body: bytes | None = None, query: dict[str, str] | None = None) -> Any:
        """One signed control request (``path`` under ``/_local``): the transport's reply."""
        headers = self.signed_headers(method, path, body, query)
        target = f"{path}?{urllib.parse.urlencode(query)}" if query else path
        return self.transport.send(method, target, body, headers)


def _operator_from_environment(aws_url: str) -> tuple[str, str, str] | None:
    """The operator credentials the environment holds when it points at ``aws_url``."""
    if os.environ.get("AWS_ENDPOINT_URL", "").rstrip("/") != aws_url or not os.environ.get("AWS_ACCESS_KEY_ID"):
        return None
    region = os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"
    return os.environ["AWS_ACCESS_KEY_ID"], os.environ.get("AWS_SECRET_ACCESS_KEY", ""), region


class Hooks:
    """The emulated AWS side's test hooks (the stack runs with --test-hooks), through its signed
    control routes."""

    def __init__(self, aws_url: str, operator: tuple[str, str, str] | None = None) -> None:
        self.control = Control(aws_url, operator)

    def _call(self, method: str, path: str, body: Any = None, **params: Any) -> Any:
        payload = None if body is None else json.dumps(body).encode()
        query = {name: str(value) for name, value in params.items()}
        reply = self.control.send(method, "/_local" + path, payload, query)
        assert reply.status < 400, f"{method} {path}: HTTP {reply.status}: {reply.body}"
        return reply.body

    def add(
        self, match: dict[str, Any], action: str = "pause", times: int | None = 1, error: dict[str, Any] | None = None
    ) -> int:
        return int(
            self._call("POST", "/hooks", {"match": match, "action": action, "times": times, "error": error or {}})["id"]
        )

    def wait(self, hook_id: int, timeout: float = 30) -> bool:
        return bool(self._call("POST", f"/hooks/{hook_id}/wait", timeout=timeout)["waited"])

    def release(self, hook_id: int) -> None:
        self._call("POST", f"/hooks/{hook_id}/release")

    def state(self, hook_id: int) -> dict[str, Any]:
        return dict(self._call("GET", f"/hooks/{hook_id}"))

    def remove(self, hook_id: int) -> None:
        self._call("DELETE", f"/hooks/{hook_id}")

    def clear(self) -> None:
        self._call("DELETE", "/hooks")

    def calls(self, since: int = 0) -> list[dict[str, Any]]:
        return list(self._call("GET", "/calls", since=since)["calls"])

    def last_seq(self) -> int:
        calls = self.calls()
        return calls[-1]["seq"] if calls else 0

    @contextmanager
    def paused(self, match: dict[str, Any], times: int | None = 1) -> Iterator[int]:
        """Pause the matching call(s) until the block ends (the hook is then released)."""
        hook = self.add(match, "pause", times)
        try:
            yield hook
        finally:
            self.remove(hook)

    @contextmanager
    def failing(
        self, match: dict[str, Any], code: str = "InternalServerError", status: int = 500, times: int | None = None
    ) -> Iterator[int]:
        """Answer the matching calls with an AWS error for as long as the block runs."""
        hook = self.add(match, "fail", times, {"code": code, "status": status, "message": "injected by a test"})
        try:
            yield hook
        finally:
            self.remove(hook)


def denied_calls(calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The AWS calls a function made that its own IAM policy refused. Aside: faults a test injected,
    and the refusals tests cause on purpose (keys under ``outside/``, and ``profiles/iam/``)."""
    return [
        c
        for c in calls
        if c["function"]
        and not c.get("injected")
        and c["refused"] in ("AccessDenied", "AccessDeniedException")
        and not str(c.get("key") or "").startswith(("outside/", "profiles/iam/"))
    ]


@contextmanager
def checked_stack(embeddings: str, **options: Any) -> Iterator[Any]:
    """:func:`local_stack`, and once its tests are done, sufficient privilege over all they did:
    no call any function made was refused by that function's own policy in template.yaml (a missing
    permission fails here, at the teardown of the session's stack, not in a deployment)."""
    running = local_stack(embeddings, **options)
    stack = next(running)
    try:
        yield stack
        denied = denied_calls(Hooks(stack.aws_url).calls())
        assert denied == [], f"{len(denied)} calls refused by their function's IAM policy: {denied[:5]}"
    finally:
        next(running, None)


def own_stack(embeddings: str = "Disabled", **options: Any) -> tuple[Any, Any, Any]:
    """The fixtures ``stack``, ``api`` and ``hooks`` of a stack for one module alone, for modules
    whose tests walk whole tables (the cleanup, erasure checks that read a table whole): on the
    session's stack those tables hold what every earlier test wrote, and each walk pays for it.
    In the module: ``stack, api, hooks = own_stack()``. Its teardown checks IAM as the session's.
    ``options``: :func:`local_stack`'s (e.g. formation on against a scripted model)."""

    @pytest.fixture(scope="module", name="stack")
    def module_stack() -> Iterator[Any]:
        with checked_stack(embeddings, **options) as running:
            yield running

    @pytest.fixture(scope="module", name="api")
    def module_api(stack: Any) -> Api:
        return Api(stack.api_url, lambda_url=stack.lambda_url)

    @pytest.fixture(scope="module", name="hooks")
    def module_hooks(stack: Any) -> Hooks:
        return Hooks(stack.aws_url)

    return module_stack, module_api, module_hooks


def local_stack(embeddings: str, **options: Any) -> Iterator[Any]:
    """A local stack as ``make run`` starts it (on free ports, nothing on disk, test hooks on), with
    the template's ``Embeddings`` parameter as given; the AWS environment points at it meanwhile.
    ``options``: ``Stack.with_hooks``'s — ``llm_url`` (formation on, Converse relayed there, e.g.
    to ``memory_hub_local.scripted_llm.serve()``'s URL), ``llm_model``, ``llm_key``,
    ``formation_batch``, ``formation_idle_s``."""
    from memory_hub_local.stack import Stack

    artifacts = Path(__file__).resolve().parent / "artifacts"
    artifacts.mkdir(exist_ok=True)
    os.environ["MEMORY_HUB_BOOTSTRAP_ADMIN_KEY"] = ADMIN_KEY
    log = open(artifacts / "stack.log", "ab")  # noqa: SIM115 - open for the whole session
    stack = Stack.with_hooks(log, embeddings, **options)
    # Environments start at their function's first invocation, not all at once ahead of it: most
    # modules call a few of the nine functions, and each environment's start costs ~0.5 s of CPU.
    stack.warm = False
    stack.start()
    environment = stack.aws_environment()
    _OPERATORS[stack.aws_url] = (
        environment["AWS_ACCESS_KEY_ID"],
        environment["AWS_SECRET_ACCESS_KEY"],
        environment["AWS_DEFAULT_REGION"],
    )
    previous = {name: os.environ.get(name) for name in stack.aws_environment()}
    os.environ.update(stack.aws_environment())
    import boto3

    boto3.DEFAULT_SESSION = None  # clients made from here on resolve this stack's credentials
    yield stack
    stack.stop()
    for name, value in previous.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    boto3.DEFAULT_SESSION = None
    log.close()


# ---------------------------------------------------------------- imports (memory-tdai trees)


def tarball(files: dict[str, bytes | str]) -> bytes:
    """A .tar.gz holding ``files`` (path → content)."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w:gz") as archive:
        for path, data in sorted(files.items()):
            data = data.encode("utf-8") if isinstance(data, str) else data
            info = tarfile.TarInfo(path)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return raw.getvalue()


def jsonl(lines: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines)


def upload_import(api: Api, team_id: str, agent_id: str, data: bytes, **fields: Any) -> str:
    """Create an import and upload ``data`` to its presigned URL; its id (not started)."""
    created = ok(api.post("/v3/memory/import", {"team_id": team_id, "agent_id": agent_id, **fields}))
    assert created["state"] == "created" and created["method"] == "PUT", created
    assert created["headers"] == {"Content-Type": "application/gzip"}
    uploaded = requests.put(created["upload_url"], data=data, headers=created["headers"], timeout=60)
    assert uploaded.status_code == 200, uploaded.text
    return str(created["import_id"])
