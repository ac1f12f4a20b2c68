"""Export and import (the ``memory-tdai`` tree) request models."""

from __future__ import annotations

from typing import Annotated

from pydantic import ConfigDict, Field

from .admin import NamesMemory, UserId
from .common import FreeId, Strict, TeamId, across

JobId = Annotated[str, Field(min_length=1, max_length=100)]


class ExportStart(NamesMemory):
    user_id: UserId | None = Field(None, description="only this person's L0/L1 (their right of access)")
    shared: bool = Field(False, description="with user_id: add the agent's shared L2/L3 (they may describe others)")


class ExportStatus(Strict):
    export_id: JobId


class ImportCreate(Strict):
    model_config = ConfigDict(
        json_schema_extra={"dependentRequired": {"from_team": ["from_agent"], "from_agent": ["from_team"]}}
    )

    team_id: TeamId
    agent_id: TeamId
    user_id: UserId | None = Field(None, description="the user of lines that name none (or 'default')")
    from_team: FreeId | None = Field(None, description="with from_agent: the source pair of a tree naming several")
    from_agent: FreeId | None = None

    _both_or_neither = across(
        "from_team",
        "from_agent",
        rule=lambda t, a: "from_team and from_agent go together" if (t is None) != (a is None) else None,
    )


class ImportJob(Strict):
    import_id: JobId
