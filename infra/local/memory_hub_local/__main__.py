"""``python -m memory_hub_local``: the local stack in the foreground (what ``make run`` starts);
``python -m memory_hub_local repair …``: ``memory-hub local repair`` (``repair.py``).

With ``MEMORY_HUB_DIE_WITH_PARENT=1`` in its environment the stack ends as on SIGTERM once the
process that started it is gone (a test run killed with SIGKILL): the emulated AWS side and the
functions' environments follow it as they follow any stop."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import time
from pathlib import Path

from .functions import IDLE_RETIRE_S
from .stack import DEFAULT_DATA_DIR, run

DIE_WITH_PARENT = "MEMORY_HUB_DIE_WITH_PARENT"
PARENT_POLL_S = 0.5


def die_with_parent() -> None:
    """Send this process SIGTERM once its parent is gone (polled, as the AWS side polls: Linux's
    parent-death signal follows the thread that started a process, not the process)."""
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(PARENT_POLL_S)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, daemon=True, name="parent").start()


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["repair"]:
        from .repair import main as repair

        return repair(argv[1:])
    if os.environ.get(DIE_WITH_PARENT) == "1":
        die_with_parent()
    parser = argparse.ArgumentParser(prog="memory-hub local", description="Serve the API over embedded moto.")
    parser.add_argument("--port", type=int, default=int(os.environ.get("PORT", 3000)))
    parser.add_argument("--lambda-port", type=int, default=int(os.environ.get("LAMBDA_PORT", 3001)))
    parser.add_argument("--aws-port", type=int, default=int(os.environ.get("AWS_PORT", 3002)))
    parser.add_argument("--region", default=os.environ.get("AWS_DEFAULT_REGION") or "us-east-1")
    parser.add_argument(
        "--data-dir",
        default=os.environ.get("MEMORY_HUB_DATA_DIR") or str(DEFAULT_DATA_DIR),
        help="where keys and memory are kept between runs (default .memory-hub/)",
    )
    parser.add_argument("--ephemeral", action="store_true", help="keep nothing: state lives in memory only")
    parser.add_argument(
        "--idle-retire-s",
        type=float,
        default=float(os.environ.get("MEMORY_HUB_IDLE_RETIRE_S") or IDLE_RETIRE_S),
        help="a function environment idle this long is retired, as Lambda does (default 600; 0: never)",
    )
    args = parser.parse_args(argv)
    data_dir = None if args.ephemeral else Path(args.data_dir)
    return run(args.port, args.lambda_port, args.aws_port, args.region, data_dir, args.idle_retire_s)


if __name__ == "__main__":
    sys.exit(main())
