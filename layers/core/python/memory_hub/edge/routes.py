"""Every route of the API: the role it needs and the function that serves it.

One table shared by the edge (401 → 404/405 → 403 ordering) and by the tests that hold
``template.yaml`` to it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Route:
    role: str
    function: str
    isolated: bool = False  # needs team_id/agent_id/user_id (body or x-tdai-* headers)
    nullable: tuple[str, ...] = ()  # top-level keys whose null is meaningful (elsewhere null = absent)
    # its body may name a team_id (the team it acts on, or which pair spells its memory_id): one
    # outside the key's teams is refused before the fields are checked
    names_team: bool = False
    needs_session: bool = False  # a session (body or header) is required: named beside the fields' problems


def _isolated(role: str, function: str) -> Route:
    return Route(role, function, isolated=True)


ROUTES: dict[str, Route] = {
    **{f"/v3/scenario/{op}": _isolated("reader", "ScenarioFunction") for op in ("ls", "read", "count")},
    **{f"/v3/scenario/{op}": _isolated("writer", "ScenarioFunction") for op in ("write", "rm")},
    **{f"/v3/core/{op}": _isolated("reader", "MemoryFunction") for op in ("read", "count")},
    "/v3/core/write": _isolated("writer", "MemoryFunction"),
    **{f"/v3/conversation/{op}": _isolated("reader", "MemoryFunction") for op in ("query", "search", "count")},
    "/v3/conversation/add": Route("writer", "MemoryFunction", isolated=True, needs_session=True),
    **{f"/v3/atomic/{op}": _isolated("reader", "MemoryFunction") for op in ("query", "search", "count")},
    **{f"/v3/atomic/{op}": _isolated("writer", "MemoryFunction") for op in ("add", "update")},
    "/v3/formation/status": _isolated("reader", "MemoryFunction"),
    "/v3/formation/run": _isolated("writer", "MemoryFunction"),
    "/v3/conversation/delete": _isolated("writer", "DeleteFunction"),
    "/v3/atomic/delete": _isolated("writer", "DeleteFunction"),
    "/v3/user-memory/delete": Route("admin", "DeleteFunction", nullable=("content_ids",), names_team=True),
    "/v2/memory": Route("admin", "DeleteFunction", nullable=("memoryContentId",), names_team=True),
    "/v3/chat-memory/clear": Route("admin", "ClearFunction"),
    "/v3/memory/delete": Route("admin", "ClearFunction", names_team=True),
    **{f"/v3/memory/{op}": Route("admin", "AdminFunction", names_team=True) for op in ("create", "list")},
    "/v3/memory/get": Route("admin", "AdminFunction", names_team=True),
    "/v3/memory/update": Route("admin", "AdminFunction", nullable=("retention_days",), names_team=True),
    **{f"/v3/admin/keys/{op}": Route("admin", "AdminFunction") for op in ("create", "list", "revoke")},
    "/v3/audit/query": Route("admin", "AdminFunction"),
    **{
        path: Route("admin", "TransferFunction")
        for path in (
            "/v3/memory/export/status",
            "/v3/memory/import/start",
            "/v3/memory/import/status",
        )
    },
    "/v3/memory/import": Route("admin", "TransferFunction", names_team=True),
    "/v3/memory/export": Route("admin", "TransferFunction", names_team=True),
}

# Served without auth and without the envelope; the console's assets live under /console/.
PUBLIC_GET = ("/health", "/openapi.json", "/docs", "/console")
PUBLIC_PREFIXES = ("/docs/", "/console/")


def is_public(path: str) -> bool:
    return path in PUBLIC_GET or path.startswith(PUBLIC_PREFIXES)
