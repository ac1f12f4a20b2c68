"""L2 scenario and L3 core request models."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from ...domain.fields import FILES_LIMIT, ExpectedVersion, Summary, Text, rule
from ...domain.formed import FORMED_FOLDER as FORMED
from .common import FilePath, Isolated, PathPrefix, RmPath


class ScenarioLs(Isolated):
    path_prefix: PathPrefix = ""
    limit: int = Field(FILES_LIMIT, ge=1, le=FILES_LIMIT)
    next_token: str | None = None


class ScenarioCount(Isolated):
    path_prefix: PathPrefix = ""


class ScenarioRead(Isolated):
    path: FilePath


WrittenPath = Annotated[
    FilePath,
    rule(lambda v: "formed/ is written by formation" if v.startswith(FORMED) else None),
    Field(description="a relative .md path; not under formed/ (formation writes there; rm works)"),
]


class ScenarioWrite(Isolated):
    path: WrittenPath
    content: Text
    summary: Summary | None = Field(None, description='persists until a write sets a new one; "" removes it')
    expected_version: ExpectedVersion | None = Field(
        None, description="0 = the file must not exist; versions are whole numbers 0..2^53"
    )


class ScenarioRm(Isolated):
    path: RmPath


class CoreRead(Isolated):
    pass


class CoreWrite(Isolated):
    content: Text
