"""Shared fixtures: one embedded stack (moto in process, resources from template.yaml) per session.

Tests isolate themselves by using fresh team/agent ids (``scope`` fixture), not by resetting moto.
"""

from __future__ import annotations

import json
import socket
import uuid
from dataclasses import dataclass
from typing import Any

import pytest

ADMIN_KEY = "mhk_000000000000_test-bootstrap-admin-key-0123456789"
SERVICE_ID = "default"


@pytest.fixture(scope="session")
def stack():
    from memory_hub_local.emulator import Stack

    stack = Stack.start(admin_key=ADMIN_KEY)
    yield stack
    stack.stop()


@pytest.fixture(scope="session")
def pool(stack):
    from memory_hub_local.emulator import FunctionPool

    return FunctionPool(stack.template)


@dataclass
class Answer:
    status: int
    body: Any
    headers: dict[str, str]

    @property
    def data(self) -> Any:
        return self.body.get("data") if isinstance(self.body, dict) else None

    @property
    def message(self) -> str:
        return self.body.get("message", "") if isinstance(self.body, dict) else ""


class Api:
    """Sends requests through the local gateway's routing as real API Gateway proxy events."""

    def __init__(self, stack, pool, key: str = ADMIN_KEY, service_id: str = SERVICE_ID) -> None:
        from memory_hub_local.gateway import Router

        self.stack, self.pool, self.key, self.service_id = stack, pool, key, service_id
        self.router = Router(stack)

    def with_key(self, key: str) -> "Api":
        return Api(self.stack, self.pool, key, self.service_id)

    def raw(self, method: str, path: str, body: bytes | None, headers: dict[str, str] | None = None,
            query: dict[str, list[str]] | None = None) -> Answer:
        from memory_hub_local.gateway import api_event

        target = self.router.match(path)
        assert target is not None, path
        event = api_event(method, path, headers or {}, body, query, target[1])
        result = self.pool.invoke(target[0], event)
        text = result.get("body") or ""
        try:
            parsed = json.loads(text)
        except ValueError:
            parsed = text
        merged = dict(result.get("headers") or {})
        for name, values in (result.get("multiValueHeaders") or {}).items():
            merged[name] = values[-1]
        return Answer(int(result["statusCode"]), parsed, merged)

    def auth_headers(self) -> dict[str, str]:
        headers = {"x-tdai-service-id": self.service_id}
        if self.key is not None:
            headers["Authorization"] = f"Bearer {self.key}"
        return headers

    def post(self, path: str, body: Any = None, headers: dict[str, str] | None = None, **kw: Any) -> Answer:
        payload = json.dumps({} if body is None else body).encode()
        return self.raw("POST", path, payload, {**self.auth_headers(), **(headers or {})}, **kw)


@pytest.fixture(scope="session")
def api(stack, pool) -> Api:
    return Api(stack, pool)


@dataclass
class Scope:
    team_id: str
    agent_id: str
    user_id: str

    @property
    def memory_id(self) -> str:
        return f"chat_memory-{self.team_id}-{self.agent_id}"

    def body(self, **fields: Any) -> dict[str, Any]:
        return {"team_id": self.team_id, "agent_id": self.agent_id, "user_id": self.user_id, **fields}


@pytest.fixture
def scope() -> Scope:
    suffix = uuid.uuid4().hex[:10]
    return Scope(f"team{suffix}", f"agent{suffix}", f"user-{suffix}")


def make_scope() -> Scope:
    suffix = uuid.uuid4().hex[:10]
    return Scope(f"team{suffix}", f"agent{suffix}", f"user-{suffix}")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="session")
def live(stack):
    """The real HTTP servers of `make run` on free ports: (api_url, lambda_url, aws_url)."""
    from memory_hub_local.gateway import serve

    ports = free_port(), free_port(), free_port()
    servers = serve(stack, *ports)
    yield tuple(f"http://127.0.0.1:{p}" for p in ports)
    for server in servers:
        server.shutdown()
