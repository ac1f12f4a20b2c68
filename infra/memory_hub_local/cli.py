"""``memory-hub``: the local stack and the operator's command line."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any


def _local(args: argparse.Namespace) -> int:
    from .emulator import Stack
    from .gateway import serve

    stack = Stack.start()
    serve(stack, args.port, args.lambda_port, args.aws_port)
    print(f"Memory Hub local stack (embedded moto, region {os.environ['AWS_DEFAULT_REGION']})")
    print(f"  API          http://127.0.0.1:{args.port}   (docs: /docs, spec: /openapi.json)")
    print(f"  Lambda API   http://127.0.0.1:{args.lambda_port}   (aws lambda invoke --endpoint-url ...)")
    print(f"  AWS endpoint http://127.0.0.1:{args.aws_port}   (aws s3 ls --endpoint-url ...)")
    print(f"  service id   {os.environ.get('MEMORY_HUB_SERVICE_ID', 'default')}")
    print(f"  admin key    {stack.admin_key}", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        return 0


def _invoke(args: argparse.Namespace) -> int:
    """Run one handler with one event, like ``sam local invoke`` (without Docker)."""
    from .emulator import FunctionPool, Stack

    stack = Stack.start()
    event = json.loads(Path(args.event).read_text()) if args.event != "-" else json.load(sys.stdin)
    result = FunctionPool(stack.template).invoke(args.function, event)
    print(json.dumps(result, indent=2, ensure_ascii=False))
    return 0


def _openapi(args: argparse.Namespace) -> int:
    from .openapi import generate

    text = generate()
    if args.check:
        from memory_hub.docs import SPEC_FILE

        if SPEC_FILE.read_text(encoding="utf-8") != text:
            print("openapi.json is out of date: run `memory-hub openapi`", file=sys.stderr)
            return 1
        return 0
    from memory_hub.docs import SPEC_FILE

    SPEC_FILE.write_text(text, encoding="utf-8")
    print(f"wrote {SPEC_FILE}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="memory-hub", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    local = sub.add_parser("local", help="serve the API over embedded moto (what `make run` runs)")
    local.add_argument("--port", type=int, default=int(os.environ.get("PORT", 3000)))
    local.add_argument("--lambda-port", type=int, default=int(os.environ.get("LAMBDA_PORT", 3001)))
    local.add_argument("--aws-port", type=int, default=int(os.environ.get("AWS_PORT", 3002)))
    local.set_defaults(run=_local)
    invoke = sub.add_parser("invoke", help="run one function with one event file, like `sam local invoke`")
    invoke.add_argument("function", help="logical id in template.yaml, e.g. ScenarioFunction")
    invoke.add_argument("event", help="event JSON file (or - for stdin)")
    invoke.set_defaults(run=_invoke)
    spec = sub.add_parser("openapi", help="regenerate the shipped OpenAPI document")
    spec.add_argument("--check", action="store_true", help="fail if the shipped file is out of date")
    spec.set_defaults(run=_openapi)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.run(args) or 0)


if __name__ == "__main__":
    raise SystemExit(main())
