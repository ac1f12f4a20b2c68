"""Amazon Bedrock's ``Converse`` for the template's formation model, answered by relaying the
conversation to an OpenAI-compatible chat-completions server (a local Ollama, llama.cpp server or
vLLM; in the tests, ``memory_hub_local.scripted_llm``).

**Which models.** The template's ``FormationModel`` as the stack resolved it (the value the stack
was started with, handed over in ``MEMORY_HUB_LOCAL_PARAMETERS``, else the parameter's default),
plus the comma-separated ids of ``MEMORY_HUB_FORMATION_MODELS``; named by id, by this region's
foundation-model ARN or by an inference-profile ARN of this region. Another model: a
ValidationException "The provided model identifier is invalid." (as ``InvokeModel`` answers).
The IAM action is ``bedrock:InvokeModel`` on the model's ARN (``vector_calls``).

**The request** is checked as Bedrock checks it before anything is relayed (``converse_checks``).

**The relay.** ``POST {MEMORY_HUB_LLM_URL}/chat/completions`` with ``model``
``MEMORY_HUB_LLM_MODEL`` (the Converse model id when unset) and ``Authorization: Bearer
{MEMORY_HUB_LLM_KEY}`` when set, within ``MEMORY_HUB_LLM_TIMEOUT_S`` (120 s by default). Converse
→ OpenAI: ``system`` → one system message; text → ``content``; an assistant's ``toolUse`` →
``tool_calls`` (``arguments``: the input as JSON); a ``toolResult`` → a ``tool`` message
(``tool_call_id``; its text and JSON blocks joined; ``status: error`` prefixes ``Error:``), the tool
messages before the user turn's text; ``toolSpec`` → ``tools: [{type: function, function: {name,
description, parameters}}]``; ``toolChoice`` ``{tool: {name}}`` → ``{type: function, function:
{name}}``, ``{any: {}}`` → ``"required"``, ``{auto: {}}`` → ``"auto"``; ``inferenceConfig``
``maxTokens``/``temperature``/``topP``/``stopSequences`` → ``max_tokens``/``temperature``/
``top_p``/``stop``. OpenAI → Converse: the text (when not blank) → a ``text`` block, each tool
call → a ``toolUse`` block (``input``: its arguments parsed); ``finish_reason`` ``tool_calls`` →
``tool_use``, ``stop`` → ``end_turn`` (``tool_use`` when the reply did call a tool),
``length`` → ``max_tokens``, ``content_filter`` → ``content_filtered``; ``usage`` → ``inputTokens``,
``outputTokens``, ``totalTokens`` (estimated at 4 characters a token when the server sends none);
``metrics.latencyMs``: the relay's time.

A tool call whose arguments are not a JSON object (or that names a tool not offered) is what
Bedrock reports as ``stopReason: malformed_tool_use``: the answer is a 200 with that stop reason,
the call left out and the rest of the reply kept (cut off by ``length``, the stop reason stays
``max_tokens``). **Fallback** (some local servers ignore a required tool): a reply without a tool
call whose whole text is one JSON object — bare or in one ```json fence — while ``toolChoice``
required a tool (``tool``, or ``any`` with one tool offered) is answered as that tool's
``toolUse`` with the object as its input.

**Errors of the relay**, in Bedrock's rest-json form (``bedrock.error``):

=====================================  ============================================
no ``MEMORY_HUB_LLM_URL``              ServiceUnavailableException 503
connection refused or reset            ServiceUnavailableException 503
upstream 502, 503                      ServiceUnavailableException 503
upstream 504, no answer in time        ModelTimeoutException 408
upstream 429                           ThrottlingException 429
upstream 401, 403                      AccessDeniedException 403
upstream 404                           ResourceNotFoundException 404
upstream 400 and other 4xx             ValidationException 400
upstream 500 and other 5xx             ModelErrorException 424 (``originalStatusCode``)
a 200 that is no chat completion       ModelErrorException 424
=====================================  ============================================

(A 5xx that says the server is overloaded or unreachable behind a gateway is the service being
unavailable, which a caller retries; any other 5xx is the model failing on this request, which
Bedrock reports as ModelErrorException.) Nothing of a conversation, a prompt or an answer is
logged, and an upstream error's own message is passed on cut to 300 characters."""

from __future__ import annotations

import http.client
import json
import math
import os
import re
import secrets
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .bedrock import error
from .converse_checks import TOOL_USE_ID, Request, parse_request
from .shapes import Refusal

DEFAULT_MODEL = "amazon.nova-lite-v1:0"
MODELS_VARIABLE = "MEMORY_HUB_FORMATION_MODELS"
PARAMETERS_VARIABLE = "MEMORY_HUB_LOCAL_PARAMETERS"  # the template parameters the stack was started with (JSON)
URL_VARIABLE = "MEMORY_HUB_LLM_URL"
MODEL_VARIABLE = "MEMORY_HUB_LLM_MODEL"
KEY_VARIABLE = "MEMORY_HUB_LLM_KEY"
TIMEOUT_VARIABLE = "MEMORY_HUB_LLM_TIMEOUT_S"
RELAY_VARIABLES = (URL_VARIABLE, MODEL_VARIABLE, KEY_VARIABLE, TIMEOUT_VARIABLE)
DEFAULT_TIMEOUT_S = 120.0
NOT_CONFIGURED = f"no language model is configured: set {URL_VARIABLE}"
UPSTREAM_MESSAGE_CHARS = 300
CHARS_PER_TOKEN = 4

_FENCED = re.compile(r"```(?:json|JSON)?[ \t]*\n(.*?)\n?```", re.DOTALL)
_FINISH = {"tool_calls": "tool_use", "stop": "end_turn", "length": "max_tokens", "content_filter": "content_filtered"}


# ---------------------------------------------------------------- which models, which relay


def template_parameters(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The template parameters the stack was started with (``MEMORY_HUB_LOCAL_PARAMETERS``)."""
    raw = (os.environ if environ is None else environ).get(PARAMETERS_VARIABLE, "")
    try:
        found = json.loads(raw) if raw else {}
    except ValueError:
        return {}
    return {str(k): str(v) for k, v in found.items()} if isinstance(found, dict) else {}


def served_models(
    cfn: dict[str, Any], parameters: Mapping[str, str] | None = None, environ: Mapping[str, str] | None = None
) -> set[str]:
    """The template's ``FormationModel`` (as given to the stack, else its default) and the ids of
    ``MEMORY_HUB_FORMATION_MODELS``."""
    environ = os.environ if environ is None else environ
    parameters = template_parameters(environ) if parameters is None else parameters
    declared = cfn.get("Parameters", {}).get("FormationModel") or {}
    served = {str(parameters.get("FormationModel") or declared.get("Default") or DEFAULT_MODEL)}
    listed = environ.get(MODELS_VARIABLE, "")
    return served | {m.strip() for m in listed.split(",") if m.strip()}


def bare_model(model: str, region: str) -> str | None:
    """The model id a request names: by itself, or by this region's foundation-model or
    inference-profile ARN (another region's ARN names nothing here)."""
    if not model.startswith("arn:"):
        return model
    found = re.fullmatch(
        rf"arn:aws:bedrock:{re.escape(region)}:(?:|[0-9]{{12}}):(?:foundation-model|inference-profile)/(.+)", model
    )
    return found.group(1) if found else None


@dataclass(frozen=True)
class Relay:
    """Where Converse is relayed: an OpenAI-compatible chat-completions API (``url`` None: none)."""

    url: str | None
    model: str | None = None
    key: str | None = None
    timeout_s: float = DEFAULT_TIMEOUT_S

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None) -> Relay:
        environ = os.environ if environ is None else environ
        try:
            timeout = float(environ.get(TIMEOUT_VARIABLE) or DEFAULT_TIMEOUT_S)
        except ValueError:
            timeout = DEFAULT_TIMEOUT_S
        return cls(
            (environ.get(URL_VARIABLE) or "").strip().rstrip("/") or None,
            (environ.get(MODEL_VARIABLE) or "").strip() or None,
            environ.get(KEY_VARIABLE) or None,
            timeout if timeout > 0 else DEFAULT_TIMEOUT_S,
        )


# ---------------------------------------------------------------- Converse → chat completions


def to_openai(request: Request, model: str) -> dict[str, Any]:
    """The chat-completions request that carries a Converse request."""
    messages: list[dict[str, Any]] = []
    if request.system:
        messages.append({"role": "system", "content": "\n\n".join(request.system)})
    for message in request.messages:
        turn = _assistant_turn if message["role"] == "assistant" else _user_turn
        messages.extend(turn(message["content"]))
    wire: dict[str, Any] = {"model": model, "messages": messages, "stream": False}
    if request.tools:
        wire["tools"] = [{"type": "function", "function": tool} for tool in request.tools]
    choice = _tool_choice(request.tool_choice or {})
    if choice is not None:
        wire["tool_choice"] = choice
    wire.update(request.inference)
    return wire


def _texts(content: list[dict[str, Any]]) -> list[str]:
    return [b["text"] for b in content if "text" in b]


def _assistant_turn(content: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One assistant message: its text (None when it only calls tools) and its ``tool_calls``."""
    texts = _texts(content)
    calls = [
        {
            "id": b["toolUse"]["toolUseId"],
            "type": "function",
            "function": {
                "name": b["toolUse"]["name"],
                "arguments": json.dumps(b["toolUse"]["input"], ensure_ascii=False),
            },
        }
        for b in content
        if "toolUse" in b
    ]
    turn: dict[str, Any] = {"role": "assistant", "content": "\n".join(texts) if texts else None}
    if calls:
        turn["tool_calls"] = calls
    return [turn]


def _user_turn(content: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A ``tool`` message for each toolResult, then the user's text: chat completions want the
    answers to the assistant's calls right after it."""
    turns = [_tool_message(b["toolResult"]) for b in content if "toolResult" in b]
    texts = _texts(content)
    if texts:
        turns.append({"role": "user", "content": "\n".join(texts)})
    return turns


def _tool_message(result: dict[str, Any]) -> dict[str, Any]:
    text = "\n".join(result["texts"])
    if result["status"] == "error":
        text = f"Error: {text}" if text else "Error"
    return {"role": "tool", "tool_call_id": result["toolUseId"], "content": text}


def _tool_choice(choice: dict[str, Any]) -> dict[str, Any] | str | None:
    """Converse's ``toolChoice`` in chat completions' words (None: leave it to the server)."""
    if "tool" in choice:
        return {"type": "function", "function": {"name": choice["tool"]["name"]}}
    if "any" in choice:
        return "required"
    if "auto" in choice:
        return "auto"
    return None


# ---------------------------------------------------------------- chat completions → Converse


def tokens_of(text: str) -> int:
    """An estimate of a text's tokens (4 characters a token), where the server counts none."""
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def _tool_use_id() -> str:
    return "tooluse_" + secrets.token_urlsafe(16)


def _text_of(content: Any) -> str:
    """A reply message's text: a string, or the text of its parts (some servers send parts)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


def json_object_of(text: str) -> dict[str, Any] | None:
    """The JSON object that is a reply's whole text, bare or in one ```json fence; else None."""
    stripped = text.strip()
    fenced = _FENCED.fullmatch(stripped)
    if fenced:
        stripped = fenced.group(1).strip()
    try:
        found = json.loads(stripped)
    except ValueError:
        return None
    return found if isinstance(found, dict) else None


def _arguments(raw: Any) -> dict[str, Any] | None:
    if isinstance(raw, dict):
        return raw
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return {}
    if not isinstance(raw, str):
        return None
    try:
        parsed = json.loads(raw)
    except ValueError:
        return None
    return parsed if isinstance(parsed, dict) else None


def from_openai(reply: Any, request: Request, wire: dict[str, Any], latency_ms: int) -> dict[str, Any]:
    """The Converse response of a chat-completions reply (a Refusal when it is none)."""
    choices = reply.get("choices") if isinstance(reply, dict) else None
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise model_error("The model produced a response that is not a chat completion.", 200)
    choice = choices[0]
    message: dict[str, Any] = choice["message"] if isinstance(choice.get("message"), dict) else {}
    text = _text_of(message.get("content"))
    offered = {t["name"] for t in request.tools}
    content: list[dict[str, Any]] = []
    if text.strip():
        content.append({"text": text})
    malformed = False
    called = False
    for call in message.get("tool_calls") or []:
        function = call.get("function") if isinstance(call, dict) else None
        name = function.get("name") if isinstance(function, dict) else None
        arguments = _arguments(function.get("arguments")) if isinstance(function, dict) else None
        if not isinstance(name, str) or name not in offered or arguments is None:
            malformed = True
            continue
        use_id = call.get("id")
        use_id = use_id if isinstance(use_id, str) and TOOL_USE_ID.fullmatch(use_id) else _tool_use_id()
        content.append({"toolUse": {"toolUseId": use_id, "name": name, "input": arguments}})
        called = True
    finish = str(choice.get("finish_reason") or "stop")
    required = request.required_tool
    if not called and not malformed and required is not None:
        found = json_object_of(text)
        if found is not None:  # the server ignored the required tool but answered its argument
            content = [{"toolUse": {"toolUseId": _tool_use_id(), "name": required, "input": found}}]
            called = True
            finish = "tool_calls" if finish == "stop" else finish
    if finish == "length":
        stop = "max_tokens"
    elif malformed:
        stop = "malformed_tool_use"
    elif called:
        stop = "tool_use"
    else:
        stop = _FINISH.get(finish, "end_turn")
        stop = "end_turn" if stop == "tool_use" else stop
    usage = reply.get("usage") if isinstance(reply.get("usage"), dict) else {}
    inputs = usage.get("prompt_tokens")
    outputs = usage.get("completion_tokens")
    if not isinstance(inputs, int) or isinstance(inputs, bool):
        inputs = tokens_of(json.dumps(wire["messages"], ensure_ascii=False) + json.dumps(wire.get("tools", [])))
    if not isinstance(outputs, int) or isinstance(outputs, bool):
        outputs = tokens_of(json.dumps(message, ensure_ascii=False))
    return {
        "output": {"message": {"role": "assistant", "content": content}},
        "stopReason": stop,
        "usage": {"inputTokens": inputs, "outputTokens": outputs, "totalTokens": inputs + outputs},
        "metrics": {"latencyMs": latency_ms},
    }


# ---------------------------------------------------------------- the relay


def model_error(message: str, original: int, resource: str = "") -> Refusal:
    refusal = error("ModelErrorException", message, 424)
    body = json.loads(refusal.body)
    body["originalStatusCode"] = original
    if resource:
        body["resourceName"] = resource
    refusal.body = json.dumps(body).encode()
    return refusal


def _upstream_message(body: bytes) -> str:
    """What an upstream error answer says (its ``error.message``, else its text), cut short."""
    text = body.decode("utf-8", "replace")
    try:
        parsed = json.loads(text)
    except ValueError:
        parsed = None
    if isinstance(parsed, dict):
        inner = parsed.get("error", parsed)
        said = inner.get("message") if isinstance(inner, dict) else inner
        text = str(said) if said else text
    return " ".join(text.split())[:UPSTREAM_MESSAGE_CHARS]


def upstream_refusal(status: int, body: bytes, relay: Relay, model: str) -> Refusal:
    """Bedrock's answer for an upstream error status (the module docstring's table)."""
    said = _upstream_message(body)
    if status == 429:
        return error("ThrottlingException", "Too many requests, please wait before trying again.", 429)
    if status in (401, 403):
        return error(
            "AccessDeniedException",
            f"The language model at {URL_VARIABLE} refused the request (HTTP {status}): check {KEY_VARIABLE}.",
            403,
        )
    if status == 404:
        return error(
            "ResourceNotFoundException",
            f"The language model server has no model {relay.model or model!r} at {relay.url}/chat/completions "
            f"(HTTP 404): check {URL_VARIABLE} and {MODEL_VARIABLE}. {said}".strip(),
            404,
        )
    if 400 <= status < 500:
        return error("ValidationException", f"The model returned the following errors: {said}".strip())
    if status in (502, 503):
        return error("ServiceUnavailableException", f"The language model is unavailable (HTTP {status}).", 503)
    if status == 504:
        return error(
            "ModelTimeoutException", "Model has timed out in processing the request. Try your request again.", 408
        )
    return model_error(f"The model failed to process the request (HTTP {status}). {said}".strip(), status, model)


def _post(relay: Relay, wire: dict[str, Any]) -> tuple[int, bytes]:
    """One chat-completions request: (status, body); OSError when no answer came."""
    assert relay.url is not None
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    if relay.key:
        headers["Authorization"] = f"Bearer {relay.key}"
    request = urllib.request.Request(  # noqa: S310 - the operator's own model server
        f"{relay.url}/chat/completions", json.dumps(wire, ensure_ascii=False).encode("utf-8"), headers, method="POST"
    )
    try:
        with urllib.request.urlopen(request, timeout=relay.timeout_s) as answer:  # noqa: S310
            return int(answer.status), answer.read()
    except urllib.error.HTTPError as failed:
        return int(failed.code), failed.read()


def relay_call(relay: Relay, wire: dict[str, Any], model: str) -> tuple[Any, int]:
    """The upstream's chat completion and the milliseconds it took (a Refusal on any failure)."""
    if relay.url is None:
        raise error("ServiceUnavailableException", NOT_CONFIGURED, 503)
    started = time.perf_counter()
    try:
        status, body = _post(relay, wire)
    except TimeoutError:
        raise error(
            "ModelTimeoutException", "Model has timed out in processing the request. Try your request again.", 408
        ) from None
    except urllib.error.URLError as failed:
        if isinstance(failed.reason, TimeoutError):
            raise error(
                "ModelTimeoutException", "Model has timed out in processing the request. Try your request again.", 408
            ) from None
        raise error(
            "ServiceUnavailableException",
            f"The language model at {relay.url} cannot be reached ({failed.reason}): is it running? ({URL_VARIABLE})",
            503,
        ) from None
    except (OSError, ValueError, http.client.HTTPException) as failed:  # reset, cut short, a URL that is no URL
        raise error(
            "ServiceUnavailableException",
            f"The language model at {relay.url} cannot be reached ({type(failed).__name__}): is it running? "
            f"({URL_VARIABLE})",
            503,
        ) from None
    latency = int((time.perf_counter() - started) * 1000)
    if status != 200:
        raise upstream_refusal(status, body, relay, model)
    try:
        return json.loads(body), latency
    except ValueError:
        raise model_error("The model produced a response that is not JSON.", status, model) from None


def converse(
    model_id: str, body: bytes, served: set[str], region: str, relay: Relay | None = None
) -> tuple[int, dict[str, str], bytes]:
    """Answer one Converse (raises Refusal for what Bedrock refuses or the relay fails at)."""
    model = bare_model(model_id, region)
    if model is None or model not in served:
        raise error("ValidationException", "The provided model identifier is invalid.")
    request = parse_request(body)
    relay = Relay.from_environment() if relay is None else relay
    wire = to_openai(request, relay.model or model)
    reply, latency = relay_call(relay, wire, model)
    answer = from_openai(reply, request, wire, latency)
    return 200, {"Content-Type": "application/json"}, json.dumps(answer, ensure_ascii=False).encode("utf-8")
