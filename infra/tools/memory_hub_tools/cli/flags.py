"""The flags several commands share: connection, scope, the --team/--agent pair, number types."""

from __future__ import annotations

import argparse
import os


def connection_flags() -> argparse.ArgumentParser:
    parent = argparse.ArgumentParser(add_help=False)
    group = parent.add_argument_group("connection")
    group.add_argument(
        "--endpoint", default=None, help="API base URL (default: $MEMORY_HUB_ENDPOINT or http://127.0.0.1:3000)"
    )
    group.add_argument("--api-key", default=None, help="API key (default: $MEMORY_HUB_API_KEY)")
    group.add_argument("--service-id", default=None, help="service id (default: $MEMORY_HUB_SERVICE_ID or 'default')")
    group.add_argument("--timeout", type=seconds, default=30.0, help="seconds per request (default 30)")
    group.add_argument("--json", action="store_true", help="print the raw JSON data (for scripts)")
    return parent


def scope_flags() -> argparse.ArgumentParser:
    parent = argparse.ArgumentParser(add_help=False)
    group = parent.add_argument_group("scope")
    group.add_argument(
        "--team", default=os.environ.get("MEMORY_HUB_TEAM_ID"), help="team id (default: $MEMORY_HUB_TEAM_ID)"
    )
    group.add_argument(
        "--agent", default=os.environ.get("MEMORY_HUB_AGENT_ID"), help="agent id (default: $MEMORY_HUB_AGENT_ID)"
    )
    group.add_argument(
        "--user", default=os.environ.get("MEMORY_HUB_USER_ID"), help="user id (default: $MEMORY_HUB_USER_ID)"
    )
    return parent


def add_pair(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--team", default=None, help="with --agent: the pair, when several spell the memory id")
    parser.add_argument("--agent", default=None, help="with --team: the pair, when several spell the memory id")


def positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError("must be more than 0")
    return value
