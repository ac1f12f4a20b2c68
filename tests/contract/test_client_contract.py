"""The tools' client is the API, route for route (``memory_hub_tools.client``): every route of
``memory_hub.edge.routes.ROUTES`` has one method; each method takes exactly the fields of the
request model its route's handler validates — their names, and which are required — sends them
under those names, and returns the type the handler answers. A field added to a request model
or renamed there fails here until the client has it (``atomic/search`` once lacked ``mode`` and the
time range, and the CLI, the MCP server and the bench each restated fields by hand)."""

from __future__ import annotations

import inspect
import typing
from functools import cache
from typing import Any

import pytest
from memory_hub.domain.results import RecordAdded
from memory_hub.edge.error_docs import ALIASES, IDEMPOTENT
from memory_hub.edge.routes import ROUTES
from memory_hub_tools.client import MemoryHubClient, TransportError
from memory_hub_tools.transport import Headers, Reply
from pydantic import BaseModel

HELPERS = {"call", "transport", "find_record"}  # public methods that are not one route each
ISOLATION = ("team_id", "agent_id", "user_id")  # given first: the client sends no x-tdai-* headers
# Fields a route requires that its model leaves optional because a header may carry them instead.
REQUIRED_BY_THE_ROUTE = {"/v3/conversation/add": {"session_id"}}


class Sent(Exception):
    """What a method handed to the transport (raised instead of sending)."""


class Recorder:
    """Stands for the transport: records the request and sends nothing."""

    def post(self, path: str, body: Any = None, headers: Any = None, **options: Any) -> Reply:
        raise Sent(path, body, options)


@cache
def handlers() -> dict[str, tuple[type[BaseModel], Any]]:
    """Each route's request model and what its handler answers, read from the functions' resolvers."""
    from memory_hub_tools.openapi.spec import _apps

    found: dict[str, tuple[type[BaseModel], Any]] = {}
    for app in _apps():
        for route in app._static_routes:
            request = inspect.signature(route.func).parameters["req"].annotation
            found[route.path] = (typing.get_args(request)[0], app.answers[route.path])
    return found


def route_methods(cls: type = MemoryHubClient) -> list[str]:
    return sorted(
        name
        for name, _ in inspect.getmembers(cls, inspect.isfunction)
        if not name.startswith("_") and name not in HELPERS
    )


def sent(method: str, cls: type = MemoryHubClient) -> tuple[str, dict[str, Any], dict[str, Any], dict[str, Any]]:
    """(path, body, transport options, the values given) of one call with every parameter given."""
    client = cls("http://127.0.0.1:9", api_key="mhk_test")
    client.transport = Recorder
    parameters = list(inspect.signature(getattr(cls, method)).parameters)[1:]
    values = {name: f"<{name}>" for name in parameters}
    with pytest.raises(Sent) as caught:
        getattr(client, method)(**values)
    path, body, options = caught.value.args
    return path, body, options, values


def problems(method: str, cls: type = MemoryHubClient) -> list[str]:
    """How a method differs from its route's request model (nothing: it is the model)."""
    path = sent(method, cls)[0]
    model, _ = handlers()[path]
    parameters = dict(inspect.signature(getattr(cls, method)).parameters)
    parameters.pop("self")
    extra = {"idempotency_key"} if path in IDEMPOTENT else set()
    found = [f"{path}: not a field: {n}" for n in sorted(set(parameters) - set(model.model_fields) - extra)]
    found += [f"{path}: missing: {n}" for n in sorted(set(model.model_fields) - set(parameters))]
    isolated = ROUTES[path].isolated
    for name, parameter in parameters.items():
        field = model.model_fields.get(name)
        if field is None:
            continue
        required = field.is_required() or (isolated and name in ISOLATION)
        required = required or name in REQUIRED_BY_THE_ROUTE.get(path, ())
        if required != (parameter.default is inspect.Parameter.empty):
            found.append(f"{path}: {name} is {'optional' if required else 'required'} in the client")
        positional = isolated and name in ISOLATION
        if positional != (parameter.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD):
            found.append(f"{path}: {name} should be {'positional' if positional else 'keyword-only'}")
    if isolated and list(parameters)[:3] != list(ISOLATION):
        found.append(f"{path}: team_id, agent_id, user_id come first")
    return found


def test_every_route_has_one_method():
    paths = [sent(method)[0] for method in route_methods()]
    assert sorted(paths) == sorted(ROUTES), "a route without a method, or a method on no route"
    assert set(handlers()) == set(ROUTES)


@pytest.mark.parametrize("method", route_methods())
def test_each_method_takes_its_request_models_fields(method):
    assert problems(method) == []


@pytest.mark.parametrize("method", route_methods())
def test_each_method_sends_its_parameters_under_the_fields_names(method):
    path, body, options, values = sent(method)
    key = values.pop("idempotency_key", None)
    assert body == values
    assert options.get("idempotency_key") == key
    if path in ALIASES:
        assert options["query"] == {"Action": "DeleteUserMemory"}


@pytest.mark.parametrize("method", route_methods())
def test_each_method_returns_what_its_route_answers(method):
    path = sent(method)[0]
    declared = typing.get_type_hints(getattr(MemoryHubClient, method))["return"]
    expected = ALIASES[path][0] if path in ALIASES else handlers()[path][1]  # an alias answers its own shape
    assert declared == expected, path


def test_the_check_is_live():
    """A method that lacks a field, adds one, or makes an optional one required is caught."""

    class Drifted(MemoryHubClient):
        def atomic_search(self, team_id: str, agent_id: str, user_id: str, *, query: str, limit: int = 5, top: int = 1):
            return self._post("/v3/atomic/search", RecordAdded, locals())

        def atomic_count(self, team_id: str, agent_id: str, user_id: str, *, type: str):
            return self._post("/v3/atomic/count", RecordAdded, locals())

    found = problems("atomic_search", Drifted)
    assert "/v3/atomic/search: not a field: top" in found
    assert {"/v3/atomic/search: missing: mode", "/v3/atomic/search: missing: time_start"} <= set(found)
    assert "/v3/atomic/count: type is required in the client" in problems("atomic_count", Drifted)


def _replying(data: Any) -> MemoryHubClient:
    class Replying:
        def post(self, path: str, body: Any = None, headers: Any = None, **options: Any) -> Reply:
            envelope = b'{"code": 0, "message": "ok", "request_id": "req-0", "data": ' + data + b"}"
            return Reply(200, Headers(), envelope)

    client = MemoryHubClient("http://127.0.0.1:9", api_key="mhk_test")
    client.transport = Replying
    return client


def test_the_data_comes_back_as_the_answer_model_or_a_one_line_error():
    added = _replying(b'{"id": "atom-1", "version": 1, "created": true, "reinforced_count": 1}').atomic_add(
        "t", "a", "u", content="c"
    )
    assert isinstance(added, RecordAdded) and added.id == "atom-1" and added.created is True
    with pytest.raises(TransportError, match=r"^/v3/atomic/add: the answer is not a RecordAdded \(created: "):
        _replying(b'{"id": "atom-1", "version": 1, "reinforced_count": 1}').atomic_add("t", "a", "u", content="c")
