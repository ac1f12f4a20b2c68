"""``memory-hub``: the local stack and the operator's command line.

Browse one user's memory with ``ls [l0|l1|l2|l3]`` and ``show ID_OR_PATH`` (read-only).
Erasure is by id only (there is no delete by content): find the record with ``search``, look at
it, then ``delete --id`` exactly that id, at the version you saw (``--expected-version``).
Connection: ``--endpoint``/``MEMORY_HUB_ENDPOINT`` (default http://127.0.0.1:3000),
``--api-key``/``MEMORY_HUB_API_KEY``, ``--service-id``/``MEMORY_HUB_SERVICE_ID`` (default ``default``).
``invoke`` and ``cleanup`` use the running stack's Lambda Invoke API: ``--lambda-endpoint``, else
``MEMORY_HUB_LAMBDA_ENDPOINT``, else http://127.0.0.1:$LAMBDA_PORT (default 3001).
Errors are one line on stderr; exit 0 done, 1 failed or refused by the API, 2 usage error.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from datetime import UTC
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from .client import MemoryHubError

if TYPE_CHECKING:
    from .client import MemoryHubClient


def _local(args: argparse.Namespace) -> int:
    try:
        from memory_hub_local.__main__ import main as local_main
    except ImportError:
        print(
            "memory-hub local needs the local stack: pip install 'memory-hub[local]' (make run does it)",
            file=sys.stderr,
        )
        return EXIT_FAILED
    return local_main(args.local_args)


def _invoke(args: argparse.Namespace) -> int:
    """Run one function of the running stack with one event, like ``sam local invoke``."""
    if args.aws and args.lambda_endpoint:
        raise UsageError("--aws and --lambda-endpoint exclude each other")
    if args.event == "-":
        event = sys.stdin.read()
    else:
        try:
            event = Path(args.event).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise UsageError(f"{args.event}: cannot read the event: {getattr(exc, 'strerror', None) or exc}") from None
    try:
        parsed = json.loads(event)
    except ValueError as exc:
        raise UsageError(f"{args.event}: not JSON ({exc})") from None
    key = args.api_key or os.environ.get("MEMORY_HUB_API_KEY")
    if key and isinstance(parsed, dict) and isinstance(parsed.get("headers"), dict):
        # the shipped events carry the test key; a running stack knows its own
        parsed["headers"]["Authorization"] = f"Bearer {key}"
        if isinstance(parsed.get("multiValueHeaders"), dict):
            parsed["multiValueHeaders"]["Authorization"] = [f"Bearer {key}"]
        event = json.dumps(parsed)
    client, _, endpoint = _lambda_client(args)
    response = _invoke_once(args, client, endpoint, args.function, event.encode("utf-8"))
    if response is None:
        return EXIT_FAILED
    raw = response["Payload"].read()
    try:
        result = json.loads(raw or b"null")
    except ValueError:
        result = raw.decode("utf-8", "replace")
    print(json.dumps(result, indent=2, ensure_ascii=False))
    if response.get("FunctionError"):
        message = result.get("errorMessage") if isinstance(result, dict) else None
        print(f"error: {args.function} failed: {message or response['FunctionError']}", file=sys.stderr)
        return EXIT_FAILED
    status = result.get("statusCode") if isinstance(result, dict) else None
    if isinstance(status, int) and status >= 400:
        message = _proxy_message(result)
        hint = (
            " (the event's API key is not one of this stack's: the shipped events/ carry the test key; "
            "pass --api-key or set MEMORY_HUB_API_KEY)"
            if status == 401 and "authorization" in message and not args.aws
            else ""
        )
        print(f"error: {args.function} answered {status}{message}{hint}", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK


def _proxy_message(result: dict[str, Any]) -> str:
    """The envelope message of an API Gateway proxy result (``: …``), or nothing."""
    body = result.get("body")
    if not isinstance(body, str):
        return ""
    if result.get("isBase64Encoded"):
        import base64
        import binascii

        try:
            body = base64.b64decode(body).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            return ""
    try:
        envelope = json.loads(body)
    except ValueError:
        return ""
    message = envelope.get("message") if isinstance(envelope, dict) else None
    return f": {message}" if isinstance(message, str) and message else ""


def _template_functions() -> list[str] | None:
    """The logical ids of template.yaml's functions (None when the template cannot be read here)."""
    try:
        from memory_hub_local.template import load_raw

        resources = load_raw().get("Resources") or {}
    except Exception:  # noqa: BLE001 - only a hint for an error message: no template, no list
        return None
    return sorted(
        name
        for name, resource in resources.items()
        if isinstance(resource, dict) and resource.get("Type") in ("AWS::Serverless::Function", "AWS::Lambda::Function")
    )


def _no_function(args: argparse.Namespace, name: str) -> str:
    if args.aws:
        return f"no function {name} on AWS (with --aws, name the deployed function, e.g. from `sam list resources`)"
    functions = _template_functions()
    if not functions:
        return f"no function {name} (use a logical id of template.yaml, e.g. ScenarioFunction)"
    import difflib

    by_lower = {f.lower(): f for f in functions}
    close = [f for f in functions if name and f.lower().startswith(name.lower())]
    close = close or [by_lower[f] for f in difflib.get_close_matches(name.lower(), by_lower, n=1, cutoff=0.8)]
    hint = f" (did you mean {close[0]}?)" if len(close) == 1 else ""
    return f"no function {name}{hint}; the template has: {', '.join(functions)}"


def _invoke_once(args: argparse.Namespace, client: Any, endpoint: str, name: str, payload: bytes) -> Any:
    """One synchronous invocation; ``None`` after printing one line when it could not run."""
    from botocore.exceptions import BotoCoreError, ClientError, EndpointConnectionError

    try:
        return client.invoke(FunctionName=name, InvocationType="RequestResponse", Payload=payload)
    except client.exceptions.ResourceNotFoundException:
        print(f"error: {_no_function(args, name)}", file=sys.stderr)
    except EndpointConnectionError:
        where = "AWS Lambda" if args.aws else f"the Lambda Invoke API at {endpoint}"
        hint = (
            ""
            if args.aws
            else " (is `make run` running? Its port: LAMBDA_PORT, $MEMORY_HUB_LAMBDA_ENDPOINT or --lambda-endpoint)"
        )
        print(f"error: cannot reach {where}{hint}", file=sys.stderr)
    except ClientError as exc:
        error = exc.response.get("Error") or {}
        status = (exc.response.get("ResponseMetadata") or {}).get("HTTPStatusCode")
        text = error.get("Message") or error.get("Code") or str(exc)
        print(f"error: cannot invoke {name}: {status or ''} {text}".replace("  ", " "), file=sys.stderr)
    except BotoCoreError as exc:
        print(f"error: cannot invoke {name}: {exc}", file=sys.stderr)
    return None


def _openapi(args: argparse.Namespace) -> int:
    """Regenerate (or, with --check, compare) the shipped OpenAPI document and docs/API.md."""
    from memory_hub.edge.public import SPEC_FILE

    from .openapi import REFERENCE_FILE, generate, reference

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


# --- operator commands over the HTTP API ------------------------------------------------------------
#
# Exit codes: 0 done; 1 the API refused or nothing was deleted (not found, conflict, aborted);
# 2 usage error, or a destructive command refused because nobody confirmed it (no terminal, no --yes).

EXIT_OK, EXIT_FAILED, EXIT_REFUSED = 0, 1, 2
LOOKUP_PAGES = 10  # how many pages of 100 a terminal confirmation reads to show a record by id


class UsageError(Exception):
    """A command line the CLI will not run (exit code 2)."""


def _client(args: argparse.Namespace) -> MemoryHubClient:
    from .client import MemoryHubClient

    return MemoryHubClient(args.endpoint, args.api_key, args.service_id, timeout=args.timeout)


def _say(args: argparse.Namespace, text: str = "") -> None:
    """Human text: stdout, or stderr under --json (stdout then carries only JSON)."""
    print(text, file=sys.stderr if getattr(args, "json", False) else sys.stdout, flush=True)


def _emit_json(data: Any) -> None:
    print(json.dumps(data, indent=2, ensure_ascii=False))


def _quote(text: Any) -> str:
    """Show text exactly: quoted, with whitespace and control characters visible ("Hello" vs "Hello ")."""
    return json.dumps("" if text is None else text, ensure_ascii=False)


def _is_terminal() -> bool:
    try:
        return bool(sys.stdin.isatty())
    except (AttributeError, ValueError):
        return False


def _ask(args: argparse.Namespace, prompt: str) -> str | None:
    stream = sys.stderr if args.json else sys.stdout
    stream.write(prompt)
    stream.flush()
    try:
        return sys.stdin.readline().rstrip("\r\n") if args.json else input()
    except EOFError:
        return None


def _refuse_without_terminal(what: str) -> int:
    print(
        f"refused: {what} needs confirmation. Run it on a terminal to review and confirm, "
        "or pass --yes once you have reviewed exactly what it deletes.",
        file=sys.stderr,
    )
    return EXIT_REFUSED


def _scope(args: argparse.Namespace) -> tuple[str, str, str]:
    missing = [
        flag for flag, value in (("--team", args.team), ("--agent", args.agent), ("--user", args.user)) if not value
    ]
    if missing:
        raise UsageError(
            f"{', '.join(missing)} required (or MEMORY_HUB_TEAM_ID / MEMORY_HUB_AGENT_ID / MEMORY_HUB_USER_ID)"
        )
    return args.team, args.agent, args.user


def _kind(record_id: str) -> str:
    if record_id.startswith("atom-"):
        return "l1"
    if record_id.startswith("msg-"):
        return "l0"
    raise UsageError(
        f"--id {record_id!r}: expected an L1 record id (atom-…) or an L0 message id (msg-…); "
        "find it with `memory-hub search`"
    )


def _record_lines(record: dict[str, Any], layer: str) -> list[str]:
    if layer == "l0":
        head = [
            record.get("id", "?"),
            "v1",
            record.get("role") or "?",
            f"session {record.get('session_id')}",
            record.get("timestamp") or "",
        ]
        if record.get("score") is not None:
            head.append(f"score {record['score']:.3f}")
        return ["  ".join(str(x) for x in head if x != ""), f"  content: {_quote(record.get('content'))}"]
    head = [
        record.get("id", "?"),
        f"v{record.get('version')}",
        record.get("type") or "?",
        f"updated {record.get('updated_at')}",
    ]
    if record.get("score") is not None:
        head.append(f"score {record['score']:.3f}")
    lines = [
        "  ".join(str(x) for x in head),
        f"  context: {_quote(record.get('background'))}",
        f"  tags:    {', '.join(record.get('tags') or []) or '-'}",
        f"  content: {_quote(record.get('content'))}",
    ]
    if record.get("reinforced_count") not in (None, 1):
        lines.insert(3, f"  reinforced: {record['reinforced_count']} times")
    return lines


def _receipt(args: argparse.Namespace, data: dict[str, Any]) -> None:
    if args.json:
        _emit_json(data)
        return
    _say(args, f"deleted:   {', '.join(data.get('deleted_ids') or []) or '(none)'}")
    _say(args, f"not found: {', '.join(data.get('not_found_ids') or []) or '(none)'}")
    _say(args, f"audit ids: {', '.join(data.get('audit_ids') or []) or '(none)'}")


def _search(args: argparse.Namespace) -> int:
    team, agent, user = _scope(args)
    client = _client(args)
    if args.layer == "l0":
        if args.type:
            raise UsageError("--type applies to L1 records only")
        data = client.conversation_search(team, agent, user, args.query, session_id=args.session, limit=args.limit)
        hits = data.get("messages") or []
    else:
        data = client.atomic_search(team, agent, user, args.query, type=args.type, limit=args.limit)
        hits = data.get("items") or []
    if args.json:
        _emit_json(data)
        return EXIT_OK
    if not hits:
        _say(args, "no matches")
    for n, hit in enumerate(hits):
        if n:
            _say(args)
        for line in _record_lines(hit, args.layer):
            _say(args, line)
    return EXIT_OK


def _lookup(
    args: argparse.Namespace, client: Any, team: str, agent: str, user: str, record_id: str
) -> dict[str, Any] | None:
    try:
        found: dict[str, Any] | None = client.find_record(team, agent, user, record_id, max_pages=LOOKUP_PAGES)
        return found
    except MemoryHubError as exc:  # showing the record is a courtesy; the delete itself is still by id
        _say(args, f"(could not look the record up: {exc})")
        return None


def _delete(args: argparse.Namespace) -> int:
    from .client import ApiError

    team, agent, user = _scope(args)
    record_id = args.id.strip()
    layer = _kind(record_id)
    expected = args.expected_version
    if layer == "l0" and expected not in (None, 1):
        raise UsageError("--expected-version: messages are never edited, their version is always 1")
    if expected is not None and expected < 1:
        raise UsageError("--expected-version: versions start at 1")
    client = _client(args)
    if not args.yes:
        if not _is_terminal():
            return _refuse_without_terminal("delete")
        record = _lookup(args, client, team, agent, user, record_id)
        if record is None:
            _say(
                args,
                f"{record_id} is not among the newest {LOOKUP_PAGES * 100} records of "
                f"{team}/{agent}/{user}, so it cannot be shown here.",
            )
            _say(args, f"  id: {record_id}   expected version: {expected if expected is not None else 'any'}")
        else:
            _say(args, "This record will be deleted:")
            for line in _record_lines(record, layer):
                _say(args, "  " + line)
            if layer == "l1":
                current = int(record.get("version") or 0)
                if expected is not None and expected != current:
                    _say(
                        args,
                        f"It is now at version {current}, not {expected}: it changed since you "
                        "looked. Review it again (it is shown above) and rerun with the version you "
                        "confirm.",
                    )
                    return EXIT_FAILED
                expected = current  # delete exactly what was shown, not a later edit of it
        if (_ask(args, "Delete exactly this id? Type yes to confirm: ") or "").strip().lower() != "yes":
            _say(args, "aborted: nothing was deleted")
            return EXIT_FAILED
    try:
        if layer == "l0":
            data = client.conversation_delete(team, agent, user, [record_id])
        else:
            data = client.atomic_delete(
                team, agent, user, [record_id], {record_id: expected} if expected is not None else None
            )
    except ApiError as exc:
        if exc.code == 409 and isinstance(exc.data, dict) and exc.data.get("conflicts"):
            for conflict in exc.data["conflicts"]:
                print(
                    f"conflict: {conflict.get('id')} is at version {conflict.get('actual')}, "
                    f"not {conflict.get('expected')}: it was edited since it was shown. Nothing was "
                    "deleted; search again, review the current text, and delete with its new version.",
                    file=sys.stderr,
                )
            if args.json:
                _emit_json({"error": exc.as_dict()})
            return EXIT_FAILED
        raise
    _receipt(args, data)
    return EXIT_OK if record_id in (data.get("deleted_ids") or []) else EXIT_FAILED


def _pair(args: argparse.Namespace) -> tuple[str, str] | None:
    """--team and --agent: which pair a memory id means when several spell it (they go together)."""
    team, agent = getattr(args, "team", None), getattr(args, "agent", None)
    if team is None and agent is None:
        return None
    if team is None or agent is None:
        raise UsageError("--team and --agent go together")
    return team.strip(), agent.strip()


def _add_pair(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--team", default=None, help="with --agent: the pair, when several spell the memory id")
    parser.add_argument("--agent", default=None, help="with --team: the pair, when several spell the memory id")


def _clear(args: argparse.Namespace) -> int:
    memory_id = args.memory_id.strip()
    pair = _pair(args)
    client = _client(args)
    if not args.yes:
        if not _is_terminal():
            return _refuse_without_terminal("clear")
        try:
            asset = client.memory_get(memory_id, pair)
            counts = asset.get("counts") or {}
            _say(
                args,
                f"{memory_id} (team {asset.get('team_id')}, agent {asset.get('agent_id')}) holds "
                f"L0 {counts.get('l0', '?')}, L1 {counts.get('l1', '?')}, L2 {counts.get('l2', '?')}, "
                f"L3 {counts.get('l3', '?')}.",
            )
        except MemoryHubError as exc:
            _say(args, f"(could not read {memory_id}: {exc})")
        _say(
            args,
            "Clear deletes every message, record, scene file and persona of this memory, for all its "
            "users (the asset itself stays). This cannot be undone.",
        )
        if (_ask(args, "Type the memory id to confirm: ") or "").strip() != memory_id:
            _say(args, "aborted: the memory id was not retyped exactly; nothing was cleared")
            return EXIT_FAILED
    data = client.chat_memory_clear([memory_id], pair=pair)
    if args.json:
        _emit_json(data)
    else:
        for item in data.get("items") or []:
            if item.get("cleared"):
                _say(args, f"{item.get('memory_id')}: cleared")
                _say(
                    args,
                    f"  l0_deleted {item.get('l0_deleted')}  l1_deleted {item.get('l1_deleted')}  "
                    f"l2_deleted {item.get('l2_deleted')}  l3_deleted {item.get('l3_deleted')}  "
                    f"profile_deleted {item.get('profile_deleted')}  "
                    f"files_deleted {item.get('files_deleted')}",
                )
                if item.get("purge_pending"):
                    _say(args, "  purge_pending: storage is still being purged in the background")
            else:
                _say(
                    args,
                    f"{item.get('memory_id')}: NOT cleared ({item.get('reason')}; retryable {item.get('retryable')})",
                )
            _say(args, f"  audit ids: {', '.join(item.get('audit_ids') or []) or '(none)'}")
    return EXIT_OK if data.get("all_cleared") else EXIT_FAILED


def _user_memory_delete(args: argparse.Namespace) -> int:
    memory_id, user_id = args.memory_id.strip(), args.user
    pair = _pair(args)
    content_id = args.content_id.strip() if args.content_id is not None else None
    if content_id is not None:
        _kind(content_id)
    client = _client(args)
    if not args.yes:
        if not _is_terminal():
            return _refuse_without_terminal("user-memory delete")
        asset = None
        try:
            asset = client.memory_get(memory_id, pair)
        except MemoryHubError as exc:
            _say(args, f"(could not read {memory_id}: {exc})")
        if content_id is None:
            _say(
                args,
                f"This erases EVERY L0 message and L1 record of user {_quote(user_id)} in {memory_id} "
                "(the agent's L2 scenes and L3 persona stay). This cannot be undone.",
            )
            if (_ask(args, "Type the user id to confirm: ") or "") != user_id:
                _say(args, "aborted: the user id was not retyped exactly; nothing was deleted")
                return EXIT_FAILED
        else:
            record = None
            if asset is not None:
                record = _lookup(args, client, asset["team_id"], asset["agent_id"], user_id, content_id)
            if record is None:
                _say(args, f"{content_id} of user {_quote(user_id)} cannot be shown here; it will be deleted by id.")
            else:
                _say(args, "This record will be deleted:")
                for line in _record_lines(record, _kind(content_id)):
                    _say(args, "  " + line)
            if (_ask(args, "Delete exactly this id? Type yes to confirm: ") or "").strip().lower() != "yes":
                _say(args, "aborted: nothing was deleted")
                return EXIT_FAILED
    data = client.user_memory_delete(memory_id, user_id, content_id, pair)
    if args.json:
        _emit_json(data)
    elif content_id is None:
        _say(
            args,
            f"{memory_id} user {_quote(user_id)}: l0_deleted {data.get('l0_deleted')}  "
            f"l1_deleted {data.get('l1_deleted')}",
        )
        _say(args, f"audit ids: {', '.join(data.get('audit_ids') or []) or '(none)'}")
    else:
        _receipt(args, data)
    if content_id is not None:
        return EXIT_OK if content_id in (data.get("deleted_ids") or []) else EXIT_FAILED
    return EXIT_OK


def _keys_create(args: argparse.Namespace) -> int:
    data = _client(args).keys_create(args.role, args.team or None, args.name)
    if args.json:
        _emit_json(data)
        return EXIT_OK
    _say(args, f"key_id   {data.get('key_id')}")
    _say(args, f"api_key  {data.get('api_key')}")
    _say(args, f"role     {data.get('role')}")
    _say(args, f"teams    {', '.join(data.get('team_ids') or [])}")
    if data.get("name"):
        _say(args, f"name     {data.get('name')}")
    _say(args, "The api_key is shown only now: store it safely.")
    return EXIT_OK


def _keys_list(args: argparse.Namespace) -> int:
    data = _client(args).keys_list()
    if args.json:
        _emit_json(data)
        return EXIT_OK
    for key in data.get("keys") or []:
        state = "REVOKED" if key.get("revoked") else "active"
        teams = ",".join(key.get("team_ids") or [])
        _say(
            args,
            f"{key.get('key_id')}  {key.get('role')}  {state}  teams={teams}"
            f"  created {key.get('created_at')}  name={_quote(key.get('name'))}",
        )
    return EXIT_OK


def _keys_revoke(args: argparse.Namespace) -> int:
    data = _client(args).keys_revoke(args.key_id)
    if args.json:
        _emit_json(data)
    else:
        _say(args, f"{data.get('key_id')}: revoked")
    return EXIT_OK


def _audit(args: argparse.Namespace) -> int:
    data = _client(args).audit_query(args.memory_id, args.action, args.limit, args.next_token)
    if args.json:
        _emit_json(data)
        return EXIT_OK
    for event in data.get("events") or []:
        _say(
            args,
            "  ".join(
                str(x)
                for x in (
                    event.get("at"),
                    event.get("action"),
                    event.get("layer"),
                    event.get("target") or "-",
                    f"count={event.get('count')}",
                    f"actor={event.get('actor')}",
                    event.get("memory_id") or "-",
                    event.get("request_id") or "-",
                    event.get("event_id"),
                )
            ),
        )
    if data.get("next_token"):
        print(f"more: --next-token {data['next_token']}", file=sys.stderr)
    return EXIT_OK


def _export(args: argparse.Namespace) -> int:
    from . import transfer

    if args.shared and args.user is None:
        raise UsageError("--shared goes with --user (a whole memory's export always holds L2/L3)")
    answer = transfer.export(
        _client(args),
        args.memory_id.strip(),
        Path(args.out),
        user_id=args.user,
        shared=args.shared,
        progress=lambda text: print(text, file=sys.stderr),
        pair=_pair(args),
    )
    if args.json:
        _emit_json({k: v for k, v in answer.items() if k != "url"})
        return EXIT_OK
    _say(args, f"exported {answer['memory_id']} into {args.out}: {transfer.counts_line(answer['counts'])}")
    return EXIT_OK


def _import(args: argparse.Namespace) -> int:
    from . import transfer

    if (args.from_team is None) != (args.from_agent is None):
        raise UsageError("--from-team and --from-agent go together")
    try:
        answer = transfer.import_tree(
            _client(args),
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
        _emit_json(answer)
        return EXIT_OK
    _say(
        args,
        f"imported into {answer['memory_id']}: {transfer.counts_line(answer['counts'])}"
        f"  (already there: {transfer.counts_line(answer.get('skipped', {}))})",
    )
    return EXIT_OK


def scheduled_event(region: str) -> dict[str, Any]:
    """The payload EventBridge sends for a scheduled rule."""
    import uuid
    from datetime import datetime

    return {
        "version": "0",
        "id": str(uuid.uuid4()),
        "detail-type": "Scheduled Event",
        "source": "aws.events",
        "account": "123456789012",
        "time": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "region": region,
        "resources": [],
        "detail": {},
    }


def lambda_endpoint(args: argparse.Namespace) -> str:
    """The running stack's Lambda Invoke API: --lambda-endpoint, else $MEMORY_HUB_LAMBDA_ENDPOINT, else
    http://127.0.0.1:$LAMBDA_PORT (the port `make run` serves it on; 3001 by default)."""
    endpoint = args.lambda_endpoint or os.environ.get("MEMORY_HUB_LAMBDA_ENDPOINT")
    if not endpoint:
        port = (os.environ.get("LAMBDA_PORT") or "").strip() or "3001"
        if not port.isdigit() or not 0 < int(port) < 65536:
            raise UsageError(f"LAMBDA_PORT={port!r} is not a port number")
        endpoint = f"http://127.0.0.1:{int(port)}"
    if not endpoint.startswith(("http://", "https://")):
        raise UsageError(f"Lambda endpoint {endpoint!r}: expected http://host:port")
    return endpoint.rstrip("/")


def _lambda_client(args: argparse.Namespace) -> tuple[Any, str, str]:
    """A Lambda client, the region, and where it points (for messages)."""
    import boto3
    from botocore.config import Config

    region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"
    config = Config(read_timeout=960, connect_timeout=10, retries={"max_attempts": 0})
    if args.aws:
        return boto3.client("lambda", region_name=region, config=config), region, "AWS Lambda"
    # The local stack's Invoke API (like `sam local start-lambda`) ignores the signature: static
    # placeholder credentials, so no real ones are ever looked up or sent to it.
    endpoint = lambda_endpoint(args)
    client = boto3.client(
        "lambda",
        endpoint_url=endpoint,
        region_name=region,
        config=config,
        aws_access_key_id="local",
        aws_secret_access_key="local",  # noqa: S106 - the local Invoke API checks no signature
    )
    return client, region, endpoint


def _cleanup(args: argparse.Namespace) -> int:
    if args.aws and args.lambda_endpoint:
        raise UsageError("--aws and --lambda-endpoint exclude each other")
    if args.max_runs < 1:
        raise UsageError("--max-runs: at least 1")
    client, region, endpoint = _lambda_client(args)
    for run in range(1, args.max_runs + 1):
        payload = json.dumps(scheduled_event(region)).encode()
        response = _invoke_once(args, client, endpoint, args.function_name, payload)
        if response is None:
            return EXIT_FAILED
        raw = response["Payload"].read()
        try:
            result = json.loads(raw or b"null")
        except ValueError:
            result = raw.decode("utf-8", "replace")
        if response.get("FunctionError"):
            message = result.get("errorMessage") if isinstance(result, dict) else result
            print(f"error: run {run}: {args.function_name} failed: {message}", file=sys.stderr)
            return EXIT_FAILED
        if args.json:
            print(json.dumps(result, ensure_ascii=False), flush=True)
        else:
            _say(args, f"run {run}: {json.dumps(result, ensure_ascii=False)}")
        if not isinstance(result, dict) or result.get("done") is not False:
            return EXIT_OK
    print(f"error: work left after {args.max_runs} runs; run cleanup again to continue", file=sys.stderr)
    return EXIT_FAILED


def _mcp(args: argparse.Namespace) -> int:
    try:
        from .mcp_server import main as serve_mcp
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


def _connection_flags() -> argparse.ArgumentParser:
    parent = argparse.ArgumentParser(add_help=False)
    group = parent.add_argument_group("connection")
    group.add_argument(
        "--endpoint", default=None, help="API base URL (default: $MEMORY_HUB_ENDPOINT or http://127.0.0.1:3000)"
    )
    group.add_argument("--api-key", default=None, help="API key (default: $MEMORY_HUB_API_KEY)")
    group.add_argument("--service-id", default=None, help="service id (default: $MEMORY_HUB_SERVICE_ID or 'default')")
    group.add_argument("--timeout", type=_seconds, default=30.0, help="seconds per request (default 30)")
    group.add_argument("--json", action="store_true", help="print the raw JSON data (for scripts)")
    return parent


def _scope_flags() -> argparse.ArgumentParser:
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


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError("must be more than 0")
    return value


class _Parser(argparse.ArgumentParser):
    """argparse, with a usage error as one line (and the place to read more)."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_REFUSED, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")


def _add_operator_commands(sub: Any) -> None:
    conn, scope = _connection_flags(), _scope_flags

    search = sub.add_parser(
        "search",
        parents=[conn, scope()],
        help="find records to review (L1 or L0)",
        description="Search one user's L1 records (default) or L0 messages and print "
        "each hit's id, version, type, context, tags and exact content.",
    )
    search.add_argument("query")
    search.add_argument("--layer", choices=("l1", "l0"), default="l1")
    search.add_argument("--type", default=None, help="L1 record type filter")
    search.add_argument("--session", default=None, help="L0 only: narrow to one session")
    search.add_argument("--limit", type=_positive, default=None, help="1-100 (API default 5)")
    search.set_defaults(run=_search)

    delete = sub.add_parser(
        "delete",
        parents=[conn, scope()],
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
    _add_pair(clear)
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
    _add_pair(um_delete)
    um_delete.set_defaults(run=_user_memory_delete)

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
    audit.add_argument("--limit", type=_positive, default=None, help="1-100 (API default 20)")
    audit.add_argument("--next-token", default=None)
    audit.set_defaults(run=_audit)

    cleanup = sub.add_parser(
        "cleanup",
        help="run the scheduled retention cleanup now (Lambda Invoke API)",
        description="Invoke the cleanup function with a scheduled-event payload, again while it answers "
        "done=false (at most --max-runs times), printing each result.",
    )
    cleanup.add_argument(
        "--lambda-endpoint",
        default=None,
        help="Lambda Invoke API (default: $MEMORY_HUB_LAMBDA_ENDPOINT or "
        "http://127.0.0.1:$LAMBDA_PORT, the running stack's; LAMBDA_PORT defaults to 3001)",
    )
    cleanup.add_argument(
        "--aws",
        action="store_true",
        help="use AWS's own Lambda endpoint and your AWS configuration "
        "(then --function-name is the deployed function's name)",
    )
    cleanup.add_argument("--function-name", default="CleanupFunction")
    cleanup.add_argument("--max-runs", type=_positive, default=10, help="at most this many invocations (10)")
    cleanup.add_argument("--json", action="store_true", help="one JSON result per line")
    cleanup.set_defaults(run=_cleanup)

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
    _add_pair(export)
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

    from . import browse

    browse.add_commands(sub, conn, scope(), _positive)

    mcp = sub.add_parser(
        "mcp",
        parents=[conn, scope()],
        help="serve memory tools over MCP (stdio): search, add, ID-based erasure",
        description="An MCP server (stdio) with search_memory (read-only), add_memory (one L1 record), "
        "and the erasure tools search_for_deletion and delete_memory (by id and version only; no delete "
        "by content). Team/agent/user flags (or MEMORY_HUB_TEAM_ID/AGENT_ID/USER_ID) are the "
        "defaults; each tool call may override them.",
    )
    mcp.set_defaults(run=_mcp)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="memory-hub", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    local = sub.add_parser("local", help="serve the API over embedded moto (what `make run` runs)", add_help=False)
    local.add_argument("local_args", nargs=argparse.REMAINDER)
    local.set_defaults(run=_local)
    invoke = sub.add_parser(
        "invoke", help="run one function of the running stack with one event (like `sam local invoke`)"
    )
    invoke.add_argument("function", help="logical id in template.yaml, e.g. ScenarioFunction")
    invoke.add_argument("event", help="event JSON file (or - for stdin)")
    invoke.add_argument(
        "--lambda-endpoint",
        default=None,
        help="Lambda Invoke API (default: $MEMORY_HUB_LAMBDA_ENDPOINT or "
        "http://127.0.0.1:$LAMBDA_PORT, the running stack's)",
    )
    invoke.add_argument(
        "--api-key",
        default=None,
        help="put this key into the event's Authorization header (default: $MEMORY_HUB_API_KEY; "
        "without either, the event's own)",
    )
    invoke.add_argument("--aws", action="store_true", help="invoke the deployed function on AWS instead")
    invoke.set_defaults(run=_invoke)
    spec = sub.add_parser("openapi", help="regenerate the shipped OpenAPI document and docs/API.md")
    spec.add_argument("--check", action="store_true", help="fail if the shipped file is out of date")
    spec.set_defaults(run=_openapi)
    _add_operator_commands(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["local"]:  # every further argument is the local stack's own (argparse's
        return _local(argparse.Namespace(local_args=argv[1:]))  # REMAINDER refuses leading options)
    parser = build_parser()
    args = parser.parse_args(argv)
    from .client import ApiError, MemoryHubError

    try:
        return int(args.run(args) or 0)
    except UsageError as exc:
        print(f"memory-hub {args.command}: error: {exc}", file=sys.stderr)
        return EXIT_REFUSED
    except ApiError as exc:
        details = f" (details: {json.dumps(exc.data, ensure_ascii=False)})" if exc.data is not None else ""
        print(f"error: {exc}{details}", file=sys.stderr)
        if "memory_id ambiguous" in str(exc):
            print(
                "hint: several (team, agent) pairs spell this memory id: name one with --team and --agent",
                file=sys.stderr,
            )
        if getattr(args, "json", False):
            _emit_json({"error": exc.as_dict()})
        return EXIT_FAILED
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


if __name__ == "__main__":  # `python -m memory_hub_tools.cli`: run the package's module, not a second copy
    from memory_hub_tools.cli import main as package_main  # (so its exceptions are the ones caught above)

    raise SystemExit(package_main())
