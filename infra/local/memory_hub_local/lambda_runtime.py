"""One Lambda execution environment: the script a local function process runs.

It plays the part of Lambda's Python runtime and nothing more: it puts the function's code, the
layer and the runtime's libraries on ``sys.path`` (the interpreter starts with ``-I -S``: no site
packages, no ``PYTHON*`` variables), imports the handler named in the template, then serves
invocations one at a time. The environment it runs in is the one the stack gave the process:
the template's variables and those Lambda itself sets. It imports nothing of the local stack.

Invocations arrive on one pipe and answers leave on another, each a 4-byte length and JSON:
``{"event", "request_id", "deadline_ms"}`` in, ``{"result"}`` or ``{"error"}`` out. The first
message out is ``{"ready": true}`` or ``{"init_error": …}`` (an import that failed, as Lambda
reports it). Whatever the function prints goes to this process's stdout/stderr.
"""

from __future__ import annotations

import importlib
import json
import os
import struct
import sys
import time
import traceback
from typing import Any


class Context:
    """The parts of Lambda's context object that handlers use."""

    def __init__(self, request_id: str, deadline_ms: int) -> None:
        self.function_name = os.environ.get("AWS_LAMBDA_FUNCTION_NAME", "")
        self.function_version = os.environ.get("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST")
        self.memory_limit_in_mb = int(os.environ.get("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "128"))
        region = os.environ.get("AWS_REGION", "us-east-1")
        self.invoked_function_arn = f"arn:aws:lambda:{region}:123456789012:function:{self.function_name}"
        self.aws_request_id = request_id
        self.log_group_name = os.environ.get("AWS_LAMBDA_LOG_GROUP_NAME", "")
        self.log_stream_name = os.environ.get("AWS_LAMBDA_LOG_STREAM_NAME", "")
        self.identity = None
        self.client_context = None
        self._deadline_ms = deadline_ms

    def get_remaining_time_in_millis(self) -> int:
        return max(0, self._deadline_ms - int(time.time() * 1000))


def _read(stream: Any) -> Any:
    head = stream.read(4)
    if len(head) < 4:
        return None
    (length,) = struct.unpack(">I", head)
    return json.loads(stream.read(length))


def _encode(message: Any) -> bytes:
    return json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def _write(stream: Any, message: Any) -> None:
    data = message if isinstance(message, bytes) else _encode(message)
    stream.write(struct.pack(">I", len(data)) + data)
    stream.flush()


def _error(exc: BaseException) -> dict[str, Any]:
    return {
        "errorMessage": str(exc),
        "errorType": type(exc).__name__,
        "stackTrace": traceback.format_exception(type(exc), exc, exc.__traceback__),
    }


def main(argv: list[str]) -> int:
    incoming_fd, outgoing_fd, handler_name, *paths = argv
    incoming = os.fdopen(int(incoming_fd), "rb")
    outgoing = os.fdopen(int(outgoing_fd), "wb")
    sys.path[:0] = paths  # function code (LAMBDA_TASK_ROOT), the layer (/opt/python), runtime libraries
    module_name, _, attribute = handler_name.rpartition(".")
    try:
        handler = getattr(importlib.import_module(module_name), attribute)
    except Exception as exc:  # noqa: BLE001 - reported like Lambda's Runtime.ImportModuleError / init error
        traceback.print_exc()
        _write(outgoing, {"init_error": _error(exc)})
        return 1
    _write(outgoing, {"ready": True})
    while True:
        message = _read(incoming)
        if message is None:
            return 0
        context = Context(message["request_id"], message["deadline_ms"])
        try:
            # a result Lambda could not serialize is an error, as there
            answer = _encode({"result": handler(message["event"], context)})
        except Exception as exc:  # noqa: BLE001 - reported as Lambda's unhandled function error
            traceback.print_exc()
            answer = _encode({"error": _error(exc)})
        _write(outgoing, answer)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
