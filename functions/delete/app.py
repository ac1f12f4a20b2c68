"""DeleteFunction: ID-based deletes — L0 messages, L1 records, one user's memory
and its DeleteUserMemory alias. There is no delete by content anywhere."""

import json
from typing import Annotated, Any, Literal

from aws_lambda_powertools.event_handler.openapi.params import Body, Query
from memory_hub.domain import assets, atomic, conversation, user_memory
from memory_hub.domain.results import MessagesDeleted, RecordsDeleted
from memory_hub.domain.results_admin import UserMemoryDeleted
from memory_hub.edge.pipeline import current
from memory_hub.edge.resolver import lambda_handler_for, make_app
from memory_hub.edge.schemas.admin import DeleteUserMemory, UserMemoryDelete
from memory_hub.edge.schemas.memory import AtomicDelete, ConversationDelete
from memory_hub.settings import get_settings

get_settings()  # a missing setting fails the cold start, naming the variable
assets.read_only()  # this function's role only reads AssetsTable
app = make_app()
ALIAS_PATH = "/v2/memory"


@app.post("/v3/conversation/delete", summary="Delete messages by id and/or whole sessions", tags=["L0 conversation"])
def conversation_delete(req: Annotated[ConversationDelete, Body(embed=False)]) -> MessagesDeleted:
    r = current()
    return conversation.delete(r.isolated_scope, req.message_ids, req.session_ids, r.authorize, r.request_id)


@app.post(
    "/v3/atomic/delete", summary="Delete records by id (optionally only at expected versions)", tags=["L1 atomic"]
)
def atomic_delete(req: Annotated[AtomicDelete, Body(embed=False)]) -> RecordsDeleted:
    r = current()
    return atomic.delete(r.isolated_scope, req.ids, req.expected_versions, r.authorize, r.request_id)


@app.post("/v3/user-memory/delete", summary="Erase a user's L0/L1 in a memory, or one item of theirs", tags=["erasure"])
def user_memory_delete(req: Annotated[UserMemoryDelete, Body(embed=False)]) -> UserMemoryDeleted:
    r = current()
    return user_memory.delete(r.authorize(), req.named, req.user_id, req.content_id, r.request_id)


@app.post(
    ALIAS_PATH,
    summary="DeleteUserMemory: {appId, userMemoryId, memoryContentId?} → {requestId, result}",
    tags=["erasure"],
)
def delete_user_memory(
    req: Annotated[DeleteUserMemory, Body(embed=False)],
    action: Annotated[Literal["DeleteUserMemory"], Query(alias="Action")],
) -> UserMemoryDeleted:
    r = current()
    return user_memory.delete(r.authorize(), req.named, req.userMemoryId, req.content_id, r.request_id)


_api_handler = lambda_handler_for(app)


# The alias's own names for the fields a message names (``<field>: <problem>``, joined by "; ").
_ALIAS_FIELDS = {"memory_id": "appId", "user_id": "userMemoryId", "content_ids": "memoryContentId"}


def _alias_names(message: str) -> str:
    """``message`` with the fields it names as the alias's request calls them."""
    parts = []
    for part in message.split("; "):
        field, colon, problem = part.partition(": ")
        head, dot, rest = field.partition(".")
        parts.append(f"{_ALIAS_FIELDS.get(head, head)}{dot}{rest}{colon}{problem}" if colon else part)
    return "; ".join(parts)


def _alias_answer(response: dict[str, Any]) -> dict[str, Any]:
    """The DeleteUserMemory answer shape: {requestId, result: true} or {requestId, code, message}."""
    answer = json.loads(response.get("body") or "{}")
    request_id = answer.get("request_id") or response.get("headers", {}).get("x-request-id")
    if response.get("statusCode") == 200 and answer.get("code") == 0:
        body: dict[str, Any] = {"requestId": request_id, "result": True}
    else:
        body = {
            "requestId": request_id,
            "code": int(answer.get("code") or response.get("statusCode", 500)),
            "message": _alias_names(str(answer.get("message", ""))),
        }
    return dict(response, body=json.dumps(body, ensure_ascii=False))


def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    response = _api_handler(event, context)
    return _alias_answer(response) if event.get("path") == ALIAS_PATH else response
