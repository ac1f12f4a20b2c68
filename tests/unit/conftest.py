"""The unit tier: domain and storage logic in this process, over moto in process (no network: every
socket connection but a Unix socket is refused). ``aws`` makes the template's tables, bucket and
secrets and points the settings at them, as the function's environment would."""

from __future__ import annotations

import os
import socket

import pytest

SETTINGS = {
    "AWS_REGION": "us-east-1",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "MEMORY_HUB_BUCKET": "memory-hub-local",
    "ASSETS_TABLE": "AssetsTable",
    "ITEMS_TABLE": "ItemsTable",
    "SCENES_TABLE": "ScenesTable",
    "KEYS_TABLE": "KeysTable",
    "AUDIT_TABLE": "AuditTable",
    "IDEMPOTENCY_TABLE": "IdempotencyTable",
}


@pytest.fixture(autouse=True)
def _no_network(monkeypatch):
    real_connect = socket.socket.connect

    def refuse(self: socket.socket, address: object) -> None:
        if self.family == getattr(socket, "AF_UNIX", None):
            return real_connect(self, address)
        raise RuntimeError(f"unit tests do not use the network (tried {address})")

    monkeypatch.setattr(socket.socket, "connect", refuse)


def _reset_process_caches() -> None:
    from memory_hub.settings import get_settings
    from memory_hub.storage import aws, secrets
    from memory_hub.storage.models import TABLE_MODELS

    get_settings.cache_clear()
    aws._clients.clear()
    aws._boto_session = None
    secrets._provider.cache_clear()
    for models in TABLE_MODELS.values():
        for model in models:
            model._connection = None


@pytest.fixture(scope="session")
def aws():
    """moto in this process with the template's resources; yields the token secret's ARN."""
    from memory_hub_local.aws import moto_patches
    from memory_hub_local.aws.state import State
    from memory_hub_local.template import expanded, local_names
    from moto import mock_aws

    previous = {k: os.environ.get(k) for k in [*SETTINGS, "MEMORY_HUB_TOKEN_SECRET_ARN", "AWS_ENDPOINT_URL"]}
    os.environ.update(SETTINGS)
    os.environ.pop("AWS_ENDPOINT_URL", None)
    moto_patches.install()
    mock = mock_aws()
    mock.start()
    names, _ = local_names("us-east-1", {})
    state = State(expanded("us-east-1"), names, "us-east-1", None, "mhk_000000000000_unit-bootstrap-key-0123456789")
    state.create()
    os.environ["MEMORY_HUB_TOKEN_SECRET_ARN"] = state.secret_arns["TokenSecret"]
    _reset_process_caches()
    yield state
    mock.stop()
    for name, value in previous.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    _reset_process_caches()
