"""``memory-hub ls`` and ``memory-hub show``: browse one user's memory from the terminal.

Read-only, over the API's own read routes (``conversation/query``, ``atomic/query``, ``scenario/ls``,
``scenario/read``, ``core/read`` and the count routes); nothing here writes or deletes.

* ``ls`` without a layer: how much each layer holds. ``ls l0``: the user's messages, newest first
  (``--session``, ``--limit``/``--offset``). ``ls l1``: the user's records, newest ``updated_at``
  first (``--type``, ``--limit``/``--offset``). ``ls l2``: the agent's scene files in path order
  (``--prefix``, ``--limit``/``--next-token``). ``ls l3``: whether the agent has a persona.
  Items go to stdout, one per line; counts and paging hints to stderr.
* ``show ID_OR_PATH``: every field of one item and its exact content: ``msg-…`` (L0), ``atom-…``
  (L1), a scene file path ending in ``.md`` (L2), or ``persona`` (L3). There is no get-by-id
  route, so an id is looked up by paging through the newest items (``--scan`` of them, at most
  what the API's ``offset`` reaches); ``--session``/``--type`` narrow that walk.

Strings are printed as JSON string literals, so whitespace and control characters are visible
("Hello" vs "Hello "); content that spans lines is printed one quoted line per line, each with its
``\\n``: joined, they are the exact content. ``--raw`` writes only the content, byte for byte;
``--json`` the API's data.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from memory_hub.domain.fields import FILES_LIMIT, MAX_OFFSET, PAGE_LIMIT
from memory_hub.domain.results import MessageItem, Messages, Persona, RecordItem, Records, ScenarioEntry

from ..client import memory_id_for

if TYPE_CHECKING:
    from ..client import MemoryHubClient
from .common import EXIT_FAILED, EXIT_OK, UsageError, api_client, emit_json, quote, say, scope_of
from .flags import positive, scope_flags

LAYERS = ("l0", "l1", "l2", "l3")
PERSONA_NAMES = ("persona", "l3")
DEFAULT_SCAN = 1_000  # items `show` reads to find an id, by default
MAX_SCAN = MAX_OFFSET + 100  # the last page the API's offset reaches
PREVIEW_CHARS = 60  # content shown per line by `ls` (without --long)
_PLAIN = re.compile(r"^[A-Za-z0-9_.@:/+-]+$")


# --- rendering ----------------------------------------------------------------------------------------


def _token(text: Any) -> str:
    """A value as it is when it is plainly one word, else as a JSON literal (exact, whitespace visible)."""
    if isinstance(text, str) and _PLAIN.match(text):
        return text
    return json.dumps(text, ensure_ascii=False)


def _preview(text: Any, width: int = PREVIEW_CHARS) -> str:
    """Content for a one-line listing: quoted; when cut, ``…`` after the closing quote and the length."""
    text = "" if text is None else str(text)
    if len(text) <= width:
        return quote(text)
    return f"{quote(text[:width])}… ({len(text)} chars)"


def exact(label: str, text: Any, indent: str = "  ", width: int = 0) -> list[str]:
    """Lines that show ``text`` exactly: one JSON string literal, or for text over several lines one
    literal per line (each keeps its ``\\n``), so that joined they are the content."""
    head = f"{indent}{label + ':':<{width + 1}} "
    if not isinstance(text, str):
        return [head + json.dumps(text, ensure_ascii=False)]
    lines = text.split("\n")
    if len(lines) == 1:
        return [head + quote(text)]
    # Split on "\n" only (not on the other characters str.splitlines breaks at): a "\r" or U+2028
    # stays visible inside its line. Each piece but the last keeps its "\n"; an empty last piece
    # (the text ends with "\n") is not a line of its own.
    pieces = [line + "\n" for line in lines[:-1]] + ([lines[-1]] if lines[-1] else [])
    size = len(text.encode("utf-8"))
    head += (
        f"{len(pieces)} lines, {len(text)} chars, {size} bytes "
        "(one JSON string per line; joined they are the exact content)"
    )
    return [head, *(indent + "  " + quote(piece) for piece in pieces)]


def _fields(item: dict[str, Any], order: tuple[str, ...], labels: dict[str, str] | None = None) -> list[str]:
    """Every field of ``item``: the known ones in ``order``, then any others; strings as JSON literals
    (an id with a trailing space must look different), other values as JSON."""
    labels = labels or {}
    keys = [k for k in order if k in item] + sorted(k for k in item if k not in order and k != "content")
    width = max((len(labels.get(k, k)) for k in [*keys, "content"]), default=0)
    lines = []
    for key in keys:
        value = item[key]
        shown = _token(value) if key in _PLAIN_FIELDS and isinstance(value, str) else None
        shown = shown if shown is not None else json.dumps(value, ensure_ascii=False)
        lines.append(f"  {labels.get(key, key) + ':':<{width + 1}} {shown}")
    if "content" in item:
        lines += exact("content", item["content"], width=width)
    return lines


# Fields whose values are machine-made (ids, times, enums): printed bare when they are one plain word.
_PLAIN_FIELDS = frozenset(
    {"id", "role", "type", "timestamp", "created_at", "updated_at", "team_id", "agent_id", "path", "memory_id"}
)
_L0_ORDER = ("id", "session_id", "role", "timestamp", "task_id", "team_id", "agent_id", "user_id")
_L1_ORDER = (
    "id",
    "version",
    "type",
    "background",
    "tags",
    "metadata",
    "reinforced_count",
    "source_message_ids",
    "formed",
    "session_id",
    "task_id",
    "team_id",
    "agent_id",
    "user_id",
    "created_at",
    "updated_at",
)
_L2_ORDER = ("path", "version", "summary", "size", "created_at", "updated_at", "team_id", "agent_id")
_L3_ORDER = ("version", "size", "created_at", "updated_at", "team_id", "agent_id")


def l0_line(message: MessageItem) -> str:
    return "  ".join(
        (
            message.id,
            message.timestamp,
            f"{message.role:<9}",
            f"session {_token(message.session_id)}",
            _preview(message.content),
        )
    )


def l1_line(item: RecordItem) -> str:
    sources = item.source_message_ids
    return "  ".join(
        (
            item.id,
            f"v{item.version}",
            item.type,
            f"updated {item.updated_at}",
            f"tags {','.join(_token(t) for t in item.tags)}" if item.tags else "tags -",
            f"sources {len(sources)}" if sources else "sources -",
            "formed" if item.formed else "client",
            _preview(item.content),
        )
    )


def l2_line(entry: ScenarioEntry) -> str:
    return "  ".join(
        (
            _token(entry.path),
            f"v{entry.version}",
            f"{entry.size} B",
            f"updated {entry.updated_at}",
            f"summary {_preview(entry.summary)}" if entry.summary is not None else "summary -",
        )
    )


def l3_line(core: Persona) -> str:
    if core.content is None:
        return "no persona"
    return f"persona  v{core.version}  {len(core.content)} chars  updated {core.updated_at}  {_preview(core.content)}"


# --- ls -------------------------------------------------------------------------------------------------


def _only(args: argparse.Namespace, layer: str | None) -> None:
    """Refuse a filter that the chosen layer does not have (rather than ignore it)."""
    allowed = {
        None: set(),
        "l0": {"session", "limit", "offset", "long"},
        "l1": {"type", "limit", "offset", "long"},
        "l2": {"prefix", "limit", "next_token"},
        "l3": set(),
    }[layer]
    flags = {
        "session": "--session",
        "type": "--type",
        "prefix": "--prefix",
        "limit": "--limit",
        "offset": "--offset",
        "next_token": "--next-token",
        "long": "--long",
    }
    given = [flag for name, flag in flags.items() if getattr(args, name) not in (None, False) and name not in allowed]
    if given:
        where = f"ls {layer}" if layer else "ls without a layer"
        raise UsageError(f"{', '.join(given)}: not an option of `memory-hub {where}`")


def ls(args: argparse.Namespace) -> int:
    layer = args.layer.lower() if args.layer else None
    _only(args, layer)
    team, agent, user = scope_of(args)
    if args.offset is not None and args.offset > MAX_OFFSET:
        raise UsageError(f"--offset: at most {MAX_OFFSET:,} (the API pages no deeper)")
    client = api_client(args)
    if layer is None:
        return _overview(args, client, team, agent, user)
    if layer == "l0":
        messages = client.conversation_query(
            team, agent, user, session_id=args.session, limit=args.limit, offset=args.offset
        )
        return _page(args, messages, messages.messages, messages.total, "l0")
    if layer == "l1":
        records = client.atomic_query(team, agent, user, type=args.type, limit=args.limit, offset=args.offset)
        return _page(args, records, records.items, records.total, "l1")
    if layer == "l2":
        return _files(args, client, team, agent, user)
    core = client.core_read(team, agent, user)
    if args.json:
        emit_json(core.wire())
        return EXIT_OK
    print(l3_line(core))
    return EXIT_OK


def _files(args: argparse.Namespace, client: MemoryHubClient, team: str, agent: str, user: str) -> int:
    data = client.scenario_ls(team, agent, user, path_prefix=args.prefix, limit=args.limit, next_token=args.next_token)
    if args.json:
        emit_json(data.wire())
        return EXIT_OK
    for entry in data.entries:
        print(l2_line(entry))
    scope = f" under {quote(args.prefix)}" if args.prefix else ""
    note = "" if data.entries else " (none here)"
    _note(f"{len(data.entries)} of {data.total} file(s){scope} of {team}/{agent}, in path order{note}")
    if data.next_token:
        _note(f"more: --next-token {data.next_token}")
    return EXIT_OK


def _note(text: str) -> None:
    """Counts and paging hints: stderr, so that stdout is only the listing."""
    print(text, file=sys.stderr, flush=True)


def _page(
    args: argparse.Namespace,
    data: Messages | Records,
    items: Sequence[MessageItem | RecordItem],
    total: int,
    layer: str,
) -> int:
    if args.json:
        emit_json(data.wire())
        return EXIT_OK
    noun = "message" if layer == "l0" else "record"
    for n, item in enumerate(items):
        if args.long:
            if n:
                print()
            print(f"{'L0 message' if layer == 'l0' else 'L1 record'} {item.id}")
            for text in _fields(item.wire(), _L0_ORDER if layer == "l0" else _L1_ORDER, {"background": "context"}):
                print(text)
        else:
            print(l0_line(item) if isinstance(item, MessageItem) else l1_line(item))
    offset = int(args.offset or 0)
    order = "newest first" if layer == "l0" else "newest update first"
    if items:
        _note(f"{noun}s {offset + 1}-{offset + len(items)} of {total}, {order}")
    else:
        _note(f"no {noun}s here ({total} in all{', offset ' + str(offset) if offset else ''})")
    if offset + len(items) < total and items:
        _note(f"more: --offset {offset + len(items)}")
    return EXIT_OK


def _overview(args: argparse.Namespace, client: MemoryHubClient, team: str, agent: str, user: str) -> int:
    l0 = client.conversation_count(team, agent, user).total
    l1 = client.atomic_count(team, agent, user).total
    l2 = client.scenario_count(team, agent, user).total
    core = client.core_read(team, agent, user)
    summary = {
        "team_id": team,
        "agent_id": agent,
        "user_id": user,
        "memory_id": memory_id_for(team, agent),
        "l0": {"messages": l0},
        "l1": {"records": l1},
        "l2": {"files": l2},
        "l3": {"persona": core.content is not None, "version": core.version, "updated_at": core.updated_at},
    }
    if args.json:
        emit_json(summary)
        return EXIT_OK
    persona = f"persona v{core.version}, updated {core.updated_at}" if core.content is not None else "no persona"
    rows = [
        ("l0", f"{l0} message(s) of this user", "memory-hub ls l0"),
        ("l1", f"{l1} record(s) of this user", "memory-hub ls l1"),
        ("l2", f"{l2} scene file(s) of the agent", "memory-hub ls l2"),
        ("l3", f"{persona} (the agent's)", "memory-hub show persona"),
    ]
    width = max(len(text) for _, text, _ in rows)
    say(args, f"{team}/{agent}/{_token(user)}  (memory {summary['memory_id']})")
    for layer, text, command in rows:
        say(args, f"  {layer}  {text:<{width}}   {command}")
    return EXIT_OK


# --- show -----------------------------------------------------------------------------------------------


def _what(target: str) -> str:
    if target.endswith(".md"):
        return "l2"
    if target.strip().startswith("msg-"):
        return "l0"
    if target.strip().startswith("atom-"):
        return "l1"
    if target.strip().lower() in PERSONA_NAMES:
        return "l3"
    raise UsageError(
        f"{target!r}: expected an L0 message id (msg-…), an L1 record id (atom-…), "
        "an L2 scene file path (….md) or 'persona' (L3); `memory-hub ls` lists them"
    )


def show(args: argparse.Namespace) -> int:
    target = args.target
    layer = _what(target)
    if args.session is not None and layer != "l0":
        raise UsageError("--session: only for an L0 message id (msg-…)")
    if args.type is not None and layer != "l1":
        raise UsageError("--type: only for an L1 record id (atom-…)")
    if args.scan is not None and layer not in ("l0", "l1"):
        raise UsageError("--scan: only for an id (msg-… or atom-…)")
    if args.raw and args.json:
        raise UsageError("--raw and --json exclude each other")
    team, agent, user = scope_of(args)
    client = api_client(args)
    if layer in ("l0", "l1"):
        record_id = target.strip()
        scan = DEFAULT_SCAN if args.scan is None else args.scan
        if scan > MAX_SCAN:
            raise UsageError(f"--scan: at most {MAX_SCAN:,} (the API pages no deeper)")
        pages = -(-scan // 100)
        item = client.find_record(
            team, agent, user, record_id, max_pages=pages, session_id=args.session, type=args.type
        )
        if item is None:
            return _not_found(args, client, team, agent, user, record_id, layer, pages * 100)
        heading = f"L0 message {record_id}" if layer == "l0" else f"L1 record {record_id}"
        order = _L0_ORDER if layer == "l0" else _L1_ORDER
        return _print(args, item.wire(), heading, order, {"background": "context"})
    if layer == "l2":
        scene = client.scenario_read(team, agent, user, path=target)
        if scene.content is None:
            print(f"error: no scene file {quote(target)} in {team}/{agent}", file=sys.stderr)
            return EXIT_FAILED
        data = {**scene.wire(), "size": len(scene.content.encode("utf-8"))}
        return _print(args, data, f"L2 scene file {_token(target)}", _L2_ORDER)
    core = client.core_read(team, agent, user)
    if core.content is None:
        print(f"error: {team}/{agent} has no persona (L3)", file=sys.stderr)
        return EXIT_FAILED
    data = {**core.wire(), "size": len(core.content.encode("utf-8"))}
    return _print(args, data, f"L3 persona of {team}/{agent}", _L3_ORDER)


def _print(
    args: argparse.Namespace,
    item: dict[str, Any],
    heading: str,
    order: tuple[str, ...],
    labels: dict[str, str] | None = None,
) -> int:
    if args.raw:
        sys.stdout.write("" if item.get("content") is None else str(item["content"]))
        sys.stdout.flush()
        return EXIT_OK
    if args.json:
        emit_json(item)
        return EXIT_OK
    print(heading)
    for line in _fields(item, order, labels):
        print(line)
    return EXIT_OK


def _not_found(
    args: argparse.Namespace,
    client: MemoryHubClient,
    team: str,
    agent: str,
    user: str,
    record_id: str,
    layer: str,
    scanned: int,
) -> int:
    noun = "message" if layer == "l0" else "record"
    narrowed = ""
    if layer == "l0" and args.session is not None:
        narrowed = f" in session {_token(args.session)}"
    if layer == "l1" and args.type is not None:
        narrowed = f" of type {args.type}"
    if layer == "l0":
        total = client.conversation_count(team, agent, user, session_id=args.session).total
    else:
        total = client.atomic_count(team, agent, user, type=args.type).total
    where = f"{team}/{agent}/{_token(user)}"
    if total <= scanned:
        print(f"error: no {noun} {record_id} in {where}{narrowed} (all {total} checked)", file=sys.stderr)
    else:
        more = (
            f"; look further with --scan {min(total, MAX_SCAN)}"
            if scanned < MAX_SCAN
            else "; narrow it with " + ("--session" if layer == "l0" else "--type")
        )
        print(
            f"error: {record_id} is not among the newest {scanned} of {total} {noun}s of {where}{narrowed}{more}",
            file=sys.stderr,
        )
    return EXIT_FAILED


# --- the parsers ------------------------------------------------------------------------------------------


def add_commands(sub: Any, conn: argparse.ArgumentParser) -> None:
    scope = scope_flags()
    listing = sub.add_parser(
        "ls",
        parents=[conn, scope],
        help="list a user's memory: L0 messages, L1 records, L2 files, L3 persona",
        description="Without a layer: how much each layer holds. l0: the user's messages, newest first "
        "(--session, --limit, --offset). l1: the user's records, newest update first (--type, --limit, "
        "--offset). l2: the agent's scene files in path order (--prefix, --limit, --next-token). l3: "
        "whether the agent has a persona. Items go to stdout, one per line (content cut to "
        f"{PREVIEW_CHARS} chars, quoted; --long prints every field); counts and paging hints to stderr. "
        "`memory-hub show ID_OR_PATH` prints one item exactly.",
    )
    listing.add_argument(
        "layer", nargs="?", type=str.lower, choices=LAYERS, help="l0, l1, l2 or l3 (default: a summary of all four)"
    )
    listing.add_argument("--session", default=None, help="l0: only this session")
    listing.add_argument("--type", default=None, help="l1: only this record type")
    listing.add_argument("--prefix", default=None, help="l2: only paths starting with this string (e.g. notes/)")
    listing.add_argument(
        "--limit", type=positive, default=None, help=f"l0/l1: 1-{PAGE_LIMIT} (20); l2: 1-{FILES_LIMIT} ({FILES_LIMIT})"
    )
    listing.add_argument("--offset", type=_offset, default=None, help=f"l0/l1: skip this many (0-{MAX_OFFSET:,})")
    listing.add_argument("--next-token", default=None, help="l2: the next page (printed as `more: …`)")
    listing.add_argument("-l", "--long", action="store_true", help="l0/l1: every field and the whole content")
    listing.set_defaults(run=ls)

    shown = sub.add_parser(
        "show",
        parents=[conn, scope],
        help="print one item's fields and exact content",
        description="Print every field of one item and its exact content, strings as JSON literals "
        "(whitespace visible; text over several lines as one literal per line). ID_OR_PATH: an L0 "
        "message id (msg-…), an L1 record id (atom-…), an L2 scene file path (….md) or 'persona' "
        f"(L3). An id is found by paging through the newest items (--scan, default {DEFAULT_SCAN:,}, "
        f"at most {MAX_SCAN:,}); --session or --type narrow that walk.",
    )
    shown.add_argument("target", metavar="ID_OR_PATH")
    shown.add_argument("--session", default=None, help="msg-…: look only in this session")
    shown.add_argument("--type", default=None, help="atom-…: look only among records of this type")
    shown.add_argument(
        "--scan", type=positive, default=None, help=f"ids: read at most this many newest items ({DEFAULT_SCAN:,})"
    )
    shown.add_argument("--raw", action="store_true", help="write only the content, exactly (no newline added)")
    shown.set_defaults(run=show)


def _offset(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError("must be at least 0")
    return value
