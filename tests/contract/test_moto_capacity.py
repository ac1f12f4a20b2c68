"""The consumed-capacity patch (infra/local/memory_hub_local/aws/moto_capacity.py) is a claim about
moto 5.2.5 and about AWS: moto ALONE answers ReturnConsumedCapacity with a constant (so the patch
can go the day moto counts), and the patched moto answers the units AWS documents. Each scenario
runs in a fresh interpreter, so unpatched and patched moto never share a process."""

from __future__ import annotations

from moto_scenarios import PRELUDE
from moto_scenarios import run as scenario

SETUP = """
    ddb = boto3.client("dynamodb", region_name="us-east-1")
    ddb.create_table(TableName="t", BillingMode="PAY_PER_REQUEST",
        AttributeDefinitions=[{"AttributeName": n, "AttributeType": "S"} for n in ("pk", "sk", "g")],
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
        GlobalSecondaryIndexes=[{"IndexName": "by-g", "Projection": {"ProjectionType": "ALL"},
            "KeySchema": [{"AttributeName": "g", "KeyType": "HASH"}]}])
"""

UNITS = """
    big = {"pk": {"S": "p"}, "sk": {"S": "a"}, "d": {"S": "x" * (3584 - 7)}}  # 3.5 KB in all
    put = ddb.put_item(TableName="t", Item=big, ReturnConsumedCapacity="TOTAL")["ConsumedCapacity"]
    indexed = ddb.put_item(TableName="t", Item={"pk": {"S": "p"}, "sk": {"S": "b"}, "g": {"S": "g"}},
                           ReturnConsumedCapacity="INDEXES")["ConsumedCapacity"]
    transaction = ddb.transact_write_items(ReturnConsumedCapacity="TOTAL", TransactItems=[
        {"Put": {"TableName": "t", "Item": {"pk": {"S": "q"}, "sk": {"S": "1"}}}}])["ConsumedCapacity"]
    unasked = "ConsumedCapacity" in ddb.batch_write_item(
        RequestItems={"t": [{"PutRequest": {"Item": {"pk": {"S": "r"}, "sk": {"S": "1"}}}}]})
    print(json.dumps({"put": put["CapacityUnits"], "indexed": indexed.get("GlobalSecondaryIndexes"),
                      "transaction": [c["CapacityUnits"] for c in transaction], "unasked": unasked}))
"""


def run(patched: bool, body: str) -> dict:
    found: dict = scenario(patched, SETUP, body, start=PRELUDE)
    return found


def test_moto_alone_answers_a_constant_whatever_the_item_and_its_indexes():
    assert run(False, UNITS) == {"put": 1.0, "indexed": None, "transaction": [], "unasked": True}


def test_patched_moto_answers_the_units_aws_charges():
    assert run(True, UNITS) == {
        "put": 4.0,  # AWS's own example: a 3.5 KB write is 4 write units
        "indexed": {"by-g": {"CapacityUnits": 1.0, "WriteCapacityUnits": 1.0}},  # the index written too
        "transaction": [2.0],  # a transactional write is two
        "unasked": False,  # none asked, none answered
    }
