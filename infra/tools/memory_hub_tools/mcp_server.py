"""``memory-hub mcp``: an MCP server (stdio) over one user's memory: recall, add, and ID-based erasure.

Six tools:

* ``search_memory`` (read-only): find the user's L1 records (default) or L0 messages by words, best
  first, each with its ``id``, ``version``, exact text and ``score``.
* ``add_memory``: remember one thing about the user as ONE L1 record (``atomic/add``: content,
  ``type``, ``context``, ``tags``). L1 and not L0 on purpose: L0 is the raw transcript an agent
  records with its own session ids and roles, while "remember that …" is an extracted memory. The
  same content, type and context again is not a second record: the existing one is reinforced
  (``created: false``, the same ``id``). It never edits or deletes anything.
* ``search_for_deletion`` and ``delete_memory``, the "Echo" protocol for erasure, used in three steps:

  1. ``search_for_deletion`` finds candidate records and returns each with its exact ``id`` and
     ``version`` (and its exact text, context, type and tags);
  2. the assistant shows the person the exact record(s) and asks which one to delete;
  3. ``delete_memory(id, expected_version)`` deletes exactly that id, and only if it is still at the
     version the person saw (otherwise 409: nothing is deleted and the current record is returned to
     be shown again).

There is no delete by content: a model trims, paraphrases and normalises whitespace, so a content
match hits no row or several identical rows. The confirmed row and the deleted row must be the
same row.

* ``formation_status`` (read-only) and ``form_now``: whether the service forms memory from the
  user's conversation and where it stands, and asking it to run now (``formation/status``,
  ``formation/run``; with formation off, an error saying so and nothing run).

Records and messages are returned with every field of the API's answer model (``RecordItem``,
``MessageItem`` and their hits: read from the model's fields, so a field the API adds is returned
too), ``background`` named ``context``: a record says which messages it was drawn from
(``source_message_ids``) and whether formation wrote it (``formed``).

Configuration (environment, overridable by ``memory-hub mcp`` flags): ``MEMORY_HUB_ENDPOINT``,
``MEMORY_HUB_API_KEY``, ``MEMORY_HUB_SERVICE_ID``, and the default scope ``MEMORY_HUB_TEAM_ID``,
``MEMORY_HUB_AGENT_ID``, ``MEMORY_HUB_USER_ID`` (each tool call may pass its own). A ``reader`` key
serves the search tools and ``formation_status``; ``add_memory``, ``delete_memory`` and ``form_now``
need a ``writer`` or ``admin`` key.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from mcp.server import MCPServer
from mcp.server.mcpserver.tools import Tool
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from memory_hub.domain.fields import BACKGROUND_CHARS, MAX_TAGS, MESSAGE_CHARS, PAGE_LIMIT
from memory_hub.domain.results import (
    FormationRun,
    FormationStatus,
    MessageHit,
    MessageItem,
    MessagesDeleted,
    RecordAdded,
    RecordHit,
    RecordItem,
    RecordsDeleted,
)
from pydantic import BaseModel, Field

from .client import ApiError, MemoryHubClient, MemoryHubError

# The API's field names the tools show under another (the person's word for a record's background).
SHOWN_AS = {"background": "context"}
# What a delete's receipt adds to the answer model's own fields (records_deleted: 0 where the model
# has none: erasing a record erases no other).
RECEIPT_EXTRA = ("records_deleted", "message")


def _names(model: type[BaseModel], *more: str) -> str:
    """``{a, b, …}``: the fields a tool returns of an answer model, as it names them, then ``more``
    (those the tool adds, each once)."""
    names = [*(SHOWN_AS.get(name, name) for name in model.model_fields), *more]
    return "{" + ", ".join(dict.fromkeys(names)) + "}"


PROTOCOL = (
    "Deleting memory is a three-step protocol. (1) Call search_for_deletion to find the record. "
    "(2) Show the person the exact record(s) found - id, content, context, type, tags - and ask which "
    "one to delete; wait for their explicit confirmation. (3) Call delete_memory with that record's id "
    "and the version you showed. Never delete by content and never guess or rebuild an id; near-identical "
    "records are different records. If delete_memory reports that the record changed (409), nothing was "
    "deleted: show the person the current record it returns and ask again."
)

INSTRUCTIONS = (
    "Memory of one user: search_memory recalls records and messages (read-only); add_memory remembers "
    "one thing as one record; formation_status and form_now show and start the service's forming of "
    "records from the conversation. " + PROTOCOL
)

SEARCH_DESCRIPTION = (
    "Step 1 of deleting a memory: find candidate records and their exact ids and versions. Returns a "
    f"list of records: for layer 'l1' (extracted memories) {_names(RecordHit)}; for layer 'l0' (raw "
    f"conversation messages) {_names(MessageHit, 'version: 1')}. Nothing is deleted by this tool. Next: "
    "show the person the exact record(s) (content and context verbatim, with the id) and ask which one to "
    "delete; only after they confirm, call delete_memory with that id and its version. Several records may "
    "look the same (e.g. differing only in whitespace or context): they are different records, show them "
    "all. " + PROTOCOL
)

MEMORY_SEARCH_DESCRIPTION = (
    "Recall: search the user's memory by words (read-only; nothing is changed). layer 'l1' (default) "
    f"searches extracted memory records {_names(RecordHit)} (source_message_ids: the messages a record "
    "was drawn from; formed: true when the service formed it from the conversation); layer 'l0' searches "
    f"raw conversation messages {_names(MessageHit, 'version: 1')}. Best match first; a record containing "
    "none of the words is not returned. Filters: `type` (l1 only) and `session_id` (l0 only). To delete something, use "
    "search_for_deletion and delete_memory (by id, after the person confirms), never this tool's results "
    "rebuilt from content."
)

ADD_DESCRIPTION = (
    "Remember one thing about the user: adds ONE extracted memory record (L1) with `content` "
    f"(1-{MESSAGE_CHARS} chars, stored exactly as given), optional `type` (lowercase letters and _, default "
    f"'episodic'), `context` (where it came from, up to {BACKGROUND_CHARS} chars) and `tags` (up to {MAX_TAGS}). "
    "If a record with the exact "
    "same content, type and context already exists, no second record is made: that one is reinforced "
    "and returned with created=false. `source_message_ids`: the ids of the user's messages (msg-…) it was "
    "drawn from, if any (erasing one of them erases the record). Returns "
    f"{_names(RecordAdded, 'message')}. It never edits or deletes a record; it does not write raw conversation "
    "messages (L0)."
)

FORMATION_STATUS_DESCRIPTION = (
    "Whether the service forms memory from this user's conversation (records, and with 'all' scenes and a "
    "persona) and where it stands (read-only): "
    f"{_names(FormationStatus)}. enabled false: formation is off for this deployment or memory (add_memory "
    "still works). pending_messages: the user's messages not formed yet (narrowed by session_id)."
)

FORM_NOW_DESCRIPTION = (
    "Ask the service to form memory from this user's unformed messages now (it otherwise waits for a batch or "
    "an idle conversation); a paused formation resumes. backfill: also messages added while formation was off, "
    f"or imported. Returns {_names(FormationRun, 'message')}; records appear once the run is done (formation_status "
    "says when: state idle, pending_messages 0). It never deletes anything; with formation off it is refused "
    "and nothing runs."
)

DELETE_DESCRIPTION = (
    "Step 3 of deleting a memory: permanently delete exactly ONE record by the id returned by "
    "search_for_deletion, and only at the version the person saw. Both `id` and `expected_version` are "
    "required (for an 'msg-' message id the version is always 1). Call it only after you showed the "
    "person that exact record and they confirmed its deletion. Never delete by content: this tool takes "
    "no content. If the record was edited since it was shown, the API answers 409, nothing is deleted, "
    "and the current record is returned: show it to the person again and ask for confirmation before "
    "retrying with the new version. Returns the receipt: for a record (atom-…) "
    f"{_names(RecordsDeleted, *RECEIPT_EXTRA)}; for a message (msg-…) {_names(MessagesDeleted, *RECEIPT_EXTRA)} "
    "(records_deleted: the records drawn from the message, erased with it). " + PROTOCOL
)


@dataclass(frozen=True)
class Config:
    endpoint: str | None = None
    api_key: str | None = None
    service_id: str | None = None
    team_id: str | None = None
    agent_id: str | None = None
    user_id: str | None = None
    timeout: float = 30.0

    @classmethod
    def from_env(cls, **overrides: Any) -> Config:
        env = os.environ.get
        values: dict[str, Any] = {
            "endpoint": env("MEMORY_HUB_ENDPOINT"),
            "api_key": env("MEMORY_HUB_API_KEY"),
            "service_id": env("MEMORY_HUB_SERVICE_ID"),
            "team_id": env("MEMORY_HUB_TEAM_ID"),
            "agent_id": env("MEMORY_HUB_AGENT_ID"),
            "user_id": env("MEMORY_HUB_USER_ID"),
        }
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)


def _result(payload: Any, *, error: bool = False, text: str | None = None) -> CallToolResult:
    body = text if text is not None else json.dumps(payload, ensure_ascii=False, indent=1)
    structured = payload if isinstance(payload, dict) else {"results": payload}
    return CallToolResult(content=[TextContent(type="text", text=body)], structured_content=structured, is_error=error)


def _error(message: str, **details: Any) -> CallToolResult:
    payload = {"error": message, **details}
    return _result(payload, error=True)


def _shown(item: BaseModel) -> dict[str, Any]:
    """Every field of an answer model (its class's ``model_fields``: a field the API adds is shown
    too), under the name the tools use."""
    return {SHOWN_AS.get(name, name): getattr(item, name) for name in type(item).model_fields}


def _l1(item: RecordItem) -> dict[str, Any]:
    return _shown(item)


def _l0(message: MessageItem | MessageHit) -> dict[str, Any]:
    return {**_shown(message), "version": 1}  # a message is never edited


def _receipt(record_id: str, data: MessagesDeleted | RecordsDeleted) -> dict[str, Any]:
    """A delete's receipt: every field of the answer model (``_shown``), ``records_deleted`` (0 for a
    record), and what it means in words."""
    receipt = _shown(data)
    records = receipt.setdefault("records_deleted", 0)
    if record_id not in data.deleted_ids:
        message = (
            f"{record_id} was not found (already deleted, or not in this team/agent/user scope). Nothing was deleted."
        )
    elif records:
        message = (
            f"Deleted {record_id}, and the {records} record(s) drawn from it (a record never outlives the "
            "messages it cites). Nothing else was deleted."
        )
    else:
        message = f"Deleted {record_id}. Nothing else was deleted."
    return {**receipt, "message": message}


class Tools:
    """The tools, bound to one client and one default scope."""

    def __init__(self, config: Config, client: MemoryHubClient | None = None) -> None:
        self.config = config
        self.client = client or MemoryHubClient(
            config.endpoint, config.api_key, config.service_id, timeout=config.timeout
        )

    def _scope(
        self, team_id: str | None, agent_id: str | None, user_id: str | None
    ) -> tuple[str, str, str] | CallToolResult:
        team = team_id or self.config.team_id
        agent = agent_id or self.config.agent_id
        user = user_id or self.config.user_id
        missing = [name for name, value in (("team_id", team), ("agent_id", agent), ("user_id", user)) if not value]
        if missing:
            return _error(
                f"missing {', '.join(missing)}: pass them to the tool or set MEMORY_HUB_TEAM_ID, "
                "MEMORY_HUB_AGENT_ID and MEMORY_HUB_USER_ID for the server"
            )
        return team, agent, user  # type: ignore[return-value]

    def search_for_deletion(
        self,
        query: Annotated[str, Field(description="words to look for (what the person wants forgotten)")],
        layer: Annotated[
            Literal["l1", "l0"],
            Field(description="'l1' extracted memory records (default) or 'l0' raw conversation messages"),
        ] = "l1",
        limit: Annotated[
            int, Field(ge=1, le=PAGE_LIMIT, description=f"at most this many records (1-{PAGE_LIMIT})")
        ] = 5,
        team_id: Annotated[str | None, Field(description="team id (default: the server's)")] = None,
        agent_id: Annotated[str | None, Field(description="agent id (default: the server's)")] = None,
        user_id: Annotated[str | None, Field(description="user id (default: the server's)")] = None,
    ) -> CallToolResult:
        scope = self._scope(team_id, agent_id, user_id)
        if isinstance(scope, CallToolResult):
            return scope
        try:
            if layer == "l0":
                records = [_l0(m) for m in self.client.conversation_search(*scope, query=query, limit=limit).messages]
            else:
                records = [_l1(i) for i in self.client.atomic_search(*scope, query=query, limit=limit).items]
        except ApiError as exc:
            return _error(f"search failed: {exc.code} {exc.message}", code=exc.code)
        except MemoryHubError as exc:
            return _error(f"search failed: {exc}")
        return _result(records)

    def search_memory(
        self,
        query: Annotated[str, Field(description="words to look for")],
        layer: Annotated[
            Literal["l1", "l0"],
            Field(description="'l1' extracted memory records (default) or 'l0' raw conversation messages"),
        ] = "l1",
        limit: Annotated[
            int, Field(ge=1, le=PAGE_LIMIT, description=f"at most this many results (1-{PAGE_LIMIT})")
        ] = 5,
        type: Annotated[str | None, Field(description="l1 only: only records of this type")] = None,
        session_id: Annotated[str | None, Field(description="l0 only: only messages of this session")] = None,
        team_id: Annotated[str | None, Field(description="team id (default: the server's)")] = None,
        agent_id: Annotated[str | None, Field(description="agent id (default: the server's)")] = None,
        user_id: Annotated[str | None, Field(description="user id (default: the server's)")] = None,
    ) -> CallToolResult:
        if layer == "l0" and type is not None:
            return _error("`type` filters l1 records only; for l0 messages use session_id")
        if layer == "l1" and session_id is not None:
            return _error("`session_id` filters l0 messages only; for l1 records use type")
        scope = self._scope(team_id, agent_id, user_id)
        if isinstance(scope, CallToolResult):
            return scope
        try:
            if layer == "l0":
                hits = self.client.conversation_search(*scope, query=query, session_id=session_id, limit=limit)
                records = [_l0(m) for m in hits.messages]
            else:
                records = [_l1(i) for i in self.client.atomic_search(*scope, query=query, type=type, limit=limit).items]
        except ApiError as exc:
            return _error(f"search failed: {exc.code} {exc.message}", code=exc.code)
        except MemoryHubError as exc:
            return _error(f"search failed: {exc}")
        return _result(records)

    def add_memory(
        self,
        content: Annotated[
            str, Field(description=f"what to remember, exactly as it should be stored (1-{MESSAGE_CHARS} chars)")
        ],
        type: Annotated[
            str | None, Field(description="record type: lowercase letters and _ (default 'episodic')")
        ] = None,
        context: Annotated[
            str | None, Field(description=f"where this comes from / the situation (up to {BACKGROUND_CHARS} chars)")
        ] = None,
        tags: Annotated[list[str] | None, Field(description=f"up to {MAX_TAGS} short labels")] = None,
        session_id: Annotated[str | None, Field(description="the conversation it came from, if any")] = None,
        source_message_ids: Annotated[
            list[str] | None, Field(description="ids (msg-…) of the user's messages it was drawn from, if any")
        ] = None,
        team_id: Annotated[str | None, Field(description="team id (default: the server's)")] = None,
        agent_id: Annotated[str | None, Field(description="agent id (default: the server's)")] = None,
        user_id: Annotated[str | None, Field(description="user id (default: the server's)")] = None,
    ) -> CallToolResult:
        scope = self._scope(team_id, agent_id, user_id)
        if isinstance(scope, CallToolResult):
            return scope
        try:
            data = self.client.atomic_add(
                *scope,
                content=content,
                type=type,
                background=context,
                tags=tags,
                session_id=session_id,
                source_message_ids=source_message_ids,
            )
        except ApiError as exc:
            return _error(f"add failed: {exc.code} {exc.message}. Nothing was added.", code=exc.code)
        except MemoryHubError as exc:
            return _error(
                f"add failed: {exc}. It is not known whether the record was added; search_memory "
                "for it before retrying (a retry with the same content only reinforces it)."
            )
        message = (
            f"Added {data.id}."
            if data.created
            else f"Already remembered as {data.id}: reinforced ({data.reinforced_count} times); "
            "no second record was made."
        )
        return _result({**_shown(data), "message": message})

    def delete_memory(
        self,
        id: Annotated[
            str | None,
            Field(
                description="REQUIRED. The exact id (atom-… or msg-…) returned by search_for_deletion for the "
                "record the person confirmed"
            ),
        ] = None,
        expected_version: Annotated[
            int | None,
            Field(description="REQUIRED. The version of that record as shown to the person (1 for msg- ids)"),
        ] = None,
        team_id: Annotated[str | None, Field(description="team id (default: the server's)")] = None,
        agent_id: Annotated[str | None, Field(description="agent id (default: the server's)")] = None,
        user_id: Annotated[str | None, Field(description="user id (default: the server's)")] = None,
    ) -> CallToolResult:
        record_id = (id or "").strip()
        missing = [
            name for name, value in (("id", record_id), ("expected_version", expected_version)) if value in ("", None)
        ]
        if missing or expected_version is None:  # (a None version is among the missing: this narrows its type)
            return _error(
                f"refused: {' and '.join(missing)} required. Nothing was deleted. Call "
                "search_for_deletion, show the person the exact record, and after they confirm "
                "call delete_memory with that record's id and version."
            )
        if not (record_id.startswith("atom-") or record_id.startswith("msg-")):
            return _error(
                f"refused: {record_id!r} is not a record id (atom-…) or message id (msg-…). "
                "Use the id returned by search_for_deletion; never build one. Nothing was deleted."
            )
        if isinstance(expected_version, bool) or expected_version < 1:
            return _error(
                "refused: expected_version must be the record's version (an integer, at least 1). Nothing was deleted."
            )
        if record_id.startswith("msg-") and expected_version != 1:
            return _error(
                "refused: a message (msg-…) is never edited; its expected_version is always 1. Nothing was deleted."
            )
        scope = self._scope(team_id, agent_id, user_id)
        if isinstance(scope, CallToolResult):
            return scope
        try:
            if record_id.startswith("msg-"):
                data: MessagesDeleted | RecordsDeleted = self.client.conversation_delete(
                    *scope, message_ids=[record_id]
                )
            else:
                data = self.client.atomic_delete(
                    *scope, ids=[record_id], expected_versions={record_id: expected_version}
                )
        except ApiError as exc:
            if exc.code == 409:
                return self._conflict(scope, record_id, expected_version, exc)
            return _error(f"delete failed: {exc.code} {exc.message}. Nothing was deleted.", code=exc.code)
        except MemoryHubError as exc:
            return _error(
                f"delete failed: {exc}. It is not known whether the record was deleted; search "
                "for it again before retrying."
            )
        return _result(_receipt(record_id, data))

    def _conflict(self, scope: tuple[str, str, str], record_id: str, expected: int, exc: ApiError) -> CallToolResult:
        conflicts = (exc.data or {}).get("conflicts") if isinstance(exc.data, dict) else None
        actual = next((c.get("actual") for c in conflicts or [] if c.get("id") == record_id), None)
        current = None
        try:
            found = self.client.find_record(*scope, record_id)
            if found is not None:
                current = _l1(found) if isinstance(found, RecordItem) else _l0(found)
        except MemoryHubError:
            pass
        now = f"version {actual}" if actual is not None else "another version"
        return _error(
            f"conflict (409): {record_id} was edited since it was shown - it is now at {now}, not version "
            f"{expected}. Nothing was deleted. Show the person the current record and ask again; delete it "
            "only after they confirm, with its new version.",
            code=409,
            conflicts=conflicts or [],
            current=current,
        )

    def formation_status(
        self,
        session_id: Annotated[
            str | None, Field(description="count only this session's unformed messages (default: all)")
        ] = None,
        team_id: Annotated[str | None, Field(description="team id (default: the server's)")] = None,
        agent_id: Annotated[str | None, Field(description="agent id (default: the server's)")] = None,
        user_id: Annotated[str | None, Field(description="user id (default: the server's)")] = None,
    ) -> CallToolResult:
        scope = self._scope(team_id, agent_id, user_id)
        if isinstance(scope, CallToolResult):
            return scope
        try:
            status = self.client.formation_status(*scope, session_id=session_id)
        except ApiError as exc:
            return _error(f"formation status failed: {exc.code} {exc.message}", code=exc.code)
        except MemoryHubError as exc:
            return _error(f"formation status failed: {exc}")
        return _result(status.wire())

    def form_now(
        self,
        session_id: Annotated[str | None, Field(description="only this session's messages (default: all)")] = None,
        backfill: Annotated[
            bool, Field(description="also messages added while formation was off, or imported")
        ] = False,
        team_id: Annotated[str | None, Field(description="team id (default: the server's)")] = None,
        agent_id: Annotated[str | None, Field(description="agent id (default: the server's)")] = None,
        user_id: Annotated[str | None, Field(description="user id (default: the server's)")] = None,
    ) -> CallToolResult:
        scope = self._scope(team_id, agent_id, user_id)
        if isinstance(scope, CallToolResult):
            return scope
        try:
            run = self.client.formation_run(*scope, session_id=session_id, backfill=backfill or None)
        except ApiError as exc:
            if exc.code == 409 and exc.message.startswith("formation: off"):
                return _error(
                    "formation is off for this memory or this deployment: nothing was run. Records can still "
                    "be added one at a time with add_memory.",
                    code=exc.code,
                )
            return _error(f"form_now failed: {exc.code} {exc.message}. Nothing was run.", code=exc.code)
        except MemoryHubError as exc:
            return _error(f"form_now failed: {exc}. Call formation_status to see whether a run was queued.")
        if run.state == "idle" and run.pending_messages == 0:
            message = "Nothing to form: every message of this user is formed already."
        else:
            message = (
                f"Formation is {run.state} with {run.pending_messages} message(s) to form; call formation_status "
                "to see when it is done."
            )
        return _result({**run.wire(), "message": message})


def build_server(config: Config | None = None, client: MemoryHubClient | None = None) -> MCPServer:
    tools = Tools(config or Config.from_env(), client)
    search = Tool.from_function(
        tools.search_for_deletion,
        name="search_for_deletion",
        title="Search memory for deletion",
        description=SEARCH_DESCRIPTION,
        annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False),
    )
    delete = Tool.from_function(
        tools.delete_memory,
        name="delete_memory",
        title="Delete one memory record by id",
        description=DELETE_DESCRIPTION,
        annotations=ToolAnnotations(
            read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False
        ),
    )
    # Both are required; they default to None in Python only so that a call without them gets an
    # explanatory refusal (an error result) rather than a bare validation error.
    delete.parameters["required"] = ["id", "expected_version"]
    for name in ("id", "expected_version"):
        delete.parameters["properties"][name].pop("default", None)
    recall = Tool.from_function(
        tools.search_memory,
        name="search_memory",
        title="Search memory",
        description=MEMORY_SEARCH_DESCRIPTION,
        annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False),
    )
    add = Tool.from_function(
        tools.add_memory,
        name="add_memory",
        title="Remember one record",
        description=ADD_DESCRIPTION,
        annotations=ToolAnnotations(
            read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False
        ),
    )
    status = Tool.from_function(
        tools.formation_status,
        name="formation_status",
        title="Memory formation status",
        description=FORMATION_STATUS_DESCRIPTION,
        annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False),
    )
    form = Tool.from_function(
        tools.form_now,
        name="form_now",
        title="Form memory now",
        description=FORM_NOW_DESCRIPTION,
        annotations=ToolAnnotations(
            read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False
        ),
    )
    return MCPServer(
        "memory-hub",
        instructions=INSTRUCTIONS,
        log_level="WARNING",
        tools=[recall, add, search, delete, status, form],
    )


def main(**overrides: Any) -> None:
    """Serve over stdio until the client closes the connection."""
    build_server(Config.from_env(**overrides)).run("stdio")


if __name__ == "__main__":
    main()
