"""The admin routes, one method each (every field of the request model a keyword): erasure and
clear, memory assets, keys, audit, export and import, and TencentDB's DeleteUserMemory alias."""

from __future__ import annotations

from functools import cache
from typing import Any

from memory_hub.domain.results import AuditAction, FormationLayers, KeyRole, Visibility
from memory_hub.domain.results_admin import (
    Asset,
    Assets,
    AssetWithCounts,
    Cleared,
    Events,
    ExportJob,
    ImportCreated,
    ImportJobState,
    KeyCreated,
    KeyRevoked,
    Keys,
    MemoryDeleted,
    UserMemoryDeleted,
)
from memory_hub.edge.error_docs import AliasResult
from pydantic import TypeAdapter

from .base import UNSET, ApiError, Sender, Unset, body_of, parse

ALIAS_PATH = "/v2/memory"


@cache
def _user_memory_deleted() -> TypeAdapter[UserMemoryDeleted]:
    """The answer of a user-memory delete: all of the user's L0/L1, or the one item named."""
    return TypeAdapter(UserMemoryDeleted)


class AdminRoutes(Sender):
    # -- erasure ---------------------------------------------------------------------------------

    def chat_memory_clear(
        self,
        *,
        memory_ids: list[str],
        targets: list[dict[str, str]] | None = None,
        idempotency_key: str | None = None,
    ) -> Cleared:
        """``targets``: ``[{memory_id, team_id, agent_id}]``, the pair an id means when several spell it."""
        return self._post("/v3/chat-memory/clear", Cleared, locals())

    def memory_delete(
        self, *, memory_id: str, team_id: str | None = None, agent_id: str | None = None
    ) -> MemoryDeleted:
        return self._post("/v3/memory/delete", MemoryDeleted, locals())

    def user_memory_delete(
        self,
        *,
        memory_id: str,
        user_id: str,
        content_ids: list[str] | Unset | None = UNSET,
        team_id: str | None = None,
        agent_id: str | None = None,
    ) -> UserMemoryDeleted:
        """Without ``content_ids`` every L0 message and L1 record of the user; with one id, that item."""
        return self._post("/v3/user-memory/delete", _user_memory_deleted(), locals())

    def delete_user_memory(
        self,
        *,
        appId: str,  # noqa: N803 - TencentDB's wire names
        userMemoryId: str,  # noqa: N803
        memoryContentId: list[str] | Unset | None = UNSET,  # noqa: N803
        team_id: str | None = None,
        agent_id: str | None = None,
    ) -> AliasResult:
        """``POST /v2/memory?Action=DeleteUserMemory``: TencentDB's shape of :meth:`user_memory_delete`,
        answered ``{requestId, result}`` (an error ``{requestId, code, message}``), not the envelope."""
        reply = self.transport().post(ALIAS_PATH, body_of(ALIAS_PATH, locals()), query={"Action": "DeleteUserMemory"})
        body = reply.body if isinstance(reply.body, dict) else {}
        if reply.status >= 400 or "result" not in body:
            code = body.get("code")
            raise ApiError(
                code if isinstance(code, int) and code else reply.status,
                str(body.get("message") or f"HTTP {reply.status}"),
                request_id=body.get("requestId"),
                path=ALIAS_PATH,
            )
        return parse(AliasResult, body, ALIAS_PATH)

    # -- memory assets ---------------------------------------------------------------------------

    def memory_create(
        self,
        *,
        team_id: str,
        agent_id: str,
        name: str | None = None,
        visibility: Visibility | None = None,
        acl: list[dict[str, Any]] | None = None,
        bindings: list[dict[str, Any]] | None = None,
        formation: FormationLayers | None = None,
    ) -> Asset:
        return self._post("/v3/memory/create", Asset, locals())

    def memory_get(self, *, memory_id: str, team_id: str | None = None, agent_id: str | None = None) -> AssetWithCounts:
        return self._post("/v3/memory/get", AssetWithCounts, locals())

    def memory_list(
        self, *, team_id: str | None = None, limit: int | None = None, next_token: str | None = None
    ) -> Assets:
        return self._post("/v3/memory/list", Assets, locals())

    def memory_update(
        self,
        *,
        memory_id: str,
        team_id: str | None = None,
        agent_id: str | None = None,
        name: str | None = None,
        visibility: Visibility | None = None,
        acl: list[dict[str, Any]] | None = None,
        bindings: list[dict[str, Any]] | None = None,
        retention_days: int | Unset | None = UNSET,
        formation: FormationLayers | None = None,
    ) -> Asset:
        """``retention_days=None`` resets it to the deployment default (left out: unchanged)."""
        return self._post("/v3/memory/update", Asset, locals())

    # -- keys and audit --------------------------------------------------------------------------

    def keys_create(self, *, role: KeyRole, team_ids: list[str] | None = None, name: str | None = None) -> KeyCreated:
        return self._post("/v3/admin/keys/create", KeyCreated, locals())

    def keys_list(self) -> Keys:
        return self._post("/v3/admin/keys/list", Keys, locals())

    def keys_revoke(self, *, key_id: str) -> KeyRevoked:
        return self._post("/v3/admin/keys/revoke", KeyRevoked, locals())

    def audit_query(
        self,
        *,
        memory_id: str | None = None,
        action: AuditAction | None = None,
        limit: int | None = None,
        next_token: str | None = None,
    ) -> Events:
        return self._post("/v3/audit/query", Events, locals())

    # -- export and import -----------------------------------------------------------------------

    def memory_export(
        self,
        *,
        memory_id: str,
        team_id: str | None = None,
        agent_id: str | None = None,
        user_id: str | None = None,
        shared: bool | None = None,
    ) -> ExportJob:
        return self._post("/v3/memory/export", ExportJob, locals())

    def memory_export_status(self, *, export_id: str) -> ExportJob:
        return self._post("/v3/memory/export/status", ExportJob, locals())

    def memory_import(
        self,
        *,
        team_id: str,
        agent_id: str,
        user_id: str | None = None,
        from_team: str | None = None,
        from_agent: str | None = None,
    ) -> ImportCreated:
        return self._post("/v3/memory/import", ImportCreated, locals())

    def memory_import_start(self, *, import_id: str) -> ImportJobState:
        return self._post("/v3/memory/import/start", ImportJobState, locals())

    def memory_import_status(self, *, import_id: str) -> ImportJobState:
        return self._post("/v3/memory/import/status", ImportJobState, locals())


__all__ = ["ALIAS_PATH", "AdminRoutes"]
