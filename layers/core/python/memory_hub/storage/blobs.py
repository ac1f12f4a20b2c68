"""S3 objects of the memories: UTF-8 text with conditional writes, copies and deletes.

Writes are compare-and-swap on the ETag read (``IfMatch``), or create-only (``IfNoneMatch: *``).
Every way S3 reports "someone else changed it meanwhile" — 412, 409 ``ConditionalRequestConflict``,
and 404 ``NoSuchKey`` for an ``IfMatch`` on an object deleted since it was read — is one
``PreconditionFailed`` for the caller to retry.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from botocore.exceptions import ClientError

from ..settings import get_settings
from . import aws
from .concurrency import for_each, in_batches
from .errors import PreconditionFailed, StorageError

DELETE_BATCH = 1000  # DeleteObjects takes at most 1,000 keys
# XML 1.0 cannot carry these, so DeleteObjects (an XML body) cannot name a key holding them; the
# path rules allow them, so such keys go one by one through DeleteObject (key in the URL).
_NOT_XML = ("\ufffe", "\uffff")
_MISSING = ("NoSuchKey", "404", "NotFound")
_CHANGED = ("PreconditionFailed", "412", "ConditionalRequestConflict", "409")


@dataclass
class Blob:
    key: str
    etag: str
    metadata: dict[str, str] = field(default_factory=dict)
    text: str | None = None
    size: int = 0
    last_modified: datetime | None = None


@dataclass(frozen=True)
class Listed:
    key: str
    etag: str
    size: int
    last_modified: datetime


def _bucket() -> str:
    return get_settings().bucket


def get(key: str) -> Blob | None:
    try:
        resp = aws.s3().get_object(Bucket=_bucket(), Key=key)
    except ClientError as exc:
        if aws.error_code(exc) in _MISSING:
            return None
        raise
    body = resp["Body"].read()
    return Blob(key, resp["ETag"], resp.get("Metadata", {}), body.decode("utf-8"), len(body), resp.get("LastModified"))


def get_bytes(key: str) -> bytes | None:
    try:
        return bytes(aws.s3().get_object(Bucket=_bucket(), Key=key)["Body"].read())
    except ClientError as exc:
        if aws.error_code(exc) in _MISSING:
            return None
        raise


def epoch_of(blob: Blob) -> int:
    """The content epoch an object was written in (its ``epoch`` metadata; 0 without one)."""
    try:
        return int(blob.metadata.get("epoch", "0"))
    except ValueError:
        return 0


def head(key: str) -> Blob | None:
    try:
        resp = aws.s3().head_object(Bucket=_bucket(), Key=key)
    except ClientError as exc:
        if aws.error_code(exc) in _MISSING:
            return None
        raise
    return Blob(
        key, resp["ETag"], resp.get("Metadata", {}), None, resp.get("ContentLength", 0), resp.get("LastModified")
    )


def put(key: str, text: str, metadata: dict[str, str], *, if_match: str | None) -> str:
    """Write ``text`` over the object with ETag ``if_match``, or only where none exists
    (``if_match=None``); returns the new ETag. PreconditionFailed when the condition fails."""
    condition = {"IfMatch": if_match} if if_match else {"IfNoneMatch": "*"}
    try:
        resp = aws.s3().put_object(
            Bucket=_bucket(),
            Key=key,
            Body=text.encode("utf-8"),
            ContentType="text/markdown; charset=utf-8",
            Metadata=metadata,
            **condition,
        )
    except ClientError as exc:
        if aws.error_code(exc) in _CHANGED + _MISSING:
            raise PreconditionFailed(key) from exc
        raise
    return str(resp["ETag"])


def put_bytes(key: str, data: bytes, content_type: str, metadata: dict[str, str] | None = None) -> str:
    resp = aws.s3().put_object(Bucket=_bucket(), Key=key, Body=data, ContentType=content_type, Metadata=metadata or {})
    return str(resp["ETag"])


def copy(source_key: str, target_key: str, *, if_match: str) -> bool:
    """Server-side copy of exactly the version read; False when it changed meanwhile."""
    bucket = _bucket()
    try:
        aws.s3().copy_object(
            Bucket=bucket,
            Key=target_key,
            CopySource={"Bucket": bucket, "Key": source_key},
            CopySourceIfMatch=if_match,
            MetadataDirective="COPY",
        )
    except ClientError as exc:
        if aws.error_code(exc) in _CHANGED + _MISSING:
            return False
        raise
    return True


def listing(prefix: str) -> Iterator[list[Listed]]:
    """Pages (≤ 1,000 objects) of everything under ``prefix``, in key order."""
    paginator = aws.s3().get_paginator("list_objects_v2")
    for page in paginator.paginate(Bucket=_bucket(), Prefix=prefix):
        yield [
            Listed(o["Key"], o.get("ETag", ""), int(o.get("Size", 0)), o["LastModified"])
            for o in page.get("Contents", [])
        ]


def keys_under(prefix: str) -> list[str]:
    return [o.key for page in listing(prefix) for o in page]


def delete(key: str, *, if_match: str | None = None) -> bool:
    """Delete one object (only while it has ETag ``if_match``, when given); False if it changed
    meanwhile or was already gone."""
    extra = {"IfMatch": if_match} if if_match else {}
    try:
        aws.s3().delete_object(Bucket=_bucket(), Key=key, **extra)
    except ClientError as exc:
        if aws.error_code(exc) in _CHANGED + _MISSING:
            return False
        raise
    return True


def delete_many(keys: list[str], etags: list[str | None] | None = None) -> int:
    """Delete ``keys`` (see :func:`deleted`); how many went."""
    return len(deleted(keys, etags))


def deleted(keys: list[str], etags: list[str | None] | None = None) -> list[str]:
    """Delete ``keys`` in batches of 1,000, batches in parallel; the keys that went.

    With ``etags``, each key goes only while it still holds that version (a conditional delete), so
    an object rewritten since it was listed survives. Raises when S3 reports a key it could not
    delete for another reason, so no caller ever claims an erasure that did not happen."""
    pairs = list(zip(keys, etags or [None] * len(keys), strict=True))
    # A key with a character XML 1.0 cannot carry goes on its own (DeleteObjects is an XML body).
    odd = [(k, t) for k, t in pairs if any(ch in k for ch in _NOT_XML)]
    gone = [k for k, t in odd if delete(k, if_match=t)]
    objects = [{"Key": k, "ETag": t} if t else {"Key": k} for k, t in pairs if (k, t) not in odd]

    def one(batch: list[dict[str, str]]) -> list[str]:
        resp = aws.s3().delete_objects(Bucket=_bucket(), Delete={"Objects": batch, "Quiet": True})
        errors = resp.get("Errors", [])
        unexpected = [e for e in errors if e.get("Code") not in _CHANGED + _MISSING]
        if unexpected:
            raise StorageError(f"S3 refused to delete {len(unexpected)} objects ({unexpected[0].get('Code')})")
        kept = {e.get("Key") for e in errors}
        return [o["Key"] for o in batch if o["Key"] not in kept]

    return gone + [k for batch in for_each(one, in_batches(objects, DELETE_BATCH)) for k in batch]


def presigned(method: str, key: str, expires_s: int, **params: Any) -> str:
    """A presigned URL for one object (``get_object`` or ``put_object``)."""
    return str(
        aws.s3().generate_presigned_url(method, Params={"Bucket": _bucket(), "Key": key, **params}, ExpiresIn=expires_s)
    )
