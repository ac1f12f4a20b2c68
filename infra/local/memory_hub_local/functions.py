"""The functions of the template, run as Lambda runs them: each execution environment is its own
process (``lambda_runtime``), started with only the template's environment and the variables Lambda
sets (plus, locally, the emulated AWS endpoint), with the function's code, its layer and the
runtime's libraries on the path — nothing of the local stack. An environment serves one invocation
at a time; concurrent invocations get more environments (cold starts, as on Lambda)."""

from __future__ import annotations

import json
import os
import select
import shutil
import struct
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import IO, Any

from .identity import Credentials
from .template import Deployment, Function

RUNTIME = Path(__file__).with_name("lambda_runtime.py")
# The runtime's libraries: what the layer installs (requirements.txt), nothing else of the venv.
RUNTIME_DISTRIBUTIONS = (
    "aws-lambda-powertools",
    "pydantic",
    "pydantic-core",
    "pynamodb",
    "boto3",
    "botocore",
    "s3transfer",
    "jmespath",
    "python-dateutil",
    "six",
    "urllib3",
    "typing-extensions",
    "typing-inspection",
    "annotated-types",
    "snowballstemmer",
)
MAX_ENVIRONMENTS = 16
# Lambda retires an execution environment that has served nothing for a while (how long is not
# documented; minutes). So does the local pool: a burst of concurrent requests leaves environments
# behind (a process each, ~50 MiB), and they go once idle this long. 0 keeps every one.
IDLE_RETIRE_S = 600.0
SYNC_RESPONSE_LIMIT = 6 * 1024 * 1024  # Lambda's limit for a synchronous response
START_TIMEOUT_S = 60.0


def runtime_site(target: Path) -> Path:
    """A folder holding only the runtime's libraries (links into this interpreter's site-packages)."""
    target.mkdir(parents=True, exist_ok=True)
    for name in RUNTIME_DISTRIBUTIONS:
        distribution = metadata.distribution(name)
        top = {Path(str(f)).parts[0] for f in distribution.files or [] if not str(f).startswith("..")}
        for entry in top:
            source = Path(str(distribution.locate_file(entry)))
            link = target / entry
            if source.exists() and not link.exists() and not entry.endswith(".pth") and entry != "bin":
                link.symlink_to(source)
    return target


RUNTIME_PREFIX = "memory-hub-runtime-"


def runtime_dir(parent: Path | None = None) -> Path:
    """A new folder for this stack's runtime site, marked with this process's id; the folders of
    stacks that are gone (killed: they could not remove their own) are removed first."""
    parent = parent or Path(tempfile.gettempdir())
    for stale in parent.glob(RUNTIME_PREFIX + "*"):
        try:
            owner = int((stale / "owner").read_text(encoding="ascii"))
        except (OSError, ValueError):
            continue  # not marked (yet): another stack may be making it
        if owner != os.getpid() and not _alive(owner):
            shutil.rmtree(stale, ignore_errors=True)
    made = Path(tempfile.mkdtemp(prefix=RUNTIME_PREFIX, dir=parent))
    (made / "owner").write_text(str(os.getpid()), encoding="ascii")
    return made


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process
    return True


class InvocationError(Exception):
    """The function failed as Lambda reports it (errorType, errorMessage)."""

    def __init__(self, error: dict[str, Any], *, kind: str = "Unhandled") -> None:
        super().__init__(error.get("errorMessage", ""))
        self.error, self.kind = error, kind


@dataclass
class Invocation:
    result: Any = None
    error: dict[str, Any] | None = None
    cold: bool = False
    ms: float = 0.0


def _read_frame(fd: int, deadline: float) -> Any:
    def exactly(size: int) -> bytes:
        data = bytearray()
        while len(data) < size:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise TimeoutError
            chunk = os.read(fd, size - len(data))
            if not chunk:
                raise EOFError
            data += chunk
        return bytes(data)

    (length,) = struct.unpack(">I", exactly(4))
    if length > SYNC_RESPONSE_LIMIT + 1024:
        exactly(length)
        raise InvocationError(
            {
                "errorType": "Function.ResponseSizeTooLarge",
                "errorMessage": f"Response payload size ({length} bytes) exceeded maximum allowed "
                f"payload size ({SYNC_RESPONSE_LIMIT} bytes).",
            }
        )
    return json.loads(exactly(length))


class Environment:
    """One execution environment: a process running ``lambda_runtime`` with one function loaded."""

    def __init__(self, function: Function, env: dict[str, str], paths: list[str], log: IO[bytes] | None) -> None:
        self.function = function
        to_child_r, self._to_child = os.pipe()
        self._from_child, from_child_w = os.pipe()
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-u",
                "-I",
                "-S",
                str(RUNTIME),
                str(to_child_r),
                str(from_child_w),
                function.handler,
                *paths,
            ],
            env=env,
            cwd=str(function.code_uri),
            pass_fds=(to_child_r, from_child_w),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
        )
        os.close(to_child_r)
        os.close(from_child_w)
        self._open_fds: tuple[int, ...] = (self._to_child, self._from_child)
        self._closing = threading.Lock()
        self.ready = False
        self.generation = 0
        self.idle_since = time.monotonic()

    def start(self) -> None:
        try:
            message = _read_frame(self._from_child, time.monotonic() + START_TIMEOUT_S)
        except (TimeoutError, EOFError):
            self.close()
            raise InvocationError(
                {"errorType": "Runtime.ExitError", "errorMessage": "the runtime exited before the function was loaded"},
                kind="Init",
            ) from None
        if "init_error" in message:
            self.close()
            raise InvocationError(message["init_error"], kind="Init")
        self.ready = True

    def invoke(self, event: Any, timeout_s: float) -> Any:
        request_id = str(uuid.uuid4())
        deadline_ms = int(time.time() * 1000 + timeout_s * 1000)
        frame = json.dumps(
            {"event": event, "request_id": request_id, "deadline_ms": deadline_ms}, ensure_ascii=False
        ).encode("utf-8")
        self._write_all(struct.pack(">I", len(frame)) + frame)
        try:
            message = _read_frame(self._from_child, time.monotonic() + timeout_s + 1.0)
        except TimeoutError:
            self.close()
            raise InvocationError(
                {"errorType": "Sandbox.Timedout", "errorMessage": f"Task timed out after {timeout_s:.2f} seconds"}
            ) from None
        except EOFError:
            self.close()
            raise InvocationError(
                {"errorType": "Runtime.ExitError", "errorMessage": "the runtime exited during the invocation"}
            ) from None
        if "error" in message:
            raise InvocationError(message["error"])
        return message["result"]

    def _write_all(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            written = os.write(self._to_child, view)
            view = view[written:]

    def alive(self) -> bool:
        return self.process.poll() is None

    def close(self) -> None:
        """Once only: an invocation whose runtime exited closes its environment, and the pool closes
        it again as it takes it back — a second ``os.close`` of the pipes' numbers would close
        whatever this process was given under them since (another environment's pipes)."""
        with self._closing:
            fds, self._open_fds = self._open_fds, ()
        for fd in fds:
            try:
                os.close(fd)
            except OSError:
                pass
        if self.process.poll() is None:
            self.process.kill()
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass


class FunctionPool:
    """Execution environments per function, started on demand and reused."""

    def __init__(
        self,
        deployment: Deployment,
        aws_endpoint: str,
        lambda_endpoint: str,
        overrides: dict[str, dict[str, str]] | None = None,
        log: IO[bytes] | None = None,
        credentials: Credentials | None = None,
        idle_retire_s: float = IDLE_RETIRE_S,
    ) -> None:
        self.deployment = deployment
        self.credentials = credentials or Credentials.create(None)
        self.aws_endpoint, self.lambda_endpoint = aws_endpoint, lambda_endpoint
        self.overrides = overrides or {}
        self.log = log
        self._site_dir = runtime_dir()
        self.paths_tail = [str(runtime_site(self._site_dir / "site"))]
        self._free: dict[str, list[Environment]] = {name: [] for name in deployment.functions}
        self._count: dict[str, int] = {name: 0 for name in deployment.functions}
        self._condition = threading.Condition()
        self._closed = False
        self._generation = 0
        self.idle_retire_s = idle_retire_s
        self._stopping = threading.Event()
        if idle_retire_s > 0:
            threading.Thread(target=self._retire_idle, daemon=True, name="retire-idle").start()

    def function(self, name: str) -> Function | None:
        """A function by logical id, physical name or ARN."""
        name = name.rsplit(":", 1)[-1] if name.startswith("arn:") else name
        for function in self.deployment.functions.values():
            if name in (function.logical_id, function.name):
                return function
        return None

    def environment_of(self, function: Function) -> dict[str, str]:
        region = self.deployment.region
        own = self.credentials.function(function.logical_id)
        env = {
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "LANG": "en_US.UTF-8",
            "TZ": ":UTC",
            "LAMBDA_TASK_ROOT": str(function.code_uri),
            "LAMBDA_RUNTIME_DIR": str(RUNTIME.parent),
            "_HANDLER": function.handler,
            "AWS_EXECUTION_ENV": "AWS_Lambda_python3.13",
            "AWS_LAMBDA_FUNCTION_NAME": function.name,
            "AWS_LAMBDA_FUNCTION_VERSION": "$LATEST",
            "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": str(function.memory),
            "AWS_LAMBDA_LOG_GROUP_NAME": f"/aws/lambda/{function.name}",
            "AWS_LAMBDA_LOG_STREAM_NAME": f"local/{uuid.uuid4().hex}",
            "AWS_LAMBDA_INITIALIZATION_TYPE": "on-demand",
            "AWS_REGION": region,
            "AWS_DEFAULT_REGION": region,
            "AWS_ACCESS_KEY_ID": own.access_key,
            "AWS_SECRET_ACCESS_KEY": own.secret,
            "AWS_SESSION_TOKEN": own.token or "",
            # the one thing Lambda would not set: where the emulated AWS answers
            "AWS_ENDPOINT_URL": self.aws_endpoint,
            "AWS_ENDPOINT_URL_LAMBDA": self.lambda_endpoint,
        }
        env.update(function.environment)
        env.update(self.overrides.get(function.logical_id, {}))
        return env

    def _take(self, function: Function) -> tuple[Environment, bool]:
        name = function.logical_id
        with self._condition:
            while True:
                if self._closed:
                    raise InvocationError({"errorType": "ServiceException", "errorMessage": "the stack is stopping"})
                while self._free[name]:
                    environment = self._free[name].pop()
                    if environment.alive():
                        return environment, False
                    self._count[name] -= 1
                if self._count[name] < MAX_ENVIRONMENTS:
                    self._count[name] += 1
                    break
                self._condition.wait(timeout=1.0)
        try:
            environment = Environment(
                function,
                self.environment_of(function),
                [str(function.code_uri), *map(str, function.layers), *self.paths_tail],
                self.log,
            )
            environment.generation = self._generation
            environment.start()
        except BaseException:
            with self._condition:
                self._count[name] -= 1
                self._condition.notify()
            raise
        return environment, True

    def _give_back(self, environment: Environment) -> None:
        name = environment.function.logical_id
        with self._condition:
            if environment.alive() and not self._closed and environment.generation == self._generation:
                environment.idle_since = time.monotonic()
                self._free[name].append(environment)  # the most recently used is taken first
            else:
                self._count[name] -= 1
                environment.close()
            self._condition.notify()

    def idle(self, name: str) -> list[Environment]:
        """The environments of a function waiting for an invocation (the most recently used last)."""
        with self._condition:
            return list(self._free[name])

    def retire_idle(self, now: float | None = None) -> int:
        """Close the environments idle for ``idle_retire_s`` or longer; how many were closed."""
        now = time.monotonic() if now is None else now
        retired: list[Environment] = []
        with self._condition:
            for name, free in self._free.items():
                kept = [e for e in free if now - e.idle_since < self.idle_retire_s]
                retired += [e for e in free if e not in kept]
                self._count[name] -= len(free) - len(kept)
                free[:] = kept
            if retired:
                self._condition.notify_all()
        for environment in retired:
            environment.close()
        return len(retired)

    def _retire_idle(self) -> None:
        while not self._stopping.wait(max(self.idle_retire_s / 4, 0.05)):
            self.retire_idle()

    def invoke(self, name: str, event: Any, timeout_s: float | None = None) -> Invocation:
        function = self.function(name)
        if function is None:
            raise KeyError(name)
        started = time.perf_counter()
        try:
            environment, cold = self._take(function)
        except InvocationError as exc:
            return Invocation(error=exc.error, ms=(time.perf_counter() - started) * 1000)
        try:
            result = environment.invoke(event, float(timeout_s or function.timeout))
            return Invocation(result=result, cold=cold, ms=(time.perf_counter() - started) * 1000)
        except InvocationError as exc:
            return Invocation(error=exc.error, cold=cold, ms=(time.perf_counter() - started) * 1000)
        finally:
            self._give_back(environment)

    def warm(self, names: list[str] | None = None, each: int = 1) -> None:
        """Start environments ahead of the first requests (in parallel)."""
        functions = [self.function(n) for n in (names or list(self.deployment.functions))]
        taken: list[Environment] = []
        lock = threading.Lock()

        def start(function: Function) -> None:
            try:
                environment, _ = self._take(function)
            except InvocationError:
                return
            with lock:
                taken.append(environment)

        threads = [threading.Thread(target=start, args=(f,)) for f in functions if f for _ in range(each)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        for environment in taken:
            self._give_back(environment)

    def restart(self, overrides: dict[str, dict[str, str]]) -> None:
        """New environment variables for some functions (like ``sam local --env-vars``): their
        environments are replaced."""
        with self._condition:
            self.overrides = overrides
            self._generation += 1
            for name, free in self._free.items():
                for environment in free:
                    environment.close()
                    self._count[name] -= 1
                free.clear()

    def close(self) -> None:
        self._stopping.set()
        with self._condition:
            self._closed = True
            environments = [e for free in self._free.values() for e in free]
            for free in self._free.values():
                free.clear()
            self._condition.notify_all()
        for environment in environments:
            environment.close()
        shutil.rmtree(self._site_dir, ignore_errors=True)
