"""Amazon Bedrock's ``InvokeModel`` for Titan Text Embeddings V2, answered by a small local model.

Request body (JSON): ``inputText`` (required, 1 to 50,000 characters), ``dimensions`` (1024 by
default, or 512 or 256), ``normalize`` (true by default), ``embeddingTypes`` (a list of "float"
and/or "binary"; ["float"] by default); no other key. Response body: ``embedding`` (floats of
``dimensions``), ``inputTextTokenCount`` and ``embeddingsByType`` (always present: ``float``, and
``binary`` — 1 for a positive component, else 0 — when asked). Anything else is refused as Bedrock
refuses it: a ValidationException (400) with ``x-amzn-ErrorType`` and ``{"message": …}``, e.g.
"Malformed input request: #/dimensions: 100 is not a valid enum value, please reformat your input
and try again."; a model id that is not served: ValidationException "The provided model identifier
is invalid."; more than 8,192 tokens: ValidationException "Too many input tokens".

The vectors are all-MiniLM-L6-v2's (``embedding_model``): 384 dimensions zero-padded to 512 or
1024 (every cosine unchanged) or projected to 256 by a fixed seeded orthonormal projection. Token
counts are the model's word pieces, which approximate Titan's. The served model ids are the
template's parameter ``EmbeddingModel`` (its default and allowed values that name a Titan Text
Embeddings V2 model) or, without that parameter, ``amazon.titan-embed-text-v2:0`` — or, when the
environment of the emulated AWS side sets ``MEMORY_HUB_EMBEDDING_MODELS``, the comma-separated ids it
lists (all answered with Titan V2's shapes). A model id may also be given as its foundation-model ARN."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping
from typing import Any

from .shapes import Refusal

DEFAULT_MODEL = "amazon.titan-embed-text-v2:0"
MODELS_VARIABLE = "MEMORY_HUB_EMBEDDING_MODELS"
DIMENSIONS = (256, 512, 1024)
MAX_CHARACTERS = 50_000
MAX_TOKENS = 8_192
EMBEDDING_TYPES = ("float", "binary")
_FIELDS = ("inputText", "dimensions", "normalize", "embeddingTypes")


def error(code: str, message: str, status: int = 400) -> Refusal:
    """A Bedrock runtime error as the service sends it (rest-json)."""
    body = json.dumps({"message": message}).encode()
    headers = {"x-amzn-ErrorType": f"{code}:http://internal.amazon.com/coral/com.amazon.bedrock/"}
    return Refusal(status, body, "application/json", headers, code)


def served_models(cfn: dict[str, Any], environ: Mapping[str, str] | None = None) -> set[str]:
    """The model ids this emulated Bedrock answers for: those of ``MEMORY_HUB_EMBEDDING_MODELS``
    (comma-separated) when set, else the template's ``EmbeddingModel``."""
    listed = (os.environ if environ is None else environ).get(MODELS_VARIABLE, "")
    if listed.strip():
        return {m.strip() for m in listed.split(",") if m.strip()}
    parameter = cfn.get("Parameters", {}).get("EmbeddingModel")
    if not parameter:
        return {DEFAULT_MODEL}
    ids = {str(parameter.get("Default", DEFAULT_MODEL))} | {str(v) for v in parameter.get("AllowedValues", [])}
    served = {i for i in ids if i.startswith("amazon.titan-embed-text-v2")}
    return served or {DEFAULT_MODEL}


def model_arn(region: str, model_id: str) -> str:
    return model_id if model_id.startswith("arn:") else f"arn:aws:bedrock:{region}::foundation-model/{model_id}"


def _bare(model_id: str, region: str) -> str | None:
    """The model id a request names, by itself or by the ARN of this region's foundation model
    (another region's ARN names nothing here)."""
    if not model_id.startswith("arn:"):
        return model_id
    prefix = f"arn:aws:bedrock:{region}::foundation-model/"
    return model_id.removeprefix(prefix) if model_id.startswith(prefix) else None


def _malformed(detail: str) -> Refusal:
    return error("ValidationException", f"Malformed input request: {detail}, please reformat your input and try again.")


def _payload(body: bytes) -> dict[str, Any]:
    """The request's JSON object, holding only the keys Titan V2 knows."""
    try:
        payload = json.loads(body or b"")
    except ValueError:
        raise error(
            "ValidationException", "Malformed input request, please reformat your input and try again."
        ) from None
    if not isinstance(payload, dict):
        raise _malformed(f"#: expected type: JSONObject, found: {type(payload).__name__}")
    for key in payload:
        if key not in _FIELDS:
            raise _malformed(f"#: extraneous key [{key}] is not permitted")
    return payload


def _input_text(payload: dict[str, Any]) -> str:
    if "inputText" not in payload:
        raise _malformed("#: required key [inputText] not found")
    text = payload["inputText"]
    if not isinstance(text, str):
        raise _malformed(f"#/inputText: expected type: String, found: {type(text).__name__}")
    if not text:
        raise _malformed("#/inputText: expected minLength: 1, actual: 0")
    if len(text) > MAX_CHARACTERS:
        raise _malformed(f"#/inputText: expected maxLength: {MAX_CHARACTERS}, actual: {len(text)}")
    return text


def _dimensions(payload: dict[str, Any]) -> int:
    dimensions = payload.get("dimensions", 1024)
    if isinstance(dimensions, bool) or dimensions not in DIMENSIONS:  # True == 1 would pass the enum
        raise _malformed(f"#/dimensions: {dimensions} is not a valid enum value")
    return int(dimensions)


def _normalize(payload: dict[str, Any]) -> bool:
    normalize = payload.get("normalize", True)
    if not isinstance(normalize, bool):
        raise _malformed(f"#/normalize: expected type: Boolean, found: {type(normalize).__name__}")
    return normalize


def _embedding_types(payload: dict[str, Any]) -> list[str]:
    """The asked types, each once, in the order first asked."""
    types = payload.get("embeddingTypes", ["float"])
    if not isinstance(types, list) or not types:
        raise _malformed("#/embeddingTypes: expected minimum item count: 1")
    for at, kind in enumerate(types):
        if kind not in EMBEDDING_TYPES:
            raise _malformed(f"#/embeddingTypes/{at}: {kind} is not a valid enum value")
    return list(dict.fromkeys(types))


def parse_request(body: bytes) -> tuple[str, int, bool, list[str]]:
    """(inputText, dimensions, normalize, embeddingTypes) of a Titan V2 request, or a Refusal.
    Bedrock names one fault a request: the first of these checks that fails."""
    payload = _payload(body)
    text = _input_text(payload)
    return text, _dimensions(payload), _normalize(payload), _embedding_types(payload)


def invoke(model_id: str, body: bytes, served: set[str], region: str) -> tuple[int, dict[str, str], bytes]:
    """Answer one InvokeModel (raises Refusal for what Bedrock refuses)."""
    from . import embedding_model  # numpy and the model: only where embeddings are made

    if _bare(model_id, region) not in served:
        raise error("ValidationException", "The provided model identifier is invalid.")
    text, dimensions, normalize, types = parse_request(body)
    started = time.perf_counter()
    tokens = len(embedding_model.model().word_pieces(text))
    if tokens > MAX_TOKENS:
        raise error(
            "ValidationException",
            f"400 Bad Request: Too many input tokens. Max input tokens: {MAX_TOKENS}, request input token "
            f"count: {tokens}",
        )
    encoded = embedding_model.embed([text], dimensions, normalize)
    vector = [float(v) for v in encoded.vectors[0].tolist()]
    by_type: dict[str, list[Any]] = {}
    if "float" in types:
        by_type["float"] = vector
    if "binary" in types:
        by_type["binary"] = [1 if v > 0 else 0 for v in vector]
    answer = {"embedding": vector, "inputTextTokenCount": tokens, "embeddingsByType": by_type}
    latency = int((time.perf_counter() - started) * 1000)
    headers = {
        "Content-Type": "application/json",
        "X-Amzn-Bedrock-Input-Token-Count": str(tokens),
        "X-Amzn-Bedrock-Invocation-Latency": str(latency),
    }
    return 200, headers, json.dumps(answer, separators=(",", ":")).encode()
