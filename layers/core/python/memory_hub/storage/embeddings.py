"""Embeddings from Amazon Bedrock (``InvokeModel``, Titan Text Embeddings request and response shapes).

A batch of texts is embedded with bounded parallelism (one ``InvokeModel`` per text: Titan embeds
one input per call) and within a deadline: a write never waits long for meaning. Every outcome is
one of three kinds, so the caller can decide what to do with each text:

- a vector (``list[float]``, ``dimensions`` long, normalised);
- ``RETRY``: throttled, a transient service or network error, or the deadline passed before the
  call was made — worth trying again later (the queue, the scheduled backfill);
- ``FINAL``: a 4xx other than throttling (input refused, access denied, unknown model) — retrying
  the same input would fail the same way.

Texts are cut to ``MAX_INPUT_CHARS`` before they are sent (Titan v2 accepts up to 8,192 tokens and
50,000 characters; a token spans at least one character for the texts this service stores, so
8,192 characters stay within both); should the model still find the input too long, it is sent
once more at half its length.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Final

from . import aws

MAX_INPUT_CHARS = 8_192
WIDTH = 8  # InvokeModel calls of one process in flight at once
RETRY: Final = "retry"
FINAL: Final = "final"

# Bedrock Runtime's error codes that say "try again later"; every other 4xx is final.
RETRYABLE_CODES = frozenset(
    {
        "ThrottlingException",
        "TooManyRequestsException",
        "ServiceUnavailableException",
        "ServiceUnavailable",
        "InternalServerException",
        "InternalFailure",
        "ModelTimeoutException",
        "ModelNotReadyException",
        "RequestTimeout",
        "RequestTimeoutException",
    }
)

Outcome = list[float] | str

_pool: ThreadPoolExecutor | None = None
_lock = threading.Lock()


def _executor() -> ThreadPoolExecutor:
    global _pool
    with _lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=WIDTH, thread_name_prefix="embed")
        return _pool


def classify(exc: BaseException) -> str:
    """``RETRY`` or ``FINAL`` for an error of ``InvokeModel``. Anything that is not an AWS answer
    (connection refused, read timeout) is transient; an AWS answer is final only when it is a 4xx
    other than throttling."""
    code = aws.error_code(exc)
    if not code:
        return RETRY
    if code in RETRYABLE_CODES:
        return RETRY
    status = int(getattr(exc, "response", {}).get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)
    if status == 429 or status >= 500 or status == 0:
        return RETRY
    return FINAL


def _too_long(exc: BaseException) -> bool:
    response = getattr(exc, "response", None) or {}  # a timeout or connection error has none
    message = str(response.get("Error", {}).get("Message", "")).lower()
    return aws.error_code(exc) == "ValidationException" and ("too many" in message or "too long" in message)


def cut(text: str) -> str:
    return text[:MAX_INPUT_CHARS]


def _invoke(model_id: str, dimensions: int, text: str) -> list[float]:
    body = json.dumps({"inputText": text, "dimensions": dimensions, "normalize": True})
    answer = aws.client("bedrock-runtime").invoke_model(
        modelId=model_id, body=body, contentType="application/json", accept="application/json"
    )
    payload = json.loads(answer["body"].read())
    return [float(x) for x in payload["embedding"]]


def embed_one(model_id: str, dimensions: int, text: str, deadline: float) -> Outcome:
    """One text's outcome (never raises)."""
    text = cut(text)
    for _ in range(2):
        if time.monotonic() >= deadline:
            return RETRY
        try:
            vector = _invoke(model_id, dimensions, text)
            if len(vector) != dimensions:
                raise ValueError(f"the model answered {len(vector)} dimensions, not {dimensions}")
            return vector
        except Exception as exc:  # noqa: BLE001 - classified into the outcome
            if _too_long(exc) and len(text) > 1:
                text = text[: len(text) // 2]
                continue
            if isinstance(exc, (ValueError, KeyError, TypeError)):
                return FINAL  # the model answered something that is not an embedding of this size
            return classify(exc)
    return FINAL


def embed_many(model_id: str, dimensions: int, texts: Sequence[str], deadline_s: float) -> list[Outcome]:
    """Each text's outcome, in order, at most ``WIDTH`` calls at a time; a text whose call has not
    started when ``deadline_s`` has passed is ``RETRY`` (the caller queues it)."""
    if not texts:
        return []
    deadline = time.monotonic() + max(0.0, deadline_s)
    if len(texts) == 1:
        return [embed_one(model_id, dimensions, texts[0], deadline)]
    futures: list[Future[Outcome]] = [
        _executor().submit(embed_one, model_id, dimensions, text, deadline) for text in texts
    ]
    results: list[Outcome] = []
    for future in futures:
        try:
            results.append(future.result())
        except Exception:  # noqa: BLE001 - embed_one never raises; belt and braces
            results.append(RETRY)
    return results


def describe(model_id: str, dimensions: int) -> str:
    """What a vector records about the model that made it (``<model id>/<dimensions>``)."""
    return f"{model_id}/{int(dimensions)}"
