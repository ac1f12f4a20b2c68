"""ClearFunction: asset-level clear and memory delete, and the asynchronous
continuation of a purge that did not fit in the request's time budget."""

from typing import Annotated, Any

from aws_lambda_powertools.event_handler.openapi.params import Body
from memory_hub.domain import clear
from memory_hub.domain.results_admin import Cleared, MemoryDeleted
from memory_hub.edge.idempotency import idempotent
from memory_hub.edge.pipeline import current
from memory_hub.edge.resolver import lambda_handler_for, make_app
from memory_hub.edge.schemas.admin import ChatMemoryClear, MemoryDelete
from memory_hub.settings import get_settings

get_settings()  # a missing setting fails the cold start, naming the variable
app = make_app()


def _remaining_ms() -> int:
    return app.lambda_context.get_remaining_time_in_millis()


@app.post("/v3/chat-memory/clear", summary="Wipe every layer of 1-100 memories; keep the assets", tags=["erasure"])
def chat_memory_clear(req: Annotated[ChatMemoryClear, Body(embed=False)]) -> Cleared:
    r = current()
    principal = r.authorize()
    targets = [(t.memory_id, t.team_id, t.agent_id) for t in req.targets or []]
    named = clear.named(clear.memory_ids(req.memory_ids), targets)
    checked = clear.checked(principal, named)  # 403/404/409 ambiguous before the Idempotency-Key
    return idempotent(
        r,
        ["chat-memory/clear"],
        lambda: clear.clear(principal, checked, r.request_id, _remaining_ms),
        Cleared,
        app.lambda_context,
    )


@app.post("/v3/memory/delete", summary="Erase all content of a memory, then the asset", tags=["assets"])
def memory_delete(req: Annotated[MemoryDelete, Body(embed=False)]) -> MemoryDeleted:
    r = current()
    return clear.delete_memory(r.authorize(), req.named, r.request_id, _remaining_ms)


_api_handler = lambda_handler_for(app)


def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    if clear.PURGE_EVENT_KEY in event:  # our own asynchronous continuation, not an API request
        return clear.run_continuation(event, context.get_remaining_time_in_millis)
    return _api_handler(event, context)
