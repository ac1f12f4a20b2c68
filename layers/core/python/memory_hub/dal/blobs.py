"""S3 objects of a memory: text files with conditional writes (IfMatch / IfNoneMatch)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator

from botocore.exceptions import ClientError

from ..settings import get_settings
from .aws import gather, s3

DELETE_BATCH = 1000  # DeleteObjects takes at most 1000 keys
# XML 1.0 cannot carry these, so DeleteObjects (an XML body) cannot name a key holding them; the
# path rules allow them, so such keys go one by one through DeleteObject (key in the URL).
_NOT_XML = ("\ufffe", "\uffff")


class PreconditionFailed(Exception):
    """Someone else changed the object between our read and our write."""


@dataclass
class Blob:
    key: str
    etag: str
    metadata: dict[str, str] = field(default_factory=dict)
    text: str | None = None
    size: int = 0


def _code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def _missing(exc: ClientError) -> bool:
    return _code(exc) in ("NoSuchKey", "404", "NotFound")


def get(key: str) -> Blob | None:
    try:
        resp = s3().get_object(Bucket=get_settings().bucket, Key=key)
    except ClientError as exc:
        if _missing(exc):
            return None
        raise
    body = resp["Body"].read()
    return Blob(key, resp["ETag"], resp.get("Metadata", {}), body.decode("utf-8"), len(body))


def head(key: str) -> Blob | None:
    try:
        resp = s3().head_object(Bucket=get_settings().bucket, Key=key)
    except ClientError as exc:
        if _missing(exc):
            return None
        raise
    return Blob(key, resp["ETag"], resp.get("Metadata", {}), None, resp.get("ContentLength", 0))


def put(key: str, text: str, metadata: dict[str, str], *, if_match: str | None) -> str:
    """Write ``text``; only over the object with ETag ``if_match``, or only where none exists
    (``if_match=None``). Raises PreconditionFailed when the condition does not hold."""
    condition = {"IfMatch": if_match} if if_match else {"IfNoneMatch": "*"}
    try:
        resp = s3().put_object(Bucket=get_settings().bucket, Key=key, Body=text.encode("utf-8"),
                               ContentType="text/markdown; charset=utf-8", Metadata=metadata,
                               **condition)
    except ClientError as exc:
        # 412: the condition failed; 409: a concurrent conditional write won (AWS asks to retry).
        if _code(exc) in ("PreconditionFailed", "ConditionalRequestConflict", "412", "409"):
            raise PreconditionFailed(key) from exc
        raise
    return resp["ETag"]


def copy(source_key: str, target_key: str, *, if_match: str) -> bool:
    """Server-side copy of the exact version we read; False when it changed meanwhile."""
    bucket = get_settings().bucket
    try:
        s3().copy_object(Bucket=bucket, Key=target_key, CopySource={"Bucket": bucket, "Key": source_key},
                         CopySourceIfMatch=if_match, MetadataDirective="COPY")
    except ClientError as exc:
        if _code(exc) in ("PreconditionFailed", "412") or _missing(exc):
            return False
        raise
    return True


def list_keys(prefix: str) -> Iterator[tuple[str, int]]:
    """Every (key, size) under ``prefix``, in key order, across pages."""
    paginator = s3().get_paginator("list_objects_v2")
    for page in paginator.paginate(Bucket=get_settings().bucket, Prefix=prefix):
        for obj in page.get("Contents", []):
            yield obj["Key"], obj["Size"]


def delete_keys(keys: list[str], etags: list[str | None] | None = None) -> int:
    """Delete ``keys`` in batches of 1000, batches in parallel; returns how many were deleted.

    With ``etags``, each key goes only if it still holds that version (S3 conditional delete), so
    an object rewritten since it was listed survives.

    Raises when S3 reports a key it could not delete, so callers never claim an erasure
    that did not happen."""
    bucket = get_settings().bucket
    tags = etags or [None] * len(keys)
    singles = [k for k in keys if any(ch in k for ch in _NOT_XML)]
    for key in singles:
        delete(key)
    objects = [{"Key": k, "ETag": t} if t else {"Key": k} for k, t in zip(keys, tags) if k not in singles]
    batches = [objects[i : i + DELETE_BATCH] for i in range(0, len(objects), DELETE_BATCH)]

    def one(batch: list[dict[str, str]]) -> int:
        resp = s3().delete_objects(Bucket=bucket, Delete={"Objects": batch, "Quiet": True})
        errors = [e for e in resp.get("Errors", []) if e.get("Code") != "PreconditionFailed"]
        if errors:
            raise RuntimeError(f"S3 refused to delete {len(errors)} objects")
        return len(batch) - len(resp.get("Errors", []))

    return len(singles) + (sum(gather(*[lambda b=b: one(b) for b in batches])) if batches else 0)


def delete(key: str) -> None:
    s3().delete_object(Bucket=get_settings().bucket, Key=key)
