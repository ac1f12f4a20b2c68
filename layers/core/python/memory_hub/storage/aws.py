"""AWS clients: created lazily, once per process, from one botocore session and one retry config.

The endpoint is botocore's own business (``AWS_ENDPOINT_URL`` and friends, as on any machine);
nothing here knows whether it talks to AWS or to an emulator."""

from __future__ import annotations

import threading
from typing import Any

from ..settings import get_settings
from . import consumed

# botocore's standard mode retries throttling and transient errors with jittered backoff.
RETRIES = {"mode": "standard", "max_attempts": 4}

_clients: dict[str, Any] = {}
_lock = threading.Lock()


def client(service: str) -> Any:
    """The process's client for ``service`` (thread-safe to use; created under a lock)."""
    found = _clients.get(service)
    if found is not None:
        return found
    with _lock:
        if service not in _clients:
            _clients[service] = _create(service)
        return _clients[service]


def _create(service: str) -> Any:
    from botocore.config import Config

    # A write never waits long for meaning: Bedrock gets one retry and short timeouts (what is
    # not embedded in time is queued and embedded later).
    quick = service == "bedrock-runtime"
    config = Config(
        retries={"mode": "standard", "max_attempts": 2} if quick else RETRIES,
        max_pool_connections=32,
        connect_timeout=2 if quick else 3,
        read_timeout=60 if service == "lambda" else 5 if quick else 20,
        tcp_keepalive=True,
        # DynamoDB requests are built by PynamoDB and by this package, not by hand: botocore's
        # client-side parameter check would only repeat what the service checks anyway.
        parameter_validation=service != "dynamodb",
        # Presigned URLs (exports, import uploads) are signed with SigV4, the only scheme every
        # region accepts.
        signature_version="s3v4" if service == "s3" else None,
    )
    made = _session().create_client(service, region_name=get_settings().region, config=config)
    if service == "dynamodb":
        consumed.install(made)  # every request asks what it consumed; the request's metrics add it up
    return made


def model_client() -> Any:
    """The process's Bedrock runtime client for the formation model: a model's answer takes
    seconds to tens of seconds, so it waits longer than the embeddings' client (and botocore does
    not retry: formation retries with its own backoff, throttling uncounted)."""
    found = _clients.get("formation-model")
    if found is not None:
        return found
    with _lock:
        if "formation-model" not in _clients:
            from botocore.config import Config

            config = Config(retries={"mode": "standard", "max_attempts": 1}, connect_timeout=5, read_timeout=120)
            _clients["formation-model"] = _session().create_client(
                "bedrock-runtime", region_name=get_settings().region, config=config
            )
        return _clients["formation-model"]


_boto_session: Any = None


def _session() -> Any:
    """One botocore session (its loader caches the service models every client shares). botocore, not
    boto3: a cold start need not import boto3 at all."""
    global _boto_session
    if _boto_session is None:
        import botocore.session

        _boto_session = botocore.session.get_session()
    return _boto_session


def s3() -> Any:
    return client("s3")


def dynamodb() -> Any:
    return client("dynamodb")


def error_code(exc: BaseException) -> str:
    """The AWS error code of a botocore ClientError ('' for anything else)."""
    response = getattr(exc, "response", None)
    if not isinstance(response, dict):
        return ""
    return str(response.get("Error", {}).get("Code", ""))
