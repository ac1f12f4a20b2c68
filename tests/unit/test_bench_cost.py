"""The bench's cost section (infra/bench/memory_hub_bench/cost.py): a request's call log becomes
units per service, and units become dollars at the list prices of prices.py."""

from __future__ import annotations

import pytest
from memory_hub_bench import cost, prices


def test_a_requests_calls_are_tallied_by_service_and_price_class():
    row = cost.RouteCost("/v3/x")
    call_log = [
        [
            {"service": "dynamodb", "operation": "TransactWriteItems",
             "capacity": [{"TableName": "a", "WriteCapacityUnits": 6.0},
                          {"TableName": "b", "WriteCapacityUnits": 2.0}]},
            {"service": "dynamodb", "operation": "Query", "capacity": [{"TableName": "a", "ReadCapacityUnits": 0.5}]},
            {"service": "s3", "operation": "PutObject"},
            {"service": "s3", "operation": "GetObject"},
            {"service": "s3", "operation": "DeleteObjects"},  # free
            {"service": "s3vectors", "operation": "PutVectors"},
            {"service": "bedrock", "operation": "InvokeModel"},
            {"service": "sqs", "operation": "SendMessage"},
        ],
        [{"service": "dynamodb", "operation": "GetItem", "capacity": [{"TableName": "a", "ReadCapacityUnits": 1.5}]}],
    ]  # fmt: skip
    cost._tally(row, call_log, chars=400)
    assert (row.wru, row.rru) == (4.0, 1.0)  # the mean of the two requests
    assert (row.s3_put, row.s3_get, row.vector_puts, row.queued) == (0.5, 0.5, 0.5, 0.5)
    assert row.lambda_requests == 1.5 and row.tokens == 100 and row.calls["dynamodb"] == 1.5


def test_dollars_follow_the_list_prices():
    row = cost.RouteCost("/v3/x", wru=20, rru=2, vector_puts=1, vector_queries=1, cpu_ms=40, round_trips=3)
    usd = row.dollars(index_vectors=0)
    assert usd["DynamoDB"] == pytest.approx((20 * 0.625 + 2 * 0.125) / 1e6)
    assert usd["S3 Vectors"] == pytest.approx(128 / 1024**2 * prices.S3_VECTORS_PUT.usd + 2.5 / 1e6)
    assert row.billed_ms == 70  # CPU + 3 round trips of 10 ms
    assert usd["Lambda"] == pytest.approx(0.2 / 1e6 + 0.070 * 0.5 * prices.LAMBDA_ARM_GB_S.usd)
    assert usd["API Gateway"] == pytest.approx(3.5 / 1e6)


def test_a_query_over_a_larger_index_processes_more_data():
    # 60x the vectors, past the first 100,000 at half the price a TB: ~30x the charge
    assert cost.query_tb(6_000_000) == pytest.approx(30.5 * cost.query_tb(100_000))
