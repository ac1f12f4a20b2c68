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
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from . import event_sources, http
from .functions import IDLE_RETIRE_S, FunctionPool
from .gateway import make_servers
from .identity import Credentials
from .template import ROOT, Deployment, deploy, expanded

DEFAULT_DATA_DIR = ROOT / ".memory-hub"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
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
    admin_key: str = ""
    deployment: Deployment | None = None
    credentials: Credentials | None = None
    pool: FunctionPool | None = None
    _aws: subprocess.Popen[bytes] | None = None
    _servers: list[http.Server] = field(default_factory=list)

    @classmethod
    def with_hooks(cls, log: IO[bytes] | None, embeddings: str = "Enabled") -> Stack:
        """A stack for the tests and the bench: free ports, nothing on disk, the emulated AWS side's
        test hooks on, and the template's ``Embeddings`` parameter as given."""
        return cls(
            port=0,
            lambda_port=0,
            aws_port=0,
            data_dir=None,
            test_hooks=True,
            log=log,
            parameters={"Embeddings": embeddings},
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
        for name in ("port", "lambda_port", "aws_port"):
            if getattr(self, name) == 0:
                setattr(self, name, free_port())
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
        if self.warm:
            threading.Thread(target=self.pool.warm, daemon=True, name="warm").start()
        return self

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
        env = {**os.environ, **self.credentials.environment()}
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


# Environment variables `make run` honours, as template parameters (like --parameter-overrides).
PARAMETERS_FROM_ENVIRONMENT = {
    "MEMORY_HUB_SERVICE_ID": "ServiceId",
    "RETENTION_DAYS": "RetentionDays",
    "MEMORY_HUB_EMBEDDINGS": "Embeddings",
}


def run(
    port: int, lambda_port: int, aws_port: int, region: str, data_dir: Path | None, idle_retire_s: float = IDLE_RETIRE_S
) -> int:
    """``make run``: serve until SIGTERM or Ctrl-C, then save the state and stop."""
    parameters = {p: os.environ[e] for e, p in PARAMETERS_FROM_ENVIRONMENT.items() if os.environ.get(e)}
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
    print(f"  admin key    {stack.admin_key}")
    print("For the AWS CLI against it (these credentials open every table, object and secret of the local")
    print("account, the admin key included: keep them to yourself):")
    for name, value in stack.aws_environment().items():
        print(f"  export {name}={value}")
    print("  unset AWS_SESSION_TOKEN")
    print(flush=True)
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    signal.signal(signal.SIGINT, lambda *_: done.set())
    done.wait()
    print("stopping (saving the state)…", flush=True)
    stack.stop()
    return 0
