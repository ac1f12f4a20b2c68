"""The formation model, called through Amazon Bedrock's ``Converse`` with one required tool.

On AWS this is Bedrock; locally the emulated Bedrock relays the same call to any OpenAI-compatible
server. A reply is reduced to what formation reads — the inputs of the required tool's calls, the
text, why the model stopped and the tokens — and a failure to one of a few kinds, each with a
fixed message (no model or request text ever reaches the state, the status or the logs)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError, ConnectTimeoutError, ReadTimeoutError

from . import aws

THROTTLED = "throttled"  # retried with backoff, never counted as a failure
KINDS = ("model_unavailable", "access_denied", "bad_answer", "timeout", "other")

_THROTTLING = {"ThrottlingException", "ServiceQuotaExceededException", "TooManyRequestsException"}
_UNAVAILABLE = {
    "ServiceUnavailableException",
    "ModelNotReadyException",
    "InternalServerException",
    "ModelErrorException",
    "ResourceNotFoundException",
}
_DENIED = {"AccessDeniedException", "UnrecognizedClientException"}
_TIMEOUT = {"ModelTimeoutException"}


class ModelError(Exception):
    """The call failed: ``kind`` is ``throttled`` or one of KINDS."""

    def __init__(self, kind: str) -> None:
        super().__init__(kind)
        self.kind = kind


@dataclass
class Reply:
    calls: list[Any] = field(default_factory=list)  # the required tool's inputs, in order
    text: str = ""
    stop_reason: str = ""
    input_tokens: int = 0
    output_tokens: int = 0

    @property
    def cut_off(self) -> bool:
        """The answer ended at the output limit (it may be incomplete)."""
        return self.stop_reason == "max_tokens"


def kind_of(exc: BaseException) -> str:
    """What kind of failure a call raised."""
    if isinstance(exc, ClientError):
        code = aws.error_code(exc)
        if code in _THROTTLING:
            return THROTTLED
        if code in _DENIED:
            return "access_denied"
        if code in _TIMEOUT:
            return "timeout"
        if code in _UNAVAILABLE:
            return "model_unavailable"
        return "other"
    if isinstance(exc, ReadTimeoutError | ConnectTimeoutError):
        return "timeout"
    if isinstance(exc, BotoCoreError):
        return "model_unavailable"
    return "other"


def converse(
    model_id: str,
    system: str,
    prompt: str,
    tool: dict[str, Any],
    max_tokens: int,
) -> Reply:
    """One model call whose answer must be a call of ``tool`` (a Converse ``toolSpec``)."""
    try:
        answer = aws.model_client().converse(
            modelId=model_id,
            system=[{"text": system}],
            messages=[{"role": "user", "content": [{"text": prompt}]}],
            toolConfig={"tools": [{"toolSpec": tool}], "toolChoice": {"tool": {"name": tool["name"]}}},
            inferenceConfig={"maxTokens": max_tokens, "temperature": 0},
        )
    except Exception as exc:  # noqa: BLE001 - every failure becomes one of a few kinds
        raise ModelError(kind_of(exc)) from None
    reply = Reply(stop_reason=str(answer.get("stopReason", "")))
    usage = answer.get("usage") or {}
    reply.input_tokens = int(usage.get("inputTokens") or 0)
    reply.output_tokens = int(usage.get("outputTokens") or 0)
    for block in ((answer.get("output") or {}).get("message") or {}).get("content") or []:
        used = block.get("toolUse")
        if isinstance(used, dict) and used.get("name") == tool["name"]:
            reply.calls.append(used.get("input"))
        elif isinstance(block.get("text"), str):
            reply.text += block["text"]
    return reply
