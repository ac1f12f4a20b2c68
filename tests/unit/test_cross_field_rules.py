"""A rule across fields is named ``(root)`` beside the fields' own problems (a 400 names each bad
field), and is asked only when the fields it reads are right themselves (edge/schemas/common.py
``across``)."""

from __future__ import annotations

import pytest
from memory_hub.domain.scope import memory_id_of
from memory_hub.edge.resolver import validation_message
from memory_hub.edge.schemas.admin import ChatMemoryClear, DeleteUserMemory, MemoryGet
from memory_hub.edge.schemas.memory import AtomicUpdate
from memory_hub.edge.schemas.transfer import ImportCreate
from pydantic import BaseModel, ValidationError

MEMORY = memory_id_of("team", "agent")
NOTHING = "(root): nothing to update: give content, background, tags, metadata or source_message_ids"


def _answer(model: type[BaseModel], body: dict) -> str:
    try:
        model.model_validate(body)
    except ValidationError as exc:
        return validation_message(list(exc.errors()))
    return "ok"


@pytest.mark.parametrize(
    ("model", "body", "said"),
    [
        (AtomicUpdate, {"id": "atom-1"}, NOTHING),
        (
            AtomicUpdate,
            {"id": "atom-1", "expected_version": "1"},
            f"expected_version: must be a whole number; {NOTHING}",
        ),
        (AtomicUpdate, {"id": "atom-1", "content": ""}, "content: must not be empty"),  # its field's own problem
        (AtomicUpdate, {"id": "atom-1", "tags": None, "content": "x"}, "ok"),
        (MemoryGet, {"memory_id": MEMORY, "team_id": "team"}, "(root): give team_id and agent_id together"),
        (
            MemoryGet,
            {"memory_id": MEMORY, "team_id": "team", "agent_id": "other"},
            "(root): team_id and agent_id do not spell memory_id",
        ),
        (MemoryGet, {"memory_id": MEMORY, "team_id": "team", "agent_id": "agent"}, "ok"),
        (
            MemoryGet,
            {"memory_id": MEMORY, "team_id": "bad team", "agent_id": "agent"},
            "team_id: must match ^[A-Za-z0-9_@-][A-Za-z0-9._@-]{0,63}$",
        ),
        (
            DeleteUserMemory,
            {"appId": MEMORY, "team_id": "team", "userMemoryId": 5},
            "userMemoryId: must be a string; (root): give team_id and agent_id together",
        ),
        (
            ImportCreate,
            {"team_id": "t", "agent_id": "a", "from_team": "x", "user_id": 3},
            "user_id: must be a string; (root): from_team and from_agent go together",
        ),
        (
            ChatMemoryClear,
            {
                "memory_ids": ["chat_memory-a-b"],
                "targets": [{"memory_id": MEMORY, "team_id": "team", "agent_id": "agent"}],
            },
            "(root): targets 0: memory_id is not one of memory_ids",
        ),
        (
            ChatMemoryClear,
            {"memory_ids": [3], "targets": [{"memory_id": MEMORY, "team_id": "team", "agent_id": "agent"}]},
            "memory_ids.0: must be a string",  # the rule reads memory_ids: not asked while they are wrong
        ),
    ],
)
def test_a_rule_across_fields_is_named_beside_the_fields_problems(model, body, said):
    assert _answer(model, body) == said
