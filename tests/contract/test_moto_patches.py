"""Every patch of moto is a claim about moto 5.2.5 and about AWS: here, moto ALONE lacks each one
(so the patch can go the day moto gains it), and the patched moto behaves as AWS does.

Each scenario runs in a fresh interpreter, so unpatched and patched moto never share a process."""

from __future__ import annotations

import functools
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
    HEADERS = []
    if DISPATCH:  # answered as the local stack's AWS side answers: through moto's Flask app, or past it
        from botocore.awsrequest import AWSResponse
        from moto.core.botocore_stubber import MockRawResponse
        from moto.moto_server.werkzeug_app import create_backend_app
        from memory_hub_local.aws import dispatch
        FLASK = create_backend_app("dynamodb")
        def local(request, **_):
            sent = {k: v.decode() if isinstance(v, bytes) else v for k, v in request.headers.items()}
            environ = dispatch.wsgi_environ("POST", "/", sent, request.body or b"", "127.0.0.1", 3002)
            if DISPATCH == "direct":
                status, headers, body = dispatch.dynamodb_direct(environ)
            else:
                status, headers, body = dispatch.through_flask(FLASK, environ)
            HEADERS.append(sorted((k.lower(), v) for k, v in headers.items()
                                  if k.lower() not in ("x-amzn-requestid", "date", "content-length")))
            return AWSResponse(request.url, status, headers, MockRawResponse(body))
        ddb.meta.events.register_first("before-send.dynamodb", local)
    if PACKED:  # as the local stack's AWS side does: what each request touched is packed after it
        from memory_hub_local.aws import moto_items
        from memory_hub_local.aws.server import _READ_ONLY
        moto_items.start_packing()
        ddb.meta.events.register("after-call.dynamodb",
            lambda model, **_: moto_items.pack_touched(changed=model.name not in _READ_ONLY))
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


def run(patched: bool, body: str, packed: bool = False, dispatch: str | None = None) -> dict:
    code = f"PATCHED = {patched}\nPACKED = {packed}\nDISPATCH = {dispatch!r}\n" + SETUP + textwrap.dedent(body)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


@functools.cache
def alone(body: str) -> str:
    """What moto alone answers to ``body`` (JSON: each caller gets its own copy), run once a session."""
    return json.dumps(run(False, body))


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


REPLACED_VALUE = """
    big, half = "x" * 300_000, "y" * 150_000
    ddb.put_item(TableName="t", Item={"pk": {"S": "p"}, "sk": {"S": "a"}, "v": {"S": big}, "w": {"S": "z" * 10_000}})
    smaller = outcome(lambda: ddb.update_item(TableName="t", Key={"pk": {"S": "p"}, "sk": {"S": "a"}},
        UpdateExpression="SET v = :v", ExpressionAttributeValues={":v": {"S": half}}))
    stored = len(ddb.get_item(TableName="t", Key={"pk": {"S": "p"}, "sk": {"S": "a"}})["Item"]["v"]["S"])
    grown = outcome(lambda: ddb.update_item(TableName="t", Key={"pk": {"S": "p"}, "sk": {"S": "a"}},
        UpdateExpression="SET w = :w", ExpressionAttributeValues={":w": {"S": "z" * 300_000}}))
    print(json.dumps({"smaller": smaller, "stored": stored, "grown": grown}))
"""


def test_moto_alone_refuses_an_update_that_makes_an_item_smaller():
    """The item is 310 KB before and 160 KB after: DynamoDB takes it (its limit is on the item as
    written), moto counts the replaced 300 KB too."""
    assert json.loads(alone(REPLACED_VALUE))["smaller"] == "ValidationException"


@pytest.mark.parametrize("packed", [False, True], ids=["unpacked", "packed"])
def test_patched_moto_checks_the_item_as_it_is_after_the_update(packed):
    assert run(True, REPLACED_VALUE, packed=packed) == {
        "smaller": "accepted",
        "stored": 150_000,
        "grown": "ValidationException",  # 150 KB + 300 KB: over the limit whatever is counted
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


@pytest.mark.parametrize("packed", [False, True], ids=["unpacked", "packed"])
def test_patched_transactions_copy_no_table_and_keep_all_or_nothing(packed):
    found = run(True, TRANSACTION, packed=packed)
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


@pytest.mark.parametrize("packed", [False, True], ids=["unpacked", "packed"])
def test_patched_moto_keeps_a_partition_sorted_through_updates_and_answers_as_moto_does(packed):
    theirs, patched = json.loads(alone(UPDATED_PARTITION)), run(True, UPDATED_PARTITION, packed=packed)
    assert patched["answers"] == theirs["answers"]
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


REPEATED_EXPRESSIONS = """
    import copy
    from moto.dynamodb.comparisons import ConditionExpressionParser
    from moto.dynamodb.parsing import validators
    from moto.dynamodb.parsing.tokens import ExpressionTokenizer
    counts = {"lexed": 0, "tokenized": 0}
    def counting(owner, name, what):
        original = getattr(owner, name)
        def spy(*args, **kwargs):
            counts[what] += 1
            return original(*args, **kwargs)
        return spy
    ConditionExpressionParser._lex_condition_expression = counting(
        ConditionExpressionParser, "_lex_condition_expression", "lexed")
    ExpressionTokenizer.make_list = counting(ExpressionTokenizer, "make_list", "tokenized")
    for i in range(20):
        ddb.put_item(TableName="t", Item={"pk": {"S": "p"}, "sk": {"S": str(i)}, "n": {"N": "0"}},
            ConditionExpression="attribute_not_exists(#p)", ExpressionAttributeNames={"#p": "pk"})
        ddb.update_item(TableName="t", Key={"pk": {"S": "p"}, "sk": {"S": str(i)}},
            UpdateExpression="SET #n = #n + :one, #l = :l", ConditionExpression="#n = :zero",
            ExpressionAttributeNames={"#n": "n", "#l": "lsi"},
            ExpressionAttributeValues={":one": {"N": "1"}, ":zero": {"N": "0"}, ":l": {"S": f"l{i}"}})
    print(json.dumps(dict(counts, generic_copy=validators.deepcopy is copy.deepcopy)))
"""


def test_moto_alone_parses_every_expression_of_every_request():
    found = run(False, REPEATED_EXPRESSIONS)
    assert found["lexed"] >= 40  # each put's condition, each update's condition (twice)
    assert found["tokenized"] >= 40  # each update's UpdateExpression, in the response and in the model
    assert found["generic_copy"]  # its validator copies the parsed UpdateExpression with copy.deepcopy


def test_patched_moto_parses_each_expression_once():
    found = run(True, REPEATED_EXPRESSIONS)
    assert found == {"lexed": 2, "tokenized": 1, "generic_copy": False}


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


EXPRESSION_ANSWERS = """
    def answer(call, **request):
        try:
            found = call(**request)
            found.pop("ResponseMetadata", None)
            found.pop("ConsumedCapacity", None)  # moto_capacity's claim (test_moto_capacity.py), not these patches'
            return found
        except Exception as exc:
            error = getattr(exc, "response", {}).get("Error", {})
            return [type(exc).__name__, error.get("Code"), error.get("Message", str(exc)),
                    getattr(exc, "response", {}).get("Item"), getattr(exc, "response", {}).get("CancellationReasons")]
    key = {"pk": {"S": "p"}, "sk": {"S": "a"}}
    ddb.put_item(TableName="t", Item={**key, "n": {"N": "1"}, "l": {"L": [{"S": "x"}, {"S": "y"}]},
        "m": {"M": {"in": {"S": "deep"}}}, "ss": {"SS": ["a", "b"]}, "lsi": {"S": "l0"}})
    names = {"#n": "n", "#m": "m", "#i": "in", "#l": "l", "#s": "ss", "#k": "sk"}
    values = {":one": {"N": "1"}, ":two": {"N": "2"}, ":x": {"S": "x"}, ":set": {"SS": ["c"]},
              ":list": {"L": [{"S": "z"}]}}
    conditions = [
        ("#n = :one", {"#n": "n"}, {":one": values[":one"]}),
        ("#n <> :one", {"#n": "n"}, {":one": values[":one"]}),
        ("attribute_exists(#n) AND NOT (#n > :two)", {"#n": "n"}, {":two": values[":two"]}),
        ("#n BETWEEN :one AND :two OR begins_with(#m.#i, :x)", {"#n": "n", "#m": "m", "#i": "in"}, values),
        ("#n IN (:one, :two)", {"#n": "n"}, {":one": values[":one"], ":two": values[":two"]}),
        ("size(#l) > :one AND #l[0] = :x", {"#l": "l"}, {":one": values[":one"], ":x": values[":x"]}),
        ("contains(#s, :x) OR attribute_type(#n, :x)", {"#s": "ss", "#n": "n"}, {":x": values[":x"]}),
        ("attribute_not_exists(#n)", {"#n": "n"}, None),
        ("#n = :missing", {"#n": "n"}, {":one": values[":one"]}),
        ("#missing = :one", {"#n": "n"}, {":one": values[":one"]}),
        ("#n = :one", None, {":one": values[":one"]}),
        ("#n = :one", {"#n": "n", "#unused": "u"}, {":one": values[":one"]}),
        ("#n = :one", {"#n": "n"}, {":one": values[":one"], ":unused": values[":two"]}),
        ("((#n = :one))", {"#n": "n"}, {":one": values[":one"]}),
        ("#n = = :one", {"#n": "n"}, {":one": values[":one"]}),
        ("#n = :one AND", {"#n": "n"}, {":one": values[":one"]}),
        ("name = :x", None, {":x": values[":x"]}),
        ("#n = :one AND name = :x", {"#n": "n"}, {":one": values[":one"], ":x": values[":x"]}),
        ("#missing = :one AND name = :x", {"#n": "n"}, {":one": values[":one"], ":x": values[":x"]}),
        ("begins_with(#n)", {"#n": "n"}, None),
        ("attribute_exists(:x)", None, {":x": values[":x"]}),
        ("#n = :one $", {"#n": "n"}, {":one": values[":one"]}),
        ("", None, None),
    ]
    updates = [
        ("SET #n = #n + :one", {"#n": "n"}, {":one": values[":one"]}),
        ("SET #l = list_append(#l, :list), #m.#i = :x REMOVE #s", {"#l": "l", "#m": "m", "#i": "in", "#s": "ss"},
         {":list": values[":list"], ":x": values[":x"]}),
        ("ADD #s :set SET #n = if_not_exists(#n, :one) - :two", {"#s": "ss", "#n": "n"},
         {":set": values[":set"], ":one": values[":one"], ":two": values[":two"]}),
        ("REMOVE #l[0], #l[1]", {"#l": "l"}, None),
        ("DELETE #s :set", {"#s": "ss"}, {":set": values[":set"]}),
        ("SET #k = :x", {"#k": "sk"}, {":x": values[":x"]}),
        ("SET #n = :x + :one", {"#n": "n"}, {":x": values[":x"], ":one": values[":one"]}),
        ("SET #n = :one, #n = :two", {"#n": "n"}, {":one": values[":one"], ":two": values[":two"]}),
        ("SET #n = :missing", {"#n": "n"}, {":one": values[":one"]}),
        ("SET #missing = :one", {"#n": "n"}, {":one": values[":one"]}),
        ("SET #n = :one SET #n = :two", {"#n": "n"}, {":one": values[":one"], ":two": values[":two"]}),
        ("SET name = :one", None, {":one": values[":one"]}),
        ("SET #n :one", {"#n": "n"}, {":one": values[":one"]}),
        ("   ", None, None),
        ("SET #n = #nothing.#deeper", {"#n": "n", "#nothing": "nothing", "#deeper": "deeper"}, None),
    ]
    out = []
    def optional(**fields):
        return {k: v for k, v in fields.items() if v is not None}
    for repeat in range(2):  # the second time, a patched moto answers from what it parsed the first time
        for expression, names_, values_ in conditions:
            extra = optional(ExpressionAttributeNames=names_, ExpressionAttributeValues=values_)
            out.append(answer(ddb.update_item, TableName="t", Key=key, UpdateExpression="SET lsi = lsi",
                ConditionExpression=expression, ReturnValuesOnConditionCheckFailure="ALL_OLD", **extra))
            out.append(answer(ddb.put_item, TableName="t", Item={"pk": {"S": "q"}, "sk": {"S": expression}},
                ConditionExpression=expression, **extra))
            out.append(answer(ddb.delete_item, TableName="t", Key={"pk": {"S": "q"}, "sk": {"S": "none"}},
                ConditionExpression=expression, **extra))
            out.append(answer(ddb.query, TableName="t", KeyConditionExpression="pk = :pk",
                FilterExpression=expression, ExpressionAttributeNames=names_ or None,
                ExpressionAttributeValues={**(values_ or {}), ":pk": {"S": "p"}}) if names_ else
                answer(ddb.scan, TableName="t", FilterExpression=expression, **extra))
            out.append(answer(ddb.transact_write_items, TransactItems=[{"ConditionCheck": {"TableName": "t",
                "Key": key, "ConditionExpression": expression, **extra}}]))
        for expression, names_, values_ in updates:
            extra = optional(ExpressionAttributeNames=names_, ExpressionAttributeValues=values_)
            out.append(answer(ddb.update_item, TableName="t", Key=key, UpdateExpression=expression,
                ReturnValues="ALL_NEW", **extra))
            out.append(answer(ddb.update_item, TableName="t", Key={"pk": {"S": "new"}, "sk": {"S": expression}},
                UpdateExpression=expression, ReturnValues="UPDATED_NEW", **extra))
            out.append(answer(ddb.transact_write_items, TransactItems=[{"Update": {"TableName": "t",
                "Key": key, "UpdateExpression": expression, **extra}}]))
    out.append(sorted(json.dumps(i, sort_keys=True) for i in ddb.scan(TableName="t")["Items"]))
    print(json.dumps(out))
"""


@pytest.mark.parametrize("packed", [False, True], ids=["unpacked", "packed"])
def test_patched_moto_answers_every_expression_as_moto_does(packed):
    answers, patched = json.loads(alone(EXPRESSION_ANSWERS)), run(True, EXPRESSION_ANSWERS, packed=packed)
    assert len(answers) > 200
    half = (len(answers) - 1) // 2
    assert any(isinstance(a, list) and a[0] == "ClientError" for a in answers[:half])  # errors are asked too
    for at, (theirs, ours) in enumerate(zip(answers, patched, strict=True)):
        assert ours == theirs, at


@functools.cache
def dispatched(how: str) -> dict:
    """The expression corpus answered as the local stack answers it (``how``: through moto's Flask
    app, or straight to its DynamoDB handler), with each answer's headers."""
    body = EXPRESSION_ANSWERS.replace("print(json.dumps(out))", "print(json.dumps({'out': out, 'headers': HEADERS}))")
    return run(True, body, packed=True, dispatch=how)


def test_dynamodb_answers_past_flask_are_flask_s_answers_status_headers_and_body():
    through, past = dispatched("flask"), dispatched("direct")
    assert len(through["headers"]) > 200  # every request of the corpus, the failed ones too
    assert past["out"] == through["out"]
    # the first answer is CreateTable's: its table id and creation time (and so its CRC) are new each run
    for at, (theirs, ours) in enumerate(zip(through["headers"][1:], past["headers"][1:], strict=True)):
        assert ours == theirs, at


FLASK_SPY = """
    import flask
    calls = []
    original = flask.Flask.wsgi_app
    flask.Flask.wsgi_app = lambda self, *a, **k: calls.append(1) or original(self, *a, **k)
    ddb.put_item(TableName="t", Item={"pk": {"S": "p"}, "sk": {"S": "a"}})
    ddb.get_item(TableName="t", Key={"pk": {"S": "p"}, "sk": {"S": "a"}})
    print(json.dumps({"flask": len(calls)}))
"""


def test_the_direct_path_leaves_flask_out():
    assert run(True, FLASK_SPY, dispatch="flask") == {"flask": 2}
    assert run(True, FLASK_SPY, dispatch="direct") == {"flask": 0}


PARSES_COMPARED = """
    import copy
    from hypothesis import HealthCheck, given, settings, strategies as st
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.dynamodb.comparisons import ConditionExpressionParser
    from moto.dynamodb.models import dynamodb_backends
    from moto.dynamodb.models.dynamo_type import DynamoType, Item
    from moto.dynamodb.parsing import validators
    from moto.dynamodb.parsing.expressions import UpdateExpressionParser
    from moto.dynamodb.parsing import ast_nodes
    moto_parse, moto_make = ConditionExpressionParser.parse, UpdateExpressionParser.make
    walks = ast_nodes.DepthFirstTraverser, ast_nodes.Node
    moto_walk = walks[0].traverse_node_recursively, walks[1].find_clauses
    from memory_hub_local.aws import moto_patches
    moto_patches.install()
    table = dynamodb_backends[DEFAULT_ACCOUNT_ID]["us-east-1"].get_table("t")
    patched_walk = walks[0].traverse_node_recursively, walks[1].find_clauses

    def walking(walk, call):  # call with moto's own tree walks, or the patched ones
        walks[0].traverse_node_recursively, walks[1].find_clauses = walk
        try:
            return call()
        finally:
            walks[0].traverse_node_recursively, walks[1].find_clauses = patched_walk

    def dump(value, seen):  # a tree as plain data: node types, attributes, and which node is whose parent
        if isinstance(value, (list, tuple)) and not hasattr(value, "_fields"):
            return [dump(v, seen) for v in value]
        if hasattr(value, "_fields"):  # moto's parse nodes (namedtuples)
            return [type(value).__name__, [dump(v, seen) for v in value]]
        if hasattr(value, "__dict__"):
            if id(value) in seen:
                return ["seen", seen[id(value)]]
            seen[id(value)] = len(seen)
            return [type(value).__name__, {k: dump(v, seen) for k, v in vars(value).items()}]
        return value if isinstance(value, (str, int, float, bool, type(None))) else repr(value)

    def outcome(call):
        try:
            return ["answer", dump(call(), {})]
        except Exception as exc:
            return ["raised", type(exc).__name__, str(exc)]

    def noisy(expressions, marks):  # mostly well formed; now and then a mark put somewhere into it
        marked = st.tuples(expressions, st.sampled_from(marks), st.integers(0, 60))
        inserted = marked.map(lambda t: t[0][: t[2]] + t[1] + t[0][t[2] :])
        return st.one_of(expressions, expressions, expressions, inserted)

    def joined(parts, separator, prefix=""):
        return parts.map(lambda p: prefix + separator.join(p))

    paths = st.sampled_from(["pk", "n", "#a", "#b", "#a.#b", "#a[1]", "a.b[2].c"] * 3 + ["#gone", "name", "#a.size"])
    values = st.sampled_from([":s", ":n", ":l"] * 3 + [":e", ":gone"])
    operands = st.one_of(paths, values, paths.map(lambda p: f"size({p})"))
    comparisons = st.sampled_from(["=", "<>", "<", "<=", ">", ">="])
    functions = st.sampled_from(["attribute_exists", "attribute_not_exists", "attribute_type", "begins_with",
                                 "contains", "size"])
    leaves = st.one_of(
        joined(st.tuples(operands, comparisons, operands), " "),
        st.tuples(st.sampled_from(["attribute_exists", "attribute_not_exists"]), paths).map(
            lambda f: f"{f[0]}({f[1]})"),
        st.tuples(st.sampled_from(["begins_with", "contains", "attribute_type"]), paths, values).map(
            lambda f: f"{f[0]}({f[1]}, {f[2]})"),
        st.tuples(functions, st.lists(operands, max_size=3)).map(lambda f: f"{f[0]}({', '.join(f[1])})"),
        st.tuples(operands, operands, operands).map(lambda o: f"{o[0]} BETWEEN {o[1]} AND {o[2]}"),
        st.tuples(operands, st.lists(operands, min_size=1, max_size=3)).map(lambda o: f"{o[0]} IN ({', '.join(o[1])})"),
    )
    conditions = st.recursive(leaves, lambda inner: st.one_of(
        joined(st.tuples(inner, st.sampled_from([" AND ", " and ", " OR ", "  OR  "]), inner), ""),
        inner.map(lambda c: f"NOT {c}"),
        inner.map(lambda c: f"({c})"),
    ), max_leaves=6)
    every_name, every_value = {"#a": "x", "#b": "y"}, {":s": {"S": "v"}, ":n": {"N": "1"}, ":l": {"L": [{"S": "w"}]},
                                         ":e": {"S": ""}}
    names = st.one_of(st.just(every_name), st.just(every_name), st.just(every_name), st.none(), st.dictionaries(
        st.sampled_from(["#a", "#b", "#c"]), st.sampled_from(["x", "y", "pk"])))
    attribute_values = st.one_of(st.just(every_value), st.just(every_value), st.just(every_value), st.none(),
        st.dictionaries(st.sampled_from([":s", ":n", ":l", ":x"]), st.sampled_from(
            [{"S": "v"}, {"N": "1"}, {"L": [{"S": "w"}]}, {"SS": ["a"]}])))

    @settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
    @given(noisy(conditions, ["(", ")", ",", "AND", "=", "$", "[1]", " "]), names, attribute_values)
    def same_condition(expression, names, values):
        def ours():
            parser = ConditionExpressionParser(expression, names, values)
            return parser.parse(), parser.expr_attr_names_found, parser.expr_attr_values_found
        def theirs():
            parser = ConditionExpressionParser(expression, names, values)
            return moto_parse(parser), parser.expr_attr_names_found, parser.expr_attr_values_found
        expected = outcome(theirs)
        assert outcome(ours) == expected  # parsed now (or known to fail)
        assert outcome(ours) == expected  # from what was parsed

    targets = st.sampled_from(["#a", "#b", "n", "#a.#b", "l[0]", "#gone", "name", "pk", "lsi"])
    sources = st.one_of(targets, values, st.tuples(targets, values).map(lambda t: f"if_not_exists({t[0]}, {t[1]})"),
                        st.tuples(targets, values).map(lambda t: f"list_append({t[0]}, {t[1]})"),
                        joined(st.tuples(targets, st.sampled_from([" + ", " - "]), values), ""))
    clauses = st.one_of(
        joined(st.lists(joined(st.tuples(targets, sources), " = "), min_size=1, max_size=3), ", ", "SET "),
        joined(st.lists(targets, min_size=1, max_size=2), ", ", "REMOVE "),
        joined(st.tuples(targets, values), " ", "ADD "),
        joined(st.tuples(targets, values), " ", "DELETE "),
    )
    distinct = joined(st.lists(clauses, min_size=1, max_size=3, unique_by=lambda c: c.split()[0]), " ")
    updates = st.one_of(distinct, distinct, distinct, joined(st.lists(clauses, min_size=2, max_size=3), " "))

    @settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
    @given(noisy(updates, ["=", ",", "SET", "(", " "]), names, attribute_values)
    def same_update(expression, names, values):
        expected = outcome(lambda: moto_make(expression))
        assert outcome(lambda: UpdateExpressionParser.make(expression)) == expected
        assert outcome(lambda: UpdateExpressionParser.make(expression)) == expected
        if expected[0] != "answer":
            return
        parsed = UpdateExpressionParser.make(expression)
        before = dump(parsed, {})

        def validator():
            item = Item(DynamoType({"S": "p"}), DynamoType({"S": "a"}), {"pk": {"S": "p"}, "sk": {"S": "a"},
                "x": {"M": {"y": {"N": "1"}}}, "n": {"N": "2"}, "l": {"L": [{"S": "z"}]}})
            return validators.UpdateExpressionValidator(parsed, expression_attribute_names=names or {},
                expression_attribute_values=values or {}, item=item, table=table)

        ours = validator()
        assert dump(ours.node_to_validate, {}) == dump(copy.deepcopy(parsed), {})  # the copy moto makes
        validated = outcome(ours.validate)
        assert validated == walking(moto_walk, lambda: outcome(validator().validate))  # moto's own walks
        if validated[0] == "answer":
            done = ours.node_to_validate
            assert dump(validators.deepcopy(done), {}) == dump(copy.deepcopy(done), {})
        assert dump(parsed, {}) == before  # what was parsed is kept as parsed

    same_condition()
    same_update()
    print(json.dumps({"compared": True}))
"""


def test_patched_parses_equal_moto_s_own_for_generated_expressions():
    assert run(False, "    EXAMPLES = 1000\n" + PARSES_COMPARED) == {"compared": True}


WALKS = """
    from moto.dynamodb.parsing import validators
    made = []
    for processor in vars(validators).values():
        if isinstance(processor, type) and "_processing_map" in vars(processor):
            def counted(self, original=processor._processing_map):
                made.append(1)
                return original(self)
            processor._processing_map = counted
    names = {f"#{i}": f"a{i}" for i in range(8)}
    values = {f":{i}": {"N": str(i)} for i in range(8)}
    update = "SET " + ", ".join(f"#{i} = :{i}" for i in range(8))
    answer = outcome(lambda: ddb.update_item(TableName="t", Key={"pk": {"S": "p"}, "sk": {"S": "a"}},
        UpdateExpression=update, ExpressionAttributeNames=names, ExpressionAttributeValues=values))
    print(json.dumps({"answer": answer, "tables_made": len(made)}))
"""


def test_moto_alone_remakes_each_validation_walk_s_table_at_every_node():
    assert run(False, WALKS)["tables_made"] > 500  # about two per node per walk, and the update is validated twice


def test_patched_moto_makes_each_walk_s_table_once():
    assert run(True, WALKS) == {"answer": "accepted", "tables_made": 20}  # ten walks, twice


THREADED_WRITES = """
    import random, threading
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.dynamodb.models import dynamodb_backends
    def query():
        found, start = [], {}
        while True:
            page = ddb.query(TableName="t", IndexName="by-lsi", KeyConditionExpression="pk = :p AND lsi >= :a",
                ExpressionAttributeValues={":p": {"S": "p"}, ":a": {"S": "0"}}, Limit=50, **start)
            found += [(i["lsi"]["S"], i["sk"]["S"]) for i in page["Items"]]
            if "LastEvaluatedKey" not in page:
                return found
            start = {"ExclusiveStartKey": page["LastEvaluatedKey"]}
    for i in range(100):
        ddb.put_item(TableName="t", Item={"pk": {"S": "p"}, "sk": {"S": f"{i:03d}"}, "lsi": {"S": f"{i:03d}"}})
    query()  # the partition's views are made
    def writer(n):
        rng = random.Random(n)
        client = boto3.client("dynamodb", region_name="us-east-1")
        for _ in range(150):
            i, v = rng.randrange(100), {"S": f"{rng.randrange(1000):03d}"}
            if rng.random() < 0.5:
                client.update_item(TableName="t", Key={"pk": {"S": "p"}, "sk": {"S": f"{i:03d}"}},
                    UpdateExpression="SET lsi = :v", ExpressionAttributeValues={":v": v})
            else:
                client.put_item(TableName="t", Item={"pk": {"S": "p"}, "sk": {"S": f"{i:03d}"}, "lsi": v})
    import sys
    sys.setswitchinterval(1e-6)  # threads take turns as often as they can: a step that is not one shows
    threads = [threading.Thread(target=writer, args=(n,)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    kept = query()
    dynamodb_backends[DEFAULT_ACCOUNT_ID]["us-east-1"].get_table("t")._memory_hub_sorted.clear()
    print(json.dumps({"same": kept == query(), "count": len(kept)}))
"""


def test_writes_from_several_threads_keep_the_sorted_views_as_the_items_are():
    assert run(True, THREADED_WRITES) == {"same": True, "count": 100}


ATTRIBUTE_OBJECTS = """
    import gc
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.dynamodb.models import dynamodb_backends
    from moto.dynamodb.models.dynamo_type import DynamoType
    for i in range(100):
        ddb.put_item(TableName="t", Item={"pk": {"S": "p"}, "sk": {"S": f"{i:03d}"}, "lsi": {"S": f"l{i}"},
            "n": {"N": str(i)}, "text": {"S": "a message"}, "tags": {"SS": ["a", "b"]},
            "m": {"M": {"at": {"N": "1"}, "by": {"S": "u"}}}, "l": {"L": [{"S": "x"}, {"N": "2"}]}})
    ddb.update_item(TableName="t", Key={"pk": {"S": "p"}, "sk": {"S": "007"}}, UpdateExpression="SET n = n + :one",
        ExpressionAttributeValues={":one": {"N": "1"}})
    newest = ddb.query(TableName="t", IndexName="by-lsi", KeyConditionExpression="pk = :p",
        ExpressionAttributeValues={":p": {"S": "p"}}, ScanIndexForward=False, Limit=3)["Items"]
    gc.collect()
    table = dynamodb_backends[DEFAULT_ACCOUNT_ID]["us-east-1"].get_table("t")
    held = [i for partition in table.items.values() for i in partition.values()]
    objects = sum(1 for o in gc.get_objects() if type(o) is DynamoType)
    print(json.dumps({"items": len(held), "objects_per_item": objects / len(held),
                      "packed": sum(getattr(i, "_attrs", "moto's") is None for i in held),
                      "updated": ddb.get_item(TableName="t", Key={"pk": {"S": "p"}, "sk": {"S": "007"}})["Item"]["n"],
                      "newest": [i["sk"]["S"] for i in newest]}))
"""


def test_moto_alone_holds_an_object_per_attribute_value():
    found = json.loads(alone(ATTRIBUTE_OBJECTS))
    assert found["items"] == 100 and found["objects_per_item"] >= 12  # 8 attributes, 4 more in the map and list


def test_packed_items_hold_their_keys_beside_one_packed_string_and_answer_the_same():
    theirs, packed = json.loads(alone(ATTRIBUTE_OBJECTS)), run(True, ATTRIBUTE_OBJECTS, packed=True)
    assert packed["items"] == 100 and packed["packed"] == 100
    assert packed["objects_per_item"] <= 1.1  # its range key; the partition's items share one hash key
    assert packed["updated"] == theirs["updated"] == {"N": "8"}
    assert packed["newest"] == theirs["newest"] == ["099", "098", "097"]


def test_without_packing_an_item_is_moto_s_own():
    found = run(True, ATTRIBUTE_OBJECTS)
    assert found["packed"] == 0 and found["objects_per_item"] >= 12


RESTORED_FROM_A_SNAPSHOT = """
    import json, sys
    from memory_hub_local.aws import __main__ as aws
    from memory_hub_local.aws.state import dynamodb_backend
    args = aws._arguments(["--port", "0", "--data-dir", sys.argv[1]])
    state, side = aws._aws_side(args)
    table = dynamodb_backend("us-east-1").get_table(state.names["ItemsTable"])
    if sys.argv[2] == "write":
        for i in range(20):
            item = {"pk": {"S": "p"}, "sk": {"S": f"{i:02d}"}, "text": {"S": "a message"}, "n": {"N": str(i)}}
            table.put_item(item)
        state.save(0)
    held = [i for partition in table.items.values() for i in partition.values()]
    print(json.dumps({"items": len(held), "packed": sum(i._attrs is None for i in held),
                      "n": sorted(int(i.attrs["n"].value) for i in held)}))
"""


def test_a_restarted_aws_side_holds_the_snapshot_s_items_packed(tmp_path):
    """The snapshot is loaded with packing on (before, it was loaded first: every item unpacked)."""

    def start(mode: str) -> dict:
        code = "import textwrap\n" + textwrap.dedent(RESTORED_FROM_A_SNAPSHOT)
        done = subprocess.run(
            [sys.executable, "-c", code, str(tmp_path), mode], capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, done.stderr[-2000:]
        return json.loads(done.stdout.strip().splitlines()[-1])

    written = start("write")
    assert written["items"] == 20 and written["packed"] == 0  # put in process, never a request: as moto made them
    restored = start("read")
    assert restored["items"] == 20 and restored["packed"] == 20
    assert restored["n"] == list(range(20))
