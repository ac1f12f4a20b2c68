"""Secrets from AWS Secrets Manager, read with Powertools Parameters and cached in the process.

Neither secret ever sits in a plain environment variable (readable with GetFunctionConfiguration):
the environment names the secret, the value is fetched on first use."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from ..settings import get_settings
from . import aws

TOKEN_SECRET_MAX_AGE_S = 3600
BOOTSTRAP_KEY_MAX_AGE_S = 300


@lru_cache(maxsize=1)
def _provider() -> Any:
    from aws_lambda_powertools.utilities.parameters import SecretsProvider

    return SecretsProvider(boto3_client=aws.client("secretsmanager"))


def _read(secret_id: str, max_age: int) -> str:
    value = _provider().get(secret_id, max_age=max_age)
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)


def token_secret() -> str:
    """The HMAC key that signs pagination tokens."""
    return _read(get_settings().token_secret_id, TOKEN_SECRET_MAX_AGE_S)


def bootstrap_admin_key() -> str | None:
    """The bootstrap admin key, when the deployment has one."""
    secret_id = get_settings().bootstrap_key_secret_id
    return _read(secret_id, BOOTSTRAP_KEY_MAX_AGE_S) if secret_id else None
