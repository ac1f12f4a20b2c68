"""The typed client of the Memory Hub API (standard library only).

Used by the ``memory-hub`` operator commands and by the MCP server; the bench and the API tests
send through the same :class:`~memory_hub_tools.transport.Transport` (URLs, headers, replies).
Every route is a ``POST`` of a JSON object answered by the envelope
``{code, message, request_id, data}`` (docs/API.md): :func:`data_of` reads it,
:meth:`MemoryHubClient.call` returns ``data`` or raises :class:`ApiError`, and there is one method
per route on top.

Configuration (explicit arguments win over the environment):

* ``MEMORY_HUB_ENDPOINT``   — base URL, default ``http://127.0.0.1:3000`` (the local stack)
* ``MEMORY_HUB_API_KEY``    — the API key (sent as ``Authorization: Bearer <key>``)
* ``MEMORY_HUB_SERVICE_ID`` — the deployment's service id, default ``default``
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

from memory_hub.domain.fields import MAX_OFFSET
from memory_hub.storage.layout import memory_id_of

from .transport import (
    DEFAULT_ENDPOINT,
    DEFAULT_SERVICE_ID,
    DEFAULT_TIMEOUT,
    ConfigError,
    MemoryHubError,
    Reply,
    Transport,
    TransportError,
)

__all__ = [
    "DEFAULT_ENDPOINT",
    "DEFAULT_SERVICE_ID",
    "DEFAULT_TIMEOUT",
    "MAX_OFFSET",
    "ApiError",
    "ConfigError",
    "MemoryHubClient",
    "MemoryHubError",
    "Pair",
    "TransportError",
    "data_of",
    "memory_id_for",
    "pair_fields",
]


class ApiError(MemoryHubError):
    """The API answered with an error envelope (``code`` = HTTP status)."""

    def __init__(
        self,
        code: int,
        message: str,
        *,
        data: Any = None,
        request_id: str | None = None,
        retryable: bool | None = None,
        path: str = "",
    ) -> None:
        self.code = code
        self.message = message
        self.data = data
        self.request_id = request_id
        self.retryable = retryable
        self.path = path
        where = f" on {path}" if path else ""
        rid = f" [{request_id}]" if request_id else ""
        super().__init__(f"{code} {message}{where}{rid}")

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"code": self.code, "message": self.message, "request_id": self.request_id}
        if self.data is not None:
            out["data"] = self.data
        if self.retryable is not None:
            out["retryable"] = self.retryable
        return out


def data_of(reply: Reply, path: str, endpoint: str) -> Any:
    """The envelope's ``data`` of a success; :class:`ApiError` for an error envelope,
    :class:`TransportError` for a reply that is not the envelope at all."""
    envelope = reply.envelope
    if envelope is None:
        what = "an envelope" if reply.is_json else "a JSON envelope"
        raise TransportError(
            f"{path}: HTTP {reply.status} without {what} (is {endpoint} Memory Hub's API?): {reply.raw[:200]!r}"
        )
    if envelope.get("code") != 0 or reply.status >= 400:
        code = envelope.get("code")
        code = code if isinstance(code, int) and code else reply.status
        raise ApiError(
            int(code),
            str(envelope.get("message") or ""),
            data=envelope.get("data"),
            request_id=envelope.get("request_id"),
            retryable=envelope.get("retryable"),
            path=path,
        )
    return envelope.get("data")


class MemoryHubClient:
    """Calls the API's routes; one instance per endpoint + key + service id."""

    def __init__(
        self,
        endpoint: str | None = None,
        api_key: str | None = None,
        service_id: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
        self.endpoint = (endpoint or os.environ.get("MEMORY_HUB_ENDPOINT") or DEFAULT_ENDPOINT).rstrip("/")
        self.api_key = api_key or os.environ.get("MEMORY_HUB_API_KEY") or None
        self.service_id = service_id or os.environ.get("MEMORY_HUB_SERVICE_ID") or DEFAULT_SERVICE_ID
        self.timeout = timeout
        self._transport: Transport | None = None

    # -- transport -------------------------------------------------------------------------------

    def call(
        self,
        path: str,
        body: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
        *,
        idempotency_key: str | None = None,
    ) -> Any:
        """POST ``body`` to ``path``; returns the envelope's ``data`` (raises :class:`ApiError`)."""
        reply = self.transport().post(path, body, headers, idempotency_key=idempotency_key)
        return data_of(reply, path, self.endpoint)

    def transport(self) -> Transport:
        """The connection this client sends with (checked: a key, printable headers, a URL)."""
        if not self.api_key:
            raise ConfigError("no API key: set MEMORY_HUB_API_KEY or pass --api-key")
        for name, value in (("API key", self.api_key), ("service id", self.service_id)):
            if not value.isascii() or not value.isprintable():
                raise ConfigError(f"the {name} must be printable ASCII (it is sent in an HTTP header)")
        wanted = (self.endpoint, self.api_key, self.service_id, self.timeout)
        kept = self._transport
        if kept is None or (kept.endpoint, kept.key, kept.service_id, kept.timeout) != wanted:
            self._transport = kept = Transport(*wanted)  # kept alive across calls: one connection per thread
        return kept

    def _object(
        self, path: str, body: dict[str, Any] | None = None, *, idempotency_key: str | None = None
    ) -> dict[str, Any]:
        """:meth:`call` for the routes whose ``data`` is a JSON object."""
        data: dict[str, Any] = self.call(path, body, idempotency_key=idempotency_key)
        return data

    # -- data plane ------------------------------------------------------------------------------

    @staticmethod
    def _scope(team_id: str, agent_id: str, user_id: str, **fields: Any) -> dict[str, Any]:
        body = {"team_id": team_id, "agent_id": agent_id, "user_id": user_id}
        body.update({k: v for k, v in fields.items() if v is not None})
        return body

    def atomic_add(self, team_id: str, agent_id: str, user_id: str, content: str, **fields: Any) -> dict[str, Any]:
        return self._object("/v3/atomic/add", self._scope(team_id, agent_id, user_id, content=content, **fields))

    def atomic_update(self, team_id: str, agent_id: str, user_id: str, id: str, **fields: Any) -> dict[str, Any]:
        return self._object("/v3/atomic/update", self._scope(team_id, agent_id, user_id, id=id, **fields))

    def atomic_search(
        self,
        team_id: str,
        agent_id: str,
        user_id: str,
        query: str,
        *,
        type: str | None = None,
        limit: int | None = None,
    ) -> dict[str, Any]:
        return self._object(
            "/v3/atomic/search", self._scope(team_id, agent_id, user_id, query=query, type=type, limit=limit)
        )

    def atomic_query(
        self,
        team_id: str,
        agent_id: str,
        user_id: str,
        *,
        type: str | None = None,
        limit: int | None = None,
        offset: int | None = None,
    ) -> dict[str, Any]:
        return self._object(
            "/v3/atomic/query", self._scope(team_id, agent_id, user_id, type=type, limit=limit, offset=offset)
        )

    def atomic_delete(
        self, team_id: str, agent_id: str, user_id: str, ids: list[str], expected_versions: dict[str, int] | None = None
    ) -> dict[str, Any]:
        return self._object(
            "/v3/atomic/delete",
            self._scope(team_id, agent_id, user_id, ids=list(ids), expected_versions=expected_versions),
        )

    def conversation_add(
        self, team_id: str, agent_id: str, user_id: str, session_id: str, messages: list[dict[str, Any]]
    ) -> dict[str, Any]:
        return self._object(
            "/v3/conversation/add", self._scope(team_id, agent_id, user_id, session_id=session_id, messages=messages)
        )

    def conversation_search(
        self,
        team_id: str,
        agent_id: str,
        user_id: str,
        query: str,
        *,
        session_id: str | None = None,
        limit: int | None = None,
    ) -> dict[str, Any]:
        return self._object(
            "/v3/conversation/search",
            self._scope(team_id, agent_id, user_id, query=query, session_id=session_id, limit=limit),
        )

    def conversation_query(
        self,
        team_id: str,
        agent_id: str,
        user_id: str,
        *,
        session_id: str | None = None,
        limit: int | None = None,
        offset: int | None = None,
    ) -> dict[str, Any]:
        return self._object(
            "/v3/conversation/query",
            self._scope(team_id, agent_id, user_id, session_id=session_id, limit=limit, offset=offset),
        )

    def conversation_count(
        self, team_id: str, agent_id: str, user_id: str, *, session_id: str | None = None
    ) -> dict[str, Any]:
        return self._object("/v3/conversation/count", self._scope(team_id, agent_id, user_id, session_id=session_id))

    def atomic_count(self, team_id: str, agent_id: str, user_id: str, *, type: str | None = None) -> dict[str, Any]:
        return self._object("/v3/atomic/count", self._scope(team_id, agent_id, user_id, type=type))

    def scenario_ls(
        self,
        team_id: str,
        agent_id: str,
        user_id: str,
        *,
        path_prefix: str | None = None,
        limit: int | None = None,
        next_token: str | None = None,
    ) -> dict[str, Any]:
        return self._object(
            "/v3/scenario/ls",
            self._scope(team_id, agent_id, user_id, path_prefix=path_prefix, limit=limit, next_token=next_token),
        )

    def scenario_read(self, team_id: str, agent_id: str, user_id: str, path: str) -> dict[str, Any]:
        return self._object("/v3/scenario/read", self._scope(team_id, agent_id, user_id, path=path))

    def scenario_count(
        self, team_id: str, agent_id: str, user_id: str, *, path_prefix: str | None = None
    ) -> dict[str, Any]:
        return self._object("/v3/scenario/count", self._scope(team_id, agent_id, user_id, path_prefix=path_prefix))

    def core_read(self, team_id: str, agent_id: str, user_id: str) -> dict[str, Any]:
        return self._object("/v3/core/read", self._scope(team_id, agent_id, user_id))

    def conversation_delete(self, team_id: str, agent_id: str, user_id: str, message_ids: list[str]) -> dict[str, Any]:
        return self._object(
            "/v3/conversation/delete", self._scope(team_id, agent_id, user_id, message_ids=list(message_ids))
        )

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
    ) -> dict[str, Any] | None:
        """Look one L1 record (``atom-…``) or L0 message (``msg-…``) up by id, paging through
        ``atomic/query`` / ``conversation/query`` (at most ``max_pages`` pages, newest first; the API
        has no get-by-id route); ``None`` if not seen. ``session_id`` (L0) and ``type`` (L1) narrow
        the pages read, so an older item is reached in fewer requests."""
        for item in self._walk(team_id, agent_id, user_id, record_id, max_pages, page_size, session_id, type):
            if item.get("id") == record_id:
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
    ) -> Iterator[dict[str, Any]]:
        l0 = record_id.startswith("msg-")
        for page in range(max_pages):
            offset = page * page_size
            if offset > MAX_OFFSET:
                return
            if l0:
                data = self.conversation_query(
                    team_id, agent_id, user_id, session_id=session_id, limit=page_size, offset=offset
                )
                batch = data.get("messages") or []
            else:
                data = self.atomic_query(team_id, agent_id, user_id, type=type, limit=page_size, offset=offset)
                batch = data.get("items") or []
            yield from batch
            if len(batch) < page_size or offset + len(batch) >= int(data.get("total") or 0):
                return

    # -- erasure and admin -----------------------------------------------------------------------

    def chat_memory_clear(
        self, memory_ids: list[str], idempotency_key: str | None = None, pair: Pair | None = None
    ) -> dict[str, Any]:
        """``pair``: (team_id, agent_id) that each id means, when several pairs spell it."""
        body: dict[str, Any] = {"memory_ids": list(memory_ids)}
        if pair is not None:
            body["targets"] = [{"memory_id": m, "team_id": pair[0], "agent_id": pair[1]} for m in memory_ids]
        return self._object("/v3/chat-memory/clear", body, idempotency_key=idempotency_key or None)

    def user_memory_delete(
        self, memory_id: str, user_id: str, content_id: str | None = None, pair: Pair | None = None
    ) -> dict[str, Any]:
        body: dict[str, Any] = {"memory_id": memory_id, "user_id": user_id, **pair_fields(pair)}
        if content_id is not None:
            body["content_ids"] = [content_id]
        return self._object("/v3/user-memory/delete", body)

    def memory_get(self, memory_id: str, pair: Pair | None = None) -> dict[str, Any]:
        return self._object("/v3/memory/get", {"memory_id": memory_id, **pair_fields(pair)})

    def keys_create(self, role: str, team_ids: list[str] | None = None, name: str | None = None) -> dict[str, Any]:
        body: dict[str, Any] = {"role": role}
        if team_ids:
            body["team_ids"] = list(team_ids)
        if name is not None:
            body["name"] = name
        return self._object("/v3/admin/keys/create", body)

    def keys_list(self) -> dict[str, Any]:
        return self._object("/v3/admin/keys/list", {})

    def keys_revoke(self, key_id: str) -> dict[str, Any]:
        return self._object("/v3/admin/keys/revoke", {"key_id": key_id})

    def audit_query(
        self,
        memory_id: str | None = None,
        action: str | None = None,
        limit: int | None = None,
        next_token: str | None = None,
    ) -> dict[str, Any]:
        body = {
            k: v
            for k, v in {"memory_id": memory_id, "action": action, "limit": limit, "next_token": next_token}.items()
            if v is not None
        }
        return self._object("/v3/audit/query", body)


# (team_id, agent_id): which of the pairs that spell a memory_id a request means (team "a-b" + agent
# "c" and team "a" + agent "b-c" spell the same id; the id alone is then ambiguous, 409).
Pair = tuple[str, str]


def pair_fields(pair: Pair | None) -> dict[str, str]:
    return {} if pair is None else {"team_id": pair[0], "agent_id": pair[1]}


def memory_id_for(team_id: str, agent_id: str) -> str:
    """The chat memory asset id of a (team, agent) pair: ``chat_memory-<team_id>-<agent_id>``
    (the runtime's own formula)."""
    return memory_id_of(team_id, agent_id)
