"""``memory-hub``: the local stack and the operator's command line, one module per area.

    parser   the argument parser (its docstring is ``memory-hub --help``'s description)
    flags    the flags several commands share: connection, scope, the --team/--agent pair
    common   exit codes, the usage error, output and confirmation helpers
    data     search, delete, clear, user-memory delete (the data plane, by id)
    admin    keys, audit, export, import
    browse   ls, show (read-only)
    formation  formation-status, form (memory formed from the conversation)
    invoke   invoke, cleanup (the Lambda Invoke API)
    local    local, openapi, mcp, scripted-model (what runs on this machine)

``main`` runs one command line and maps what went wrong to one line on stderr and an exit code.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from ..client import ApiError, MemoryHubError
from .common import EXIT_FAILED, EXIT_OK, EXIT_REFUSED, UsageError, emit_json
from .invoke import lambda_endpoint, scheduled_event
from .local import run_local
from .parser import build_parser

__all__ = [
    "EXIT_FAILED",
    "EXIT_OK",
    "EXIT_REFUSED",
    "UsageError",
    "build_parser",
    "lambda_endpoint",
    "main",
    "scheduled_event",
]


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["local"]:  # every further argument is the local stack's own (argparse's
        return run_local(argparse.Namespace(local_args=argv[1:]))  # REMAINDER refuses leading options)
    parser = build_parser()
    args = parser.parse_args(argv)

    try:
        return int(args.run(args) or 0)
    except UsageError as exc:
        print(f"memory-hub {args.command}: error: {exc}", file=sys.stderr)
        return EXIT_REFUSED
    except ApiError as exc:
        return _refused(args, exc)
    except MemoryHubError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except KeyboardInterrupt:
        print("\ninterrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `memory-hub ls l0 | head`: the reader left; say nothing more
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except (OSError, ValueError, AttributeError):
            pass
        return EXIT_FAILED
    except OSError as exc:  # a file or directory the command reads or writes
        print(f"error: {exc.strerror or exc}{f': {exc.filename}' if exc.filename else ''}", file=sys.stderr)
        return EXIT_FAILED
    except Exception as exc:
        if os.environ.get("MEMORY_HUB_DEBUG"):
            raise
        print(
            f"error: unexpected {type(exc).__name__}: {exc} (MEMORY_HUB_DEBUG=1 shows the traceback)",
            file=sys.stderr,
        )
        return EXIT_FAILED


def _refused(args: argparse.Namespace, exc: ApiError) -> int:
    """The API's error in one line on stderr (and under --json, as JSON on stdout)."""
    details = f" (details: {json.dumps(exc.data, ensure_ascii=False)})" if exc.data is not None else ""
    print(f"error: {exc}{details}", file=sys.stderr)
    if "memory_id ambiguous" in str(exc):
        print(
            "hint: several (team, agent) pairs spell this memory id: name one with --team and --agent",
            file=sys.stderr,
        )
    if getattr(args, "json", False):
        emit_json({"error": exc.as_dict()})
    return EXIT_FAILED
