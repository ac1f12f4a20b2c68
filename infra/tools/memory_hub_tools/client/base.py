"""What every route method of the client stands on: the connection, the envelope, and one way to
send a method's parameters as a route's body and read its ``data`` as the route's answer model.

A route method's parameters are its request model's fields (``tests/contract/test_client_contract.py``
holds them to ``memory_hub.edge.schemas``), so its body is its parameters: :meth:`Sender._post` takes
the method's ``locals()`` and leaves out what was not given (``None``, or :data:`UNSET` where null
means something: ``Route.nullable``). The answer is parsed into the type the route's handler
returns (``memory_hub.domain.results*``), so a field the API adds reaches every caller at once.
"""

from __future__ import annotations

import enum
import os
from typing import Any, TypeVar

from memory_hub.edge.routes import ROUTES
from pydantic import BaseModel, TypeAdapter, ValidationError

from ..transport import (
    DEFAULT_ENDPOINT,
    DEFAULT_SERVICE_ID,
    DEFAULT_TIMEOUT,
    ConfigError,
    MemoryHubError,
    Reply,
    Transport,
    TransportError,
)

A = TypeVar("A", bound=BaseModel)
# Parameters that are not fields of the body.
_NOT_BODY = frozenset({"self", "idempotency_key"})


class Unset(enum.Enum):
    """A parameter left out, where ``None`` would be sent as a meaningful null."""

    UNSET = "unset"


UNSET = Unset.UNSET


class ApiError(MemoryHubError):
    """The API answered with an error envelope (``code`` = HTTP status)."""

    def __init__(
        self,
        code: int,
        message: str,
        *,
        data: Any = None,
        request_id: str | None = None,
        retryable: bool | None = None,
        path: str = "",
    ) -> None:
        self.code = code
        self.message = message
        self.data = data
        self.request_id = request_id
        self.retryable = retryable
        self.path = path
        where = f" on {path}" if path else ""
        rid = f" [{request_id}]" if request_id else ""
        super().__init__(f"{code} {message}{where}{rid}")

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"code": self.code, "message": self.message, "request_id": self.request_id}
        if self.data is not None:
            out["data"] = self.data
        if self.retryable is not None:
            out["retryable"] = self.retryable
        return out


def data_of(reply: Reply, path: str, endpoint: str) -> Any:
    """The envelope's ``data`` of a success; :class:`ApiError` for an error envelope,
    :class:`TransportError` for a reply that is not the envelope at all."""
    envelope = reply.envelope
    if envelope is None:
        what = "an envelope" if reply.is_json else "a JSON envelope"
        raise TransportError(
            f"{path}: HTTP {reply.status} without {what} (is {endpoint} Memory Hub's API?): {reply.raw[:200]!r}"
        )
    if envelope.get("code") != 0 or reply.status >= 400:
        code = envelope.get("code")
        code = code if isinstance(code, int) and code else reply.status
        raise ApiError(
            int(code),
            str(envelope.get("message") or ""),
            data=envelope.get("data"),
            request_id=envelope.get("request_id"),
            retryable=envelope.get("retryable"),
            path=path,
        )
    return envelope.get("data")


def parse(answer: type[A] | TypeAdapter[A], data: Any, path: str) -> A:
    """``data`` as the route's answer model; an answer that is not one is a :class:`TransportError`
    (a server of another version, or not Memory Hub), said in one line."""
    try:
        if isinstance(answer, TypeAdapter):
            return answer.validate_python(data)
        return answer.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "(root)"
        name = getattr(answer, "__name__", "the answer model")
        raise TransportError(f"{path}: the answer is not a {name} ({where}: {first['msg']})") from None


class Sender:
    """The connection of one endpoint + key + service id, and the envelope of its answers."""

    def __init__(
        self,
        endpoint: str | None = None,
        api_key: str | None = None,
        service_id: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
        self.endpoint = (endpoint or os.environ.get("MEMORY_HUB_ENDPOINT") or DEFAULT_ENDPOINT).rstrip("/")
        self.api_key = api_key or os.environ.get("MEMORY_HUB_API_KEY") or None
        self.service_id = service_id or os.environ.get("MEMORY_HUB_SERVICE_ID") or DEFAULT_SERVICE_ID
        self.timeout = timeout
        self._transport: Transport | None = None

    def call(
        self,
        path: str,
        body: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
        *,
        idempotency_key: str | None = None,
    ) -> Any:
        """POST ``body`` to ``path``; returns the envelope's ``data`` as JSON values (raises
        :class:`ApiError`). The route methods return answer models instead."""
        reply = self.transport().post(path, body, headers, idempotency_key=idempotency_key)
        return data_of(reply, path, self.endpoint)

    def transport(self) -> Transport:
        """The connection this client sends with (checked: a key, printable headers, a URL)."""
        if not self.api_key:
            raise ConfigError("no API key: set MEMORY_HUB_API_KEY or pass --api-key")
        for name, value in (("API key", self.api_key), ("service id", self.service_id)):
            if not value.isascii() or not value.isprintable():
                raise ConfigError(f"the {name} must be printable ASCII (it is sent in an HTTP header)")
        wanted = (self.endpoint, self.api_key, self.service_id, self.timeout)
        kept = self._transport
        if kept is None or (kept.endpoint, kept.key, kept.service_id, kept.timeout) != wanted:
            self._transport = kept = Transport(*wanted)  # kept alive across calls: one connection per thread
        return kept

    def _post(self, path: str, answer: type[A] | TypeAdapter[A], parameters: dict[str, Any]) -> A:
        """POST a route method's ``parameters`` (its ``locals()``) as the body of ``path`` and parse
        the ``data`` as ``answer``."""
        return parse(answer, self.call(path, body_of(path, parameters), idempotency_key=idempotency(parameters)), path)


def body_of(path: str, parameters: dict[str, Any]) -> dict[str, Any]:
    """A route method's parameters as the route's body: what was given, under the field's name."""
    nullable = ROUTES[path].nullable if path in ROUTES else ()
    return {
        name: value
        for name, value in parameters.items()
        if name not in _NOT_BODY and value is not UNSET and (value is not None or name in nullable)
    }


def idempotency(parameters: dict[str, Any]) -> str | None:
    key = parameters.get("idempotency_key")
    return key if isinstance(key, str) and key else None


# (team_id, agent_id): which of the pairs that spell a memory_id a request means (team "a-b" + agent
# "c" and team "a" + agent "b-c" spell the same id; the id alone is then ambiguous, 409).
Pair = tuple[str, str]


def pair_fields(pair: Pair | None) -> dict[str, str]:
    return {} if pair is None else {"team_id": pair[0], "agent_id": pair[1]}


__all__ = [
    "DEFAULT_ENDPOINT",
    "DEFAULT_SERVICE_ID",
    "DEFAULT_TIMEOUT",
    "UNSET",
    "ApiError",
    "ConfigError",
    "MemoryHubError",
    "Pair",
    "Sender",
    "TransportError",
    "Unset",
    "body_of",
    "data_of",
    "pair_fields",
    "parse",
]
