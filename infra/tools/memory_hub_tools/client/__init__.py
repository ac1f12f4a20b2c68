"""The typed client of the Memory Hub API: one method per route, built on the request and answer
models (``memory_hub.edge.schemas``, ``memory_hub.domain.results*``).

Used by the ``memory-hub`` operator commands and by the MCP server; the bench and the API tests
send through the same :class:`~memory_hub_tools.transport.Transport` (URLs, headers, replies).
Every route is a ``POST`` of a JSON object answered by the envelope
``{code, message, request_id, data}`` (docs/API.md): :func:`data_of` reads it, :meth:`call` returns
``data`` as JSON values or raises :class:`ApiError`, and each route's method (``atomic_add``,
``formation_status``, …) takes exactly its request model's fields — ``team_id, agent_id, user_id``
first on the isolated routes, every other field a keyword — and returns its answer model (a field
the API adds reaches every caller). ``tests/contract/test_client_contract.py`` holds the methods to
the models and to ``memory_hub.edge.routes.ROUTES``.

    base    the connection, the envelope, ApiError, sending a method's parameters as a body
    data    the data plane: scenario, core, conversation, atomic, formation
    admin   erasure, clear, assets, keys, audit, export and import, the DeleteUserMemory alias

Configuration (explicit arguments win over the environment):

* ``MEMORY_HUB_ENDPOINT``   — base URL, default ``http://127.0.0.1:3000`` (the local stack)
* ``MEMORY_HUB_API_KEY``    — the API key (sent as ``Authorization: Bearer <key>``)
* ``MEMORY_HUB_SERVICE_ID`` — the deployment's service id, default ``default``
"""

from __future__ import annotations

from collections.abc import Iterator

from memory_hub.domain.fields import MAX_OFFSET
from memory_hub.domain.results import MessageItem, RecordItem
from memory_hub.domain.scope import Scope

from .admin import AdminRoutes
from .base import (
    DEFAULT_ENDPOINT,
    DEFAULT_SERVICE_ID,
    DEFAULT_TIMEOUT,
    UNSET,
    ApiError,
    ConfigError,
    MemoryHubError,
    Pair,
    TransportError,
    Unset,
    data_of,
    pair_fields,
)
from .data import DataRoutes

__all__ = [
    "DEFAULT_ENDPOINT",
    "DEFAULT_SERVICE_ID",
    "DEFAULT_TIMEOUT",
    "MAX_OFFSET",
    "UNSET",
    "ApiError",
    "ConfigError",
    "MemoryHubClient",
    "MemoryHubError",
    "Pair",
    "TransportError",
    "Unset",
    "data_of",
    "memory_id_for",
    "pair_fields",
]


class MemoryHubClient(DataRoutes, AdminRoutes):
    """Calls the API's routes; one instance per endpoint + key + service id."""

    def find_record(
        self,
        team_id: str,
        agent_id: str,
        user_id: str,
        record_id: str,
        max_pages: int = 10,
        page_size: int = 100,
        *,
        session_id: str | None = None,
        type: str | None = None,
    ) -> MessageItem | RecordItem | None:
        """Look one L1 record (``atom-…``) or L0 message (``msg-…``) up by id, paging through
        ``atomic/query`` / ``conversation/query`` (at most ``max_pages`` pages, newest first; the API
        has no get-by-id route); ``None`` if not seen. ``session_id`` (L0) and ``type`` (L1) narrow
        the pages read, so an older item is reached in fewer requests."""
        for item in self._walk(team_id, agent_id, user_id, record_id, max_pages, page_size, session_id, type):
            if item.id == record_id:
                return item
        return None

    def _walk(
        self,
        team_id: str,
        agent_id: str,
        user_id: str,
        record_id: str,
        max_pages: int,
        page_size: int,
        session_id: str | None = None,
        type: str | None = None,
    ) -> Iterator[MessageItem | RecordItem]:
        l0 = record_id.startswith("msg-")
        for page in range(max_pages):
            offset = page * page_size
            if offset > MAX_OFFSET:
                return
            batch: list[MessageItem] | list[RecordItem]
            if l0:
                messages = self.conversation_query(
                    team_id, agent_id, user_id, session_id=session_id, limit=page_size, offset=offset
                )
                batch, total = messages.messages, messages.total
            else:
                records = self.atomic_query(team_id, agent_id, user_id, type=type, limit=page_size, offset=offset)
                batch, total = records.items, records.total
            yield from batch
            if len(batch) < page_size or offset + len(batch) >= total:
                return


def memory_id_for(team_id: str, agent_id: str) -> str:
    """The chat memory asset id of a (team, agent) pair: ``chat_memory-<team_id>-<agent_id>``
    (the runtime's own formula)."""
    return Scope(team_id, agent_id, "").memory_id
