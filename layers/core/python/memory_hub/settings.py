"""Deployment settings, read once from the environment into a pydantic model."""

from __future__ import annotations

import os
from functools import lru_cache

from pydantic import BaseModel, ConfigDict, Field, ValidationError


class Settings(BaseModel):
    model_config = ConfigDict(frozen=True)

    service_id: str = Field("default", min_length=1)
    bootstrap_admin_key: str | None = None
    bucket: str = "memory-hub-local"
    assets_table: str = "memory-hub-assets"
    scenes_table: str = "memory-hub-scenes"
    keys_table: str = "memory-hub-keys"
    audit_table: str = "memory-hub-audit"
    idempotency_table: str = "memory-hub-idempotency"
    items_table: str = "memory-hub-items"
    region: str = "us-east-1"
    token_secret: str = "memory-hub-local-token-secret"
    retention_days: int = Field(0, ge=0, le=36_500)
    retention_min_l0: int = Field(50, ge=0)
    retention_min_l1: int = Field(20, ge=0)
    max_body_bytes: int = 1_048_576


_ENV = {
    "service_id": "MEMORY_HUB_SERVICE_ID",
    "bootstrap_admin_key": "MEMORY_HUB_BOOTSTRAP_ADMIN_KEY",
    "bucket": "MEMORY_HUB_BUCKET",
    "assets_table": "ASSETS_TABLE",
    "scenes_table": "SCENES_TABLE",
    "keys_table": "KEYS_TABLE",
    "audit_table": "AUDIT_TABLE",
    "idempotency_table": "IDEMPOTENCY_TABLE",
    "items_table": "ITEMS_TABLE",
    "region": "AWS_DEFAULT_REGION",
    "token_secret": "MEMORY_HUB_TOKEN_SECRET",
    "retention_days": "RETENTION_DAYS",
    "retention_min_l0": "RETENTION_MIN_L0",
    "retention_min_l1": "RETENTION_MIN_L1",
}


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The settings of this process. Fails at cold start with the offending variable named."""
    raw = {field: os.environ[env] for field, env in _ENV.items() if os.environ.get(env, "") != ""}
    raw.setdefault("region", os.environ.get("AWS_REGION", "us-east-1"))
    try:
        return Settings.model_validate(raw)
    except ValidationError as exc:  # pragma: no cover - exercised by a unit test through the message
        names = ", ".join(_ENV.get(str(e["loc"][0]), str(e["loc"][0])) for e in exc.errors())
        raise RuntimeError(f"invalid Memory Hub settings: {names}") from exc
