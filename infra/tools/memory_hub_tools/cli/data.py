"""The data-plane commands over the HTTP API: ``search`` (find records to review), ``delete`` (exactly
one record or message, by id), ``clear`` (every layer of one memory) and ``user-memory delete`` (one
user's L0/L1, or one item of theirs). There is no delete by content; on a terminal every deletion is
shown and confirmed first, without one it needs ``--yes``."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any, get_args

from memory_hub.domain.fields import PAGE_LIMIT
from memory_hub.domain.results import (
    MessageHit,
    MessageHits,
    MessagesDeleted,
    Mode,
    RecordHit,
    RecordHits,
    RecordItem,
    RecordsDeleted,
)
from memory_hub.domain.results_admin import ClearItem, UserItemDeleted

from ..client import UNSET, ApiError, MemoryHubClient, MemoryHubError, Pair, pair_fields
from .common import (
    EXIT_FAILED,
    EXIT_OK,
    LOOKUP_PAGES,
    UsageError,
    api_client,
    ask,
    emit_json,
    is_terminal,
    kind_of,
    lookup,
    pair_of,
    quote,
    receipt,
    record_lines,
    refuse_without_terminal,
    say,
    scope_of,
)
from .flags import add_pair, positive, scope_flags


def _search(args: argparse.Namespace) -> int:
    team, agent, user = scope_of(args)
    client = api_client(args)
    if args.layer == "l0":
        if args.type:
            raise UsageError("--type applies to L1 records only")
        messages = client.conversation_search(
            team, agent, user, query=args.query, session_id=args.session, limit=args.limit, mode=args.mode
        )
        hits: Sequence[MessageHit | RecordHit] = messages.messages
        answer: MessageHits | RecordHits = messages
    else:
        if args.session:
            raise UsageError("--session applies to L0 messages only")
        answer = client.atomic_search(
            team, agent, user, query=args.query, type=args.type, limit=args.limit, mode=args.mode
        )
        hits = answer.items
    if args.json:
        emit_json(answer.wire())
        return EXIT_OK
    if not hits:
        say(args, "no matches")
    for n, hit in enumerate(hits):
        if n:
            say(args)
        for line in record_lines(hit):
            say(args, line)
    return EXIT_OK


def _delete(args: argparse.Namespace) -> int:
    team, agent, user = scope_of(args)
    record_id = args.id.strip()
    layer = kind_of(record_id)
    expected = args.expected_version
    if layer == "l0" and expected not in (None, 1):
        raise UsageError("--expected-version: messages are never edited, their version is always 1")
    if expected is not None and expected < 1:
        raise UsageError("--expected-version: versions start at 1")
    client = api_client(args)
    if not args.yes:
        if not is_terminal():
            return refuse_without_terminal("delete")
        confirmed, expected = _confirm_delete(args, client, (team, agent, user), record_id, expected)
        if not confirmed:
            return EXIT_FAILED
    try:
        if layer == "l0":
            data: MessagesDeleted | RecordsDeleted = client.conversation_delete(
                team, agent, user, message_ids=[record_id]
            )
        else:
            versions = {record_id: expected} if expected is not None else None
            data = client.atomic_delete(team, agent, user, ids=[record_id], expected_versions=versions)
    except ApiError as exc:
        if _conflicted(args, exc):
            return EXIT_FAILED
        raise
    receipt(args, data)
    return EXIT_OK if record_id in data.deleted_ids else EXIT_FAILED


def _confirm_delete(
    args: argparse.Namespace,
    client: MemoryHubClient,
    scope: tuple[str, str, str],
    record_id: str,
    expected: int | None,
) -> tuple[bool, int | None]:
    """Show the record on the terminal and ask; whether confirmed, and the version to delete (the
    one shown: not a later edit of it)."""
    record = lookup(args, client, *scope, record_id)
    if record is None:
        say(
            args,
            f"{record_id} is not among the newest {LOOKUP_PAGES * 100} records of "
            f"{'/'.join(scope)}, so it cannot be shown here.",
        )
        say(args, f"  id: {record_id}   expected version: {expected if expected is not None else 'any'}")
    else:
        say(args, "This record will be deleted:")
        for line in record_lines(record):
            say(args, "  " + line)
        if isinstance(record, RecordItem):
            if expected is not None and expected != record.version:
                say(
                    args,
                    f"It is now at version {record.version}, not {expected}: it changed since you "
                    "looked. Review it again (it is shown above) and rerun with the version you "
                    "confirm.",
                )
                return False, expected
            expected = record.version
    if (ask(args, "Delete exactly this id? Type yes to confirm: ") or "").strip().lower() != "yes":
        say(args, "aborted: nothing was deleted")
        return False, expected
    return True, expected


def _conflicted(args: argparse.Namespace, exc: ApiError) -> bool:
    """A 409 of a delete at a version: each conflict said in one line (nothing was deleted)."""
    if exc.code != 409 or not isinstance(exc.data, dict) or not exc.data.get("conflicts"):
        return False
    for conflict in exc.data["conflicts"]:
        print(
            f"conflict: {conflict.get('id')} is at version {conflict.get('actual')}, "
            f"not {conflict.get('expected')}: it was edited since it was shown. Nothing was "
            "deleted; search again, review the current text, and delete with its new version.",
            file=sys.stderr,
        )
    if args.json:
        emit_json({"error": exc.as_dict()})
    return True


def _clear(args: argparse.Namespace) -> int:
    memory_id = args.memory_id.strip()
    pair = pair_of(args)
    client = api_client(args)
    if not args.yes:
        if not is_terminal():
            return refuse_without_terminal("clear")
        try:
            asset = client.memory_get(memory_id=memory_id, **pair_fields(pair))
            counts = asset.counts
            say(
                args,
                f"{memory_id} (team {asset.team_id}, agent {asset.agent_id}) holds "
                f"L0 {counts.l0}, L1 {counts.l1}, L2 {counts.l2}, L3 {counts.l3}.",
            )
        except MemoryHubError as exc:
            say(args, f"(could not read {memory_id}: {exc})")
        say(
            args,
            "Clear deletes every message, record, scene file and persona of this memory, for all its "
            "users (the asset itself stays). This cannot be undone.",
        )
        if (ask(args, "Type the memory id to confirm: ") or "").strip() != memory_id:
            say(args, "aborted: the memory id was not retyped exactly; nothing was cleared")
            return EXIT_FAILED
    targets = None if pair is None else [{"memory_id": memory_id, **pair_fields(pair)}]
    data = client.chat_memory_clear(memory_ids=[memory_id], targets=targets)
    if args.json:
        emit_json(data.wire())
    else:
        for item in data.items:
            _cleared(args, item)
    return EXIT_OK if data.all_cleared else EXIT_FAILED


def _cleared(args: argparse.Namespace, item: ClearItem) -> None:
    if item.cleared:
        say(args, f"{item.memory_id}: cleared")
        say(
            args,
            f"  l0_deleted {item.l0_deleted}  l1_deleted {item.l1_deleted}  l2_deleted {item.l2_deleted}  "
            f"l3_deleted {item.l3_deleted}  profile_deleted {item.profile_deleted}  files_deleted {item.files_deleted}",
        )
        if item.purge_pending:
            say(args, "  purge_pending: storage is still being purged in the background")
    else:
        say(args, f"{item.memory_id}: NOT cleared ({item.reason}; retryable {item.retryable})")
    say(args, f"  audit ids: {', '.join(item.audit_ids) or '(none)'}")


def _user_memory_delete(args: argparse.Namespace) -> int:
    memory_id, user_id = args.memory_id.strip(), args.user
    pair = pair_of(args)
    content_id = args.content_id.strip() if args.content_id is not None else None
    if content_id is not None:
        kind_of(content_id)
    client = api_client(args)
    if not args.yes:
        if not is_terminal():
            return refuse_without_terminal("user-memory delete")
        if not _confirm_user_memory_delete(args, client, memory_id, user_id, content_id, pair):
            return EXIT_FAILED
    data = client.user_memory_delete(
        memory_id=memory_id,
        user_id=user_id,
        content_ids=UNSET if content_id is None else [content_id],
        **pair_fields(pair),
    )
    if isinstance(data, UserItemDeleted):
        receipt(args, data)
        return EXIT_OK if content_id in data.deleted_ids else EXIT_FAILED
    if args.json:
        emit_json(data.wire())
    else:
        say(
            args,
            f"{memory_id} user {quote(user_id)}: l0_deleted {data.l0_deleted}  l1_deleted {data.l1_deleted}  "
            f"files_deleted {data.files_deleted}",
        )
        say(args, f"audit ids: {', '.join(data.audit_ids) or '(none)'}")
    return EXIT_OK


def _confirm_user_memory_delete(
    args: argparse.Namespace,
    client: MemoryHubClient,
    memory_id: str,
    user_id: str,
    content_id: str | None,
    pair: Pair | None,
) -> bool:
    """On a terminal: all of a user's memory needs the user id retyped; one item is shown and asked."""
    asset = None
    try:
        asset = client.memory_get(memory_id=memory_id, **pair_fields(pair))
    except MemoryHubError as exc:
        say(args, f"(could not read {memory_id}: {exc})")
    if content_id is None:
        say(
            args,
            f"This erases EVERY L0 message and L1 record of user {quote(user_id)} in {memory_id} "
            "(the agent's L2 scenes and L3 persona stay). This cannot be undone.",
        )
        if (ask(args, "Type the user id to confirm: ") or "") != user_id:
            say(args, "aborted: the user id was not retyped exactly; nothing was deleted")
            return False
        return True
    record = None if asset is None else lookup(args, client, asset.team_id, asset.agent_id, user_id, content_id)
    if record is None:
        say(args, f"{content_id} of user {quote(user_id)} cannot be shown here; it will be deleted by id.")
    else:
        say(args, "This record will be deleted:")
        for line in record_lines(record):
            say(args, "  " + line)
    if (ask(args, "Delete exactly this id? Type yes to confirm: ") or "").strip().lower() != "yes":
        say(args, "aborted: nothing was deleted")
        return False
    return True


def add_commands(sub: Any, conn: argparse.ArgumentParser) -> None:
    """search, delete, clear and user-memory delete."""
    search = sub.add_parser(
        "search",
        parents=[conn, scope_flags()],
        help="find records to review (L1 or L0)",
        description="Search one user's L1 records (default) or L0 messages and print "
        "each hit's id, version, type, context, tags and exact content.",
    )
    search.add_argument("query")
    search.add_argument("--layer", choices=("l1", "l0"), default="l1")
    search.add_argument("--type", default=None, help="L1 record type filter")
    search.add_argument("--session", default=None, help="L0 only: narrow to one session")
    search.add_argument("--limit", type=positive, default=None, help=f"1-{PAGE_LIMIT} (API default 5)")
    search.add_argument(
        "--mode",
        choices=get_args(Mode),
        default=None,
        help="hybrid, keyword or semantic (API default: hybrid where meaning is on)",
    )
    search.set_defaults(run=_search)

    delete = sub.add_parser(
        "delete",
        parents=[conn, scope_flags()],
        help="delete exactly one record or message, by id",
        description="Delete one L1 record (atom-…) or L0 message (msg-…) by its id. On a terminal the "
        "record is shown and you confirm; without a terminal --yes is required (else exit 2). "
        "There is no delete by content.",
    )
    delete.add_argument("--id", required=True, help="the id printed by `memory-hub search`")
    delete.add_argument(
        "--expected-version",
        type=int,
        default=None,
        help="L1: delete only if the record is still at this version (else 409, nothing deleted)",
    )
    delete.add_argument("--yes", action="store_true", help="do not ask (you already reviewed the record)")
    delete.set_defaults(run=_delete)

    clear = sub.add_parser(
        "clear",
        parents=[conn],
        help="wipe every layer of one memory (asset stays)",
        description="Asset-level clear (/v3/chat-memory/clear). On a terminal you confirm "
        "by retyping the memory id; without a terminal --yes is required.",
    )
    clear.add_argument("memory_id", help="chat_memory-<team>-<agent>")
    clear.add_argument("--yes", action="store_true")
    add_pair(clear)
    clear.set_defaults(run=_clear)

    user_memory = sub.add_parser("user-memory", help="erase one user's memory (admin)")
    um_sub = user_memory.add_subparsers(dest="user_memory_command", required=True)
    um_delete = um_sub.add_parser(
        "delete",
        parents=[conn],
        help="erase a user's L0/L1 in a memory, or one item by id",
        description="/v3/user-memory/delete: without --content-id every L0 message and L1 record of the "
        "user in the memory is erased; with it, exactly that one item.",
    )
    um_delete.add_argument("--memory-id", required=True)
    um_delete.add_argument("--user", required=True)
    um_delete.add_argument("--content-id", default=None, help="one msg-… or atom-… id of that user")
    um_delete.add_argument("--yes", action="store_true")
    add_pair(um_delete)
    um_delete.set_defaults(run=_user_memory_delete)
