"""The emulated AWS side serves Bedrock's InvokeModel (Titan Text Embeddings V2's shapes, from a real
sentence-embedding model) and Amazon S3 Vectors (QueryVectors included) as AWS does: shapes, errors,
limits, IAM per function, the call log and injected faults — through boto3 clients of the stack."""

from __future__ import annotations

import json
import math

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

REGION = "us-east-1"
MODEL = "amazon.titan-embed-text-v2:0"
ONCE = Config(retries={"total_max_attempts": 1, "mode": "standard"})
# all-MiniLM-L6-v2's published embedding of "This is an example sentence" (first six components)
REFERENCE = [0.06765693, 0.06349593, 0.04871314, 0.07930495, 0.03744806, 0.00265273]


def bedrock(**extra):
    return boto3.client("bedrock-runtime", region_name=REGION, config=ONCE, **extra)


def vectors(**extra):
    return boto3.client("s3vectors", region_name=REGION, config=ONCE, **extra)


def embed(text: str, **fields) -> dict:
    answer = bedrock().invoke_model(modelId=MODEL, body=json.dumps({"inputText": text, **fields}))
    assert answer["contentType"] == "application/json"
    return json.loads(answer["body"].read())


def failure(call) -> tuple[str, int, str]:
    """(error code, HTTP status, x-amzn-ErrorType header) of a refused call."""
    try:
        call()
    except ClientError as exc:
        meta = exc.response["ResponseMetadata"]
        return (
            str(exc.response["Error"]["Code"]),
            int(meta["HTTPStatusCode"]),
            str(meta["HTTPHeaders"].get("x-amzn-errortype", "")),
        )
    return ("accepted", 200, "")


def cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True)) / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))


# ---------------------------------------------------------------- Bedrock


def test_titan_v2_shapes_and_the_real_models_vectors(stack):
    answer = embed("This is an example sentence")
    assert set(answer) == {"embedding", "inputTextTokenCount", "embeddingsByType"}
    assert len(answer["embedding"]) == 1024 and answer["embeddingsByType"] == {"float": answer["embedding"]}
    assert answer["inputTextTokenCount"] == 5
    assert math.isclose(math.fsum(v * v for v in answer["embedding"]), 1.0, rel_tol=1e-5)
    assert answer["embedding"][:6] == pytest.approx(REFERENCE, abs=1e-5)  # the published reference
    assert all(v == 0.0 for v in answer["embedding"][384:])  # 384 model dimensions, zero-padded
    assert embed("This is an example sentence")["embedding"] == answer["embedding"]  # deterministic

    small = embed("This is an example sentence", dimensions=512)["embedding"]
    assert len(small) == 512 and small[:384] == answer["embedding"][:384]
    tiny = embed("This is an example sentence", dimensions=256, embeddingTypes=["float", "binary"])
    assert len(tiny["embedding"]) == 256 and math.isclose(math.fsum(v * v for v in tiny["embedding"]), 1, rel_tol=1e-5)
    assert tiny["embeddingsByType"]["binary"] == [1 if v > 0 else 0 for v in tiny["embedding"]]
    raw = embed("This is an example sentence", normalize=False)["embedding"]
    assert not math.isclose(math.fsum(v * v for v in raw), 1.0, rel_tol=1e-3)
    assert cosine(raw, answer["embedding"]) == pytest.approx(1.0, abs=1e-5)


@pytest.mark.parametrize("dimensions", [1024, 256])
def test_paraphrases_are_nearer_than_unrelated_texts(stack, dimensions):
    first = embed("A man is eating food.", dimensions=dimensions)["embedding"]
    paraphrase = embed("A man is eating a piece of bread.", dimensions=dimensions)["embedding"]
    unrelated = embed("The girl is carrying a baby.", dimensions=dimensions)["embedding"]
    assert cosine(first, paraphrase) > 0.6 > 0.2 > cosine(first, unrelated)


def test_what_bedrock_refuses(stack):
    def invoke(body, model=MODEL):
        return failure(lambda: bedrock().invoke_model(modelId=model, body=body))

    validation = ("ValidationException", 400)
    assert invoke(json.dumps({"inputText": "x"}), model="amazon.titan-embed-text-v9:0")[:2] == validation
    assert invoke(json.dumps({"inputText": "x", "dimensions": 100}))[:2] == validation
    assert invoke(json.dumps({"inputText": ""}))[:2] == validation
    assert invoke(json.dumps({"inputText": "word " * 10_001}))[:2] == validation  # over 50,000 characters
    assert invoke(json.dumps({"inputText": "x", "temperature": 0.5}))[:2] == validation
    assert invoke(json.dumps({"inputText": "x", "normalize": "yes"}))[:2] == validation
    assert invoke(json.dumps({"inputText": "x", "embeddingTypes": ["int8"]}))[:2] == validation
    assert invoke(b"not json")[:2] == validation
    assert invoke(json.dumps({}))[2].startswith("ValidationException")  # x-amzn-ErrorType as Bedrock sends it
    # a model's ARN is as good as its id
    arn = f"arn:aws:bedrock:{REGION}::foundation-model/{MODEL}"
    assert invoke(json.dumps({"inputText": "x"}), model=arn) == ("accepted", 200, "")
    elsewhere = f"arn:aws:bedrock:eu-west-1::foundation-model/{MODEL}"  # another region's model
    assert invoke(json.dumps({"inputText": "x"}), model=elsewhere)[:2] == validation


def test_long_inputs_are_cut_to_the_models_256_word_pieces(stack):
    words = " ".join(f"topic{i}" for i in range(400))
    whole = embed(words)
    assert whole["inputTextTokenCount"] > 256  # counted whole
    assert cosine(whole["embedding"], embed(words + " and more words at the end")["embedding"]) > 0.9999


def test_invoke_model_faults_are_injected_by_the_test_hooks(stack, hooks):
    seq = hooks.last_seq()
    hooks.add(
        {"operation": "InvokeModel"},
        action="fail",
        times=None,
        error={"status": 429, "code": "ThrottlingException", "message": "Too many requests, please wait."},
    )
    code, status, header = failure(lambda: embed("throttled"))
    assert (code, status) == ("ThrottlingException", 429) and header.startswith("ThrottlingException")
    hooks.clear()
    hooks.add(
        {"operation": "InvokeModel", "body_contains": "poison"},
        action="fail",
        error={"status": 503, "code": "ServiceUnavailableException", "message": "unavailable"},
    )
    assert failure(lambda: embed("a poison text"))[:2] == ("ServiceUnavailableException", 503)
    assert len(embed("a healthy text")["embedding"]) == 1024
    logged = [c for c in hooks.calls(seq) if c["operation"] == "InvokeModel"]
    assert [c["refused"] for c in logged] == ["ThrottlingException", "ServiceUnavailableException", None]
    assert logged[-1]["actions"] == [["bedrock:InvokeModel", f"arn:aws:bedrock:{REGION}::foundation-model/{MODEL}"]]


# ---------------------------------------------------------------- S3 Vectors


@pytest.fixture(scope="module")
def index(stack):
    client = vectors()
    client.create_vector_bucket(vectorBucketName="api-test-vectors")
    client.create_index(
        vectorBucketName="api-test-vectors",
        indexName="memory-1.epoch-1",
        dataType="float32",
        dimension=256,
        distanceMetric="cosine",
        metadataConfiguration={"nonFilterableMetadataKeys": ["model"]},
    )
    return {"vectorBucketName": "api-test-vectors", "indexName": "memory-1.epoch-1"}


def test_meaning_found_through_bedrock_and_query_vectors(stack, index):
    client = vectors()
    texts = {
        "m1": ("The cat sat on the mat.", "u1"),
        "m2": ("Quarterly revenue grew by ten percent.", "u1"),
        "m3": ("A kitten is resting on a rug.", "u2"),
        "m4": ("How to bake sourdough bread at home.", "u1"),
    }
    client.put_vectors(
        **index,
        vectors=[
            {
                "key": key,
                "data": {"float32": embed(text, dimensions=256)["embedding"]},
                "metadata": {"user": user, "model": MODEL},
            }
            for key, (text, user) in texts.items()
        ],
    )
    probe = {"float32": embed("a small cat lying on a carpet", dimensions=256)["embedding"]}
    answer = client.query_vectors(**index, topK=2, queryVector=probe, returnDistance=True, returnMetadata=True)
    assert answer["distanceMetric"] == "cosine"
    assert [v["key"] for v in answer["vectors"]] == ["m3", "m1"]
    assert answer["vectors"][0]["distance"] < answer["vectors"][1]["distance"]
    assert answer["vectors"][0]["metadata"] == {"user": "u2", "model": MODEL}
    only_u1 = client.query_vectors(**index, topK=3, queryVector=probe, filter={"user": {"$eq": "u1"}})
    found = [v["key"] for v in only_u1["vectors"]]
    assert found[0] == "m1" and sorted(found) == ["m1", "m2", "m4"]  # u2's m3 filtered out
    got = client.get_vectors(**index, keys=["m2", "gone"], returnMetadata=True)["vectors"]
    assert [v["key"] for v in got] == ["m2"]
    client.delete_vectors(**index, keys=["m2", "never-there"])
    listed = client.list_vectors(**index, maxResults=2)
    assert len(listed["vectors"]) == 2 and listed["nextToken"]
    assert failure(lambda: client.query_vectors(**index, topK=1, queryVector=probe, filter={"model": MODEL}))[:2] == (
        "ValidationException",
        400,
    )


def test_s3_vectors_limits_are_aws_limits(stack, index):
    client = vectors()
    one = {"float32": [0.1] * 256}
    assert failure(lambda: client.put_vectors(**index, vectors=[{"key": f"k{i}", "data": one} for i in range(501)]))[
        :2
    ] == ("ValidationException", 400)
    assert failure(lambda: client.query_vectors(**index, topK=101, queryVector=one))[:2] == ("ValidationException", 400)
    assert failure(
        lambda: client.put_vectors(**index, vectors=[{"key": "f", "data": one, "metadata": {"d": "x" * 2100}}])
    )[:2] == ("ValidationException", 400)
    assert failure(lambda: client.create_index(**index, dataType="float32", dimension=256, distanceMetric="cosine"))[
        :2
    ] == ("ConflictException", 409)
    missing = {"vectorBucketName": "api-test-vectors", "indexName": "no-such-index"}
    assert failure(lambda: client.query_vectors(**missing, topK=1, queryVector=one))[:2] == ("NotFoundException", 404)


def test_s3_vectors_faults_are_injected_by_the_test_hooks(stack, hooks, index):
    hooks.add(
        {"operation": "QueryVectors", "key_contains": "memory-1."},
        action="fail",
        error={"status": 429, "code": "TooManyRequestsException", "message": "slow down"},
    )
    probe = {"float32": [0.1] * 256}
    code, status, header = failure(lambda: vectors().query_vectors(**index, topK=1, queryVector=probe))
    assert (code, status, header) == ("TooManyRequestsException", 429, "TooManyRequestsException")
    assert failure(lambda: vectors().query_vectors(**index, topK=1, queryVector=probe))[0] == "accepted"


def test_each_function_is_held_to_its_policy_for_vectors_and_models(stack, hooks, index):
    """AdminFunction's policy grants neither Bedrock nor S3 Vectors: both refuse it as AWS does (403
    AccessDeniedException), and the call log names the action and the resource ARN. (The resources
    are named ``outside/…`` in the log, the mark of a refusal on purpose that the session's IAM
    sufficiency check leaves out.)"""
    own = stack.credentials.function("AdminFunction")
    keys = {"aws_access_key_id": own.access_key, "aws_secret_access_key": own.secret, "aws_session_token": own.token}
    seq = hooks.last_seq()
    body = json.dumps({"inputText": "x"})
    outside_model = "outside/amazon.titan-embed-text-v2:0"
    assert failure(lambda: bedrock(**keys).invoke_model(modelId=outside_model, body=body))[:2] == (
        "AccessDeniedException",
        403,
    )
    probe = {"float32": [0.1] * 256}
    index_arn = f"arn:aws:s3vectors:{REGION}:123456789012:bucket/api-test-vectors/index/outside/probe"
    client = vectors(**keys)
    denied = failure(lambda: client.query_vectors(indexArn=index_arn, topK=1, queryVector=probe, filter={"user": "u1"}))
    assert denied[:2] == ("AccessDeniedException", 403)
    logged = [c for c in hooks.calls(seq) if c["function"] == "AdminFunction"]
    assert [c["refused"] for c in logged] == ["AccessDeniedException", "AccessDeniedException"]
    assert [c["key"] for c in logged] == [outside_model, "outside/probe"]
    assert logged[0]["actions"] == [
        ["bedrock:InvokeModel", f"arn:aws:bedrock:{REGION}::foundation-model/{outside_model}"]
    ]
    assert logged[1]["actions"] == [["s3vectors:QueryVectors", index_arn], ["s3vectors:GetVectors", index_arn]]
    # the operator's key opens everything, as an account administrator's would
    assert failure(lambda: vectors().list_vector_buckets())[0] == "accepted"


# ---------------------------------------------------------------- kept across a restart


def _emulated_side(data_dir, credentials):
    """The emulated AWS side alone (no functions), on a free port, keeping its state in data_dir."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    local = Path(__file__).resolve().parents[2] / "infra" / "local"
    env = {**os.environ, **credentials.environment(), "PYTHONPATH": str(local)}
    process = subprocess.Popen(
        [sys.executable, "-m", "memory_hub_local.aws", "--port", "0", "--data-dir", str(data_dir)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert process.stdout is not None
    for line in process.stdout:
        if line.startswith(b"READY "):
            return process, f"http://127.0.0.1:{json.loads(line[6:])['port']}"
    raise AssertionError(f"the emulated AWS side exited ({process.wait()})")


def test_vector_buckets_indexes_and_vectors_survive_a_restart(tmp_path):
    import signal

    from memory_hub_local.identity import Credentials

    credentials = Credentials.create(tmp_path)
    operator = credentials.operator
    keys = {"aws_access_key_id": operator.access_key, "aws_secret_access_key": operator.secret}
    process, url = _emulated_side(tmp_path, credentials)
    try:
        client = vectors(endpoint_url=url, **keys)
        made = {b["vectorBucketName"] for b in client.list_vector_buckets()["vectorBuckets"]}
        assert made, "the template's vector buckets are made at start"
        bucket = sorted(made)[0]
        at = {"vectorBucketName": bucket, "indexName": "restart-probe"}
        client.create_index(
            **at,
            dataType="float32",
            dimension=2,
            distanceMetric="euclidean",
            metadataConfiguration={"nonFilterableMetadataKeys": ["note"]},
        )
        client.put_vectors(**at, vectors=[{"key": "k", "data": {"float32": [0.5, -2.0]}, "metadata": {"u": "1"}}])
    finally:
        process.send_signal(signal.SIGTERM)  # a stop saves a last snapshot
        process.wait(timeout=60)
    process, url = _emulated_side(tmp_path, credentials)
    try:
        client = vectors(endpoint_url=url, **keys)
        assert {b["vectorBucketName"] for b in client.list_vector_buckets()["vectorBuckets"]} == made
        index = client.get_index(**at)["index"]
        assert (index["dimension"], index["distanceMetric"]) == (2, "euclidean")
        assert index["metadataConfiguration"]["nonFilterableMetadataKeys"] == ["note"]
        got = client.get_vectors(**at, keys=["k"], returnData=True, returnMetadata=True)["vectors"]
        assert got == [{"key": "k", "data": {"float32": [0.5, -2.0]}, "metadata": {"u": "1"}}]
        hit = client.query_vectors(**at, topK=1, queryVector={"float32": [0.5, -2.0]}, filter={"u": "1"})
        assert [v["key"] for v in hit["vectors"]] == ["k"]
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=60)
