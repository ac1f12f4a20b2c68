"""Every vector bucket, index and vector (with its metadata) as plain data for the local stack's
snapshot, and back (vector data as base64 of little-endian float32)."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import numpy as np

from .service import backend


def _pack(values: list[float]) -> str:
    return base64.b64encode(np.asarray(values, dtype="<f4").tobytes()).decode()


def _unpack(text: str) -> list[float]:
    return [float(x) for x in np.frombuffer(base64.b64decode(text), dtype="<f4").tolist()]


def _index_entry(index: Any) -> dict[str, Any]:
    return {
        "name": index.index_name,
        "dimension": index.dimension,
        "dataType": index.data_type,
        "distanceMetric": index.distance_metric,
        "metadataConfiguration": getattr(index, "metadata_configuration", None) or {},
        "created": getattr(index, "creation_time", datetime.now(UTC)).isoformat(),
    }


def _bucket_entry(bucket: Any) -> dict[str, Any]:
    return {
        "name": bucket.vector_bucket_name,
        "arn": bucket.vector_bucket_arn,
        "encryption": bucket.encryption_configuration,
        "created": getattr(bucket, "creation_time", datetime.now(UTC)).isoformat(),
    }


def dump_records() -> Iterator[tuple[str, dict[str, Any]]]:
    """Every vector bucket, index and vector, one record at a time, each after what holds it:
    ("bucket", …), ("index", … with its bucket's "arn"), ("vector", … with its bucket's "arn" and
    its index's "index_arn")."""
    for bucket in list(backend().vector_buckets.values()):
        yield "bucket", _bucket_entry(bucket)
        for index in list(bucket.indexes.values()):
            yield "index", {"arn": bucket.vector_bucket_arn, **_index_entry(index)}
            for v in list(index.vectors.values()):
                record = {"key": v.key, "data": _pack(v.data["float32"]), "metadata": v.metadata}
                yield "vector", {"arn": bucket.vector_bucket_arn, "index_arn": index.index_arn, **record}


def load_record(kind: str, record: dict[str, Any]) -> Any:
    """Put one record of ``dump_records`` back and answer what it made (a bucket the template
    already made is filled, not made again)."""
    from moto.s3vectors.models import Index, Vector, VectorBucket

    vectors_backend = backend()
    if kind == "bucket":
        bucket = vectors_backend.vector_buckets.get(record["arn"])
        if bucket is None:
            bucket = VectorBucket(arn=record["arn"], name=record["name"], encryption_configuration=record["encryption"])
            vectors_backend.vector_buckets[record["arn"]] = bucket
        bucket.creation_time = datetime.fromisoformat(record["created"])
        return bucket
    bucket = vectors_backend.vector_buckets[record["arn"]]
    if kind == "index":
        index: Any = Index(
            bucket=bucket,
            name=record["name"],
            dimension=record["dimension"],
            data_type=record["dataType"],
            distance_metric=record["distanceMetric"],
        )
        index.creation_time = datetime.fromisoformat(record["created"])
        index.metadata_configuration = record.get("metadataConfiguration") or {}
        bucket.indexes[index.index_arn] = index
        return index
    vector = Vector(record["key"], {"float32": _unpack(record["data"])}, record.get("metadata"))
    bucket.indexes[record["index_arn"]].vectors[record["key"]] = vector
    return vector


def load_state(saved: dict[str, Any]) -> None:
    """Put back the vectors of a snapshot of format 1 or 2 (one JSON document: buckets holding their
    indexes, indexes their vectors)."""
    for bucket in saved.get("buckets", []):
        load_record("bucket", {k: v for k, v in bucket.items() if k != "indexes"})
        for index in bucket.get("indexes", []):
            made = load_record("index", {"arn": bucket["arn"], **{k: v for k, v in index.items() if k != "vectors"}})
            for vector in index.get("vectors", []):
                load_record("vector", {"arn": bucket["arn"], "index_arn": made.index_arn, **vector})
