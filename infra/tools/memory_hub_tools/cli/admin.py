"""The admin commands over the HTTP API: ``keys create|list|revoke``, ``audit``, and ``export`` /
``import`` of a memory as a memory-tdai tree."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from memory_hub.domain.fields import PAGE_LIMIT

from .common import EXIT_FAILED, EXIT_OK, UsageError, api_client, emit_json, pair_of, quote, say
from .flags import add_pair, positive


def _keys_create(args: argparse.Namespace) -> int:
    data = api_client(args).keys_create(role=args.role, team_ids=args.team or None, name=args.name)
    if args.json:
        emit_json(data.wire())
        return EXIT_OK
    say(args, f"key_id   {data.key_id}")
    say(args, f"api_key  {data.api_key}")
    say(args, f"role     {data.role}")
    say(args, f"teams    {', '.join(data.team_ids)}")
    if data.name:
        say(args, f"name     {data.name}")
    say(args, "The api_key is shown only now: store it safely.")
    return EXIT_OK


def _keys_list(args: argparse.Namespace) -> int:
    data = api_client(args).keys_list()
    if args.json:
        emit_json(data.wire())
        return EXIT_OK
    for key in data.keys:
        state = "REVOKED" if key.revoked else "active"
        say(
            args,
            f"{key.key_id}  {key.role}  {state}  teams={','.join(key.team_ids)}"
            f"  created {key.created_at}  name={quote(key.name)}",
        )
    return EXIT_OK


def _keys_revoke(args: argparse.Namespace) -> int:
    data = api_client(args).keys_revoke(key_id=args.key_id)
    if args.json:
        emit_json(data.wire())
    else:
        say(args, f"{data.key_id}: revoked")
    return EXIT_OK


def _audit(args: argparse.Namespace) -> int:
    data = api_client(args).audit_query(
        memory_id=args.memory_id, action=args.action, limit=args.limit, next_token=args.next_token
    )
    if args.json:
        emit_json(data.wire())
        return EXIT_OK
    for event in data.events:
        fields = (
            event.at,
            event.action,
            event.layer,
            event.target or "-",
            f"count={event.count}",
            f"actor={event.actor}",
            event.memory_id or "-",
            event.request_id or "-",
            event.event_id,
        )
        say(args, "  ".join(str(x) for x in fields))
    if data.next_token:
        print(f"more: --next-token {data.next_token}", file=sys.stderr)
    return EXIT_OK


def _export(args: argparse.Namespace) -> int:
    from .. import transfer

    if args.shared and args.user is None:
        raise UsageError("--shared goes with --user (a whole memory's export always holds L2/L3)")
    answer = transfer.export(
        api_client(args),
        args.memory_id.strip(),
        Path(args.out),
        user_id=args.user,
        shared=args.shared,
        progress=lambda text: print(text, file=sys.stderr),
        pair=pair_of(args),
    )
    if args.json:
        emit_json({k: v for k, v in answer.items() if k != "url"})
        return EXIT_OK
    say(args, f"exported {answer['memory_id']} into {args.out}: {transfer.counts_line(answer['counts'])}")
    return EXIT_OK


def _import(args: argparse.Namespace) -> int:
    from .. import transfer

    if (args.from_team is None) != (args.from_agent is None):
        raise UsageError("--from-team and --from-agent go together")
    try:
        answer = transfer.import_tree(
            api_client(args),
            Path(args.tree),
            args.team,
            args.agent,
            user_id=args.user,
            from_team=args.from_team,
            from_agent=args.from_agent,
            progress=lambda text: print(text, file=sys.stderr),
        )
    except transfer.TransferFailed as exc:
        print(f"error: import failed: {exc}", file=sys.stderr)
        for problem in exc.problems:
            print(f"  {problem}", file=sys.stderr)
        return EXIT_FAILED
    if args.json:
        emit_json(answer)
        return EXIT_OK
    say(
        args,
        f"imported into {answer['memory_id']}: {transfer.counts_line(answer['counts'])}"
        f"  (already there: {transfer.counts_line(answer.get('skipped', {}))})",
    )
    return EXIT_OK


def add_keys_and_audit(sub: Any, conn: argparse.ArgumentParser) -> None:
    keys = sub.add_parser("keys", help="API keys (admin)")
    keys_sub = keys.add_subparsers(dest="keys_command", required=True)
    create = keys_sub.add_parser("create", parents=[conn], help="create a key (its secret is shown once)")
    create.add_argument("--role", required=True, choices=("reader", "writer", "admin"))
    create.add_argument("--team", action="append", default=[], help="team id (repeat; default all teams '*')")
    create.add_argument("--name", default=None)
    create.set_defaults(run=_keys_create)
    listing = keys_sub.add_parser("list", parents=[conn], help="list keys (never a secret)")
    listing.set_defaults(run=_keys_list)
    revoke = keys_sub.add_parser("revoke", parents=[conn], help="revoke a key")
    revoke.add_argument("key_id")
    revoke.set_defaults(run=_keys_revoke)

    audit = sub.add_parser("audit", parents=[conn], help="audit events, newest first (admin)")
    audit.add_argument("memory_id", nargs="?", default=None)
    audit.add_argument("--action", default=None, help="e.g. delete, clear, user_memory_delete, key_create")
    audit.add_argument("--limit", type=positive, default=None, help=f"1-{PAGE_LIMIT} (API default 20)")
    audit.add_argument("--next-token", default=None)
    audit.set_defaults(run=_audit)


def add_transfer(sub: Any, conn: argparse.ArgumentParser) -> None:
    """export and import."""
    export = sub.add_parser(
        "export",
        parents=[conn],
        help="export a memory as a memory-tdai tree (admin)",
        description="The service builds the memory's memory-tdai tree (TencentDB Agent Memory's on-disk "
        "layout); it is downloaded into --out, which must be empty or missing.",
    )
    export.add_argument("--memory-id", required=True)
    export.add_argument("--user", default=None, help="only this person's L0/L1 (their right of access)")
    export.add_argument("--shared", action="store_true", help="with --user: add the agent's shared L2/L3")
    export.add_argument("--out", required=True, help="directory to write the tree into")
    add_pair(export)
    export.set_defaults(run=_export)

    imported = sub.add_parser(
        "import",
        parents=[conn],
        help="import a memory-tdai tree into a (team, agent) memory (admin)",
        description="Load a tree (exported by Memory Hub, or written by TencentDB Agent Memory) into the "
        "pair's memory, creating it. A malformed line is reported as <file>:<line>: <problem> "
        "and nothing of the import is kept; importing the same tree again changes nothing.",
    )
    imported.add_argument("tree", help="the tree's directory")
    imported.add_argument("--team", required=True)
    imported.add_argument("--agent", required=True)
    imported.add_argument("--user", default=None, help="the user of lines that name none (or 'default')")
    imported.add_argument("--from-team", default=None, help="with --from-agent: the source pair to take")
    imported.add_argument("--from-agent", default=None)
    imported.set_defaults(run=_import)
