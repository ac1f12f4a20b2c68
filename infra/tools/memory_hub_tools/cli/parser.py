"""``memory-hub``: the local stack and the operator's command line.

Browse one user's memory with ``ls [l0|l1|l2|l3]`` and ``show ID_OR_PATH`` (read-only).
Erasure is by id only (there is no delete by content): find the record with ``search``, look at
it, then ``delete --id`` exactly that id, at the version you saw (``--expected-version``).
``formation-status`` and ``form`` show and start the forming of a user's memory from their conversation.
Connection: ``--endpoint``/``MEMORY_HUB_ENDPOINT`` (default http://127.0.0.1:3000),
``--api-key``/``MEMORY_HUB_API_KEY``, ``--service-id``/``MEMORY_HUB_SERVICE_ID`` (default ``default``).
``invoke`` and ``cleanup`` use the running stack's Lambda Invoke API: ``--lambda-endpoint``, else
``MEMORY_HUB_LAMBDA_ENDPOINT``, else http://127.0.0.1:$LAMBDA_PORT (default 3001).
Errors are one line on stderr; exit 0 done, 1 failed or refused by the API, 2 usage error.
"""

# The text above is `memory-hub --help`'s description (build_parser passes this module's docstring).

from __future__ import annotations

import argparse
from typing import NoReturn

from . import admin, browse, data, formation, invoke, local
from .common import EXIT_REFUSED
from .flags import connection_flags


class _Parser(argparse.ArgumentParser):
    """argparse, with a usage error as one line (and the place to read more)."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_REFUSED, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="memory-hub", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    conn = connection_flags()
    # the order of `memory-hub --help`'s command list
    local.add_local(sub)
    invoke.add_invoke(sub)
    local.add_openapi(sub)
    data.add_commands(sub, conn)
    admin.add_keys_and_audit(sub, conn)
    invoke.add_cleanup(sub)
    admin.add_transfer(sub, conn)
    browse.add_commands(sub, conn)
    formation.add_commands(sub, conn)
    local.add_mcp(sub, conn)
    local.add_scripted_model(sub)
    return parser
