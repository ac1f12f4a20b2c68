"""What the commands share: exit codes, the usage error, the API client the flags name, and the
output (human text or JSON, exact quoting, confirmation prompts, record lines, receipts).

Exit codes: 0 done; 1 the API refused or nothing was deleted (not found, conflict, aborted);
2 usage error, or a destructive command refused because nobody confirmed it (no terminal, no --yes).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from memory_hub.domain.results import MessageHit, MessageItem, MessagesDeleted, RecordHit, RecordItem, RecordsDeleted
from memory_hub.domain.results_admin import UserItemDeleted

from ..client import MemoryHubError

if TYPE_CHECKING:
    from ..client import MemoryHubClient

Message = MessageItem | MessageHit
Record = RecordItem | RecordHit

EXIT_OK, EXIT_FAILED, EXIT_REFUSED = 0, 1, 2
LOOKUP_PAGES = 10  # how many pages of 100 a terminal confirmation reads to show a record by id


class UsageError(Exception):
    """A command line the CLI will not run (exit code 2)."""


def api_client(args: argparse.Namespace) -> MemoryHubClient:
    from ..client import MemoryHubClient

    return MemoryHubClient(args.endpoint, args.api_key, args.service_id, timeout=args.timeout)


def say(args: argparse.Namespace, text: str = "") -> None:
    """Human text: stdout, or stderr under --json (stdout then carries only JSON)."""
    print(text, file=sys.stderr if getattr(args, "json", False) else sys.stdout, flush=True)


def emit_json(data: Any) -> None:
    print(json.dumps(data, indent=2, ensure_ascii=False))


def quote(text: Any) -> str:
    """Show text exactly: quoted, with whitespace and control characters visible ("Hello" vs "Hello ")."""
    return json.dumps("" if text is None else text, ensure_ascii=False)


def is_terminal() -> bool:
    try:
        return bool(sys.stdin.isatty())
    except (AttributeError, ValueError):
        return False


def ask(args: argparse.Namespace, prompt: str) -> str | None:
    stream = sys.stderr if args.json else sys.stdout
    stream.write(prompt)
    stream.flush()
    try:
        return sys.stdin.readline().rstrip("\r\n") if args.json else input()
    except EOFError:
        return None


def refuse_without_terminal(what: str) -> int:
    print(
        f"refused: {what} needs confirmation. Run it on a terminal to review and confirm, "
        "or pass --yes once you have reviewed exactly what it deletes.",
        file=sys.stderr,
    )
    return EXIT_REFUSED


def scope_of(args: argparse.Namespace) -> tuple[str, str, str]:
    missing = [
        flag for flag, value in (("--team", args.team), ("--agent", args.agent), ("--user", args.user)) if not value
    ]
    if missing:
        raise UsageError(
            f"{', '.join(missing)} required (or MEMORY_HUB_TEAM_ID / MEMORY_HUB_AGENT_ID / MEMORY_HUB_USER_ID)"
        )
    return args.team, args.agent, args.user


def pair_of(args: argparse.Namespace) -> tuple[str, str] | None:
    """--team and --agent: which pair a memory id means when several spell it (they go together)."""
    team, agent = getattr(args, "team", None), getattr(args, "agent", None)
    if team is None and agent is None:
        return None
    if team is None or agent is None:
        raise UsageError("--team and --agent go together")
    return team.strip(), agent.strip()


def kind_of(record_id: str) -> str:
    if record_id.startswith("atom-"):
        return "l1"
    if record_id.startswith("msg-"):
        return "l0"
    raise UsageError(
        f"--id {record_id!r}: expected an L1 record id (atom-…) or an L0 message id (msg-…); "
        "find it with `memory-hub search`"
    )


def record_lines(record: Message | Record) -> list[str]:
    """A search hit or a record to confirm: its id and version, and every field a person reviews
    (content quoted, whitespace visible)."""
    score = getattr(record, "score", None)
    if isinstance(record, MessageItem | MessageHit):
        head = [record.id, "v1", record.role, f"session {record.session_id}", record.timestamp]
        if score is not None:
            head.append(f"score {score:.4f}")
        return ["  ".join(str(x) for x in head if x != ""), f"  content: {quote(record.content)}"]
    head = [record.id, f"v{record.version}", record.type or "?", f"updated {record.updated_at}"]
    if score is not None:
        head.append(f"score {score:.4f}")
    lines = [
        "  ".join(str(x) for x in head),
        f"  context: {quote(record.background)}",
        f"  tags:    {', '.join(record.tags) or '-'}",
        f"  sources: {', '.join(record.source_message_ids) or '-'}",
        f"  formed:  {'yes (by formation)' if record.formed else 'no'}",
        f"  content: {quote(record.content)}",
    ]
    if record.reinforced_count != 1:
        lines.insert(3, f"  reinforced: {record.reinforced_count} times")
    return lines


def receipt(args: argparse.Namespace, data: RecordsDeleted | MessagesDeleted | UserItemDeleted) -> None:
    if args.json:
        emit_json(data.wire())
        return
    say(args, f"deleted:   {', '.join(data.deleted_ids) or '(none)'}")
    say(args, f"not found: {', '.join(data.not_found_ids) or '(none)'}")
    records = getattr(data, "records_deleted", 0)
    if records:
        say(args, f"records:   {records} erased with it (they cited a deleted message)")
    if data.files_deleted:
        say(args, f"files:     {data.files_deleted} formed file(s) removed with them")
    say(args, f"audit ids: {', '.join(data.audit_ids) or '(none)'}")


def lookup(
    args: argparse.Namespace, client: MemoryHubClient, team: str, agent: str, user: str, record_id: str
) -> MessageItem | RecordItem | None:
    try:
        return client.find_record(team, agent, user, record_id, max_pages=LOOKUP_PAGES)
    except MemoryHubError as exc:  # showing the record is a courtesy; the delete itself is still by id
        say(args, f"(could not look the record up: {exc})")
        return None
