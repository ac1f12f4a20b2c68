"""A Converse request checked as Amazon Bedrock checks it, before the local stack relays it
(``converse``): what fails is a ValidationException (400), in Bedrock's words where Bedrock's are
known. ``messages`` present, not empty, starting with
a user message and alternating user/assistant; each message's content not empty, each block one
of ``text`` (not blank), ``toolUse`` (assistant turns: ``toolUseId``, ``name``, ``input``) or
``toolResult`` (user turns: answering the previous turn's ``toolUse`` ids, ``content`` of ``text``
or ``json`` blocks, ``status`` success|error, not empty when error); ``toolUse``/``toolResult``
only with a ``toolConfig``; ``toolConfig.tools`` at least one ``toolSpec`` (``name`` as Bedrock's
pattern, ``inputSchema.json`` an object, names unique); ``toolChoice`` exactly one of ``auto``,
``any``, ``tool`` (naming an offered tool); ``system`` blocks of non-empty ``text``;
``inferenceConfig``: ``maxTokens`` ≥ 1, ``temperature`` and ``topP`` in [0, 1],
``stopSequences`` non-empty strings (AWS's "1 validation error detected: …" wording). What the
relay cannot carry is refused rather than ignored: images, documents and other media blocks,
guardrails, prompt variables, structured output (``outputConfig``)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from .bedrock import error
from .shapes import Refusal

TOOL_NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")
TOOL_USE_ID = re.compile(r"[a-zA-Z0-9_.:-]{1,64}")
_SERVED_BLOCKS = ("text", "toolUse", "toolResult")
_MEDIA_BLOCKS = (
    "image",
    "document",
    "video",
    "audio",
    "guardContent",
    "reasoningContent",
    "citationsContent",
    "searchResult",
    "toolAddition",
    "toolRemoval",
)
_UNRELAYED = ("guardrailConfig", "promptVariables", "outputConfig")


def invalid(message: str) -> Refusal:
    return error("ValidationException", message)


def _constraint(value: Any, where: str, rule: str) -> Refusal:
    shown = json.dumps(value) if not isinstance(value, str) else value
    return invalid(f"1 validation error detected: Value '{shown}' at '{where}' failed to satisfy constraint: {rule}")


@dataclass
class Request:
    """A Converse request as the relay needs it (already checked)."""

    messages: list[dict[str, Any]]
    system: list[str] = field(default_factory=list)
    tools: list[dict[str, Any]] = field(default_factory=list)
    tool_choice: dict[str, Any] | None = None
    inference: dict[str, Any] = field(default_factory=dict)

    @property
    def required_tool(self) -> str | None:
        """The tool ``toolChoice`` requires: the one it names, or the only one offered with ``any``."""
        choice = self.tool_choice or {}
        if "tool" in choice:
            return str(choice["tool"]["name"])
        if "any" in choice and len(self.tools) == 1:
            return str(self.tools[0]["name"])
        return None


def _object(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise invalid(f"Malformed input request: #/{where}: expected type: JSONObject, found: {_kind(value)}")
    return value


def _list(value: Any, where: str) -> list[Any]:
    if not isinstance(value, list):
        raise invalid(f"Malformed input request: #/{where}: expected type: JSONArray, found: {_kind(value)}")
    return value


def _kind(value: Any) -> str:
    return {dict: "JSONObject", list: "JSONArray", str: "String", bool: "Boolean"}.get(
        type(value), "Number" if isinstance(value, int | float) else "Null"
    )


def _one_member(block: Any, where: str) -> tuple[str, Any]:
    """The one member a union (a content block, a tool choice …) sets."""
    members = _object(block, where)
    if len(members) != 1:
        raise invalid(
            f"The {where} field must set exactly one member of its union; it sets {len(members)} "
            f"({', '.join(sorted(members)) or 'none'})."
        )
    ((name, value),) = members.items()
    return name, value


def parse_request(body: bytes) -> Request:
    """The Converse request of ``body``, or a Refusal as Bedrock words it."""
    try:
        payload = json.loads(body or b"{}")
    except ValueError:
        raise invalid("Malformed input request, please reformat your input and try again.") from None
    payload = _object(payload, "")
    for name in _UNRELAYED:
        if payload.get(name) is not None:
            raise invalid(f"The local stack's Converse does not relay {name}: leave it out of the request.")
    system = _system(payload.get("system"))
    tools, choice = _tool_config(payload.get("toolConfig"))
    messages = _messages(payload.get("messages"), tools_configured=bool(tools))
    return Request(messages, system, tools, choice, _inference(payload.get("inferenceConfig")))


def _system(value: Any) -> list[str]:
    if value is None:
        return []
    texts = []
    for at, block in enumerate(_list(value, "system")):
        name, text = _one_member(block, f"system.{at}")
        if name == "cachePoint":
            continue
        if name != "text":
            raise invalid(f"The local stack's Converse relays only text system blocks (system.{at} is {name}).")
        if not isinstance(text, str) or not text:
            raise _constraint(
                text, f"system.{at + 1}.member.text", "Member must have length greater than or equal to 1"
            )
        texts.append(text)
    return texts


def _tool_config(value: Any) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    if value is None:
        return [], None
    config = _object(value, "toolConfig")
    tools = _tools(config)
    choice = config.get("toolChoice")
    if choice is None:
        return tools, None
    return tools, _tool_choice(choice, [t["name"] for t in tools])


def _tools(config: dict[str, Any]) -> list[dict[str, Any]]:
    """The offered tools as the relay sends them (``cachePoint`` entries dropped), names unique."""
    listed = _list(config.get("tools"), "toolConfig/tools") if "tools" in config else None
    if listed is None:
        raise invalid(
            "1 validation error detected: Value null at 'toolConfig.tools' failed to satisfy constraint: "
            "Member must not be null"
        )
    if not listed:
        raise _constraint([], "toolConfig.tools", "Member must have length greater than or equal to 1")
    tools: list[dict[str, Any]] = []
    for at, tool in enumerate(listed):
        name, spec = _one_member(tool, f"toolConfig.tools.{at}")
        if name == "cachePoint":
            continue
        if name != "toolSpec":
            raise invalid(f"The local stack's Converse relays only toolSpec tools (toolConfig.tools.{at} is {name}).")
        tools.append(_tool_spec(spec, at))
    names = [t["name"] for t in tools]
    if len(set(names)) != len(names):
        raise invalid("The toolConfig field contains duplicate tool names. Tool names must be unique.")
    return tools


def _tool_choice(choice: Any, names: list[str]) -> dict[str, Any]:
    """``auto``, ``any`` or ``tool`` — the last naming one of the offered tools."""
    kind, chosen = _one_member(choice, "toolConfig.toolChoice")
    if kind not in ("auto", "any", "tool"):
        raise invalid(f"Malformed input request: #/toolConfig/toolChoice: extraneous key [{kind}] is not permitted")
    chosen = _object(chosen, f"toolConfig/toolChoice/{kind}")
    if kind != "tool":
        return {kind: {}}
    named = chosen.get("name")
    if not isinstance(named, str) or not TOOL_NAME.fullmatch(named):
        raise _constraint(
            named,
            "toolConfig.toolChoice.tool.name",
            "Member must satisfy regular expression pattern: [a-zA-Z0-9_-]+",
        )
    if named not in names:
        raise invalid(f"The tool {named} named by toolConfig.toolChoice is not one of the tools in toolConfig.tools.")
    return {"tool": {"name": named}}


def _tool_spec(spec: Any, at: int) -> dict[str, Any]:
    spec = _object(spec, f"toolConfig/tools/{at}/toolSpec")
    name = spec.get("name")
    where = f"toolConfig.tools.{at + 1}.member.toolSpec"
    if not isinstance(name, str) or not TOOL_NAME.fullmatch(name):
        raise _constraint(name, f"{where}.name", "Member must satisfy regular expression pattern: [a-zA-Z0-9_-]+")
    description = spec.get("description")
    if description is not None and (not isinstance(description, str) or not description):
        raise _constraint(description, f"{where}.description", "Member must have length greater than or equal to 1")
    schema = spec.get("inputSchema")
    if not isinstance(schema, dict) or set(schema) != {"json"} or not isinstance(schema["json"], dict):
        raise invalid(f'The inputSchema of the tool {name} must be {{"json": <a JSON schema object>}}.')
    tool: dict[str, Any] = {"name": name, "parameters": schema["json"]}
    if description:
        tool["description"] = description
    return tool


def _inference(value: Any) -> dict[str, Any]:
    """``inferenceConfig`` as chat-completions parameters (``max_tokens``, ``temperature``,
    ``top_p``, ``stop``), each only when the request sets it."""
    if value is None:
        return {}
    config = _object(value, "inferenceConfig")
    found: dict[str, Any] = {}
    if config.get("maxTokens") is not None:
        found["max_tokens"] = _max_tokens(config["maxTokens"])
    for name, key in (("temperature", "temperature"), ("topP", "top_p")):
        if config.get(name) is not None:
            found[key] = _unit_number(config[name], name)
    if config.get("stopSequences") is not None:
        stops = _stop_sequences(config["stopSequences"])
        if stops:
            found["stop"] = stops
    return found


def _max_tokens(tokens: Any) -> int:
    if isinstance(tokens, bool) or not isinstance(tokens, int):
        raise invalid(
            f"Malformed input request: #/inferenceConfig/maxTokens: expected type: Integer, found: {_kind(tokens)}"
        )
    if tokens < 1:
        raise _constraint(tokens, "inferenceConfig.maxTokens", "Member must have value greater than or equal to 1")
    return tokens


def _unit_number(number: Any, name: str) -> float:
    """A number in [0, 1] (``temperature``, ``topP``); a bool is no number to Bedrock."""
    if isinstance(number, bool) or not isinstance(number, int | float):
        raise invalid(
            f"Malformed input request: #/inferenceConfig/{name}: expected type: Number, found: {_kind(number)}"
        )
    if number < 0:
        raise _constraint(number, f"inferenceConfig.{name}", "Member must have value greater than or equal to 0")
    if number > 1:
        raise _constraint(number, f"inferenceConfig.{name}", "Member must have value less than or equal to 1")
    return number


def _stop_sequences(value: Any) -> list[str]:
    stops = _list(value, "inferenceConfig/stopSequences")
    for at, stop in enumerate(stops):
        if not isinstance(stop, str) or not stop:
            raise _constraint(
                stop,
                f"inferenceConfig.stopSequences.{at + 1}.member",
                "Member must have length greater than or equal to 1",
            )
    return list(stops)


_START = "A conversation must start with a user message. Try again with a conversation that starts with a user message."
_ALTERNATE = (
    "A conversation must alternate between user and assistant roles. Make sure the conversation alternates "
    "between user and assistant roles and try again."
)


def _messages(value: Any, *, tools_configured: bool) -> list[dict[str, Any]]:
    if value is None or value == []:
        raise invalid(_START)
    listed = _list(value, "messages")
    messages: list[dict[str, Any]] = []
    for at, message in enumerate(listed):
        message = _object(message, f"messages/{at}")
        role = message.get("role")
        if role not in ("user", "assistant"):
            raise _constraint(
                role, f"messages.{at + 1}.member.role", "Member must satisfy enum value set: [user, assistant]"
            )
        if "content" not in message or message["content"] is None:
            raise invalid(
                f"1 validation error detected: Value null at 'messages.{at + 1}.member.content' failed to "
                "satisfy constraint: Member must not be null"
            )
        content = _list(message["content"], f"messages/{at}/content")
        if not content:
            raise invalid(
                f"The content field in the Message object at messages.{at} is empty. Add a ContentBlock "
                "object to the content field and try again."
            )
        if at == 0 and role != "user":
            raise invalid(_START)
        if at > 0 and role == messages[-1]["role"]:
            raise invalid(_ALTERNATE)
        blocks = [_block(block, role, at, index, tools_configured) for index, block in enumerate(content)]
        messages.append({"role": role, "content": blocks})
    _tool_results_answer_tool_uses(messages)
    return messages


@dataclass(frozen=True)
class _Place:
    """Where a content block is, in the three spellings Bedrock's errors use for it."""

    at: int  # the message
    index: int  # the block in its content
    name: str  # the block's kind

    @property
    def where(self) -> str:
        return f"messages.{self.at}.content.{self.index}"

    @property
    def path(self) -> str:  # a JSON pointer, as "Malformed input request" names places
        return f"messages/{self.at}/content/{self.index}"

    @property
    def member(self) -> str:  # 1-based, as "1 validation error detected" names places
        return f"messages.{self.at + 1}.member.content.{self.index + 1}.member.{self.name}"


def _block(block: Any, role: str, at: int, index: int, tools_configured: bool) -> dict[str, Any]:
    """One content block of ``messages[at]``: text, or (with a ``toolConfig``) a toolUse or toolResult."""
    where = f"messages.{at}.content.{index}"
    name, value = _one_member(block, where)
    if name in _MEDIA_BLOCKS:
        raise invalid(
            f"The local stack's Converse relays only text, toolUse and toolResult content blocks ({where} is {name})."
        )
    if name == "cachePoint":
        return {"cachePoint": value}
    if name not in _SERVED_BLOCKS:
        raise invalid(
            f"Malformed input request: #/messages/{at}/content/{index}: extraneous key [{name}] is not permitted"
        )
    if name == "text":
        return {"text": _text_block(value, where)}
    if not tools_configured:
        raise invalid("The toolConfig field must be defined when using toolUse and toolResult content blocks.")
    place = _Place(at, index, name)
    value = _object(value, f"{place.path}/{name}")
    use_id = _tool_use_id(value, place)
    if name == "toolUse":
        return {"toolUse": _tool_use(value, use_id, role, place)}
    return {"toolResult": _tool_result(value, use_id, role, place)}


def _text_block(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise invalid(
            f"The text field in the ContentBlock object at {where} is blank. Add text to the text field, and try again."
        )
    return value


def _tool_use_id(value: dict[str, Any], place: _Place) -> str:
    use_id = value.get("toolUseId")
    if not isinstance(use_id, str) or not TOOL_USE_ID.fullmatch(use_id):
        raise _constraint(
            use_id, f"{place.member}.toolUseId", "Member must satisfy regular expression pattern: [a-zA-Z0-9_.:-]+"
        )
    return use_id


def _tool_use(value: dict[str, Any], use_id: str, role: str, place: _Place) -> dict[str, Any]:
    if role != "assistant":
        raise invalid(f"A toolUse block may appear only in an assistant message ({place.where} is in a user message).")
    tool = value.get("name")
    if not isinstance(tool, str) or not TOOL_NAME.fullmatch(tool):
        raise _constraint(
            tool, f"{place.member}.name", "Member must satisfy regular expression pattern: [a-zA-Z0-9_-]+"
        )
    if "input" not in value:
        raise invalid(
            f"1 validation error detected: Value null at '{place.member}.input' failed to satisfy constraint: "
            "Member must not be null"
        )
    return {"toolUseId": use_id, "name": tool, "input": value["input"]}


def _tool_result(value: dict[str, Any], use_id: str, role: str, place: _Place) -> dict[str, Any]:
    """A toolResult with its content as texts (JSON blocks compact): the relay's tool message."""
    where = place.where
    if role != "user":
        raise invalid(f"A toolResult block may appear only in a user message ({where} is in an assistant message).")
    status = value.get("status", "success")
    if status not in ("success", "error"):
        raise _constraint(status, f"{place.member}.status", "Member must satisfy enum value set: [success, error]")
    parts = _list(value.get("content", []), f"{place.path}/toolResult/content")
    if not parts and status == "error":
        raise invalid(f"The content field at {where}.toolResult cannot be empty when status value is error.")
    texts = [_tool_result_text(part, f"{where}.toolResult.content.{n}", where) for n, part in enumerate(parts)]
    return {"toolUseId": use_id, "texts": texts, "status": status}


def _tool_result_text(part: Any, at: str, where: str) -> str:
    kind, inner = _one_member(part, at)
    if kind == "text":
        return str(inner)
    if kind == "json":
        return json.dumps(inner, ensure_ascii=False, separators=(",", ":"))
    raise invalid(f"The local stack's Converse relays only text and json tool results ({where} has {kind}).")


def _tool_results_answer_tool_uses(messages: list[dict[str, Any]]) -> None:
    """A user turn after an assistant's toolUse blocks answers each of them (Bedrock's rule)."""
    for at, message in enumerate(messages):
        if message["role"] != "user":
            continue
        results = [b["toolResult"]["toolUseId"] for b in message["content"] if "toolResult" in b]
        previous = messages[at - 1]["content"] if at > 0 else []
        uses = [b["toolUse"]["toolUseId"] for b in previous if "toolUse" in b]
        if len(results) > len(uses):
            raise invalid(
                f"The number of toolResult blocks at messages.{at}.content exceeds the number of toolUse "
                "blocks of previous turn."
            )
        missing = [u for u in uses if u not in results]
        if missing:
            raise invalid(
                f"Expected toolResult blocks at messages.{at}.content for the following Ids: {', '.join(missing)}"
            )
        unknown = [r for r in results if r not in uses]
        if unknown:
            raise invalid(
                f"The toolUseId {unknown[0]} of the toolResult at messages.{at}.content matches no toolUse "
                "block of the previous turn."
            )
