"""Consumed capacity as AWS documents it (infra/local/memory_hub_local/aws/capacity.py states the
rules and where they are written): item sizes by DynamoDB's size rules, then a table of requests —
put, update, delete, transactions, batches, query, get, with and without indexes — each with the
units AWS charges, asked of the emulated DynamoDB (moto in process, patched as the local stack
patches it) with ReturnConsumedCapacity INDEXES."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from memory_hub_local.aws import capacity, moto_capacity

# ---------------------------------------------------------------- item sizes


@pytest.mark.parametrize(
    ("item", "size"),
    [
        ({"a": {"S": "héllo"}}, 1 + 6),  # UTF-8 bytes of name and value
        ({"n": {"N": "12345"}}, 1 + 3 + 1),  # 5 significant digits: 3 bytes, plus 1
        ({"n": {"N": "1200.00"}}, 1 + 1 + 1),  # trailing zeros trimmed: "12"
        ({"n": {"N": "-0.0045"}}, 1 + 1 + 1),  # leading zeros trimmed: "45"
        ({"b": {"B": base64.b64encode(b"\x00" * 10).decode()}}, 1 + 10),  # raw bytes, not base64
        ({"t": {"BOOL": True}, "z": {"NULL": True}}, 2 + 2),
        ({"l": {"L": [{"S": "ab"}, {"N": "1"}]}}, 1 + 3 + (1 + 2) + (1 + 2)),  # 3 + 1 per element
        ({"m": {"M": {"k": {"S": "v"}}}}, 1 + 3 + (1 + 1 + 1)),  # an element's name counts too
        ({"s": {"SS": ["ab", "c"]}}, 1 + 3),
        ({}, 0),
    ],
)
def test_item_size_follows_dynamodbs_size_rules(item: dict[str, Any], size: int):
    assert capacity.item_size(item) == size


def test_units_round_writes_per_1kb_and_reads_per_4kb():
    assert [capacity.write_units(s) for s in (0, 1, 1024, 1025, 3584)] == [1, 1, 1, 2, 4]
    assert [capacity.read_units(s, consistent=True) for s in (0, 4096, 4097, 10_240)] == [1, 1, 2, 3]
    assert capacity.read_units(3584, consistent=False) == 0.5


# ---------------------------------------------------------------- requests against the emulated table

TABLE = "CapacityCases"
KB = 1024


def blob(size: int) -> dict[str, str]:
    """A string attribute value whose item ``{"pk", "sk", "d"}`` is ``size`` bytes in all."""
    return {"S": "x" * (size - len("pk") - 1 - len("sk") - 1 - len("d"))}


def item(sk: str, size: int = 100, **more: str) -> dict[str, Any]:
    return {"pk": {"S": "p"}, "sk": {"S": sk}, "d": blob(size), **{k: {"S": v} for k, v in more.items()}}


def key(sk: str) -> dict[str, Any]:
    return {"pk": {"S": "p"}, "sk": {"S": sk}}


@pytest.fixture(scope="module")
def ddb(aws):
    import boto3

    client = boto3.client("dynamodb", region_name="us-east-1")
    client.create_table(
        TableName=TABLE,
        BillingMode="PAY_PER_REQUEST",
        AttributeDefinitions=[{"AttributeName": n, "AttributeType": "S"} for n in ("pk", "sk", "lsi", "g")],
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
        LocalSecondaryIndexes=[
            {
                "IndexName": "by-lsi",
                "Projection": {"ProjectionType": "ALL"},
                "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "lsi", "KeyType": "RANGE"}],
            }
        ],
        GlobalSecondaryIndexes=[
            {
                "IndexName": "by-g",
                "Projection": {"ProjectionType": "KEYS_ONLY"},
                "KeySchema": [{"AttributeName": "g", "KeyType": "HASH"}],
            }
        ],
    )
    yield client
    client.delete_table(TableName=TABLE)


def put(sk: str, size: int = 100, **more: str) -> tuple[str, dict[str, Any]]:
    return "put_item", {"TableName": TABLE, "Item": item(sk, size, **more)}


def update(sk: str, expression: str, **values: str) -> tuple[str, dict[str, Any]]:
    params = {"TableName": TABLE, "Key": key(sk), "UpdateExpression": expression}
    if values:
        params["ExpressionAttributeValues"] = {f":{k}": {"S": v} for k, v in values.items()}
    return "update_item", params


def delete(sk: str) -> tuple[str, dict[str, Any]]:
    return "delete_item", {"TableName": TABLE, "Key": key(sk)}


def units(table: float, lsi: float = 0, gsi: float = 0) -> tuple[float, float, float]:
    return table, lsi, gsi


# (what, the items there before, the request, units on the table / by-lsi / by-gsi)
CASES: list[tuple[str, list[tuple[str, dict[str, Any]]], tuple[str, dict[str, Any]], tuple[float, float, float]]] = [
    ("put 100 B, no index key", [], put("a"), units(1)),
    ("put 3.5 KB (AWS's own example: 4)", [], put("a", 3584), units(4)),
    ("put 1 KB exactly", [], put("a", 1024), units(1)),
    ("put over an item of 2.5 KB: the larger", [put("a", 2560)], put("a", 100), units(3)),
    ("put with both index keys: one write each", [], put("a", lsi="l", g="g"), units(1, 1, 1)),
    ("update of a plain attribute", [put("a", 1500)], update("a", "SET e = :v", v="e"), units(2)),
    ("update entering the LSI", [put("a")], update("a", "SET lsi = :v", v="l"), units(1, 1)),
    ("update changing the LSI key: old + new", [put("a", lsi="l")], update("a", "SET lsi = :v", v="m"), units(1, 2)),
    ("update of an attribute the KEYS_ONLY GSI does not hold", [put("a", g="g")], update("a", "SET e = :v", v="e"),
     units(1)),
    ("update of a projected attribute (ALL LSI)", [put("a", lsi="l")], update("a", "SET e = :v", v="e"), units(1, 1)),
    ("update removing the GSI key", [put("a", g="g")], update("a", "REMOVE g"), units(1, 0, 1)),
    ("delete of a 1.5 KB item in both indexes", [put("a", 1500, lsi="l", g="g")], delete("a"), units(2, 2, 1)),
    ("delete of a missing item: 1", [], delete("missing"), units(1)),
    ("get 3.5 KB, eventually consistent: 0.5", [put("a", 3584)], ("get_item", {"TableName": TABLE, "Key": key("a")}),
     units(0.5)),
    (
        "get 10 KB, strongly consistent: 3",
        [put("a", 10 * KB)],
        ("get_item", {"TableName": TABLE, "Key": key("a"), "ConsistentRead": True}),
        units(3),
    ),
    ("get of a missing item: the minimum", [], ("get_item", {"TableName": TABLE, "Key": key("none")}), units(0.5)),
    (
        "query of three 1.5 KB items: summed, then rounded (4.5 KB → 2 strong)",
        [put("a", 1536), put("b", 1536), put("c", 1536)],
        ("query", {"TableName": TABLE, "KeyConditionExpression": "pk = :p", "ConsistentRead": True,
                   "ExpressionAttributeValues": {":p": {"S": "p"}}}),
        units(2),
    ),
    (
        "query: a filter does not lower what was read",
        [put("a", 3000), put("b", 3000)],
        ("query", {"TableName": TABLE, "KeyConditionExpression": "pk = :p", "FilterExpression": "sk = :n",
                   "ExpressionAttributeValues": {":p": {"S": "p"}, ":n": {"S": "none"}}}),
        units(1),
    ),
    (
        "query of the LSI: charged to the index",
        [put("a", 5000, lsi="l")],
        ("query", {"TableName": TABLE, "IndexName": "by-lsi", "KeyConditionExpression": "pk = :p",
                   "ExpressionAttributeValues": {":p": {"S": "p"}}}),
        units(0, 1),
    ),
    (
        "batch get of 1.5 KB and 6.5 KB: each rounded (4 + 8 KB → 3 strong)",
        [put("a", 1536), put("b", 6656)],
        ("batch_get_item", {"RequestItems": {TABLE: {"Keys": [key("a"), key("b")], "ConsistentRead": True}}}),
        units(3),
    ),
    (
        "batch write: a 2.5 KB put and a delete of a missing item",
        [],
        ("batch_write_item", {"RequestItems": {TABLE: [{"PutRequest": {"Item": item("a", 2560)}},
                                                       {"DeleteRequest": {"Key": key("gone")}}]}}),
        units(4),
    ),
    (
        "transaction: two 500 B puts, one into the GSI, ×2",
        [],
        ("transact_write_items", {"TransactItems": [{"Put": {"TableName": TABLE, "Item": item("a", 500)}},
                                                    {"Put": {"TableName": TABLE, "Item": item("b", 500, g="g")}}]}),
        units(4, 0, 2),
    ),
    (
        "transaction: an update and a condition check of a 1.5 KB item, ×2",
        [put("a"), put("b", 1536)],
        ("transact_write_items", {"TransactItems": [
            {"Update": {"TableName": TABLE, "Key": key("a"), "UpdateExpression": "SET e = :v",
                        "ExpressionAttributeValues": {":v": {"S": "e"}}}},
            {"ConditionCheck": {"TableName": TABLE, "Key": key("b"), "ConditionExpression": "attribute_exists(pk)"}},
        ]}),
        units(6),
    ),
    (
        "transactional get of a 5 KB item: 2 × 2",
        [put("a", 5000)],
        ("transact_get_items", {"TransactItems": [{"Get": {"TableName": TABLE, "Key": key("a")}}]}),
        units(4),
    ),
]  # fmt: skip


def _by_part(answer: dict[str, Any] | list[dict[str, Any]]) -> tuple[float, float, float]:
    element = answer[0] if isinstance(answer, list) else answer
    assert element["TableName"] == TABLE
    lsi = element.get("LocalSecondaryIndexes", {}).get("by-lsi", {}).get("CapacityUnits", 0)
    gsi = element.get("GlobalSecondaryIndexes", {}).get("by-g", {}).get("CapacityUnits", 0)
    assert element["CapacityUnits"] == element["Table"]["CapacityUnits"] + lsi + gsi
    return element["Table"]["CapacityUnits"], lsi, gsi


@pytest.mark.parametrize(("what", "before", "request_", "expected"), CASES, ids=[c[0] for c in CASES])
def test_consumed_capacity_is_what_aws_charges(ddb, what, before, request_, expected):
    for operation, params in before:
        getattr(ddb, operation)(**params)
    operation, params = request_
    try:
        answer = getattr(ddb, operation)(**params, ReturnConsumedCapacity="INDEXES")
        assert _by_part(answer["ConsumedCapacity"]) == expected, what
        total = getattr(ddb, operation)(**params, ReturnConsumedCapacity="TOTAL")["ConsumedCapacity"]
        element = total[0] if isinstance(total, list) else total
        assert "Table" not in element and element["CapacityUnits"] >= 0
        assert "ConsumedCapacity" not in getattr(ddb, operation)(**params)  # none asked, none answered
    finally:
        for page in ddb.get_paginator("scan").paginate(TableName=TABLE):
            for found in page["Items"]:
                ddb.delete_item(TableName=TABLE, Key={"pk": found["pk"], "sk": found["sk"]})


def test_a_false_condition_still_consumes_for_the_item_as_it_is(ddb):
    ddb.put_item(TableName=TABLE, Item=item("a", 2500))
    with pytest.raises(ddb.exceptions.ConditionalCheckFailedException):
        ddb.put_item(TableName=TABLE, Item=item("a"), ConditionExpression="attribute_not_exists(pk)")
    assert [c["CapacityUnits"] for c in moto_capacity.take_last() or []] == [3]
    ddb.delete_item(TableName=TABLE, Key=key("a"))
