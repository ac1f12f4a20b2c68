"""Where Powertools idempotency keeps its records (IdempotencyTable, expired by TTL)."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from ..settings import get_settings
from . import aws


@lru_cache(maxsize=1)
def persistence_layer() -> Any:
    from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer

    return DynamoDBPersistenceLayer(table_name=get_settings().idempotency_table, boto3_client=aws.dynamodb())


def expired_records(now_s: int) -> int:
    """Delete records past their expiry — what DynamoDB's TTL does on AWS, late (up to days)."""
    table = get_settings().idempotency_table
    client = aws.dynamodb()
    removed = 0
    for page in client.get_paginator("scan").paginate(
        TableName=table,
        FilterExpression="#e < :now",
        ProjectionExpression="id",
        ExpressionAttributeNames={"#e": "expiration"},
        ExpressionAttributeValues={":now": {"N": str(now_s)}},
    ):
        for row in page.get("Items", []):
            client.delete_item(TableName=table, Key={"id": row["id"]})
            removed += 1
    return removed
