"""What runs on this machine: ``local`` (the local stack), ``openapi`` (regenerate the shipped
OpenAPI document and docs/API.md), ``mcp`` (the MCP server over stdio) and ``scripted-model`` (the
local stack's scripted OpenAI-compatible model, to run formation without a real one)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from .common import EXIT_FAILED, EXIT_OK
from .flags import scope_flags


def run_local(args: argparse.Namespace) -> int:
    try:
        from memory_hub_local.__main__ import main as local_main
    except ImportError:
        print(
            "memory-hub local needs the local stack: pip install 'memory-hub[local]' (make run does it)",
            file=sys.stderr,
        )
        return EXIT_FAILED
    return local_main(args.local_args)


def _openapi(args: argparse.Namespace) -> int:
    """Regenerate (or, with --check, compare) the shipped OpenAPI document and docs/API.md."""
    from memory_hub.edge.public import SPEC_FILE

    from ..openapi import REFERENCE_FILE, generate, reference

    outputs = {SPEC_FILE: generate(), REFERENCE_FILE: reference()}
    if args.check:
        stale = [path for path, text in outputs.items() if not path.exists() or path.read_text("utf-8") != text]
        for path in stale:
            print(f"{path.name} is out of date: run `memory-hub openapi`", file=sys.stderr)
        return EXIT_FAILED if stale else EXIT_OK
    for path, text in outputs.items():
        path.write_text(text, encoding="utf-8")
        print(f"wrote {path}")
    return EXIT_OK


def _mcp(args: argparse.Namespace) -> int:
    try:
        from ..mcp_server import main as serve_mcp
    except ImportError as exc:
        print(f"error: memory-hub mcp needs the MCP SDK ({exc}): pip install 'memory-hub[mcp]'", file=sys.stderr)
        return EXIT_FAILED

    serve_mcp(
        endpoint=args.endpoint,
        api_key=args.api_key,
        service_id=args.service_id,
        team_id=args.team,
        agent_id=args.agent,
        user_id=args.user,
        timeout=args.timeout,
    )
    return EXIT_OK


def _scripted_model(args: argparse.Namespace) -> int:
    try:
        from memory_hub_local.scripted_llm import main as serve_model
    except ImportError:
        print(
            "memory-hub scripted-model needs the local stack: pip install 'memory-hub[local]' (make run does it)",
            file=sys.stderr,
        )
        return EXIT_FAILED
    return serve_model(["--port", str(args.port)])


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {text!r}") from None
    if not 0 <= value < 65536:
        raise argparse.ArgumentTypeError("must be 0-65535 (0: a free one)")
    return value


def add_local(sub: Any) -> None:
    local = sub.add_parser("local", help="serve the API over embedded moto (what `make run` runs)", add_help=False)
    local.add_argument("local_args", nargs=argparse.REMAINDER)
    local.set_defaults(run=run_local)


def add_openapi(sub: Any) -> None:
    spec = sub.add_parser("openapi", help="regenerate the shipped OpenAPI document and docs/API.md")
    spec.add_argument("--check", action="store_true", help="fail if the shipped file is out of date")
    spec.set_defaults(run=_openapi)


def add_mcp(sub: Any, conn: argparse.ArgumentParser) -> None:
    mcp = sub.add_parser(
        "mcp",
        parents=[conn, scope_flags()],
        help="serve memory tools over MCP (stdio): search, add, ID-based erasure, formation",
        description="An MCP server (stdio) with search_memory (read-only), add_memory (one L1 record), "
        "the erasure tools search_for_deletion and delete_memory (by id and version only; no delete "
        "by content), formation_status and form_now. Team/agent/user flags (or "
        "MEMORY_HUB_TEAM_ID/AGENT_ID/USER_ID) are the defaults; each tool call may override them.",
    )
    mcp.set_defaults(run=_mcp)


def add_scripted_model(sub: Any) -> None:
    model = sub.add_parser(
        "scripted-model",
        help="serve the scripted OpenAI-compatible model (formation without a real model)",
        description="A deterministic OpenAI-compatible chat-completions server on 127.0.0.1 (the one the "
        "tests and the bench use; memory_hub_local.scripted_llm describes its answers). It prints its base URL: "
        "start the stack with MEMORY_HUB_LLM_URL=<that URL> MEMORY_HUB_LLM_MODEL=scripted make run. Runs until "
        "interrupted.",
    )
    model.add_argument("--port", type=_port, default=0, help="the port on 127.0.0.1 (default 0: a free one)")
    model.set_defaults(run=_scripted_model)
