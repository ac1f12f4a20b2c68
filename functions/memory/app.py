"""MemoryFunction: the memory data plane — L3 persona (§6), L0 conversation (§7), L1 records (§8)."""

from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Body

from memory_hub import assets, atomic, conversation, idempotency, persona
from memory_hub.api import envelope, lambda_handler_for, make_app
from memory_hub.dataplane_schemas import (
    AtomicAdd,
    AtomicCount,
    AtomicQuery,
    AtomicSearch,
    AtomicUpdate,
    ConversationAdd,
    ConversationCount,
    ConversationQuery,
    ConversationSearch,
)
from memory_hub.dal.aws import submit
from memory_hub.edge import current
from memory_hub.schemas import CoreRead, CoreWrite

app = make_app()


@app.post("/v3/core/read", summary="Read the persona (all null when missing)", tags=["L3 core"])
def core_read(req: Annotated[CoreRead, Body(embed=False)]):
    return envelope(persona.read(current().isolation))


@app.post("/v3/core/write", summary="Write the persona exactly as given; 3 backups kept", tags=["L3 core"])
def core_write(req: Annotated[CoreWrite, Body(embed=False)]):
    return envelope(persona.write(current().isolation, req.content))


@app.post("/v3/core/count", summary="1 if a persona exists (even empty), else 0", tags=["L3 core"])
def core_count(req: Annotated[CoreRead, Body(embed=False)]):
    return envelope(persona.count(current().isolation))


@app.post("/v3/conversation/add", summary="Append 1-100 messages (Idempotency-Key supported)",
          tags=["L0 conversation"])
def conversation_add(req: Annotated[ConversationAdd, Body(embed=False)]):
    ctx = current()
    scope = ctx.isolation
    asset_read = submit(assets.get, scope.memory_id)  # overlaps the key lookup
    principal = ctx.check_access()
    messages = [m.model_dump() for m in req.messages]
    return envelope(idempotency.once(
        ctx.header(idempotency.HEADER),
        [principal.key_id, "conversation/add", scope.team_id, scope.agent_id, scope.user_id],
        ctx.body, lambda: conversation.add(scope, messages, asset_read), app.lambda_context))


@app.post("/v3/conversation/query", summary="Messages, newest first", tags=["L0 conversation"])
def conversation_query(req: Annotated[ConversationQuery, Body(embed=False)]):
    return envelope(conversation.query(current().isolation, req.limit, req.offset, req.time_start, req.time_end))


@app.post("/v3/conversation/search", summary="Messages by relevance (BM25)", tags=["L0 conversation"])
def conversation_search(req: Annotated[ConversationSearch, Body(embed=False)]):
    return envelope(conversation.search_messages(current().isolation, req.query, req.limit))


@app.post("/v3/conversation/count", summary="Number of messages", tags=["L0 conversation"])
def conversation_count(req: Annotated[ConversationCount, Body(embed=False)]):
    return envelope(conversation.count(current().isolation, req.time_start, req.time_end))


@app.post("/v3/atomic/add", summary="Add a record; the same content+type+background reinforces it",
          tags=["L1 atomic"])
def atomic_add(req: Annotated[AtomicAdd, Body(embed=False)]):
    return envelope(atomic.add(current().isolation, req.content, req.type, req.background, req.tags,
                               req.metadata))


@app.post("/v3/atomic/query", summary="Records, newest updated_at first", tags=["L1 atomic"])
def atomic_query(req: Annotated[AtomicQuery, Body(embed=False)]):
    return envelope(atomic.query(current().isolation, req.type, req.limit, req.offset, req.time_start,
                                 req.time_end))


@app.post("/v3/atomic/search", summary="Records by relevance (BM25)", tags=["L1 atomic"])
def atomic_search(req: Annotated[AtomicSearch, Body(embed=False)]):
    return envelope(atomic.search_records(current().isolation, req.query, req.type, req.limit))


@app.post("/v3/atomic/count", summary="Number of records", tags=["L1 atomic"])
def atomic_count(req: Annotated[AtomicCount, Body(embed=False)]):
    return envelope(atomic.count(current().isolation, req.type, req.time_start, req.time_end))


@app.post("/v3/atomic/update", summary="Change only the given fields; version + 1", tags=["L1 atomic"])
def atomic_update(req: Annotated[AtomicUpdate, Body(embed=False)]):
    changes = req.model_dump(include={"content", "background", "tags", "metadata"}, exclude_none=True)
    return envelope(atomic.update(current().isolation, req.id, changes, req.expected_version))


lambda_handler = lambda_handler_for(app)
