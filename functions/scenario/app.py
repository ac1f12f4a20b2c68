"""ScenarioFunction: L2 scenario files (§5) — ls, read, write, rm, count."""

from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Body

from memory_hub import scenario
from memory_hub.api import envelope, lambda_handler_for, make_app
from memory_hub.edge import current
from memory_hub.schemas import ScenarioCount, ScenarioLs, ScenarioRead, ScenarioRm, ScenarioWrite

app = make_app()


@app.post("/v3/scenario/ls", summary="List scenario files (files only, sorted, paged)", tags=["L2 scenario"])
def ls(req: Annotated[ScenarioLs, Body(embed=False)]):
    return envelope(scenario.ls(current().isolation, req.path_prefix, req.limit, req.next_token))


@app.post("/v3/scenario/read", summary="Read one scenario file (content: null when missing)", tags=["L2 scenario"])
def read(req: Annotated[ScenarioRead, Body(embed=False)]):
    return envelope(scenario.read(current().isolation, req.path))


@app.post("/v3/scenario/write", summary="Create or overwrite a file; versions 1, 2, …", tags=["L2 scenario"])
def write(req: Annotated[ScenarioWrite, Body(embed=False)]):
    return envelope(scenario.write(current().isolation, req.path, req.content, req.summary, req.expected_version))


@app.post("/v3/scenario/rm", summary="Remove a file, or a folder (path ending in /)", tags=["L2 scenario"])
def rm(req: Annotated[ScenarioRm, Body(embed=False)]):
    return envelope(scenario.rm(current().isolation, req.path))


@app.post("/v3/scenario/count", summary="Count files under a prefix", tags=["L2 scenario"])
def count(req: Annotated[ScenarioCount, Body(embed=False)]):
    return envelope(scenario.count(current().isolation, req.path_prefix))


lambda_handler = lambda_handler_for(app)
