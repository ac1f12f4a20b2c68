"""Every vector bucket, index and vector (with its metadata) as plain data for the local stack's
snapshot, and back (vector data as base64 of little-endian float32)."""

from __future__ import annotations

import base64
from datetime import UTC, datetime
from typing import Any

import numpy as np

from .service import backend


def _pack(values: list[float]) -> str:
    return base64.b64encode(np.asarray(values, dtype="<f4").tobytes()).decode()


def _unpack(text: str) -> list[float]:
    return [float(x) for x in np.frombuffer(base64.b64decode(text), dtype="<f4").tolist()]


def _dump_index(index: Any) -> dict[str, Any]:
    return {
        "name": index.index_name,
        "dimension": index.dimension,
        "dataType": index.data_type,
        "distanceMetric": index.distance_metric,
        "metadataConfiguration": getattr(index, "metadata_configuration", None) or {},
        "created": getattr(index, "creation_time", datetime.now(UTC)).isoformat(),
        "vectors": [
            {"key": v.key, "data": _pack(v.data["float32"]), "metadata": v.metadata} for v in index.vectors.values()
        ],
    }


def dump_state() -> dict[str, Any]:
    """Every vector bucket, index and vector as plain data (call under the AWS lock)."""
    buckets = [
        {
            "name": bucket.vector_bucket_name,
            "arn": bucket.vector_bucket_arn,
            "encryption": bucket.encryption_configuration,
            "created": getattr(bucket, "creation_time", datetime.now(UTC)).isoformat(),
            "indexes": [_dump_index(index) for index in bucket.indexes.values()],
        }
        for bucket in backend().vector_buckets.values()
    ]
    return {"format": 1, "buckets": buckets}


def load_state(saved: dict[str, Any]) -> None:
    """Put a dumped state back (buckets the template already made are filled, not made again)."""
    from moto.s3vectors.models import Index, Vector, VectorBucket

    vectors_backend = backend()
    for entry in saved.get("buckets", []):
        bucket = vectors_backend.vector_buckets.get(entry["arn"])
        if bucket is None:
            bucket = VectorBucket(arn=entry["arn"], name=entry["name"], encryption_configuration=entry["encryption"])
            vectors_backend.vector_buckets[entry["arn"]] = bucket
        bucket.creation_time = datetime.fromisoformat(entry["created"])
        for saved_index in entry.get("indexes", []):
            index: Any = Index(
                bucket=bucket,
                name=saved_index["name"],
                dimension=saved_index["dimension"],
                data_type=saved_index["dataType"],
                distance_metric=saved_index["distanceMetric"],
            )
            index.creation_time = datetime.fromisoformat(saved_index["created"])
            index.metadata_configuration = saved_index.get("metadataConfiguration") or {}
            for v in saved_index.get("vectors", []):
                index.vectors[v["key"]] = Vector(v["key"], {"float32": _unpack(v["data"])}, v.get("metadata"))
            bucket.indexes[index.index_arn] = index
