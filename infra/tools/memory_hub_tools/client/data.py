"""The data plane's routes, one method each: L2 scenario files, the L3 persona, L0 conversation, L1
records and formation — each scoped to ``team_id, agent_id, user_id`` (given first, positionally, as
the client sends no ``x-tdai-*`` headers), every other field of the request model a keyword."""

from __future__ import annotations

from typing import Any

from memory_hub.domain.results import (
    Added,
    FormationRun,
    FormationStatus,
    MessageHits,
    Messages,
    MessagesDeleted,
    Mode,
    Persona,
    PersonaCount,
    PersonaWritten,
    RecordAdded,
    RecordHits,
    Records,
    RecordsDeleted,
    RecordUpdated,
    ScenarioCounted,
    ScenarioFile,
    ScenarioList,
    ScenarioRemoved,
    ScenarioWritten,
    Total,
)

from .base import Sender


class DataRoutes(Sender):
    # -- L2 scenario files ------------------------------------------------------------------------

    def scenario_ls(
        self,
        team_id: str,
        agent_id: str,
        user_id: str,
        *,
        path_prefix: str | None = None,
        limit: int | None = None,
        next_token: str | None = None,
        session_id: str | None = None,
        task_id: str | None = None,
    ) -> ScenarioList:
        return self._post("/v3/scenario/ls", ScenarioList, locals())

    def scenario_read(
        self,
        team_id: str,
        agent_id: str,
        user_id: str,
        *,
        path: str,
        session_id: str | None = None,
        task_id: str | None = None,
    ) -> ScenarioFile:
        return self._post("/v3/scenario/read", ScenarioFile, locals())

    def scenario_write(
        self,
        team_id: str,
        agent_id: str,
        user_id: str,
        *,
        path: str,
        content: str,
        summary: str | None = None,
        expected_version: int | None = None,
        session_id: str | None = None,
        task_id: str | None = None,
    ) -> ScenarioWritten:
        return self._post("/v3/scenario/write", ScenarioWritten, locals())

    def scenario_rm(
        self,
        team_id: str,
        agent_id: str,
        user_id: str,
        *,
        path: str,
        session_id: str | None = None,
        task_id: str | None = None,
    ) -> ScenarioRemoved:
        return self._post("/v3/scenario/rm", ScenarioRemoved, locals())

    def scenario_count(
        self,
        team_id: str,
        agent_id: str,
        user_id: str,
        *,
        path_prefix: str | None = None,
        session_id: str | None = None,
        task_id: str | None = None,
    ) -> ScenarioCounted:
        return self._post("/v3/scenario/count", ScenarioCounted, locals())

    # -- L3 persona ------------------------------------------------------------------------------

    def core_read(
        self, team_id: str, agent_id: str, user_id: str, *, session_id: str | None = None, task_id: str | None = None
    ) -> Persona:
        return self._post("/v3/core/read", Persona, locals())

    def core_write(
        self,
        team_id: str,
        agent_id: str,
        user_id: str,
        *,
        content: str,
        session_id: str | None = None,
        task_id: str | None = None,
    ) -> PersonaWritten:
        return self._post("/v3/core/write", PersonaWritten, locals())

    def core_count(
        self, team_id: str, agent_id: str, user_id: str, *, session_id: str | None = None, task_id: str | None = None
    ) -> PersonaCount:
        return self._post("/v3/core/count", PersonaCount, locals())

    # -- L0 conversation -------------------------------------------------------------------------

    def conversation_add(
        self,
        team_id: str,
        agent_id: str,
        user_id: str,
        *,
        session_id: str,
        messages: list[dict[str, Any]],
        task_id: str | None = None,
        idempotency_key: str | None = None,
    ) -> Added:
        """``session_id`` is required here (the route answers 400 without one)."""
        return self._post("/v3/conversation/add", Added, locals())

    def conversation_query(
        self,
        team_id: str,
        agent_id: str,
        user_id: str,
        *,
        limit: int | None = None,
        offset: int | None = None,
        time_start: str | None = None,
        time_end: str | None = None,
        session_id: str | None = None,
        task_id: str | None = None,
    ) -> Messages:
        return self._post("/v3/conversation/query", Messages, locals())

    def conversation_search(
        self,
        team_id: str,
        agent_id: str,
        user_id: str,
        *,
        query: str,
        limit: int | None = None,
        mode: Mode | None = None,
        reference_time: str | None = None,
        time_start: str | None = None,
        time_end: str | None = None,
        session_id: str | None = None,
        task_id: str | None = None,
    ) -> MessageHits:
        return self._post("/v3/conversation/search", MessageHits, locals())

    def conversation_count(
        self,
        team_id: str,
        agent_id: str,
        user_id: str,
        *,
        time_start: str | None = None,
        time_end: str | None = None,
        session_id: str | None = None,
        task_id: str | None = None,
    ) -> Total:
        return self._post("/v3/conversation/count", Total, locals())

    def conversation_delete(
        self,
        team_id: str,
        agent_id: str,
        user_id: str,
        *,
        message_ids: list[str] | None = None,
        session_ids: list[str] | None = None,
        session_id: str | None = None,
        task_id: str | None = None,
    ) -> MessagesDeleted:
        return self._post("/v3/conversation/delete", MessagesDeleted, locals())

    # -- L1 records ------------------------------------------------------------------------------

    def atomic_add(
        self,
        team_id: str,
        agent_id: str,
        user_id: str,
        *,
        content: str,
        type: str | None = None,
        background: str | None = None,
        tags: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        source_message_ids: list[str] | None = None,
        session_id: str | None = None,
        task_id: str | None = None,
    ) -> RecordAdded:
        return self._post("/v3/atomic/add", RecordAdded, locals())

    def atomic_query(
        self,
        team_id: str,
        agent_id: str,
        user_id: str,
        *,
        type: str | None = None,
        limit: int | None = None,
        offset: int | None = None,
        time_start: str | None = None,
        time_end: str | None = None,
        session_id: str | None = None,
        task_id: str | None = None,
    ) -> Records:
        return self._post("/v3/atomic/query", Records, locals())

    def atomic_search(
        self,
        team_id: str,
        agent_id: str,
        user_id: str,
        *,
        query: str,
        type: str | None = None,
        limit: int | None = None,
        mode: Mode | None = None,
        time_start: str | None = None,
        time_end: str | None = None,
        session_id: str | None = None,
        task_id: str | None = None,
    ) -> RecordHits:
        return self._post("/v3/atomic/search", RecordHits, locals())

    def atomic_count(
        self,
        team_id: str,
        agent_id: str,
        user_id: str,
        *,
        type: str | None = None,
        time_start: str | None = None,
        time_end: str | None = None,
        session_id: str | None = None,
        task_id: str | None = None,
    ) -> Total:
        return self._post("/v3/atomic/count", Total, locals())

    def atomic_update(
        self,
        team_id: str,
        agent_id: str,
        user_id: str,
        *,
        id: str,
        content: str | None = None,
        background: str | None = None,
        tags: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        source_message_ids: list[str] | None = None,
        expected_version: int | None = None,
        session_id: str | None = None,
        task_id: str | None = None,
    ) -> RecordUpdated:
        return self._post("/v3/atomic/update", RecordUpdated, locals())

    def atomic_delete(
        self,
        team_id: str,
        agent_id: str,
        user_id: str,
        *,
        ids: list[str],
        expected_versions: dict[str, int] | None = None,
        session_id: str | None = None,
        task_id: str | None = None,
    ) -> RecordsDeleted:
        return self._post("/v3/atomic/delete", RecordsDeleted, locals())

    # -- formation -------------------------------------------------------------------------------

    def formation_status(
        self, team_id: str, agent_id: str, user_id: str, *, session_id: str | None = None, task_id: str | None = None
    ) -> FormationStatus:
        """``session_id`` narrows ``pending_messages``; the other fields are the user's."""
        return self._post("/v3/formation/status", FormationStatus, locals())

    def formation_run(
        self,
        team_id: str,
        agent_id: str,
        user_id: str,
        *,
        backfill: bool | None = None,
        session_id: str | None = None,
        task_id: str | None = None,
    ) -> FormationRun:
        """409 ``formation: off`` (an :class:`ApiError`) when the deployment or the asset has it off."""
        return self._post("/v3/formation/run", FormationRun, locals())
