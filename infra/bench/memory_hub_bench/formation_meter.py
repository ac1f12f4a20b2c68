"""A counting relay between the local stack's emulated Bedrock and the language model formation
calls: the bench gives the stack this relay's base URL as ``MEMORY_HUB_LLM_URL`` and the relay
passes every chat-completions request on to the real one (the scripted model, or a real
OpenAI-compatible server), unchanged, answer included — so what is counted is the same whichever
model answers.

Per call it counts: the function the request requires (``tool_choice``: ``save_memories`` for a
batch's records; with ``formation: all`` also ``assign_scenes``, ``write_scene``,
``write_persona``), the tokens the server reports in ``usage`` (``prompt_tokens``,
``completion_tokens``; a call without them is counted at 4 characters a token and flagged as
estimated), the characters sent (the text of every message, plus the tool definitions as JSON) and
received (the reply's text and its tool calls' arguments), and the model's time. Nothing is
logged or kept of the content itself."""

from __future__ import annotations

import json
import math
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from memory_hub_local import http
from memory_hub_local.scripted_llm import text_of

UPSTREAM_TIMEOUT_S = 600.0  # longer than the emulated Bedrock's own relay timeout (120 s by default)
CHARS_PER_TOKEN = 4  # the estimate when a server reports no usage


def request_chars(request: dict[str, Any]) -> int:
    """What a request sends the model: its messages' text, and its tools' definitions as JSON."""
    messages = request.get("messages") or []
    text = sum(len(text_of(m.get("content"))) for m in messages if isinstance(m, dict))
    calls = sum(
        len(str((c.get("function") or {}).get("arguments", "")))
        for m in messages
        if isinstance(m, dict)
        for c in m.get("tool_calls") or []
        if isinstance(c, dict)
    )
    return text + calls + (len(json.dumps(request["tools"])) if request.get("tools") else 0)


def reply_chars(reply: dict[str, Any]) -> int:
    """What the model wrote: its text and its tool calls' arguments."""
    total = 0
    for choice in reply.get("choices") or []:
        message = choice.get("message") if isinstance(choice, dict) else None
        if not isinstance(message, dict):
            continue
        total += len(text_of(message.get("content")))
        for call in message.get("tool_calls") or []:
            if isinstance(call, dict):
                total += len(str((call.get("function") or {}).get("arguments", "")))
    return total


def tool_of(request: dict[str, Any]) -> str:
    """The function a request requires (``-`` when it names none)."""
    choice = request.get("tool_choice")
    if isinstance(choice, dict):
        name = (choice.get("function") or {}).get("name")
        if isinstance(name, str) and name:
            return name
    return "-"


@dataclass
class Usage:
    """What the relay counted, per function required and in all."""

    calls: Counter[str] = field(default_factory=Counter)
    input_tokens: Counter[str] = field(default_factory=Counter)
    output_tokens: Counter[str] = field(default_factory=Counter)
    input_chars: Counter[str] = field(default_factory=Counter)
    output_chars: Counter[str] = field(default_factory=Counter)
    errors: Counter[str] = field(default_factory=Counter)  # answers other than 200, and no answer
    estimated: int = 0  # calls whose tokens the server did not report
    seconds: list[float] = field(default_factory=list)  # the model's time per answered call

    def add(self, tool: str, sent: int, reply: dict[str, Any] | None, seconds: float) -> None:
        self.calls[tool] += 1
        self.input_chars[tool] += sent
        if reply is None:
            self.errors[tool] += 1
            return
        self.seconds.append(seconds)
        written = reply_chars(reply)
        self.output_chars[tool] += written
        usage: dict[str, Any] = reply["usage"] if isinstance(reply.get("usage"), dict) else {}
        prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
        if not isinstance(prompt, int) or not isinstance(completion, int):
            self.estimated += 1
            prompt = max(1, math.ceil(sent / CHARS_PER_TOKEN))
            completion = max(1, math.ceil(written / CHARS_PER_TOKEN))
        self.input_tokens[tool] += prompt
        self.output_tokens[tool] += completion

    def count(self, request: dict[str, Any], status: int, body: bytes, seconds: float) -> None:
        """One relayed chat completion: the request sent, and the status and body answered."""
        reply: dict[str, Any] | None = None
        if status == 200:
            try:
                parsed = json.loads(body)
                reply = parsed if isinstance(parsed, dict) else None
            except ValueError:
                reply = None
        self.add(tool_of(request), request_chars(request), reply, seconds)

    def total(self, counter: Counter[str], tools: tuple[str, ...] | None = None) -> int:
        return sum(v for k, v in counter.items() if tools is None or k in tools)

    def summary(self, tools: tuple[str, ...] | None = None) -> dict[str, float]:
        """Calls, tokens and characters (of ``tools`` only, when given)."""
        return {
            "calls": self.total(self.calls, tools),
            "input_tokens": self.total(self.input_tokens, tools),
            "output_tokens": self.total(self.output_tokens, tools),
            "input_chars": self.total(self.input_chars, tools),
            "output_chars": self.total(self.output_chars, tools),
            "errors": self.total(self.errors, tools),
        }


class MeterServer(http.Server):
    upstream: str
    key: str
    usage: Usage
    lock: threading.Lock

    @property
    def url(self) -> str:
        """The base URL to give the stack as ``MEMORY_HUB_LLM_URL``."""
        return f"http://127.0.0.1:{self.server_address[1]}/v1"


class _Handler(http.Handler):
    server: MeterServer
    server_version = "FormationMeter/1"

    def _relay(self) -> None:
        try:
            raw = self.read_body()
        except (http.Malformed, http.TooLarge):
            self.send(400, {"Content-Type": "application/json"}, b'{"error": {"message": "bad request"}}', close=True)
            return
        path = self.path.split("?", 1)[0]
        suffix = path[len("/v1") :] if path.startswith("/v1") else path
        try:
            request = json.loads(raw or b"{}")
        except ValueError:
            request = {}
        request = request if isinstance(request, dict) else {}
        headers = {"Content-Type": "application/json"}
        authorization = f"Bearer {self.server.key}" if self.server.key else self.headers.get("Authorization")
        if authorization:
            headers["Authorization"] = authorization
        forward = urllib.request.Request(  # noqa: S310 - the model URL the operator gave
            self.server.upstream + suffix, raw or None, headers, method=self.command
        )
        began = time.perf_counter()
        status, body = self._forward(forward)
        seconds = time.perf_counter() - began
        if self.command == "POST" and suffix.rstrip("/").endswith("/chat/completions"):
            with self.server.lock:
                self.server.usage.count(request, status, body, seconds)
        self.send(status, {"Content-Type": "application/json"}, body)

    @staticmethod
    def _forward(forward: urllib.request.Request) -> tuple[int, bytes]:
        try:
            with urllib.request.urlopen(forward, timeout=UPSTREAM_TIMEOUT_S) as answer:  # noqa: S310
                return int(answer.status), bytes(answer.read())
        except urllib.error.HTTPError as error:
            return int(error.code), bytes(error.read() or b"{}")
        except (urllib.error.URLError, OSError) as error:
            message = json.dumps({"error": {"message": f"formation meter: no answer upstream ({error})"}})
            return 502, message.encode("utf-8")

    do_GET = do_POST = _relay  # noqa: N815 - http.server names


def start(upstream: str, key: str = "") -> MeterServer:
    """A relay on a free port of 127.0.0.1 to ``upstream`` (an OpenAI-compatible base URL, e.g.
    ``http://127.0.0.1:11434/v1``), sending ``Authorization: Bearer key`` when a key is given."""
    server = MeterServer(("127.0.0.1", 0), _Handler)
    server.upstream = upstream.rstrip("/")
    server.key = key
    server.usage = Usage()
    server.lock = threading.Lock()
    http.serve(server)
    return server


def stop(server: MeterServer) -> None:
    server.shutdown()
    server.server_close()
