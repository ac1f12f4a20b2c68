"""AWS's limits and conditional semantics that moto 5.2.5 lacks, enforced on each request before
moto sees it — with AWS's own error codes, so a test fails here wherever AWS would refuse.

Each rule is a claim about AWS and about moto: tests/api/test_faithful_aws.py shows moto alone
accepts what the rule refuses (drop the rule the day moto does it itself).

DynamoDB: partition keys ≤ 2,048 bytes and sort keys ≤ 1,024 bytes on every key a request names
(reads included) and on every index key an item carries; items ≤ 400 KB; BatchWriteItem ≤ 25
requests without duplicate keys; BatchGetItem ≤ 100 keys; TransactWriteItems ≤ 100 actions and
≤ 4 MB. S3: object keys ≤ 1,024 bytes; user metadata ≤ 2 KB; DeleteObjects ≤ 1,000 keys and its
per-object ETag condition; CopyObject's x-amz-copy-source-if-match; ListObjectsV2 pages ≤ 1,000.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable
from typing import Any
from urllib.parse import unquote
from xml.sax.saxutils import escape

from .calls import delete_objects_keys
from .shapes import Call, Refusal

MAX_PARTITION_KEY, MAX_SORT_KEY = 2048, 1024
MAX_ITEM = 400 * 1024
MAX_TRANSACTION_BYTES = 4 * 1024 * 1024
MAX_S3_KEY, MAX_METADATA = 1024, 2048


def dynamodb_error(code: str, message: str, status: int = 400) -> Refusal:
    body = json.dumps({"__type": f"com.amazonaws.dynamodb.v20120810#{code}", "message": message}).encode()
    return Refusal(status, body, "application/x-amz-json-1.0", {"x-amzn-ErrorType": code}, code)


def s3_error(code: str, message: str, status: int = 400, **extra: str) -> Refusal:
    details = "".join(f"<{k}>{escape(v)}</{k}>" for k, v in extra.items())
    body = (
        f'<?xml version="1.0" encoding="UTF-8"?><Error><Code>{code}</Code><Message>{escape(message)}</Message>'
        f"{details}<RequestId>{uuid.uuid4().hex[:16].upper()}</RequestId></Error>"
    ).encode()
    return Refusal(status, body, "application/xml", code=code)


# ---------------------------------------------------------------- DynamoDB


def _size(value: Any) -> int:
    """Bytes of one attribute value as DynamoDB counts them (DynamoDB JSON)."""
    ((kind, inner),) = value.items()
    if kind == "S":
        return len(inner.encode("utf-8"))
    if kind == "N":
        digits = re.sub(r"[^0-9]", "", str(inner).split("e")[0].split("E")[0]).strip("0") or "0"
        return (len(digits) + 1) // 2 + 1
    if kind == "B":
        return len(inner) * 3 // 4 if isinstance(inner, str) else len(inner)
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "SS":
        return sum(len(v.encode("utf-8")) for v in inner)
    if kind == "NS":
        return sum(_size({"N": v}) for v in inner)
    if kind == "BS":
        return sum(len(v) for v in inner)
    if kind == "L":
        return 3 + sum(_size(v) + 1 for v in inner)
    if kind == "M":
        return 3 + sum(len(k.encode("utf-8")) + _size(v) + 1 for k, v in inner.items())
    return 0


def item_size(item: dict[str, Any]) -> int:
    return sum(len(name.encode("utf-8")) + _size(value) for name, value in item.items())


class Schemas:
    """Key attributes of the tables, read from moto's backend."""

    def __init__(self, backend: Any) -> None:
        self.backend = backend

    def keys(self, table_name: str) -> tuple[str | None, str | None, list[tuple[str, str]]]:
        """(hash, range, [(index key attribute, HASH|RANGE)]) of a table."""
        try:
            table = self.backend.get_table(table_name)
        except Exception:  # noqa: BLE001 - an unknown table: moto answers that itself
            return None, None, []
        index_keys = [
            (k["AttributeName"], k["KeyType"])
            for index in list(table.indexes or []) + list(table.global_indexes or [])
            for k in index.schema
        ]
        return table.hash_key_attr, table.range_key_attr, index_keys


def _key_too_long(kind: str) -> Refusal:
    limit = MAX_PARTITION_KEY if kind == "partition" else MAX_SORT_KEY
    return dynamodb_error(
        "ValidationException",
        f"One or more parameter values were invalid: Size of {kind} key "
        f"has exceeded the maximum size limit of {limit} bytes",
    )


def _check_key(schemas: Schemas, table: str, key: dict[str, Any]) -> None:
    hash_name, range_name, _ = schemas.keys(table)
    if hash_name in key and _size(key[hash_name]) > MAX_PARTITION_KEY:
        raise _key_too_long("partition")
    if range_name and range_name in key and _size(key[range_name]) > MAX_SORT_KEY:
        raise _key_too_long("sort")


def _check_item(schemas: Schemas, table: str, item: dict[str, Any]) -> None:
    _check_key(schemas, table, item)
    for name, kind in schemas.keys(table)[2]:
        if name in item and _size(item[name]) > (MAX_PARTITION_KEY if kind == "HASH" else MAX_SORT_KEY):
            raise _key_too_long("partition" if kind == "HASH" else "sort")
    if item_size(item) > MAX_ITEM:
        raise dynamodb_error("ValidationException", "Item size has exceeded the maximum allowed size")


def check_dynamodb(call: Call, schemas: Schemas) -> None:
    """Refuse what DynamoDB would refuse of this request (operations without a limit here pass)."""
    check = _DYNAMODB_CHECKS.get(call.operation)
    if check is not None:
        check(call.body or {}, schemas)


def _check_named_key(body: dict[str, Any], schemas: Schemas) -> None:
    _check_key(schemas, body.get("TableName", ""), body.get("Key", {}))


def _check_put(body: dict[str, Any], schemas: Schemas) -> None:
    _check_item(schemas, body.get("TableName", ""), body.get("Item", {}))


def _check_query(body: dict[str, Any], schemas: Schemas) -> None:
    """Each value the key condition names, held to the partition key's limit."""
    for name, value in (body.get("ExpressionAttributeValues") or {}).items():
        if name in (body.get("KeyConditionExpression") or "") and _size(value) > MAX_PARTITION_KEY:
            raise _key_too_long("partition")


def _check_batch_write(body: dict[str, Any], schemas: Schemas) -> None:
    requests = [(table, r) for table, rs in body.get("RequestItems", {}).items() for r in rs]
    if len(requests) > 25:
        raise dynamodb_error("ValidationException", "Too many items requested for the BatchWriteItem call")
    seen = set()
    for table, request in requests:
        marker = (table, _batch_write_key(schemas, table, request))
        if marker in seen:
            raise dynamodb_error("ValidationException", "Provided list of item keys contains duplicates")
        seen.add(marker)


def _batch_write_key(schemas: Schemas, table: str, request: dict[str, Any]) -> str:
    """The key a put or delete request of a batch names, checked, as text to spot duplicates by."""
    hash_name, range_name, _ = schemas.keys(table)
    if "PutRequest" in request:
        item = request["PutRequest"]["Item"]
        _check_item(schemas, table, item)
    else:
        item = request.get("DeleteRequest", {}).get("Key", {})
        _check_key(schemas, table, item)
    return json.dumps([item.get(hash_name), item.get(range_name) if range_name else None], sort_keys=True)


def _check_batch_get(body: dict[str, Any], schemas: Schemas) -> None:
    keys = [(table, k) for table, spec in body.get("RequestItems", {}).items() for k in spec.get("Keys", [])]
    if len(keys) > 100:
        raise dynamodb_error("ValidationException", "Too many items requested for the BatchGetItem call")
    for table, key in keys:
        _check_key(schemas, table, key)


def _check_transaction(body: dict[str, Any], schemas: Schemas) -> None:
    items = body.get("TransactItems", [])
    if len(items) > 100:
        raise dynamodb_error("ValidationException", "Member must have length less than or equal to 100")
    total = sum(_transaction_action_size(schemas, entry) for entry in items)
    if total > MAX_TRANSACTION_BYTES:
        raise dynamodb_error("ValidationException", "Transaction request cannot be larger than 4 MB")


def _transaction_action_size(schemas: Schemas, entry: dict[str, Any]) -> int:
    """One action of a transaction, checked: the bytes it counts toward the 4 MB (its item or key,
    and the values of its expressions)."""
    kind, op = next(iter(entry.items()))
    if kind == "Put":
        _check_item(schemas, op["TableName"], op["Item"])
        size = item_size(op["Item"])
    else:
        _check_key(schemas, op["TableName"], op.get("Key", {}))
        size = item_size(op.get("Key", {}))
    return size + sum(_size(v) for v in (op.get("ExpressionAttributeValues") or {}).values())


_DYNAMODB_CHECKS: dict[str, Callable[[dict[str, Any], Schemas], None]] = {
    "GetItem": _check_named_key,
    "DeleteItem": _check_named_key,
    "UpdateItem": _check_named_key,
    "PutItem": _check_put,
    "Query": _check_query,
    "BatchWriteItem": _check_batch_write,
    "BatchGetItem": _check_batch_get,
    "TransactWriteItems": _check_transaction,
}


# ---------------------------------------------------------------- S3


def _metadata_size(headers: dict[str, str]) -> int:
    return sum(
        len(k[len("x-amz-meta-") :].encode()) + len(v.encode("utf-8", "surrogateescape"))
        for k, v in headers.items()
        if k.startswith("x-amz-meta-")
    )


def _current_etag(s3: Any, bucket: str, key: str) -> str | None:
    try:
        found = s3.get_object(bucket, key)
    except Exception:  # noqa: BLE001 - no such bucket or key
        return None
    return found.etag.strip('"') if found is not None else None


def check_s3(call: Call, headers: dict[str, str], body: bytes, s3: Any) -> bytes | None:
    """Refuse what S3 would refuse. Returns a rewritten request body when one is needed (the
    DeleteObjects objects that may go), else None."""
    if call.key is not None and len(call.key.encode("utf-8")) > MAX_S3_KEY:
        raise s3_error(
            "KeyTooLongError",
            "Your key is too long",
            MaxSizeAllowed=str(MAX_S3_KEY),
            Size=str(len(call.key.encode("utf-8"))),
        )
    if call.operation in ("PutObject", "CopyObject"):
        replaces = call.operation == "PutObject" or headers.get("x-amz-metadata-directive", "").upper() == "REPLACE"
        if replaces and _metadata_size(headers) > MAX_METADATA:
            raise s3_error(
                "MetadataTooLarge",
                "Your metadata headers exceed the maximum allowed metadata size",
                Size=str(_metadata_size(headers)),
                MaxSizeAllowed=str(MAX_METADATA),
            )
    if call.operation == "CopyObject" and headers.get("x-amz-copy-source-if-match"):
        source = unquote(headers["x-amz-copy-source"].split("?", 1)[0]).lstrip("/")
        source_bucket, _, source_key = source.partition("/")
        current = _current_etag(s3, source_bucket, source_key)
        if current is not None and current != headers["x-amz-copy-source-if-match"].strip('"'):
            raise s3_error(
                "PreconditionFailed",
                "At least one of the pre-conditions you specified did not hold",
                412,
                Condition="x-amz-copy-source-If-Match",
            )
    if call.operation == "DeleteObjects":
        keys = delete_objects_keys(body)
        if len(keys) > 1000:
            raise s3_error(
                "MalformedXML",
                "The XML you provided was not well-formed or did not validate against our published schema",
            )
    return None


def delete_objects_preconditions(body: bytes, bucket: str, s3: Any) -> tuple[bytes, list[str]]:
    """DeleteObjects with per-object ETags: the request without the objects whose ETag no longer
    matches, and those keys (answered as PreconditionFailed errors, as S3 does)."""
    keys = delete_objects_keys(body)
    if not any(etag for _, etag in keys):
        return body, []
    changed = [k for k, etag in keys if etag and _current_etag(s3, bucket, k) not in (None, etag.strip('"'))]
    kept = [(k, e) for k, e in keys if k not in changed]
    quiet = b"<Quiet>true</Quiet>" in body
    objects = "".join(f"<Object><Key>{escape(k)}</Key></Object>" for k, _ in kept)
    rewritten = (
        f'<?xml version="1.0" encoding="UTF-8"?><Delete xmlns="http://s3.amazonaws.com/doc/2006-03-01/">'
        f"{'<Quiet>true</Quiet>' if quiet else ''}{objects}</Delete>"
    ).encode()
    return rewritten, changed


def add_precondition_errors(response: bytes, changed: list[str]) -> bytes:
    errors = "".join(
        f"<Error><Key>{escape(k)}</Key><Code>PreconditionFailed</Code><Message>At least one of the "
        f"pre-conditions you specified did not hold</Message></Error>"
        for k in changed
    )
    text = response.decode("utf-8")
    if "</DeleteResult>" in text:
        return text.replace("</DeleteResult>", errors + "</DeleteResult>").encode()
    return (
        f'<?xml version="1.0" encoding="UTF-8"?><DeleteResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">'
        f"{errors}</DeleteResult>"
    ).encode()


def s3_cors(headers: dict[str, str], bucket: str | None, s3: Any) -> dict[str, str]:
    """S3 answers a browser's ``Origin`` with CORS headers only by the bucket's CORS rules; moto's
    server adds them to every answer (its Flask app allows any origin). A bucket without rules —
    the template sets none — gets none, so a web page cannot read what it sends there."""
    found = s3.buckets.get(bucket) if bucket else None
    if found is not None and found.cors:
        return headers
    return {k: v for k, v in headers.items() if not k.lower().startswith("access-control-")}


def cap_list_page(query: str) -> str:
    """ListObjectsV2 returns at most 1,000 keys a page, whatever max-keys asks for."""

    def cap(match: re.Match[str]) -> str:
        return f"max-keys={min(int(match.group(1)), 1000)}"

    return re.sub(r"max-keys=(\d+)", cap, query)
