"""A scripted OpenAI-compatible chat-completions server, for the tests and the bench: what the local
stack's emulated Bedrock relays ``Converse`` to (``MEMORY_HUB_LLM_URL``) when no real model should
answer. Deterministic, on 127.0.0.1 only, standard library only.

In process: ``server, url = serve()`` (port 0: a free one; ``url`` is the base URL to give as
``MEMORY_HUB_LLM_URL``, ``http://127.0.0.1:N/v1``), ``server.model`` (a :class:`ScriptedModel`: its
``script``, ``requests`` and ``stats``), ``stop(server)``. From anywhere: :class:`ScriptedClient`
(``ScriptedClient(url).script({"text": "…"})``), or ``python -m memory_hub_local.scripted_llm
--port N``.

Routes:

- ``POST /v1/chat/completions`` (and ``/chat/completions``): one chat completion, never streamed.
- ``POST /_script`` ``{"responses": [...]}``: answers queued for the next requests, one a request,
  first in first out; ``DELETE /_script`` empties the queue.
- ``GET /_requests``: ``{"requests": [...]}``, every request body received, in order;
  ``DELETE /_requests`` forgets them.
- ``GET /_stats``: ``{"calls", "prompt_tokens", "completion_tokens", "total_tokens", "tool_calls",
  "errors"}``; ``DELETE /_stats`` zeroes them.
- ``GET /v1/models``: the one model, ``scripted``.

A queued answer is one of (``delay_s``: seconds to wait before answering, with any of them, or
alone for the default answer after a delay):

- ``{"tool_input": {...}}``: one call of ``save_memories`` (``"name"`` for another tool) with
  exactly that argument;
- ``{"tool_calls": [{"name": …, "arguments": {...} or "raw text"}]}``: those calls, a string sent
  as the arguments verbatim (``"text"`` beside it: content as well);
- ``{"text": "…"}``: plain content, no tool call;
- ``{"status": 429 | 500 | …, "body": {...}}``: that HTTP status and body (by default
  ``{"error": {"message", "type", "code"}}``);
- ``"finish_reason"`` beside any of them: that finish reason (e.g. ``"length"``) instead of
  ``tool_calls``/``stop``.

**The default answer** (nothing queued) calls the tool the request requires (``tool_choice``
naming a function; else, with ``required`` or ``auto``, ``save_memories`` when offered, else the
first tool; no tools: the text ``OK.``):

- ``save_memories`` — the extractor: the last user message holds one JSON object between the lines
  ``<conversation>`` and ``</conversation>`` (the formation contract: ``{"messages": [{"id", "role",
  "content", "time", "context"}], "memories": [{"alias", "type", "content"}]}``); the answer is
  ``{"memories": [...]}`` with one ``add`` per non-context user message (``type`` ``episodic``,
  ``content`` :func:`fact_of` the message — ``"The user said: "`` and its first 200 characters —
  ``source_message_ids`` [its id]), or, when an offered memory's content is that fact already,
  ``{"op": "update", "alias", "content", "source_message_ids"}`` instead. No such object: no entry.
- any other tool (a scene or persona writer): an argument built from the tool's JSON schema — its
  required properties (all of them when the schema lists none): enums take their first value,
  numbers their minimum or 1, booleans true; a string named like a title (``title``, ``name``,
  ``summary``, ``heading``, ``subject``) is ``"<Label>: <first words>"`` (``Scene``, ``Persona``
  or the tool's name, by the tool's name), one named like a body (``content``, ``body``,
  ``markdown``, ``text``, ``description``, ``scene``, ``persona``) a markdown bullet list of the
  input's memory contents, any other ``"<name>: <first words>"`` (``maxLength`` honoured); an array
  of ids (a name ending in ``ids``) the input's ids (or aliases, for integer items), another array
  one item; objects recursively. The input: the JSON object of the last user message (between a
  line ``<tag>`` and its ``</tag>``, or the whole text), its "memory contents" every ``content``
  string of an object in it; without one, the message's text.

Usage is counted approximately: a token per 4 characters (prompt: the messages and tools as JSON;
completion: the text and arguments), at least 1."""

from __future__ import annotations

import argparse
import json
import math
import re
import signal
import sys
import threading
import time
import urllib.request
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from . import http

SAVE_MEMORIES = "save_memories"
FACT_PREFIX = "The user said: "
FACT_CHARS = 200
FIRST_WORDS = 6
MAX_REQUESTS_KEPT = 10_000
CHARS_PER_TOKEN = 4
_CONVERSATION = re.compile(r"^[ \t]*<conversation>[ \t]*\r?\n(.*?)\r?\n[ \t]*</conversation>[ \t]*$", re.M | re.S)
_TAGGED = re.compile(r"^[ \t]*<([A-Za-z_][\w-]*)>[ \t]*\r?\n(.*?)\r?\n[ \t]*</\1>[ \t]*$", re.M | re.S)
_TITLE_NAMES = ("title", "name", "summary", "heading", "subject")
_BODY_NAMES = ("content", "body", "markdown", "text", "description", "scene", "persona")


def fact_of(content: str) -> str:
    """What the extractor makes of a user message's content."""
    return FACT_PREFIX + content.strip()[:FACT_CHARS]


def tokens_of(text: str) -> int:
    return max(1, math.ceil(len(text) / CHARS_PER_TOKEN))


# ---------------------------------------------------------------- the input


def text_of(content: Any) -> str:
    """A chat message's text: its string content, or its text parts joined."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


def last_user_text(request: dict[str, Any]) -> str:
    for message in reversed(request.get("messages") or []):
        if isinstance(message, dict) and message.get("role") == "user":
            return text_of(message.get("content"))
    return ""


def conversation_of(text: str) -> dict[str, Any] | None:
    """The JSON object between the lines ``<conversation>`` and ``</conversation>``."""
    found = _CONVERSATION.search(text)
    if found is None:
        return None
    try:
        parsed = json.loads(found.group(1))
    except ValueError:
        return None
    return parsed if isinstance(parsed, dict) else None


def input_of(text: str) -> Any:
    """The JSON object a prompt holds: between a line ``<tag>`` and ``</tag>``, or the whole text."""
    for found in _TAGGED.finditer(text):
        try:
            return json.loads(found.group(2))
        except ValueError:
            continue
    try:
        return json.loads(text)
    except ValueError:
        return None


def _records(node: Any) -> list[dict[str, Any]]:
    """Every object of ``node`` (walked in order) with a ``content`` string."""
    found: list[dict[str, Any]] = []
    if isinstance(node, dict):
        if isinstance(node.get("content"), str):
            found.append(node)
        for value in node.values():
            found += _records(value)
    elif isinstance(node, list):
        for value in node:
            found += _records(value)
    return found


# ---------------------------------------------------------------- the default answers


def extract(request: dict[str, Any]) -> dict[str, Any]:
    """The extractor's ``save_memories`` argument for a formation request."""
    conversation = conversation_of(last_user_text(request)) or {}
    offered: dict[str, Any] = {}
    for memory in conversation.get("memories") or []:
        if isinstance(memory, dict) and isinstance(memory.get("content"), str):
            offered.setdefault(memory["content"], memory.get("alias"))
    entries: list[dict[str, Any]] = []
    for message in conversation.get("messages") or []:
        if not isinstance(message, dict) or message.get("role") != "user" or message.get("context"):
            continue
        content = message.get("content")
        if not isinstance(content, str) or not content.strip():
            continue
        fact, sources = fact_of(content), [str(message.get("id"))]
        if fact in offered:
            entries.append({"op": "update", "alias": offered[fact], "content": fact, "source_message_ids": sources})
        else:
            entries.append({"op": "add", "type": "episodic", "content": fact, "source_message_ids": sources})
    return {"memories": entries}


@dataclass
class _Context:
    tool: str
    records: list[dict[str, Any]]
    words: str

    @property
    def label(self) -> str:
        lowered = self.tool.lower()
        if "scene" in lowered:
            return "Scene"
        if "persona" in lowered:
            return "Persona"
        return self.tool.replace("_", " ").replace("-", " ").strip().capitalize() or "Note"

    def bullets(self) -> str:
        contents = [" ".join(str(r["content"]).split()) for r in self.records if str(r["content"]).strip()]
        return "\n".join(f"- {c}" for c in contents) or f"- {self.words}"


def from_schema(tool: str, schema: Any, request: dict[str, Any]) -> Any:
    """An argument for ``tool`` built from its JSON schema and the request's input."""
    text = last_user_text(request)
    records = _records(input_of(text))
    first = records[0]["content"] if records else re.sub(r"</?[A-Za-z_][\w-]*>", " ", text)
    words = " ".join(str(first).split()[:FIRST_WORDS]) or tool
    return _value(schema if isinstance(schema, dict) else {}, "", _Context(tool, records, words), 0)


def _value(schema: dict[str, Any], name: str, context: _Context, depth: int) -> Any:
    """The simplest value ``schema`` accepts, worded from the request (``name``: the property's)."""
    if "const" in schema:
        return schema["const"]
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return schema["enum"][0]
    option = _first_option(schema)
    if option is not None:
        return _value(option, name, context, depth)
    kind = _type(schema)
    if kind == "object":
        return _object_value(schema, context, depth)
    if kind == "array":
        return _array_value(schema, name, context, depth)
    return _scalar_value(schema, kind, name, context)


def _first_option(schema: dict[str, Any]) -> dict[str, Any] | None:
    """The schema with its first non-null ``anyOf``/``oneOf``/``allOf`` option merged in, or None."""
    for union in ("anyOf", "oneOf", "allOf"):
        options = [o for o in schema.get(union) or [] if isinstance(o, dict) and o.get("type") != "null"]
        if options:
            return {**schema, union: None, **options[0]}
    return None


def _type(schema: dict[str, Any]) -> str:
    """The schema's type, its first that is not null; unstated: an object if it has properties, else a string."""
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), None)
    if kind is None:
        return "object" if "properties" in schema else "string"
    return str(kind)


def _object_value(schema: dict[str, Any], context: _Context, depth: int) -> dict[str, Any]:
    """The required properties (all, when none is said required); empty below 8 levels, so a
    recursive schema ends."""
    if depth > 8:
        return {}
    properties: dict[str, Any] = schema["properties"] if isinstance(schema.get("properties"), dict) else {}
    wanted: list[Any] = schema["required"] if isinstance(schema.get("required"), list) else list(properties)
    return {k: _value(properties.get(k) or {}, k, context, depth + 1) for k in wanted}


def _array_value(schema: dict[str, Any], name: str, context: _Context, depth: int) -> list[Any]:
    """A list named ``…ids`` cites the input's records (their aliases where integers are asked);
    any other holds ``minItems`` (at least one) values."""
    items: dict[str, Any] = schema["items"] if isinstance(schema.get("items"), dict) else {}
    if name.lower().endswith("ids"):
        integers = items.get("type") == "integer"
        ids = [r.get("alias") if integers else r.get("id", r.get("alias")) for r in context.records]
        found = [i for i in ids if i is not None]
        if found:
            return found
    count = max(1, int(schema.get("minItems") or 1))
    return [_value(items, name.rstrip("s"), context, depth + 1) for _ in range(count)]


def _scalar_value(schema: dict[str, Any], kind: str, name: str, context: _Context) -> Any:
    if kind == "integer":
        return int(schema.get("minimum", 1))
    if kind == "number":
        return schema.get("minimum", 1)
    if kind == "boolean":
        return True
    text = _string(name.lower(), context)
    limit = schema.get("maxLength")
    return text[: int(limit)] if isinstance(limit, int) else text


def _string(name: str, context: _Context) -> str:
    if any(word in name for word in _TITLE_NAMES):
        return f"{context.label}: {context.words}"
    if any(word in name for word in _BODY_NAMES):
        return context.bullets()
    return f"{name or 'value'}: {context.words}"


# ---------------------------------------------------------------- the model


@dataclass
class Answer:
    status: int
    body: dict[str, Any]
    delay_s: float = 0.0


@dataclass
class ScriptedModel:
    """The scripted model's state: the queued answers, the requests received, the counts."""

    queue: deque[dict[str, Any]] = field(default_factory=deque)
    received: list[dict[str, Any]] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.reset_stats()

    # the script
    def script(self, *responses: dict[str, Any]) -> int:
        """Queue answers for the next requests; how many are queued now."""
        for response in responses:
            if not isinstance(response, dict):
                raise ValueError("each scripted response is a JSON object")
        with self.lock:
            self.queue.extend(dict(r) for r in responses)
            return len(self.queue)

    def clear_script(self) -> None:
        with self.lock:
            self.queue.clear()

    def requests(self) -> list[dict[str, Any]]:
        with self.lock:
            return list(self.received)

    def clear_requests(self) -> None:
        with self.lock:
            self.received.clear()

    def stats(self) -> dict[str, int]:
        with self.lock:
            return dict(self.counts, total_tokens=self.counts["prompt_tokens"] + self.counts["completion_tokens"])

    def reset_stats(self) -> None:
        with self.lock:
            self.counts = {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0, "tool_calls": 0, "errors": 0}

    # one completion
    def complete(self, request: dict[str, Any]) -> Answer:
        """The answer to one chat-completions request (the next scripted one, else the default)."""
        with self.lock:
            self.received.append(request)
            del self.received[:-MAX_REQUESTS_KEPT]
            self.counts["calls"] += 1
            number = self.counts["calls"]
            step = self.queue.popleft() if self.queue else {}
        delay = float(step.get("delay_s") or 0)
        if step.get("status") not in (None, 200):
            status = int(step["status"])
            body = step.get("body") or {
                "error": {"message": f"scripted status {status}", "type": "scripted", "code": status}
            }
            with self.lock:
                self.counts["errors"] += 1
            return Answer(status, body, delay)
        text, calls = self._reply(request, step)
        tool_calls: list[dict[str, Any]] = [
            {
                "id": f"call_{number}_{at}",
                "type": "function",
                "function": {
                    "name": name,
                    "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments),
                },
            }
            for at, (name, arguments) in enumerate(calls)
        ]
        message: dict[str, Any] = {"role": "assistant", "content": text}
        if tool_calls:
            message["tool_calls"] = tool_calls
        finish = str(step.get("finish_reason") or ("tool_calls" if tool_calls else "stop"))
        prompt = tokens_of(json.dumps(request.get("messages") or []) + json.dumps(request.get("tools") or []))
        completion = tokens_of((text or "") + "".join(c["function"]["arguments"] for c in tool_calls))
        with self.lock:
            self.counts["prompt_tokens"] += prompt
            self.counts["completion_tokens"] += completion
            self.counts["tool_calls"] += len(tool_calls)
        body = {
            "id": f"chatcmpl-scripted-{number}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": str(request.get("model") or "scripted"),
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion},
        }
        return Answer(200, body, delay)

    def _reply(self, request: dict[str, Any], step: dict[str, Any]) -> tuple[str | None, list[tuple[str, Any]]]:
        """(content, [(tool, arguments)]) of an answer."""
        if "tool_input" in step:
            return step.get("text"), [(str(step.get("name") or SAVE_MEMORIES), step["tool_input"])]
        if "tool_calls" in step:
            calls = [(str(c.get("name")), c.get("arguments", {})) for c in step["tool_calls"] if isinstance(c, dict)]
            return step.get("text"), calls
        if "text" in step:
            return str(step["text"]), []
        return default_reply(request)


def _tools(request: dict[str, Any]) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    for tool in request.get("tools") or []:
        function = tool.get("function") if isinstance(tool, dict) else None
        if isinstance(function, dict) and isinstance(function.get("name"), str):
            found[function["name"]] = function
    return found


def required_tool(request: dict[str, Any]) -> str | None:
    """The tool the default answer calls (None: it answers text)."""
    tools = _tools(request)
    choice = request.get("tool_choice")
    if isinstance(choice, dict):
        named = (choice.get("function") or {}).get("name")
        return str(named) if named else None
    if not tools or choice == "none":
        return None
    return SAVE_MEMORIES if SAVE_MEMORIES in tools else next(iter(tools))


def default_reply(request: dict[str, Any]) -> tuple[str | None, list[tuple[str, Any]]]:
    tool = required_tool(request)
    if tool is None:
        return "OK.", []
    if tool == SAVE_MEMORIES:
        return None, [(tool, extract(request))]
    return None, [(tool, from_schema(tool, _tools(request).get(tool, {}).get("parameters"), request))]


# ---------------------------------------------------------------- HTTP


Route = Callable[[ScriptedModel, bytes], tuple[int, Any]]  # the model and the request's body → (status, JSON body)


def _complete(model: ScriptedModel, raw: bytes) -> tuple[int, Any]:
    """One chat completion, after the answer's ``delay_s`` (a slow model, on purpose)."""
    try:
        request = json.loads(raw or b"")
    except ValueError:
        request = None
    if not isinstance(request, dict) or not isinstance(request.get("messages"), list):
        return 400, {"error": {"message": "the body must be a JSON object with messages", "code": 400}}
    answer = model.complete(request)
    if answer.delay_s > 0:
        time.sleep(answer.delay_s)
    return answer.status, answer.body


def _queue_script(model: ScriptedModel, raw: bytes) -> tuple[int, Any]:
    try:
        responses = json.loads(raw or b"{}").get("responses") or []
        return 200, {"queued": model.script(*responses)}
    except (ValueError, AttributeError, TypeError):
        return 400, {"error": {"message": 'expected {"responses": [{...}, ...]}'}}


def _cleared(clear: Callable[[ScriptedModel], None]) -> Route:
    def route(model: ScriptedModel, raw: bytes) -> tuple[int, Any]:
        clear(model)
        return 200, {"cleared": True}

    return route


def _models(model: ScriptedModel, raw: bytes) -> tuple[int, Any]:
    return 200, {"object": "list", "data": [{"id": "scripted", "object": "model"}]}


# (method, path) → its route: those the module's docstring lists.
_ROUTES: dict[tuple[str, str], Route] = {
    ("POST", "/v1/chat/completions"): _complete,
    ("POST", "/chat/completions"): _complete,
    ("POST", "/_script"): _queue_script,
    ("DELETE", "/_script"): _cleared(ScriptedModel.clear_script),
    ("GET", "/_requests"): lambda model, _: (200, {"requests": model.requests()}),
    ("DELETE", "/_requests"): _cleared(ScriptedModel.clear_requests),
    ("GET", "/_stats"): lambda model, _: (200, model.stats()),
    ("DELETE", "/_stats"): _cleared(ScriptedModel.reset_stats),
    ("GET", "/v1/models"): _models,
    ("GET", "/models"): _models,
}


class ScriptedServer(http.Server):
    model: ScriptedModel

    @property
    def url(self) -> str:
        """The base URL for ``MEMORY_HUB_LLM_URL``."""
        return f"http://127.0.0.1:{self.server_address[1]}/v1"


class _Handler(http.Handler):
    server: ScriptedServer
    server_version = "ScriptedModel/1"

    def _answer(self, status: int, body: Any) -> None:
        self.send(status, {"Content-Type": "application/json"}, json.dumps(body).encode("utf-8"))

    def _serve(self) -> None:
        try:
            raw = self.read_body()
        except (http.Malformed, http.TooLarge):
            self.send(400, {"Content-Type": "application/json"}, b'{"error": {"message": "bad request"}}', close=True)
            return
        path = self.path.split("?", 1)[0].rstrip("/")
        route = _ROUTES.get((self.command, path))
        if route is None:
            self._answer(404, {"error": {"message": f"no route {self.command} {path}"}})
            return
        self._answer(*route(self.server.model, raw))

    do_GET = do_POST = do_DELETE = _serve  # noqa: N815 - http.server names


def serve(port: int = 0) -> tuple[ScriptedServer, str]:
    """A scripted model on 127.0.0.1:``port`` (0: a free one), serving on a thread of its own:
    (the server, its base URL for ``MEMORY_HUB_LLM_URL``)."""
    server = ScriptedServer(("127.0.0.1", port), _Handler)
    server.model = ScriptedModel()
    http.serve(server)
    return server, server.url


def stop(server: ScriptedServer) -> None:
    server.shutdown()
    server.server_close()


class ScriptedClient:
    """The control routes of a scripted model at ``url`` (its base URL, ``…/v1``, or its root)."""

    def __init__(self, url: str, timeout: float = 30.0) -> None:
        self.root = re.sub(r"/v1/?$", "", url.rstrip("/"))
        self.timeout = timeout

    def _call(self, method: str, path: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode("utf-8")
        request = urllib.request.Request(  # noqa: S310 - a loopback test server
            self.root + path, data, {"Content-Type": "application/json"}, method=method
        )
        with urllib.request.urlopen(request, timeout=self.timeout) as answer:  # noqa: S310
            return json.loads(answer.read())

    def script(self, *responses: dict[str, Any]) -> int:
        return int(self._call("POST", "/_script", {"responses": list(responses)})["queued"])

    def clear_script(self) -> None:
        self._call("DELETE", "/_script")

    def requests(self) -> list[dict[str, Any]]:
        return list(self._call("GET", "/_requests")["requests"])

    def clear_requests(self) -> None:
        self._call("DELETE", "/_requests")

    def stats(self) -> dict[str, int]:
        return dict(self._call("GET", "/_stats"))

    def reset_stats(self) -> None:
        self._call("DELETE", "/_stats")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m memory_hub_local.scripted_llm", description=__doc__.split("\n")[0])
    parser.add_argument("--port", type=int, default=0, help="the port on 127.0.0.1 (0: a free one)")
    args = parser.parse_args(argv)
    try:
        server, url = serve(args.port)
    except OSError as exc:
        print(f"scripted model: cannot listen on 127.0.0.1:{args.port}: {exc.strerror}", file=sys.stderr)
        return 1
    print(f"scripted model on {url}  (MEMORY_HUB_LLM_URL={url})", flush=True)
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    signal.signal(signal.SIGINT, lambda *_: done.set())
    done.wait()
    stop(server)
    return 0


if __name__ == "__main__":
    sys.exit(main())
