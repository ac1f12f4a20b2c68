"""Deployment settings: read once from the environment (as Lambda gives it) into a frozen model.

Every value comes from the function's environment in ``template.yaml``; nothing here knows about
the local stack, which provides the same variables the way Lambda does. A missing or invalid
variable fails the cold start with a message that names it.

Why not pydantic-settings (weighed, and left out of the layer): it would do the same work here, not
less, and cost every cold start.

- The variables share no prefix (Lambda's own ``AWS_REGION``, falling back to
  ``AWS_DEFAULT_REGION``; the template's ``ASSETS_TABLE`` and friends; ``MEMORY_HUB_*``), so each
  field would need its own ``validation_alias``: the ``ENVIRONMENT`` map below, spelled as field
  arguments instead.
- Three values are in no format it reads: ``EMBEDDINGS`` is the template's ``Enabled``/``Disabled``,
  ``VECTOR_WRITES`` its ``Immediate``/``Batched`` and ``VECTOR_BUCKETS`` a comma-separated list of
  names or ARNs (it reads a tuple as JSON), so they would keep their validators.
- It adds two packages to the layer (pydantic-settings and python-dotenv), and importing it after
  pydantic took about 0.25 s on a busy 2-core machine (its command-line and dotenv sources load
  with it): a price at every cold start for the same result, one pydantic model validated once.
"""

from __future__ import annotations

import os
from functools import lru_cache
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

MAX_BODY_BYTES = 1_048_576  # 1 MiB: the most a request body may hold, as received and after decoding


class Settings(BaseModel):
    model_config = ConfigDict(frozen=True)

    region: str = Field(min_length=1)
    bucket: str = Field(min_length=1)
    assets_table: str = Field(min_length=1)
    items_table: str = Field(min_length=1)
    scenes_table: str = Field(min_length=1)
    keys_table: str = Field(min_length=1)
    audit_table: str = Field(min_length=1)
    idempotency_table: str = Field(min_length=1)
    token_secret_id: str = Field(min_length=1)
    bootstrap_key_secret_id: str | None = None
    service_id: str = Field("default", min_length=1)
    retention_days: int = Field(0, ge=0, le=36_500)
    retention_min_l0: int = Field(50, ge=0)
    retention_min_l1: int = Field(20, ge=0)
    clear_budget_s: float = Field(24.0, ge=0, le=900)
    # A delete by id, by session or of a user's memory stops here (503, retryable) and a retry goes on.
    erase_budget_s: float = Field(20.0, ge=0.001, le=900)
    # Meaning (embeddings and vectors). Off unless the environment turns it on; the vector buckets
    # exist whenever the stack has them (erasure reaches vectors even while embeddings are off).
    embeddings: bool = False
    embedding_model: str = Field("amazon.titan-embed-text-v2:0", min_length=1)
    embedding_dimensions: int = Field(1024, ge=1, le=4096)
    vector_buckets: tuple[str, ...] = ()
    embed_queue_url: str | None = None
    vector_queue_url: str | None = None  # VectorDrainMinutes: waiting vectors, drained on a schedule
    embed_budget_s: float = Field(3.0, ge=0, le=20)
    # True (VectorWrites Batched): a write keeps its vectors waiting in DynamoDB and queues them
    # (the queue's consumer puts the vectors of one memory together, one PutVectors for many
    # writes). False (Immediate): a write puts its vectors within the request.
    vectors_batched: bool = False
    # The groups of users a new memory's vector indexes are split into (its users' vectors by a
    # digest of the user id): a search reads its user's group's index only.
    vector_groups: int = Field(1, ge=1, le=256)
    # Where a new memory's messages are indexed by words: in DynamoDB (``postings``, one item a
    # distinct term) or with their vectors in S3 Vectors (``vectors``: their terms as searchable
    # metadata, asked in the vector query). Fixed for a memory's life; ``vectors`` needs meaning on.
    word_index: Literal["postings", "vectors"] = "postings"
    # What a write's epoch check reads: the memory's fence (a small item) or its asset, as releases
    # before 2026-12-05 did (the first deploy of an upgrade from one of them: see storage/assets).
    epoch_checks: Literal["Fence", "Asset"] = "Fence"
    # Formation (the model is called through Bedrock Converse). Off unless the template turns it on.
    formation: bool = False
    formation_model: str = Field("amazon.nova-lite-v1:0", min_length=1)
    formation_batch: int = Field(10, ge=2, le=100)
    formation_idle_s: int = Field(600, ge=1, le=900)
    formation_queue_url: str | None = None


# field → environment variable; the region comes from Lambda's own AWS_REGION.
ENVIRONMENT = {
    "region": "AWS_REGION",
    "bucket": "MEMORY_HUB_BUCKET",
    "assets_table": "ASSETS_TABLE",
    "items_table": "ITEMS_TABLE",
    "scenes_table": "SCENES_TABLE",
    "keys_table": "KEYS_TABLE",
    "audit_table": "AUDIT_TABLE",
    "idempotency_table": "IDEMPOTENCY_TABLE",
    "token_secret_id": "MEMORY_HUB_TOKEN_SECRET_ARN",
    "bootstrap_key_secret_id": "MEMORY_HUB_BOOTSTRAP_KEY_SECRET_ARN",
    "service_id": "MEMORY_HUB_SERVICE_ID",
    "retention_days": "RETENTION_DAYS",
    "retention_min_l0": "RETENTION_MIN_L0",
    "retention_min_l1": "RETENTION_MIN_L1",
    "clear_budget_s": "MEMORY_HUB_CLEAR_BUDGET_S",
    "erase_budget_s": "MEMORY_HUB_ERASE_BUDGET_S",
    "embeddings": "EMBEDDINGS",
    "embedding_model": "EMBEDDING_MODEL",
    "embedding_dimensions": "EMBEDDING_DIMENSIONS",
    "vector_buckets": "VECTOR_BUCKETS",
    "embed_queue_url": "EMBED_QUEUE_URL",
    "vector_queue_url": "VECTOR_QUEUE_URL",
    "embed_budget_s": "MEMORY_HUB_EMBED_BUDGET_S",
    "vectors_batched": "VECTOR_WRITES",
    "vector_groups": "VECTOR_GROUPS",
    "word_index": "WORD_INDEX",
    "epoch_checks": "EPOCH_CHECKS",
    "formation": "FORMATION",
    "formation_model": "FORMATION_MODEL",
    "formation_batch": "FORMATION_BATCH",
    "formation_idle_s": "FORMATION_IDLE_S",
    "formation_queue_url": "FORMATION_QUEUE_URL",
}


class SettingsError(RuntimeError):
    """The environment lacks a required variable or holds an invalid one (names it)."""


def from_environment(environ: dict[str, str] | os._Environ[str]) -> Settings:
    raw: dict[str, object] = {
        field: environ[name] for field, name in ENVIRONMENT.items() if environ.get(name, "") != ""
    }
    for switch in ("embeddings", "formation"):  # the template's Enabled|Disabled
        if switch in raw:
            raw[switch] = str(raw[switch]).strip().lower() in ("enabled", "true", "1")
    if "vectors_batched" in raw:  # the template's VectorWrites: Immediate|Batched
        raw["vectors_batched"] = str(raw["vectors_batched"]).strip().lower() == "batched"
    if "word_index" in raw:  # the template's WordIndex: Postings|Vectors
        raw["word_index"] = str(raw["word_index"]).strip().lower()
    if "vector_buckets" in raw:  # comma-separated names
        # names or ARNs (``arn:…:s3vectors:…:bucket/<name>``), comma-separated
        raw["vector_buckets"] = tuple(
            b.strip().rsplit("bucket/", 1)[-1] for b in str(raw["vector_buckets"]).split(",") if b.strip()
        )
    if "region" not in raw and environ.get("AWS_DEFAULT_REGION"):
        raw["region"] = environ["AWS_DEFAULT_REGION"]
    try:
        return Settings.model_validate(raw)
    except ValidationError as exc:
        problems = []
        for error in exc.errors():
            field = str(error["loc"][0]) if error["loc"] else ""
            name = ENVIRONMENT.get(field, field)
            problems.append(f"{name} is not set" if error["type"] == "missing" else f"{name}: {error['msg']}")
        raise SettingsError("Memory Hub cannot start: " + "; ".join(problems)) from None


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The settings of this process, read on first use (a function's cold start)."""
    return from_environment(os.environ)
