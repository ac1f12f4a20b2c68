"""What an AWS request is: its service, operation, caller and the IAM actions it needs on which
resources (as AWS evaluates them: a TransactWriteItems needs PutItem/UpdateItem/DeleteItem/
ConditionCheckItem on each table it touches; a DeleteObjects needs s3:DeleteObject on each key;
a CopyObject needs s3:GetObject on its source and s3:PutObject on its target). Requests signed
for ``s3vectors`` and ``bedrock`` are described in ``vector_calls``."""

from __future__ import annotations

import json
import re
from urllib.parse import parse_qs, unquote, urlsplit
from xml.etree import ElementTree

from . import vector_calls
from .shapes import Call

_CREDENTIAL = re.compile(r"Credential=([^/,\s]+)/")
_SCOPE = re.compile(r"Credential=[^/,\s]+/\d{8}/[^/]+/([^/]+)/aws4_request")


def access_key(headers: dict[str, str], query: dict[str, list[str]]) -> str | None:
    match = _CREDENTIAL.search(headers.get("authorization", ""))
    if match:
        return match.group(1)
    credential = (query.get("X-Amz-Credential") or [""])[0]
    if credential:
        return credential.split("/", 1)[0]
    legacy = query.get("AWSAccessKeyId")
    return legacy[0] if legacy else None


def parse(method: str, raw_path: str, headers: dict[str, str], body: bytes, region: str) -> Call:
    url = urlsplit(raw_path)
    query = parse_qs(url.query, keep_blank_values=True)
    who = access_key(headers, query)
    target = headers.get("x-amz-target", "")
    if target.startswith("DynamoDB_"):
        return _dynamodb(target.split(".", 1)[1], who, body, region)
    if target.startswith("secretsmanager."):
        payload = json.loads(body or b"{}")
        secret = str(payload.get("SecretId", ""))
        return Call(
            "secretsmanager",
            target.split(".", 1)[1],
            who,
            [(f"secretsmanager:{target.split('.', 1)[1]}", secret)],
            payload,
        )
    if target.startswith("AmazonSQS."):  # SQS's JSON protocol: the queue is named by its URL
        payload = json.loads(body or b"{}")
        operation, queue = target.split(".", 1)[1], str(payload.get("QueueUrl") or payload.get("QueueName") or "")
        arn = f"arn:aws:sqs:{region}:123456789012:{queue.rstrip('/').rsplit('/', 1)[-1]}"
        action = operation.removesuffix("Batch")  # IAM has no *Batch actions: a batch needs the single one
        return Call("sqs", operation, who, [(f"sqs:{action}", arn)], payload)
    service = signing_service(headers, query)
    if service in ("s3vectors", "bedrock"):
        return vector_calls.parse(service, method, raw_path, who, body, region)
    return _s3(method, url.path, query, headers, body, who)


def signing_service(headers: dict[str, str], query: dict[str, list[str]]) -> str | None:
    """The service a request was signed for (its SigV4 credential scope)."""
    match = _SCOPE.search(headers.get("authorization", "")) or _SCOPE.search(
        "Credential=" + (query.get("X-Amz-Credential") or [""])[0]
    )
    return match.group(1) if match else None


def _table_arn(region: str, table: str, index: str | None = None) -> str:
    arn = f"arn:aws:dynamodb:{region}:123456789012:table/{table}"
    return f"{arn}/index/{index}" if index else arn


_TRANSACT_ACTIONS = {
    "Put": "PutItem",
    "Update": "UpdateItem",
    "Delete": "DeleteItem",
    "ConditionCheck": "ConditionCheckItem",
    "Get": "GetItem",
}


def _dynamodb(operation: str, who: str | None, body: bytes, region: str) -> Call:
    payload = json.loads(body or b"{}")
    call = Call("dynamodb", operation, who, body=payload)
    if operation in ("BatchGetItem", "BatchWriteItem"):
        for table in payload.get("RequestItems", {}):
            call.tables.append(table)
            call.actions.append((f"dynamodb:{operation}", _table_arn(region, table)))
    elif operation in ("TransactWriteItems", "TransactGetItems"):
        for entry in payload.get("TransactItems", []):
            kind, op = next(iter(entry.items()))
            call.tables.append(op["TableName"])
            call.actions.append((f"dynamodb:{_TRANSACT_ACTIONS[kind]}", _table_arn(region, op["TableName"])))
    elif "TableName" in payload:
        call.tables.append(payload["TableName"])
        call.actions.append(
            (f"dynamodb:{operation}", _table_arn(region, payload["TableName"], payload.get("IndexName")))
        )
    else:
        call.actions.append((f"dynamodb:{operation}", "*"))
    return call


def _object_arn(bucket: str, key: str) -> str:
    return f"arn:aws:s3:::{bucket}/{key}"


def _s3(
    method: str, path: str, query: dict[str, list[str]], headers: dict[str, str], body: bytes, who: str | None
) -> Call:
    bucket, _, key = unquote(path).lstrip("/").partition("/")
    call = Call("s3", method, who, bucket=bucket or None, key=key or None)
    if not bucket:
        call.operation = "ListBuckets"
        call.actions.append(("s3:ListAllMyBuckets", "*"))
    elif not key:
        if method == "POST" and "delete" in query:
            call.operation = "DeleteObjects"
            keys = delete_objects_keys(body)
            call.actions += [("s3:DeleteObject", _object_arn(bucket, k)) for k, _ in keys]
        elif method in ("GET", "HEAD") and not any(q in query for q in ("policy", "acl", "location", "versioning")):
            call.operation = (
                "ListObjectsV2" if "list-type" in query else ("HeadBucket" if method == "HEAD" else "ListObjects")
            )
            call.actions.append(("s3:ListBucket", f"arn:aws:s3:::{bucket}"))
        else:
            call.operation = f"Bucket{method.title()}"
            call.actions.append((f"s3:{method.title()}Bucket", f"arn:aws:s3:::{bucket}"))
    elif method in ("GET", "HEAD"):
        call.operation = "GetObject" if method == "GET" else "HeadObject"
        call.actions.append(("s3:GetObject", _object_arn(bucket, key)))
    elif method == "PUT":
        source = headers.get("x-amz-copy-source")
        if source:
            call.operation = "CopyObject"
            source_bucket, _, source_key = unquote(source.split("?", 1)[0]).lstrip("/").partition("/")
            call.actions.append(("s3:GetObject", _object_arn(source_bucket, source_key)))
        else:
            call.operation = "PutObject"
        call.actions.append(("s3:PutObject", _object_arn(bucket, key)))
    elif method == "DELETE":
        call.operation = "DeleteObject"
        call.actions.append(("s3:DeleteObject", _object_arn(bucket, key)))
    else:
        call.operation = f"Object{method.title()}"
        call.actions.append((f"s3:{method.title()}Object", _object_arn(bucket, key)))
    return call


def delete_objects_keys(body: bytes) -> list[tuple[str, str | None]]:
    """(key, ETag or None) of each object of a DeleteObjects request."""
    try:
        root = ElementTree.fromstring(body)  # noqa: S314 - from the functions on loopback, no entities
    except ElementTree.ParseError:
        return []
    found = []
    for element in root.iter():
        if element.tag.endswith("Object"):
            key = etag = None
            for child in element:
                if child.tag.endswith("Key"):
                    key = child.text or ""
                elif child.tag.endswith("ETag"):
                    etag = child.text
            if key is not None:
                found.append((key, etag))
    return found
