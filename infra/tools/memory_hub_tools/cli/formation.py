"""``formation-status`` and ``form``: where memory formation stands for one user, and asking it to
run now (``/v3/formation/status``, ``/v3/formation/run``). Formation forms L1 records (and with
``formation: all`` scenes and a persona) from the user's conversation; it is off when the deployment
or the memory's asset has it off, and then ``form`` is refused (409 ``formation: off``)."""

from __future__ import annotations

import argparse
from typing import Any

from memory_hub.domain.results import FormationStatus

from .common import EXIT_OK, api_client, emit_json, say, scope_of
from .flags import scope_flags


def status_lines(status: FormationStatus, session: str | None = None) -> list[str]:
    """A person's view of ``formation/status``: configuration first, then where it stands."""
    setting = f"on ({status.layers})" if status.enabled else f"off (this memory's setting: {status.layers})"
    error = status.last_error
    pending = f"{status.pending_messages}{f' in session {session}' if session is not None else ''}"
    return [
        f"formation:        {setting}",
        f"model:            {status.model or '-'}",
        f"state:            {status.state}",
        f"pending messages: {pending}",
        f"last run:         {status.last_run_at or 'never'}",
        f"last formed:      {status.last_formed_message_id or '-'}",
        f"records formed:   {status.records_formed}",
        f"dropped entries:  {status.dropped}",
        f"last error:       {f'{error.at} {error.kind}: {error.message}' if error else '-'}",
    ]


def _status(args: argparse.Namespace) -> int:
    team, agent, user = scope_of(args)
    status = api_client(args).formation_status(team, agent, user, session_id=args.session)
    if args.json:
        emit_json(status.wire())
        return EXIT_OK
    for line in status_lines(status, args.session):
        say(args, line)
    return EXIT_OK


def _form(args: argparse.Namespace) -> int:
    team, agent, user = scope_of(args)
    run = api_client(args).formation_run(
        team, agent, user, session_id=args.session, backfill=True if args.backfill else None
    )
    if args.json:
        emit_json(run.wire())
        return EXIT_OK
    if run.state == "idle" and run.pending_messages == 0:
        say(args, "nothing to form: no unformed messages" + (" (try --backfill)" if not args.backfill else ""))
    else:
        say(args, f"formation {run.state}: {run.pending_messages} pending message(s)")
    return EXIT_OK


def add_commands(sub: Any, conn: argparse.ArgumentParser) -> None:
    """formation-status and form."""
    status = sub.add_parser(
        "formation-status",
        parents=[conn, scope_flags()],
        help="where memory formation stands for one user",
        description="/v3/formation/status: whether formation is on for this memory (and which layers), the "
        "model, the state (idle, queued, running, paused), the user's unformed messages (--session narrows "
        "them), the last run, the records formed, the entries dropped and the last error.",
    )
    status.add_argument("--session", default=None, help="count only this session's unformed messages")
    status.set_defaults(run=_status)

    form = sub.add_parser(
        "form",
        parents=[conn, scope_flags()],
        help="form memory from one user's conversation now",
        description="/v3/formation/run: queue a run for the user's unformed messages now (a paused formation "
        "resumes). Refused (409 formation: off, exit 1) when the deployment or the memory has formation off.",
    )
    form.add_argument("--session", default=None, help="only this session's messages")
    form.add_argument(
        "--backfill",
        action="store_true",
        help="also form messages never queued (added while formation was off, or imported)",
    )
    form.set_defaults(run=_form)
