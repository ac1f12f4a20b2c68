"""MemoryFunction: the memory data plane — L3 persona, L0 conversation, L1 records."""

from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Body
from memory_hub.domain import atomic, conversation, persona
from memory_hub.domain.formation import schedule
from memory_hub.domain.results import (
    Added,
    FormationRun,
    FormationStatus,
    MessageHits,
    Messages,
    Persona,
    PersonaCount,
    PersonaWritten,
    RecordAdded,
    RecordHits,
    Records,
    RecordUpdated,
    Total,
)
from memory_hub.edge.idempotency import idempotent
from memory_hub.edge.pipeline import current
from memory_hub.edge.resolver import lambda_handler_for, make_app
from memory_hub.edge.schemas.memory import (
    AtomicAdd,
    AtomicCount,
    AtomicQuery,
    AtomicSearch,
    AtomicUpdate,
    ConversationAdd,
    ConversationCount,
    ConversationQuery,
    ConversationSearch,
    FormationRunRequest,
    FormationStatusRequest,
)
from memory_hub.edge.schemas.scenario import CoreRead, CoreWrite
from memory_hub.settings import get_settings

get_settings()  # a missing setting fails the cold start, naming the variable
app = make_app()
L0, L1, L3, FORMATION = ["L0 conversation"], ["L1 atomic"], ["L3 core"], ["formation"]


@app.post("/v3/core/read", summary="Read the persona (all null when missing)", tags=L3)
def core_read(req: Annotated[CoreRead, Body(embed=False)]) -> Persona:
    r = current()
    return persona.read(r.isolated_scope, r.authorize)


@app.post("/v3/core/write", summary="Write the persona exactly as given; 3 backups kept", tags=L3)
def core_write(req: Annotated[CoreWrite, Body(embed=False)]) -> PersonaWritten:
    r = current()
    return persona.write(r.isolated_scope, req.content, r.authorize, r.request_id)


@app.post("/v3/core/count", summary="1 if a persona exists (even empty), else 0", tags=L3)
def core_count(req: Annotated[CoreRead, Body(embed=False)]) -> PersonaCount:
    r = current()
    return persona.count(r.isolated_scope, r.authorize)


@app.post("/v3/conversation/add", summary="Append 1-100 messages (Idempotency-Key supported)", tags=L0)
def conversation_add(req: Annotated[ConversationAdd, Body(embed=False)]) -> Added:
    r = current()
    scope = r.isolated_scope
    batch = [m.model_dump() for m in req.messages]
    return idempotent(
        r,
        ["conversation/add", scope.team_id, scope.agent_id, scope.user_id],
        lambda: conversation.add(scope, batch, r.authorize),
        Added,
        app.lambda_context,
    )


@app.post("/v3/conversation/query", summary="Messages, newest first", tags=L0)
def conversation_query(req: Annotated[ConversationQuery, Body(embed=False)]) -> Messages:
    r = current()
    return conversation.query(r.isolated_scope, req.limit, req.offset, req.time_start, req.time_end, r.authorize)


@app.post("/v3/conversation/search", summary="Messages by relevance (words and meaning, fused)", tags=L0)
def conversation_search(req: Annotated[ConversationSearch, Body(embed=False)]) -> MessageHits:
    r = current()
    return conversation.search(
        r.isolated_scope, req.query, req.limit, req.time_start, req.time_end, r.authorize, req.mode, req.reference_time
    )


@app.post("/v3/conversation/count", summary="Number of messages", tags=L0)
def conversation_count(req: Annotated[ConversationCount, Body(embed=False)]) -> Total:
    r = current()
    return conversation.count(r.isolated_scope, req.time_start, req.time_end, r.authorize)


@app.post("/v3/atomic/add", summary="Add a record; the same content+type+background reinforces it", tags=L1)
def atomic_add(req: Annotated[AtomicAdd, Body(embed=False)]) -> RecordAdded:
    r = current()
    return atomic.add(
        r.isolated_scope,
        req.content,
        req.type,
        req.background,
        req.tags,
        req.metadata,
        r.authorize,
        req.source_message_ids,
    )


@app.post("/v3/atomic/query", summary="Records, newest updated_at first", tags=L1)
def atomic_query(req: Annotated[AtomicQuery, Body(embed=False)]) -> Records:
    r = current()
    return atomic.query(r.isolated_scope, req.type, req.limit, req.offset, req.time_start, req.time_end, r.authorize)


@app.post("/v3/atomic/search", summary="Records by relevance (words and meaning, fused)", tags=L1)
def atomic_search(req: Annotated[AtomicSearch, Body(embed=False)]) -> RecordHits:
    r = current()
    return atomic.search(
        r.isolated_scope, req.query, req.type, req.limit, req.time_start, req.time_end, r.authorize, req.mode
    )


@app.post("/v3/atomic/count", summary="Number of records", tags=L1)
def atomic_count(req: Annotated[AtomicCount, Body(embed=False)]) -> Total:
    r = current()
    return atomic.count(r.isolated_scope, req.type, req.time_start, req.time_end, r.authorize)


@app.post("/v3/atomic/update", summary="Change only the given fields; version + 1", tags=L1)
def atomic_update(req: Annotated[AtomicUpdate, Body(embed=False)]) -> RecordUpdated:
    r = current()
    changes = req.model_dump(
        include={"content", "background", "tags", "metadata", "source_message_ids"}, exclude_none=True
    )
    return atomic.update(r.isolated_scope, req.id, changes, req.expected_version, r.authorize, r.request_id)


@app.post(
    "/v3/formation/status", summary="The user's memory formation: setting, state, pending, errors", tags=FORMATION
)
def formation_status(req: Annotated[FormationStatusRequest, Body(embed=False)]) -> FormationStatus:
    r = current()
    return schedule.status(r.isolated_scope, r.authorize)


@app.post(
    "/v3/formation/run",
    summary="Form what waits now (resumes a paused user; backfill: older messages too)",
    tags=FORMATION,
)
def formation_run(req: Annotated[FormationRunRequest, Body(embed=False)]) -> FormationRun:
    r = current()
    return schedule.run(r.isolated_scope, req.backfill, r.authorize)


lambda_handler = lambda_handler_for(app)
