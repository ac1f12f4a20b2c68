"""The emulated AWS side as its own process: ``python -m memory_hub_local.aws --port N …``.

It starts moto (in this process, patched), makes the template's resources (or restores them from
the data directory), serves them on the port, and prints one line ``READY {json}`` with the
secrets' ARNs. Every change is on disk before it is answered (``journal``); on SIGTERM or SIGINT, or
when the process that started it is gone, it ends a compaction under way and exits. A damaged
journal (``journal.Damaged``) stops the start with exit status 1, the data directory unchanged.
``--compact-upto N`` runs a compaction child instead."""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .server import AwsSide
    from .state import State

PARENT_POLL_S = 0.5

for name, value in {"AWS_ACCESS_KEY_ID": "local", "AWS_SECRET_ACCESS_KEY": "local"}.items():
    os.environ.setdefault(name, value)
for name in ("AWS_ENDPOINT_URL", "AWS_PROFILE", "AWS_SESSION_TOKEN"):
    os.environ.pop(name, None)


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="memory_hub_local.aws")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--region", default="us-east-1")
    parser.add_argument("--data-dir", default="")
    parser.add_argument("--test-hooks", action="store_true")
    parser.add_argument("--no-iam", action="store_true", help="do not enforce the functions' IAM policies")
    parser.add_argument("--compact-upto", type=int, help="(internal) write the snapshot of journal segments below N")
    parser.add_argument("--parent", type=int, default=0, help="(internal) the stack a compaction child belongs to")
    return parser.parse_args(argv)


def _aws_side(args: argparse.Namespace) -> tuple[State, AwsSide]:
    """Patched moto started, the template's resources made (or restored), and the AWS side over
    them that knows each function's access key and (unless --no-iam) its IAM policy."""
    from moto import mock_aws

    from .. import template
    from ..identity import access_key_of
    from . import moto_items, moto_patches
    from .hooks import Hooks
    from .server import AwsSide, Identity
    from .state import State

    moto_patches.install()
    moto_items.start_packing()  # before the snapshot is loaded: its items are held packed too
    mock = mock_aws()
    mock.start()
    cfn = template.expanded(args.region)
    names, _ = template.local_names(args.region, {})
    state = State(
        cfn,
        names,
        args.region,
        Path(args.data_dir) if args.data_dir else None,
        os.environ.get("MEMORY_HUB_BOOTSTRAP_ADMIN_KEY") or None,
    )
    state.create()
    deployment = template.deploy(args.region, state.secret_arns)
    identities = {
        access_key_of(f.logical_id): Identity(f.logical_id, None if args.no_iam else f.allows)
        for f in deployment.functions.values()
    }
    return state, AwsSide(state, args.region, identities, Hooks() if args.test_hooks else None)


def _serve(state: State, side: AwsSide, port: int, parent: int) -> int:
    """Recover from the journal, listen, say READY, and serve until SIGTERM or SIGINT."""
    from .server import make_server

    try:
        side.recover()
    except RuntimeError as exc:
        print(f"the emulated AWS side cannot start: {exc}", file=sys.stderr)
        return 1
    try:
        server = make_server(side, port)
    except OSError as exc:
        print(f"the emulated AWS side cannot listen on 127.0.0.1:{port}: {exc.strerror}", file=sys.stderr)
        return 1
    stop = threading.Event()
    saver = threading.Thread(target=side.keep_compacting, args=(stop,), daemon=True)
    saver.start()

    def finish(*_: object) -> None:
        stop.set()
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, finish)
    signal.signal(signal.SIGINT, finish)
    threading.Thread(target=_end_with_parent, args=(parent, finish), daemon=True, name="parent").start()
    ready = {
        "port": server.server_address[1],
        "secrets": state.secret_arns,
        "admin_key": state.secret_values.get("BootstrapAdminKeySecret"),
    }
    print("READY " + json.dumps(ready), flush=True)
    server.serve_forever()
    side.close()
    return 0


def _end_with_parent(parent: int, finish: Callable[[], None]) -> None:
    """The stack that started this process is gone (a SIGKILL, a closed terminal): finish as on
    SIGTERM instead of holding the port and the data directory's lock for nobody. Every answered
    change is already on disk. (Polled: Linux's parent-death signal follows the starting thread,
    not the process, and a stack may be started from any thread.)"""
    while os.getppid() == parent:
        time.sleep(PARENT_POLL_S)
    finish()


def _compact(side: AwsSide, upto: int) -> int:
    """The compaction child: a damaged closed segment is not folded in (the journal is kept whole)."""
    from .journal import Damaged

    try:
        return side.compact_child(upto)
    except Damaged as exc:
        print(f"the compaction cannot fold the journal in: {exc}", file=sys.stderr, flush=True)
        return 1


def main(argv: list[str] | None = None) -> int:
    parent = os.getppid()  # read first: a stack killed during the start-up is noticed too
    args = _arguments(argv)
    if args.compact_upto is not None:
        from .journal import die_with_parent

        die_with_parent(args.parent)
        os.nice(10)
    os.environ["AWS_DEFAULT_REGION"] = args.region
    state, side = _aws_side(args)
    if args.compact_upto is not None:
        return _compact(side, args.compact_upto)
    # Load the embedding model beside start-up, so the first write does not wait for it.
    from . import embedding_model

    threading.Thread(target=embedding_model.model, name="embedding-model", daemon=True).start()
    return _serve(state, side, args.port, parent)


if __name__ == "__main__":
    sys.exit(main())
