"""ScenarioFunction: L2 scenario files — ls, read, write, rm, count."""

from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Body
from memory_hub.domain import scenario
from memory_hub.domain.results import ScenarioCounted, ScenarioFile, ScenarioList, ScenarioRemoved, ScenarioWritten
from memory_hub.edge.pipeline import current
from memory_hub.edge.resolver import lambda_handler_for, make_app
from memory_hub.edge.schemas.scenario import ScenarioCount, ScenarioLs, ScenarioRead, ScenarioRm, ScenarioWrite
from memory_hub.settings import get_settings

get_settings()  # a missing setting fails the cold start, naming the variable
app = make_app()
TAGS = ["L2 scenario"]


@app.post("/v3/scenario/ls", summary="List scenario files (files only, sorted by path, paged)", tags=TAGS)
def ls(req: Annotated[ScenarioLs, Body(embed=False)]) -> ScenarioList:
    r = current()
    return scenario.ls(r.isolated_scope, req.path_prefix, req.limit, req.next_token, r.authorize)


@app.post("/v3/scenario/read", summary="Read one file (content: null when missing)", tags=TAGS)
def read(req: Annotated[ScenarioRead, Body(embed=False)]) -> ScenarioFile:
    r = current()
    return scenario.read(r.isolated_scope, req.path, r.authorize)


@app.post("/v3/scenario/write", summary="Create or overwrite a file; versions 1, 2, …", tags=TAGS)
def write(req: Annotated[ScenarioWrite, Body(embed=False)]) -> ScenarioWritten:
    r = current()
    return scenario.write(
        r.isolated_scope, req.path, req.content, req.summary, req.expected_version, r.authorize, r.request_id
    )


@app.post("/v3/scenario/rm", summary="Remove a file, or a folder (path ending in /)", tags=TAGS)
def rm(req: Annotated[ScenarioRm, Body(embed=False)]) -> ScenarioRemoved:
    r = current()
    return scenario.rm(r.isolated_scope, req.path, r.authorize, r.request_id)


@app.post("/v3/scenario/count", summary="Count files under a prefix", tags=TAGS)
def count(req: Annotated[ScenarioCount, Body(embed=False)]) -> ScenarioCounted:
    r = current()
    return scenario.count(r.isolated_scope, req.path_prefix, r.authorize)


lambda_handler = lambda_handler_for(app)
