"""AdminFunction: keys (§2), audit (§11), memory assets (§4); also /health, /openapi.json, /docs
and every unknown path (the API's catch-all route), so 401/404/405 answer the same on AWS."""

from typing import Annotated, Any

from aws_lambda_powertools.event_handler.openapi.params import Body

from memory_hub import audit, keys
from memory_hub.api import envelope, lambda_handler_for, make_app
from memory_hub.docs import public_answer
from memory_hub.edge import current
from memory_hub.schemas import AuditQuery, KeyCreate, KeyList, KeyRevoke

app = make_app()


def _admin() -> Any:
    return current().check_access()


@app.post("/v3/admin/keys/create", summary="Create a key (secret shown once)", tags=["admin"])
def key_create(req: Annotated[KeyCreate, Body(embed=False)]):
    principal = _admin()
    return envelope(keys.create(principal, req.role, req.team_ids, req.name, current().request_id))


@app.post("/v3/admin/keys/list", summary="List keys within the caller's teams (never a secret)", tags=["admin"])
def key_list(req: Annotated[KeyList, Body(embed=False)]):
    return envelope(keys.list_keys(_admin()))


@app.post("/v3/admin/keys/revoke", summary="Revoke a key (idempotent)", tags=["admin"])
def key_revoke(req: Annotated[KeyRevoke, Body(embed=False)]):
    principal = _admin()
    return envelope(keys.revoke(principal, req.key_id, current().request_id))


@app.post("/v3/audit/query", summary="Audit events, newest first", tags=["admin"])
def audit_query(req: Annotated[AuditQuery, Body(embed=False)]):
    principal = _admin()
    return envelope(audit.query(principal, req.memory_id, req.action, req.limit, req.next_token))


lambda_handler = lambda_handler_for(app, public_answer)
