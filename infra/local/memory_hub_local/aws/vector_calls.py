"""What an S3 Vectors or Bedrock runtime request is (known by the service its SigV4 signature names):
its operation and the IAM actions it needs on which resources, as AWS evaluates them.

S3 Vectors: each operation is the action of its name (``s3vectors:PutVectors`` …) on the vector
index's ARN ``arn:aws:s3vectors:REGION:ACCOUNT:bucket/NAME/index/INDEX`` (CreateIndex, GetIndex,
DeleteIndex and the vector operations) or the vector bucket's ``…:bucket/NAME`` (the bucket
operations and ListIndexes); ListVectorBuckets needs ``*``. A QueryVectors with a ``filter``,
``queryTexts`` or ``returnMetadata`` also needs ``s3vectors:GetVectors`` on the index. The call
log names the vector bucket as ``bucket`` and the index as ``key`` (so a test hook's
``key_contains`` selects an index).

Bedrock: InvokeModel and Converse need ``bedrock:InvokeModel`` on the model's ARN,
``arn:aws:bedrock:REGION::foundation-model/MODEL``, an inference profile's
``arn:aws:bedrock:REGION:ACCOUNT:inference-profile/MODEL`` for a profile id (``us.…``), or the ARN
the request names."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import unquote

from .shapes import Call

ACCOUNT = "123456789012"
_BUCKET_OPERATIONS = {
    "CreateVectorBucket",
    "GetVectorBucket",
    "DeleteVectorBucket",
    "PutVectorBucketPolicy",
    "GetVectorBucketPolicy",
    "DeleteVectorBucketPolicy",
    "ListIndexes",
}
_TAGS = {"POST": "TagResource", "DELETE": "UntagResource", "GET": "ListTagsForResource"}


def parse(service: str, method: str, raw_path: str, who: str | None, body: bytes, region: str) -> Call:
    if service == "bedrock":
        return bedrock_call(raw_path, who, body, region)
    return vectors_call(method, raw_path, who, body, region)


def _json(body: bytes) -> dict[str, Any]:
    try:
        payload = json.loads(body or b"{}")
    except ValueError:
        return {}
    return payload if isinstance(payload, dict) else {}


def bucket_arn(region: str, name: str) -> str:
    return f"arn:aws:s3vectors:{region}:{ACCOUNT}:bucket/{name}"


def vectors_call(method: str, raw_path: str, who: str | None, body: bytes, region: str) -> Call:
    path = raw_path.split("?", 1)[0]
    segments = [unquote(s) for s in path.strip("/").split("/", 1)]
    payload = _json(body)
    if segments[0] == "tags":
        resource = segments[1] if len(segments) > 1 else "*"
        operation = _TAGS.get(method, "TagResource")
        return Call("s3vectors", operation, who, [(f"s3vectors:{operation}", resource)], payload)
    operation = segments[0]
    bucket = payload.get("vectorBucketName")
    index = payload.get("indexName")
    the_bucket_arn = payload.get("vectorBucketArn")
    index_arn = payload.get("indexArn")
    if isinstance(index_arn, str) and "/index/" in index_arn:
        the_bucket_arn, _, index = index_arn.partition("/index/")
    if isinstance(the_bucket_arn, str) and ":bucket/" in the_bucket_arn:
        bucket = the_bucket_arn.split(":bucket/", 1)[1]
    bucket = str(bucket) if bucket else None
    index = str(index) if index else None
    call = Call("s3vectors", operation, who, body=payload, bucket=bucket, key=index)
    if operation == "ListVectorBuckets":
        call.actions.append(("s3vectors:ListVectorBuckets", "*"))
        return call
    on_bucket = bucket_arn(region, bucket or "*")
    if operation in _BUCKET_OPERATIONS:
        call.actions.append((f"s3vectors:{operation}", on_bucket))
        return call
    on_index = f"{on_bucket}/index/{index or '*'}"
    call.actions.append((f"s3vectors:{operation}", on_index))
    needs_values = payload.get("filter") is not None or payload.get("queryTexts") is not None
    if operation == "QueryVectors" and (needs_values or payload.get("returnMetadata")):
        call.actions.append(("s3vectors:GetVectors", on_index))
    return call


# the Bedrock runtime's operations on a model, by the last segment of their path: (operation, IAM action)
_MODEL_OPERATIONS = {
    "invoke": ("InvokeModel", "bedrock:InvokeModel"),
    "invoke-with-response-stream": ("InvokeModelWithResponseStream", "bedrock:InvokeModelWithResponseStream"),
    "converse": ("Converse", "bedrock:InvokeModel"),
    "converse-stream": ("ConverseStream", "bedrock:InvokeModelWithResponseStream"),
    "count-tokens": ("CountTokens", "bedrock:CountTokens"),
}


# Cross-region inference profiles are named by a geography before the model id (us.amazon.nova-…).
_PROFILE_PREFIXES = ("us.", "us-gov.", "eu.", "apac.", "jp.", "au.", "ca.", "global.")


def model_resource(region: str, model: str) -> str:
    """The ARN IAM checks an InvokeModel or a Converse against: the ARN a request names, or a model
    id's — an inference profile's (``us.amazon.nova-lite-v1:0``) or else the foundation model's."""
    if model.startswith("arn:"):
        return model
    if model.startswith(_PROFILE_PREFIXES):
        return f"arn:aws:bedrock:{region}:{ACCOUNT}:inference-profile/{model}"
    return f"arn:aws:bedrock:{region}::foundation-model/{model}"


def bedrock_call(raw_path: str, who: str | None, body: bytes, region: str) -> Call:
    """``POST /model/{modelId}/{invoke|converse|…}`` (the model id percent-encoded, an ARN's '/'
    included). Converse needs ``bedrock:InvokeModel`` (ConverseStream the streaming action) on the
    model's ARN: a foundation model's, an inference profile's for a profile id (``us.…``), or the
    ARN the request names."""
    segments = raw_path.split("?", 1)[0].strip("/").split("/")
    model = unquote("/".join(segments[1:-1])) if len(segments) >= 3 and segments[0] == "model" else ""
    operation, action = _MODEL_OPERATIONS.get(segments[-1], _MODEL_OPERATIONS["invoke-with-response-stream"])
    call = Call("bedrock", operation, who, [(action, model_resource(region, model))])
    call.key = model  # the call log's ``key``: the model id (or ARN) as the request names it
    call.body = {"modelId": model, **_json(body)}  # what a test hook's ``body_contains`` looks at
    return call
