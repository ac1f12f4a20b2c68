"""AdminFunction: keys, audit, memory assets; also /health, /openapi.json, /docs,
/console and every unknown path (the API's catch-all route), so 401/404/405 answer the same on AWS."""

from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Body
from memory_hub.domain import assets, audit, keys
from memory_hub.domain.results_admin import Asset, Assets, AssetWithCounts, Events, KeyCreated, KeyRevoked, Keys
from memory_hub.edge import public
from memory_hub.edge.pipeline import current
from memory_hub.edge.resolver import lambda_handler_for, make_app
from memory_hub.edge.schemas.admin import (
    AuditQuery,
    KeyCreate,
    KeyList,
    KeyRevoke,
    MemoryCreate,
    MemoryGet,
    MemoryList,
    MemoryUpdate,
)
from memory_hub.settings import get_settings

get_settings()  # a missing setting fails the cold start, naming the variable
app = make_app()


@app.post("/v3/admin/keys/create", summary="Create a key (its secret is shown once)", tags=["admin"])
def key_create(req: Annotated[KeyCreate, Body(embed=False)]) -> KeyCreated:
    r = current()
    return keys.create(r.authorize(), req.role, req.team_ids, req.name, r.request_id)


@app.post("/v3/admin/keys/list", summary="List keys within the caller's teams (never a secret)", tags=["admin"])
def key_list(req: Annotated[KeyList, Body(embed=False)]) -> Keys:
    return keys.list_keys(current().authorize())


@app.post("/v3/admin/keys/revoke", summary="Revoke a key (idempotent)", tags=["admin"])
def key_revoke(req: Annotated[KeyRevoke, Body(embed=False)]) -> KeyRevoked:
    r = current()
    return keys.revoke(r.authorize(), req.key_id, r.request_id)


@app.post("/v3/audit/query", summary="Audit events, newest first", tags=["admin"])
def audit_query(req: Annotated[AuditQuery, Body(embed=False)]) -> Events:
    return audit.query(current().authorize(), req.memory_id, req.action, req.limit, req.next_token)


@app.post("/v3/memory/create", summary="Create the (team, agent) memory asset (idempotent)", tags=["assets"])
def memory_create(req: Annotated[MemoryCreate, Body(embed=False)]) -> Asset:
    fields = req.model_dump(include={"name", "visibility", "acl", "bindings", "formation"}, exclude_none=True)
    return assets.create(current().authorize(), req.team_id, req.agent_id, fields)


@app.post("/v3/memory/get", summary="An asset with its per-layer counts", tags=["assets"])
def memory_get(req: Annotated[MemoryGet, Body(embed=False)]) -> AssetWithCounts:
    return assets.describe(current().authorize(), req.named)


@app.post("/v3/memory/list", summary="Assets by memory_id, paged", tags=["assets"])
def memory_list(req: Annotated[MemoryList, Body(embed=False)]) -> Assets:
    return assets.list_assets(current().authorize(), req.team_id, req.limit, req.next_token)


@app.post(
    "/v3/memory/update", summary="Change name, visibility, acl, bindings, retention_days or formation", tags=["assets"]
)
def memory_update(req: Annotated[MemoryUpdate, Body(embed=False)]) -> Asset:
    r = current()
    fields = {"name", "visibility", "acl", "bindings", "retention_days", "formation"} & req.model_fields_set
    changes = req.model_dump(include=fields, exclude_none=True)  # null counts as absent, inside lists too
    if "retention_days" in fields and req.retention_days is None:
        changes["retention_days"] = None  # the one meaningful null: back to the deployment default
    return assets.update(r.authorize(), req.named, changes, r.request_id)


lambda_handler = lambda_handler_for(app, public.answer)
