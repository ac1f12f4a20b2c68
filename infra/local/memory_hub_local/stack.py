"""The local stack: the emulated AWS side in a process of its own, the functions in theirs, and
API Gateway plus the Lambda Invoke API in front — what ``make run`` starts."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from . import event_sources, http, schedules
from .aws.converse import KEY_VARIABLE, MODEL_VARIABLE, PARAMETERS_VARIABLE, URL_VARIABLE
from .functions import IDLE_RETIRE_S, FunctionPool
from .gateway import make_servers
from .identity import Credentials
from .template import ROOT, Deployment, deploy, expanded, load_raw

DEFAULT_DATA_DIR = ROOT / ".memory-hub"
STOP_POLL_S = 0.1  # how soon ``make run`` notices a SIGTERM or Ctrl-C


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def reserve_port() -> socket.socket:
    """A free port held until its server has bound it: a socket bound there with SO_REUSEADDR that
    never listens. Meanwhile no other bind to port 0 and no outgoing connection is given that port
    (a port only looked up, as ``free_port`` does, was taken in that gap under a loaded test run),
    while the server, which sets SO_REUSEADDR too, binds it beside. Close it once the server listens."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    return sock


_HELD: list[socket.socket] = []  # ``held_port``'s reservations, kept while this process lives


def held_port() -> int:
    """A free port for a server that another process starts (``make run`` in a test, the bench's
    durability runs): reserved as ``reserve_port`` does for as long as this process lives, so
    nothing else takes it between the look-up and that server's bind, nor while the server restarts
    on it. A server that does not set SO_REUSEADDR could not bind it: the local stack's all do."""
    sock = reserve_port()
    _HELD.append(sock)
    return int(sock.getsockname()[1])


@dataclass
class Stack:
    port: int = 3000
    lambda_port: int = 3001
    aws_port: int = 3002
    region: str = "us-east-1"
    data_dir: Path | None = DEFAULT_DATA_DIR
    test_hooks: bool = False
    log: IO[bytes] | None = None
    overrides: dict[str, dict[str, str]] = field(default_factory=dict)
    warm: bool = True
    idle_retire_s: float = IDLE_RETIRE_S  # an environment idle this long is retired, as Lambda does (0: never)
    parameters: dict[str, str] = field(default_factory=dict)
    fire_schedules: bool = True  # fire the template's rate(…) schedules (the bench holds them to run at known times)
    # The language model the emulated Bedrock relays Converse to (MEMORY_HUB_LLM_URL, _MODEL, _KEY):
    # None takes this process's environment; "" none (the functions never see these).
    llm_url: str | None = None
    llm_model: str | None = None
    llm_key: str | None = None
    admin_key: str = ""
    deployment: Deployment | None = None
    credentials: Credentials | None = None
    pool: FunctionPool | None = None
    _aws: subprocess.Popen[bytes] | None = None
    _servers: list[http.Server] = field(default_factory=list)

    @classmethod
    def with_hooks(
        cls,
        log: IO[bytes] | None,
        embeddings: str = "Enabled",
        *,
        llm_url: str | None = None,
        llm_model: str | None = None,
        llm_key: str | None = None,
        formation_batch: int | None = None,
        formation_idle_s: int | None = None,
        vectors_batched_s: int | None = None,
        vectors_drain_min: int = 0,
        fire_schedules: bool = True,
        word_index: str | None = None,
    ) -> Stack:
        """A stack for the tests and the bench: free ports, nothing on disk, the emulated AWS side's
        test hooks on, and the template's ``Embeddings`` parameter as given. With ``llm_url`` (an
        OpenAI-compatible base URL, e.g. ``scripted_llm.serve()``'s) formation is on — the
        template's ``Formation`` Enabled, Converse relayed there as ``llm_model`` — and
        ``formation_batch``/``formation_idle_s`` set ``FormationBatch``/``FormationIdleSeconds``;
        without it formation is off and no language model is configured, whatever this process's
        environment says. ``vectors_batched_s``: ``VectorWrites`` Batched with that window, its queue's
        event source on (``vectors_drain_min`` 0) or off for a drain that often (``VectorDrainMinutes``).
        ``fire_schedules`` False: no schedule fires by itself (``pool.invoke`` runs one when wanted).
        ``word_index``: the template's ``WordIndex`` (Postings by default)."""
        parameters = {**LOCAL_DEFAULTS, "Embeddings": embeddings, "Formation": "Enabled" if llm_url else "Disabled"}
        if formation_batch is not None:
            parameters["FormationBatch"] = str(formation_batch)
        if formation_idle_s is not None:
            parameters["FormationIdleSeconds"] = str(formation_idle_s)
        if vectors_batched_s is not None:
            parameters |= {"VectorWrites": "Batched", "VectorBatchSeconds": str(vectors_batched_s)}
            parameters |= {"VectorDrainMinutes": str(vectors_drain_min)}
        if word_index is not None:
            parameters["WordIndex"] = word_index
        return cls(
            port=0,
            lambda_port=0,
            aws_port=0,
            data_dir=None,
            test_hooks=True,
            log=log,
            parameters=parameters,
            llm_url=llm_url or "",
            llm_model=llm_model or "",
            llm_key=llm_key or "",
            fire_schedules=fire_schedules,
        )

    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def lambda_url(self) -> str:
        return f"http://127.0.0.1:{self.lambda_port}"

    @property
    def aws_url(self) -> str:
        return f"http://127.0.0.1:{self.aws_port}"

    def start(self) -> Stack:
        held = {name: reserve_port() for name in ("port", "lambda_port", "aws_port") if getattr(self, name) == 0}
        for name, sock in held.items():
            setattr(self, name, int(sock.getsockname()[1]))
        try:
            return self._start()
        finally:  # every server listens by now (or the start failed): the ports are theirs
            for sock in held.values():
                sock.close()

    def _start(self) -> Stack:
        restarted = self.data_dir is not None and Path(self.data_dir).is_dir() and any(Path(self.data_dir).iterdir())
        self.credentials = Credentials.create(self.data_dir)
        # the SAM transform (a child process) runs for this process beside the AWS side's own
        expanding = threading.Thread(target=expanded, args=(self.region,), daemon=True, name="sam-transform")
        expanding.start()
        ready = self._start_aws()
        expanding.join()
        self.admin_key = ready.get("admin_key") or ""
        self.deployment = deploy(self.region, ready["secrets"], self.parameters)
        self.pool = FunctionPool(
            self.deployment,
            self.aws_url,
            self.lambda_url,
            self.overrides,
            self.log,
            self.credentials,
            idle_retire_s=self.idle_retire_s,
        )
        self._servers = make_servers(self.pool, self.port, self.lambda_port)
        for server in self._servers:
            http.serve(server)
        # SQS event sources, polled as Lambda polls them
        self._pollers = event_sources.start(self.deployment, self.pool, self.aws_url, self.pool.credentials)
        # and the template's rate schedules, fired as EventBridge fires them
        self._timers = schedules.start(self.deployment, self.pool) if self.fire_schedules else []
        if restarted:
            self._undo_imports_left_running()
        if self.warm:
            threading.Thread(target=self.pool.warm, daemon=True, name="warm").start()
        return self

    def _undo_imports_left_running(self) -> None:
        """An import the previous process was running died with it: before the stack answers, the
        product's own rollback (the cleanup function, asked for that alone) undoes it. Its items
        were never visible; this only removes them."""
        assert self.pool is not None
        outcome = self.pool.invoke("CleanupFunction", {"imports_left_running": True})
        if outcome.error is not None:
            print(f"memory-hub local: undoing imports left running failed: {outcome.error}", file=sys.stderr)
        elif outcome.result and outcome.result.get("imports_undone"):
            print(f"memory-hub local: undid {outcome.result['imports_undone']} import(s) left running", file=sys.stderr)

    def _start_aws(self) -> dict[str, Any]:
        args = [
            sys.executable,
            "-m",
            "memory_hub_local.aws",
            "--port",
            str(self.aws_port),
            "--region",
            self.region,
            "--data-dir",
            str(self.data_dir) if self.data_dir else "",
        ]
        if self.test_hooks:
            args.append("--test-hooks")
        assert self.credentials is not None
        env = {**os.environ, **self.credentials.environment(), PARAMETERS_VARIABLE: json.dumps(self.parameters)}
        relay = {URL_VARIABLE: self.llm_url, MODEL_VARIABLE: self.llm_model, KEY_VARIABLE: self.llm_key}
        for name, value in relay.items():
            if value is not None:  # this stack's own relay ("": none), not this process's environment's
                env.pop(name, None)
                if value:
                    env[name] = value
        # The AWS side answers each request on a thread of its own, and glibc gives each thread that
        # allocates a heap of its own (up to 8 a core) that keeps what was freed in it: a grown
        # account's RSS was half such free space (67 vs 34 MiB per 1,000 messages with two).
        env.setdefault("MALLOC_ARENA_MAX", "2")
        env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).resolve().parents[1]), env.get("PYTHONPATH", "")])
        self._aws = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=self.log)
        assert self._aws.stdout is not None
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            line = self._aws.stdout.readline()
            if not line:
                raise RuntimeError(f"the emulated AWS side exited (code {self._aws.wait()}); see above")
            if line.startswith(b"READY "):
                threading.Thread(target=self._drain, args=(self._aws.stdout,), daemon=True).start()
                ready: dict[str, Any] = json.loads(line[6:])
                return ready
        raise RuntimeError("the emulated AWS side did not start in time")

    def _drain(self, stream: IO[bytes]) -> None:
        for line in stream:
            if self.log is not None:
                self.log.write(line)
                self.log.flush()

    def set_overrides(self, overrides: dict[str, dict[str, str]]) -> None:
        """Environment variables for functions (like ``sam local --env-vars``); takes effect at once."""
        self.overrides = overrides
        assert self.pool is not None
        self.pool.restart(overrides)

    def stop(self) -> None:
        event_sources.stop(getattr(self, "_pollers", []))
        schedules.stop(getattr(self, "_timers", []))
        for server in self._servers:
            server.shutdown()
            server.server_close()
        if self.pool is not None:
            self.pool.close()
        if self._aws is not None and self._aws.poll() is None:
            self._aws.send_signal(signal.SIGTERM)
            try:
                self._aws.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self._aws.kill()
        self._aws = None

    def aws_environment(self) -> dict[str, str]:
        """What the AWS CLI or boto3 need to look at the emulated account: the operator's
        credentials, which open everything in it (every table, object and secret)."""
        assert self.credentials is not None  # start() made them
        operator = self.credentials.operator
        return {
            "AWS_ENDPOINT_URL": self.aws_url,
            "AWS_DEFAULT_REGION": self.region,
            "AWS_ACCESS_KEY_ID": operator.access_key,
            "AWS_SECRET_ACCESS_KEY": operator.secret,
        }


# Where the local stack departs from the template's defaults. VectorWrites Immediate: each write puts
# its vectors into the emulated S3 Vectors before it answers, so what a test or a person looks for
# there is there at once (Batched, the default on AWS, puts them up to VectorBatchSeconds later;
# searches find an item by meaning from the next request either way). MEMORY_HUB_VECTOR_WRITES=Batched
# runs the local stack as deployed.
LOCAL_DEFAULTS = {"VectorWrites": "Immediate"}

# Environment variables `make run` honours, as template parameters (like --parameter-overrides).
# `Formation` follows MEMORY_HUB_LLM_URL (see environment_parameters).
PARAMETERS_FROM_ENVIRONMENT = {
    "MEMORY_HUB_SERVICE_ID": "ServiceId",
    "RETENTION_DAYS": "RetentionDays",
    "MEMORY_HUB_EMBEDDINGS": "Embeddings",
    "MEMORY_HUB_VECTOR_WRITES": "VectorWrites",
    "MEMORY_HUB_VECTOR_BATCH_S": "VectorBatchSeconds",
    "MEMORY_HUB_VECTOR_DRAIN_MIN": "VectorDrainMinutes",
    "MEMORY_HUB_VECTOR_GROUPS": "VectorGroups",
    "MEMORY_HUB_WORD_INDEX": "WordIndex",
    "MEMORY_HUB_EPOCH_CHECKS": "EpochChecks",
    "MEMORY_HUB_FORMATION_BATCH": "FormationBatch",
    "MEMORY_HUB_FORMATION_IDLE_S": "FormationIdleSeconds",
}


def environment_parameters(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The template parameters ``make run`` takes from the environment: those of
    PARAMETERS_FROM_ENVIRONMENT (over LOCAL_DEFAULTS), and ``Formation`` Enabled exactly when a
    language model is configured (``MEMORY_HUB_LLM_URL``: formation sends conversation to that
    model)."""
    environ = os.environ if environ is None else environ
    given = {p: environ[e] for e, p in PARAMETERS_FROM_ENVIRONMENT.items() if environ.get(e)}
    parameters = LOCAL_DEFAULTS | given
    parameters["Formation"] = "Enabled" if environ.get(URL_VARIABLE, "").strip() else "Disabled"
    return parameters


def check_parameters(cfn: dict[str, Any], parameters: dict[str, str]) -> None:
    """Refuse values CloudFormation would refuse (AllowedValues, a Number's MinValue/MaxValue)."""
    declared = cfn.get("Parameters", {})
    for name, value in parameters.items():
        spec = declared.get(name)
        if spec is None:
            raise ValueError(f"the template has no parameter {name}")
        allowed = [str(v) for v in spec.get("AllowedValues", [])]
        if allowed and value not in allowed:
            raise ValueError(f"{name} must be one of {', '.join(allowed)} (not {value!r})")
        if spec.get("Type") == "Number":
            try:
                number = float(value)
            except ValueError:
                raise ValueError(f"{name} must be a number (not {value!r})") from None
            if "MinValue" in spec and number < float(spec["MinValue"]):
                raise ValueError(f"{name} must be at least {spec['MinValue']} (not {value})")
            if "MaxValue" in spec and number > float(spec["MaxValue"]):
                raise ValueError(f"{name} must be at most {spec['MaxValue']} (not {value})")


def formation_line(stack: Stack) -> str:
    """The banner's formation line: on (which model, relayed where, as what) or off (and how to turn it on)."""
    assert stack.deployment is not None
    url = (os.environ.get(URL_VARIABLE, "") if stack.llm_url is None else stack.llm_url).strip()
    if stack.deployment.parameters.get("Formation") != "Enabled" or not url:
        return f"  formation    off (set {URL_VARIABLE} to an OpenAI-compatible server to form memory)"
    model = str(stack.deployment.value({"Ref": "FormationModel"}))
    sent = (os.environ.get(MODEL_VARIABLE, "") if stack.llm_model is None else stack.llm_model).strip() or model
    return f"  formation    on (model {model} relayed to {url} as {sent})"


def run(
    port: int, lambda_port: int, aws_port: int, region: str, data_dir: Path | None, idle_retire_s: float = IDLE_RETIRE_S
) -> int:
    """``make run``: serve until SIGTERM or Ctrl-C, then save the state and stop."""
    parameters = environment_parameters()
    try:
        check_parameters(load_raw(), parameters)
    except ValueError as exc:
        print(f"memory-hub local: cannot start: {exc}", file=sys.stderr)
        return 1
    stack = Stack(port, lambda_port, aws_port, region, data_dir, parameters=parameters, idle_retire_s=idle_retire_s)
    try:
        stack.start()
    except (OSError, RuntimeError) as exc:
        stack.stop()
        reason = f"port in use ({exc.strerror})" if isinstance(exc, OSError) and exc.strerror else str(exc)
        print(f"memory-hub local: cannot start: {reason}", file=sys.stderr)
        return 1
    assert stack.deployment is not None  # start() deployed the template
    service = stack.deployment.functions["AdminFunction"].environment.get("MEMORY_HUB_SERVICE_ID", "default")
    print(
        f"Memory Hub local stack (region {region}; "
        f"{'state in ' + str(data_dir) if data_dir else 'ephemeral: nothing is kept'})"
    )
    print(f"  API          {stack.api_url}   (console: /console, docs: /docs, spec: /openapi.json)")
    print(f"  Lambda API   {stack.lambda_url}   (aws lambda invoke --endpoint-url …)")
    print(f"  AWS endpoint {stack.aws_url}   (aws s3 ls --endpoint-url …)")
    print(f"  service id   {service}")
    print(formation_line(stack))
    print(f"  admin key    {stack.admin_key}")
    print("For the AWS CLI against it (these credentials open every table, object and secret of the local")
    print("account, the admin key included: keep them to yourself):")
    for name, value in stack.aws_environment().items():
        print(f"  export {name}={value}")
    print("  unset AWS_SESSION_TOKEN")
    print(flush=True)
    # The handlers only note the signal: one that set a threading.Event could deadlock, as a signal
    # handler runs in the main thread, which may hold that Event's lock inside its own wait() (a
    # SIGTERM right after the banner hung the stack that way).
    asked: list[int] = []
    signal.signal(signal.SIGTERM, lambda number, _: asked.append(number))
    signal.signal(signal.SIGINT, lambda number, _: asked.append(number))
    while not asked:
        time.sleep(STOP_POLL_S)
    print("stopping (saving the state)…", flush=True)
    stack.stop()
    return 0
