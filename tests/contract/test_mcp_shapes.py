"""The MCP server maps from the API's answer models: a delete's receipt carries every field of the
answer model (``MessagesDeleted``, ``RecordsDeleted``), and the tools' descriptions name the fields
they return from the models, so a field the API adds is neither dropped nor left unsaid."""

from __future__ import annotations

import pytest
from memory_hub.domain.results import FormationRun, MessagesDeleted, RecordAdded, RecordsDeleted
from memory_hub_tools import mcp_server
from pydantic import BaseModel


def _filled(model: type[BaseModel], record_id: str) -> BaseModel:
    """An answer with a distinct value in every field (``record_id`` among the deleted ones)."""
    values: dict[str, object] = {}
    for i, (name, field) in enumerate(model.model_fields.items(), start=1):
        values[name] = i if field.annotation is int else [f"{name}-{i}"]
    values["deleted_ids"] = [record_id]
    return model.model_validate(values)


@pytest.mark.parametrize(
    ("model", "record_id"), [(MessagesDeleted, "msg-1"), (RecordsDeleted, "atom-1")], ids=["message", "record"]
)
def test_the_receipt_keeps_every_field_of_the_answer(model: type[BaseModel], record_id: str) -> None:
    data = _filled(model, record_id)
    receipt = mcp_server._receipt(record_id, data)  # type: ignore[arg-type]
    for name in model.model_fields:
        assert receipt[mcp_server.SHOWN_AS.get(name, name)] == getattr(data, name), name
    assert set(receipt) == {*model.model_fields, *mcp_server.RECEIPT_EXTRA}
    assert receipt["records_deleted"] == getattr(data, "records_deleted", 0)
    assert receipt["message"].startswith(f"Deleted {record_id}")


def test_a_receipt_says_when_nothing_was_found() -> None:
    data = RecordsDeleted(deleted_count=0, deleted_ids=[], not_found_ids=["atom-1"], files_deleted=0, audit_ids=[])
    receipt = mcp_server._receipt("atom-1", data)
    assert receipt["not_found_ids"] == ["atom-1"] and "Nothing was deleted" in receipt["message"]


@pytest.mark.parametrize(
    ("description", "models"),
    [
        ("ADD_DESCRIPTION", (RecordAdded,)),
        ("FORM_NOW_DESCRIPTION", (FormationRun,)),
        ("DELETE_DESCRIPTION", (MessagesDeleted, RecordsDeleted)),
    ],
)
def test_descriptions_name_the_fields_of_the_answer(description: str, models: tuple[type[BaseModel], ...]) -> None:
    text = getattr(mcp_server, description)
    for model in models:
        for name in model.model_fields:
            assert mcp_server.SHOWN_AS.get(name, name) in text, (description, name)
