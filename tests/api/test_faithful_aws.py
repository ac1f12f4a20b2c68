"""The emulated AWS side refuses what AWS refuses and moto alone accepts (each rule of
infra/local/memory_hub_local/aws/faithful.py is a claim: plain moto here accepts, so the rule can go
the day moto does it), and it holds each function to its own IAM policy."""

from __future__ import annotations

import os

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError
from helpers import BUCKET, TABLES

REGION = "us-east-1"


@pytest.fixture(scope="module")
def plain():
    """A moto server as moto ships it, with one bucket and one table like ours."""
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    url = f"http://{host}:{port}"
    s3 = boto3.client("s3", endpoint_url=url, region_name=REGION)
    s3.create_bucket(Bucket=BUCKET)
    dynamodb = boto3.client("dynamodb", endpoint_url=url, region_name=REGION)
    dynamodb.create_table(
        TableName=TABLES["keys"],
        BillingMode="PAY_PER_REQUEST",
        AttributeDefinitions=[{"AttributeName": "key_id", "AttributeType": "S"}],
        KeySchema=[{"AttributeName": "key_id", "KeyType": "HASH"}],
    )
    yield url
    server.stop()


def clients(endpoint: str | None) -> tuple:
    extra = {"endpoint_url": endpoint} if endpoint else {}
    return boto3.client("s3", region_name=REGION, **extra), boto3.client("dynamodb", region_name=REGION, **extra)


def code_of(call) -> str:
    try:
        call()
    except ClientError as exc:
        return str(exc.response["Error"]["Code"])
    return "accepted"


def both(plain_url, scenario):
    """(plain moto's outcome, the stack's outcome) of one scenario."""
    return scenario(*clients(plain_url)), scenario(*clients(None))


def test_s3_object_keys_over_1024_bytes(stack, plain):
    key = "profiles/limits/" + "k" * 1020
    outcome = both(plain, lambda s3, _: code_of(lambda: s3.put_object(Bucket=BUCKET, Key=key, Body=b"x")))
    assert outcome == ("accepted", "KeyTooLongError")


def test_s3_user_metadata_over_2_kb(stack, plain):
    metadata = {"a": "v" * 2100}
    outcome = both(
        plain,
        lambda s3, _: code_of(
            lambda: s3.put_object(Bucket=BUCKET, Key="profiles/limits/meta", Body=b"x", Metadata=metadata)
        ),
    )
    assert outcome == ("accepted", "MetadataTooLarge")


def test_delete_objects_of_more_than_1000_keys(stack, plain):
    objects = [{"Key": f"profiles/limits/{i}"} for i in range(1001)]
    outcome = both(
        plain,
        lambda s3, _: code_of(lambda: s3.delete_objects(Bucket=BUCKET, Delete={"Objects": objects, "Quiet": True})),
    )
    assert outcome == ("accepted", "MalformedXML")


def test_delete_objects_honours_each_objects_etag(stack, plain):
    def scenario(s3, _):
        key = "profiles/limits/etag.md"
        s3.put_object(Bucket=BUCKET, Key=key, Body=b"first")
        stale = s3.head_object(Bucket=BUCKET, Key=key)["ETag"]
        s3.put_object(Bucket=BUCKET, Key=key, Body=b"rewritten")
        answer = s3.delete_objects(Bucket=BUCKET, Delete={"Objects": [{"Key": key, "ETag": stale}], "Quiet": True})
        survived = s3.list_objects_v2(Bucket=BUCKET, Prefix=key).get("KeyCount", 0) == 1
        return survived, [e.get("Code") for e in answer.get("Errors", [])]

    assert both(plain, scenario) == ((False, []), (True, ["PreconditionFailed"]))


def test_copy_object_honours_copy_source_if_match(stack, plain):
    def scenario(s3, _):
        source = "profiles/limits/source.md"
        s3.put_object(Bucket=BUCKET, Key=source, Body=b"first")
        stale = s3.head_object(Bucket=BUCKET, Key=source)["ETag"]
        s3.put_object(Bucket=BUCKET, Key=source, Body=b"second")
        return code_of(
            lambda: s3.copy_object(
                Bucket=BUCKET,
                Key="profiles/limits/copy.md",
                CopySourceIfMatch=stale,
                CopySource={"Bucket": BUCKET, "Key": source},
            )
        )

    assert both(plain, scenario) == ("accepted", "PreconditionFailed")


def test_list_objects_pages_hold_at_most_1000_keys(stack, plain):
    def scenario(s3, _):
        prefix = "profiles/limits/many/"
        for i in range(1003):
            s3.put_object(Bucket=BUCKET, Key=f"{prefix}{i:05d}", Body=b"")
        return len(s3.list_objects_v2(Bucket=BUCKET, Prefix=prefix, MaxKeys=5000).get("Contents", []))

    assert both(plain, scenario) == (1003, 1000)


def test_batch_write_item_of_26_or_with_duplicate_keys(stack, plain):
    def scenario(_, dynamodb):
        table = TABLES["keys"]
        many = [{"PutRequest": {"Item": {"key_id": {"S": f"limits-{i}"}}}} for i in range(26)]
        duplicate = [{"PutRequest": {"Item": {"key_id": {"S": "limits-d"}, "n": {"S": str(i)}}}} for i in range(2)]
        return (
            code_of(lambda: dynamodb.batch_write_item(RequestItems={table: many})),
            code_of(lambda: dynamodb.batch_write_item(RequestItems={table: duplicate})),
        )

    assert both(plain, scenario) == (("accepted", "accepted"), ("ValidationException", "ValidationException"))


def test_a_key_over_2048_bytes_even_on_a_read(stack, plain):
    outcome = both(
        plain,
        lambda _, dynamodb: code_of(
            lambda: dynamodb.get_item(TableName=TABLES["keys"], Key={"key_id": {"S": "k" * 2049}})
        ),
    )
    assert outcome == ("accepted", "ValidationException")


def test_transactions_over_4_mb(stack, plain):
    big = "x" * 350_000
    items = [
        {"Put": {"TableName": TABLES["keys"], "Item": {"key_id": {"S": f"limits-big-{i}"}, "v": {"S": big}}}}
        for i in range(13)
    ]
    outcome = both(plain, lambda _, dynamodb: code_of(lambda: dynamodb.transact_write_items(TransactItems=items)))
    assert outcome == ("accepted", "ValidationException")


def test_a_function_may_do_only_what_its_policy_allows(stack):
    """Each function signs with its own key: AdminFunction's policy reads scene objects but never
    writes them; a write with its credentials is refused as AWS refuses it."""

    def client_of(function: str):
        own = stack.credentials.function(function)
        return boto3.client(
            "s3",
            region_name=REGION,
            aws_access_key_id=own.access_key,
            aws_secret_access_key=own.secret,
            aws_session_token=own.token,
        )

    admin = client_of("AdminFunction")
    key = "profiles/iam/x.md"
    assert code_of(lambda: admin.put_object(Bucket=BUCKET, Key=key, Body=b"x")) == "AccessDenied"
    scenario = client_of("ScenarioFunction")
    assert code_of(lambda: scenario.put_object(Bucket=BUCKET, Key=key, Body=b"x")) == "accepted"
    assert code_of(lambda: scenario.put_object(Bucket=BUCKET, Key="outside/x.md", Body=b"x")) == "AccessDenied"
    assert os.environ["AWS_ENDPOINT_URL"] == stack.aws_url  # these clients did talk to the stack


def test_the_call_log_tells_a_policy_refusal_from_an_injected_fault(stack, hooks):
    """The IAM check over the session (helpers.denied_calls) skips faults a test injected and
    must still see every refusal a policy made: the call log marks which is which."""
    own = stack.credentials.function("AdminFunction")
    admin = boto3.client(
        "s3",
        region_name=REGION,
        aws_access_key_id=own.access_key,
        aws_secret_access_key=own.secret,
        aws_session_token=own.token,
    )
    since = hooks.last_seq()
    assert code_of(lambda: admin.put_object(Bucket=BUCKET, Key="profiles/iam/denied.md", Body=b"x")) == "AccessDenied"
    with hooks.failing(
        {"function": "AdminFunction", "key_contains": "iam/injected.md"}, code="AccessDenied", status=403
    ):
        assert code_of(lambda: admin.get_object(Bucket=BUCKET, Key="profiles/iam/injected.md")) == "AccessDenied"
    logged = [(c["key"], c["refused"], c["injected"]) for c in hooks.calls(since) if c["function"] == "AdminFunction"]
    assert logged == [
        ("profiles/iam/denied.md", "AccessDenied", False),
        ("profiles/iam/injected.md", "AccessDenied", True),
    ]


def test_s3_sends_no_cors_headers_for_a_bucket_without_cors_rules(stack, plain):
    """A web page's request (an Origin header) to a presigned URL: S3 answers it with CORS headers
    only by the bucket's CORS rules, and the template's bucket has none."""
    import requests

    def answer(endpoint: str | None) -> dict[str, str]:
        extra = {"endpoint_url": endpoint} if endpoint else {}
        s3 = boto3.client("s3", region_name=REGION, config=Config(signature_version="s3v4"), **extra)
        s3.put_object(Bucket=BUCKET, Key="faithful/cors.md", Body=b"x")
        url = s3.generate_presigned_url("get_object", Params={"Bucket": BUCKET, "Key": "faithful/cors.md"})
        got = requests.get(url, headers={"Origin": "http://evil.example"}, timeout=30)
        assert got.status_code == 200 and got.content == b"x"
        return {k.lower(): v for k, v in got.headers.items()}

    assert "access-control-allow-origin" in answer(plain)  # plain moto lets any page read it
    assert not [h for h in answer(None) if h.startswith("access-control-")]
