"""TransferFunction: export a memory (or one person's part of it) as the memory-tdai tree, and
import such a tree. Large jobs continue in an asynchronous invocation of this function."""

from typing import Annotated, Any

from aws_lambda_powertools.event_handler.openapi.params import Body
from memory_hub.domain import transfer
from memory_hub.domain.results_admin import ExportJob, ImportCreated, ImportJobState
from memory_hub.domain.transfer import exporting, importing
from memory_hub.edge.pipeline import current
from memory_hub.edge.resolver import lambda_handler_for, make_app
from memory_hub.edge.schemas.transfer import ExportStart, ExportStatus, ImportCreate, ImportJob
from memory_hub.settings import get_settings

get_settings()  # a missing setting fails the cold start, naming the variable
app = make_app()


@app.post(
    "/v3/memory/export",
    summary="Export a memory (or one user's part) as a memory-tdai .tar.gz",
    tags=["export and import"],
)
def memory_export(req: Annotated[ExportStart, Body(embed=False)]) -> ExportJob:
    r = current()
    return exporting.start(r.authorize(), req.named, req.user_id, req.shared, r.request_id)


@app.post(
    "/v3/memory/export/status", summary="An export's state; its download URL once done", tags=["export and import"]
)
def memory_export_status(req: Annotated[ExportStatus, Body(embed=False)]) -> ExportJob:
    return exporting.status(current().authorize(), req.export_id)


@app.post(
    "/v3/memory/import", summary="Begin an import: a presigned URL to upload the tree to", tags=["export and import"]
)
def memory_import(req: Annotated[ImportCreate, Body(embed=False)]) -> ImportCreated:
    r = current()
    return importing.create(
        r.authorize(), req.team_id, req.agent_id, req.user_id, req.from_team, req.from_agent, r.request_id
    )


@app.post(
    "/v3/memory/import/start",
    summary="Ingest the uploaded tree (asynchronously when large)",
    tags=["export and import"],
)
def memory_import_start(req: Annotated[ImportJob, Body(embed=False)]) -> ImportJobState:
    return importing.begin(current().authorize(), req.import_id)


@app.post(
    "/v3/memory/import/status",
    summary="An import's state, counts per layer, or its problems",
    tags=["export and import"],
)
def memory_import_status(req: Annotated[ImportJob, Body(embed=False)]) -> ImportJobState:
    return importing.status(current().authorize(), req.import_id)


_api_handler = lambda_handler_for(app)


def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    if transfer.JOB_EVENT_KEY in event:  # our own asynchronous continuation, not an API request
        return transfer.run_job(event)
    return _api_handler(event, context)
