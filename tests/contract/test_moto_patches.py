"""Every patch of moto is a claim about moto 5.2.5 and about AWS: here, moto ALONE lacks each one
(so the patch can go the day moto gains it), and the patched moto behaves as AWS does.

Each scenario runs in a fresh interpreter, so unpatched and patched moto never share a process."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

SETUP = textwrap.dedent("""
    import json, os, time
    os.environ.update(AWS_ACCESS_KEY_ID="x", AWS_SECRET_ACCESS_KEY="x", AWS_DEFAULT_REGION="us-east-1")
    import boto3
    from moto import mock_aws
    if PATCHED:
        from memory_hub_local.aws import moto_patches
        moto_patches.install()
    mock = mock_aws(); mock.start()
    ddb = boto3.client("dynamodb", region_name="us-east-1")
    ddb.create_table(TableName="t", BillingMode="PAY_PER_REQUEST",
        AttributeDefinitions=[{"AttributeName": n, "AttributeType": "S"} for n in ("pk", "sk", "lsi")],
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
        LocalSecondaryIndexes=[{"IndexName": "by-lsi", "Projection": {"ProjectionType": "ALL"},
            "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "lsi", "KeyType": "RANGE"}]}])
    def outcome(call):
        try:
            call()
            return "accepted"
        except Exception as exc:
            return getattr(exc, "response", {}).get("Error", {}).get("Code", type(exc).__name__)
""")


def run(patched: bool, body: str) -> dict:
    code = f"PATCHED = {patched}\n" + SETUP + textwrap.dedent(body)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


LSI_KEY_TOO_LONG = """
    long = "x" * 1025
    put = outcome(lambda: ddb.put_item(TableName="t", Item={"pk": {"S": "p"}, "sk": {"S": "a"}, "lsi": {"S": long}}))
    ddb.put_item(TableName="t", Item={"pk": {"S": "p"}, "sk": {"S": "b"}})
    update = outcome(lambda: ddb.update_item(TableName="t", Key={"pk": {"S": "p"}, "sk": {"S": "b"}},
        UpdateExpression="SET lsi = :v", ExpressionAttributeValues={":v": {"S": long}}))
    left = ddb.get_item(TableName="t", Key={"pk": {"S": "p"}, "sk": {"S": "b"}})["Item"]
    print(json.dumps({"put": put, "update": update, "stored": "lsi" in left}))
"""


def test_moto_alone_accepts_a_local_index_key_over_1024_bytes():
    assert run(False, LSI_KEY_TOO_LONG) == {"put": "accepted", "update": "accepted", "stored": True}


def test_patched_moto_refuses_it_as_dynamodb_does_and_keeps_the_item_unchanged():
    assert run(True, LSI_KEY_TOO_LONG) == {
        "put": "ValidationException",
        "update": "ValidationException",
        "stored": False,
    }


SORTED_QUERY = """
    for i in range(300):
        ddb.put_item(TableName="t", Item={"pk": {"S": "p"}, "sk": {"S": f"{i:05d}"}, "lsi": {"S": f"{299 - i:05d}"}})
    ddb.put_item(TableName="t", Item={"pk": {"S": "q"}, "sk": {"S": "00001"}, "lsi": {"S": "00001"}})
    from moto.dynamodb.models.table import Table
    seen = []
    original = Table.sorted_items
    def spy(self, hash_attrs, range_attrs, items):
        seen.append(len(items))
        return original(self, hash_attrs, range_attrs, items)
    Table.sorted_items = spy
    page = ddb.query(TableName="t", IndexName="by-lsi", KeyConditionExpression="pk = :p AND lsi BETWEEN :a AND :b",
        ExpressionAttributeValues={":p": {"S": "p"}, ":a": {"S": "00010"}, ":b": {"S": "00200"}},
        ScanIndexForward=False, Limit=20, ConsistentRead=True)
    following = ddb.query(TableName="t", IndexName="by-lsi", KeyConditionExpression="pk = :p AND lsi BETWEEN :a AND :b",
        ExpressionAttributeValues={":p": {"S": "p"}, ":a": {"S": "00010"}, ":b": {"S": "00200"}},
        ScanIndexForward=False, Limit=20, ConsistentRead=True, ExclusiveStartKey=page["LastEvaluatedKey"])
    ddb.update_item(TableName="t", Key={"pk": {"S": "p"}, "sk": {"S": "00000"}}, UpdateExpression="SET lsi = :v",
        ExpressionAttributeValues={":v": {"S": "00150"}})
    after = ddb.query(TableName="t", IndexName="by-lsi", KeyConditionExpression="pk = :p AND lsi = :v",
        ExpressionAttributeValues={":p": {"S": "p"}, ":v": {"S": "00150"}}, ConsistentRead=True)
    print(json.dumps({"sorted": seen[0], "first": [i["lsi"]["S"] for i in page["Items"]][:3],
                      "next": following["Items"][0]["lsi"]["S"], "count": page["Count"],
                      "moved": sorted(i["sk"]["S"] for i in after["Items"])}))
"""


def test_moto_alone_sorts_every_item_of_the_partition_for_a_newest_20_query():
    found = run(False, SORTED_QUERY)
    assert found["sorted"] == 300  # the whole partition (the other partition is filtered before sorting)
    assert found["first"] == ["00200", "00199", "00198"] and found["next"] == "00180" and found["count"] == 20


def test_patched_moto_reads_only_what_the_key_condition_and_limit_reach_with_the_same_answers():
    found = run(True, SORTED_QUERY)
    assert found["sorted"] <= 21  # Limit 20, plus one to know there is more
    assert found["first"] == ["00200", "00199", "00198"] and found["next"] == "00180" and found["count"] == 20
    assert found["moved"] == ["00000", "00149"]  # an update of the index key is seen at once


EXACT_LIMIT = """
    for i in range(20):
        ddb.put_item(TableName="t", Item={"pk": {"S": "p"}, "sk": {"S": f"{i:03d}"}, "lsi": {"S": f"{19 - i:03d}"}})
    pages = []
    for index, attribute in ((None, "sk"), ("by-lsi", "lsi")):
        for forward in (True, False):
            for low, high, limit in (("005", "009", 5), ("005", "009", 6), ("000", "004", 5), ("015", "019", 5)):
                extra = {"IndexName": index} if index else {}
                page = ddb.query(TableName="t", KeyConditionExpression=f"pk = :p AND {attribute} BETWEEN :a AND :b",
                    ExpressionAttributeValues={":p": {"S": "p"}, ":a": {"S": low}, ":b": {"S": high}},
                    ScanIndexForward=forward, Limit=limit, ConsistentRead=True, **extra)
                pages.append([page["Count"], page["ScannedCount"], page.get("LastEvaluatedKey")])
    print(json.dumps(pages))
"""


def test_a_query_that_fills_its_limit_exactly_answers_moto_s_last_evaluated_key():
    alone = run(False, EXACT_LIMIT)
    assert alone[0] == [5, 5, {"pk": {"S": "p"}, "sk": {"S": "009"}}]  # an item follows the 5th match: moto says so
    assert run(True, EXACT_LIMIT) == alone


TRANSACTION = """
    import copy as copymod
    copies = []
    real = copymod.deepcopy
    def counting(value, *args, **kwargs):
        copies.append(type(value).__name__)
        return real(value, *args, **kwargs)
    for i in range(200):
        ddb.put_item(TableName="t", Item={"pk": {"S": "p"}, "sk": {"S": f"{i:05d}"}})
    import moto.dynamodb.models as models
    models.copy.deepcopy = counting
    ddb.transact_write_items(TransactItems=[{"Put": {"TableName": "t", "Item": {"pk": {"S": "n"}, "sk": {"S": str(i)}}}}
                                            for i in range(50)])
    failed = outcome(lambda: ddb.transact_write_items(TransactItems=[
        {"Put": {"TableName": "t", "Item": {"pk": {"S": "n"}, "sk": {"S": "x"}}}},
        {"ConditionCheck": {"TableName": "t", "Key": {"pk": {"S": "p"}, "sk": {"S": "00001"}},
                            "ConditionExpression": "attribute_not_exists(pk)"}}]))
    kept = "Item" in ddb.get_item(TableName="t", Key={"pk": {"S": "n"}, "sk": {"S": "x"}})
    print(json.dumps({"table_copies": sum(1 for c in copies if c == "Table"), "failed": failed, "written": kept}))
"""


def test_moto_alone_copies_the_whole_table_for_every_transaction_action():
    found = run(False, TRANSACTION)
    assert found["table_copies"] >= 50


def test_patched_transactions_copy_no_table_and_keep_all_or_nothing():
    found = run(True, TRANSACTION)
    assert found == {"table_copies": 0, "failed": "TransactionCanceledException", "written": False}


def test_patches_refuse_an_untested_moto_version(monkeypatch):
    import moto
    from memory_hub_local.aws import moto_patches

    monkeypatch.setattr(moto, "__version__", "9.9.9")
    with pytest.raises(moto_patches.UntestedMoto, match=r"9\.9\.9"):
        moto_patches.install()


REPLACED_ITEM = """
    import gc, weakref
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.dynamodb.models import dynamodb_backends
    table = dynamodb_backends[DEFAULT_ACCOUNT_ID]["us-east-1"].get_table("t")
    ddb.put_item(TableName="t", Item={"pk": {"S": "p"}, "sk": {"S": "a"}, "v": {"S": "old"}})
    ddb.put_item(TableName="t", Item={"pk": {"S": "p"}, "sk": {"S": "gone"}})
    first = weakref.ref(next(iter(table.items.values()))[next(iter(next(iter(table.items.values()))))])
    deleted = weakref.ref(list(next(iter(table.items.values())).values())[1])
    ddb.put_item(TableName="t", Item={"pk": {"S": "p"}, "sk": {"S": "a"}, "v": {"S": "new"}})
    ddb.delete_item(TableName="t", Key={"pk": {"S": "p"}, "sk": {"S": "gone"}})
    gc.collect()
    stored = ddb.get_item(TableName="t", Key={"pk": {"S": "p"}, "sk": {"S": "a"}})["Item"]["v"]["S"]
    count = ddb.scan(TableName="t")["Count"]
    print(json.dumps({"replaced_kept": first() is not None, "deleted_kept": deleted() is not None,
                      "stored": stored, "count": count}))
"""


def test_moto_alone_keeps_every_item_it_ever_made():
    assert run(False, REPLACED_ITEM) == {"replaced_kept": True, "deleted_kept": True, "stored": "new", "count": 1}


def test_patched_moto_frees_an_overwritten_or_deleted_item():
    assert run(True, REPLACED_ITEM) == {"replaced_kept": False, "deleted_kept": False, "stored": "new", "count": 1}


UPDATED_PARTITION = """
    import random
    from memory_hub_local.aws import moto_patches
    builds = []
    if PATCHED:
        made = moto_patches.SortedPartition.__init__
        def counted(self, *args):
            builds.append(1)
            made(self, *args)
        moto_patches.SortedPartition.__init__ = counted
    rng = random.Random(7)
    answers = []
    def key(i):
        return {"pk": {"S": "p"}, "sk": {"S": f"{i:03d}"}}
    for i in range(120):
        ddb.put_item(TableName="t", Item={**key(i), "lsi": {"S": f"{rng.randrange(50):03d}"}})
    for step in range(150):
        i, v = rng.randrange(140), f"{rng.randrange(50):03d}"
        action = rng.choice(["set", "set", "remove", "other", "failed", "put", "delete"])
        if action == "set":  # moves the item in the index (or makes a new item)
            answers.append(outcome(lambda: ddb.update_item(TableName="t", Key=key(i), UpdateExpression="SET lsi = :v",
                ExpressionAttributeValues={":v": {"S": v}})))
        elif action == "remove":
            answers.append(outcome(lambda: ddb.update_item(TableName="t", Key=key(i), UpdateExpression="REMOVE lsi")))
        elif action == "other":
            answers.append(outcome(lambda: ddb.update_item(TableName="t", Key=key(i), UpdateExpression="SET o = :v",
                ExpressionAttributeValues={":v": {"S": v}})))
        elif action == "failed":
            answers.append(outcome(lambda: ddb.update_item(TableName="t", Key=key(i), UpdateExpression="SET lsi = :v",
                ConditionExpression="attribute_not_exists(sk)", ExpressionAttributeValues={":v": {"S": v}})))
        elif action == "put":
            answers.append(outcome(lambda: ddb.put_item(TableName="t", Item={**key(i), "lsi": {"S": v}})))
        else:
            answers.append(outcome(lambda: ddb.delete_item(TableName="t", Key=key(i))))
        low, high = sorted([f"{rng.randrange(50):03d}", f"{rng.randrange(50):03d}"])
        for index, attribute in ((None, "sk"), ("by-lsi", "lsi")):
            extra = {"IndexName": index} if index else {}
            page = ddb.query(TableName="t", KeyConditionExpression=f"pk = :p AND {attribute} BETWEEN :a AND :b",
                ExpressionAttributeValues={":p": {"S": "p"}, ":a": {"S": low}, ":b": {"S": high}},
                ScanIndexForward=rng.random() < 0.5, Limit=rng.choice([3, 10, 200]), ConsistentRead=True, **extra)
            answers.append([[i["sk"]["S"], i.get("lsi", {}).get("S")] for i in page["Items"]])
            answers.append(page.get("LastEvaluatedKey"))
    print(json.dumps({"answers": answers, "builds": len(builds)}))
"""


def test_patched_moto_keeps_a_partition_sorted_through_updates_and_answers_as_moto_does():
    alone, patched = run(False, UPDATED_PARTITION), run(True, UPDATED_PARTITION)
    assert patched["answers"] == alone["answers"]
    assert patched["builds"] == 2  # one view of the partition by sk and one by lsi, never made again


REFUSED_UPDATE = """
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.dynamodb.models import dynamodb_backends
    for i in range(10):
        ddb.put_item(TableName="t", Item={"pk": {"S": "p"}, "sk": {"S": f"{i:03d}"}, "lsi": {"S": f"{i:03d}"}})
    def newest():
        page = ddb.query(TableName="t", IndexName="by-lsi", KeyConditionExpression="pk = :p AND lsi > :a",
            ExpressionAttributeValues={":p": {"S": "p"}, ":a": {"S": "000"}}, ScanIndexForward=False, Limit=4)
        return [i["sk"]["S"] for i in page["Items"]]
    first = newest()
    refused = outcome(lambda: ddb.update_item(TableName="t", Key={"pk": {"S": "p"}, "sk": {"S": "008"}},
        UpdateExpression="SET lsi = :v", ExpressionAttributeValues={":v": {"S": "x" * 1025}}))
    moved = outcome(lambda: ddb.update_item(TableName="t", Key={"pk": {"S": "p"}, "sk": {"S": "002"}},
        UpdateExpression="SET lsi = :v", ExpressionAttributeValues={":v": {"S": "100"}}))
    kept = newest()
    table = dynamodb_backends[DEFAULT_ACCOUNT_ID]["us-east-1"].get_table("t")
    table._memory_hub_sorted.clear()  # sorted again from the items as they are
    print(json.dumps({"first": first, "refused": refused, "moved": moved, "kept": kept, "sorted_anew": newest()}))
"""


def test_a_refused_update_leaves_the_sorted_partition_as_the_items_are():
    found = run(True, REFUSED_UPDATE)
    assert found["first"] == ["009", "008", "007", "006"] and found["refused"] == "ValidationException"
    assert found["kept"] == found["sorted_anew"] == ["002", "009", "008", "007"]


ACTION_LOOKUP = """
    import inspect
    listed = []
    members = inspect.getmembers
    def spy(owner, *args, **kwargs):
        listed.append(getattr(owner, "__name__", "?"))
        return members(owner, *args, **kwargs)
    inspect.getmembers = spy
    answers = [outcome(lambda: ddb.put_item(TableName="t", Item={"pk": {"S": "p"}, "sk": {"S": str(i)}}))
               for i in range(10)]
    answers.append(outcome(lambda: ddb.describe_table(TableName="t")))
    answers.append(outcome(lambda: ddb.describe_table(TableName="missing")))
    answers.append(outcome(lambda: ddb._make_api_call("DescribeLimits", {})))
    print(json.dumps({"listed": listed.count("DynamoHandler"), "answers": answers}))
"""


def test_moto_alone_lists_every_function_of_its_response_class_on_every_request():
    assert run(False, ACTION_LOOKUP)["listed"] >= 13


def test_patched_moto_looks_up_the_one_action_with_the_same_answers():
    alone, patched = run(False, ACTION_LOOKUP), run(True, ACTION_LOOKUP)
    assert patched == {"listed": 0, "answers": alone["answers"]}
