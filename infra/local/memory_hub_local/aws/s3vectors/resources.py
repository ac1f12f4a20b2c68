"""The template's S3 Vectors resources made at the local stack's start: each
``AWS::S3Vectors::VectorBucket`` and ``AWS::S3Vectors::Index``, through the (patched) API."""

from __future__ import annotations

from typing import Any


def _resolve_name(value: Any, names: dict[str, str]) -> str | None:
    """A vector bucket named in a resource's properties: a literal name or ARN, a Ref or a GetAtt."""
    if isinstance(value, str):
        return value.split(":bucket/", 1)[1].split("/", 1)[0] if ":bucket/" in value else value
    if isinstance(value, dict) and len(value) == 1:
        ((function, argument),) = value.items()
        if function == "Ref":
            return names.get(str(argument))
        if function == "Fn::GetAtt":
            target = argument[0] if isinstance(argument, list) else str(argument).split(".", 1)[0]
            return names.get(str(target))
    return None


def create_from_template(cfn: dict[str, Any], names: dict[str, str], region: str) -> None:
    """Make the template's ``AWS::S3Vectors::VectorBucket`` and ``AWS::S3Vectors::Index`` resources
    (a bucket is named by its ``VectorBucketName`` or else as the local stack names the resource)."""
    import boto3

    resources = cfn.get("Resources", {})
    buckets = {k: v for k, v in resources.items() if v.get("Type") == "AWS::S3Vectors::VectorBucket"}
    indexes = {k: v for k, v in resources.items() if v.get("Type") == "AWS::S3Vectors::Index"}
    if not buckets and not indexes:
        return
    client = boto3.client("s3vectors", region_name=region)
    bucket_names: dict[str, str] = dict(names)
    for logical_id, resource in buckets.items():
        props = resource.get("Properties") or {}
        name = props.get("VectorBucketName")
        name = name if isinstance(name, str) else names.get(logical_id, logical_id)
        bucket_names[logical_id] = name
        client.create_vector_bucket(vectorBucketName=name)
    for logical_id, resource in indexes.items():
        props = resource.get("Properties") or {}
        bucket = _resolve_name(props.get("VectorBucketName") or props.get("VectorBucketArn"), bucket_names)
        index_name = props.get("IndexName")
        args: dict[str, Any] = {
            "vectorBucketName": bucket,
            "indexName": index_name if isinstance(index_name, str) else names.get(logical_id, logical_id).lower(),
            "dataType": props.get("DataType", "float32"),
            "dimension": int(props["Dimension"]),
            "distanceMetric": props.get("DistanceMetric", "cosine"),
        }
        keys = (props.get("MetadataConfiguration") or {}).get("NonFilterableMetadataKeys")
        if keys:
            args["metadataConfiguration"] = {"nonFilterableMetadataKeys": list(keys)}
        client.create_index(**args)
