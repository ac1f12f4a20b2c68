"""ClearFunction: asset-level clear (§9) and memory delete (§4), and the asynchronous
continuation of a purge that did not fit in the request's time budget."""

from typing import Annotated, Any

from aws_lambda_powertools.event_handler.openapi.params import Body

from memory_hub import clear, idempotency
from memory_hub.api import envelope, lambda_handler_for, make_app
from memory_hub.dataplane_schemas import ChatMemoryClear, MemoryDelete
from memory_hub.edge import current

app = make_app()


def _remaining_ms() -> int:
    context = app.lambda_context
    return context.get_remaining_time_in_millis() if context is not None else 29_000


@app.post("/v3/chat-memory/clear", summary="Wipe every layer of 1-100 memories; keep the assets",
          tags=["erasure"])
def chat_memory_clear(req: Annotated[ChatMemoryClear, Body(embed=False)]):
    ctx = current()
    principal = ctx.check_access()
    return envelope(idempotency.once(
        ctx.header(idempotency.HEADER), [principal.key_id, "chat-memory/clear"], ctx.body,
        lambda: clear.clear(principal, req.memory_ids, ctx.request_id, _remaining_ms), app.lambda_context))


@app.post("/v3/memory/delete", summary="Erase all content of a memory, then the asset", tags=["assets"])
def memory_delete(req: Annotated[MemoryDelete, Body(embed=False)]):
    ctx = current()
    return envelope(clear.delete_memory(ctx.check_access(), req.memory_id, ctx.request_id, _remaining_ms))


_api_handler = lambda_handler_for(app)


def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    if clear.PURGE_EVENT_KEY in event:  # our own asynchronous continuation, not an API request
        return clear.run_continuation(event, context.get_remaining_time_in_millis)
    return _api_handler(event, context)
