"""The S3 Vectors patches of the local stack (infra/local/memory_hub_local/aws/s3vectors/) are
claims about moto 5.2.5 and about AWS: moto ALONE lacks each one (so a patch can go the day moto
gains it), and the patched moto answers as S3 Vectors does. Each scenario runs in a fresh
interpreter, so unpatched and patched moto never share a process."""

from __future__ import annotations

import pytest
from moto_scenarios import run as scenario

SETUP = """
    vectors.create_index(vectorBucketName="memory-vectors", indexName="m1.e1", dataType="float32", dimension=3,
        distanceMetric="cosine", metadataConfiguration={"nonFilterableMetadataKeys": ["note"]})
    AT = {"vectorBucketName": "memory-vectors", "indexName": "m1.e1"}
"""


def run(patched: bool, body: str) -> dict:
    found: dict = scenario(patched, SETUP, body)
    return found


QUERY = """
    rows = [("a", [1, 0, 0], {"user": "u1", "kind": "msg", "at": 10}),
            ("b", [0.9, 0.1, 0], {"user": "u1", "kind": "rec", "at": 20, "tags": ["x", "y"]}),
            ("c", [0, 1, 0], {"user": "u2", "kind": "msg", "at": 30}),
            ("d", [-1, 0, 0], {"user": "u1", "kind": "msg", "note": "n"})]
    vectors.put_vectors(**AT, vectors=[{"key": k, "data": {"float32": v}, "metadata": m} for k, v, m in rows])
    def keys(**kwargs):
        answer = vectors.query_vectors(**AT, queryVector={"float32": [1, 0, 0]}, **kwargs)
        return [v["key"] for v in answer["vectors"]]
    try:
        plain = vectors.query_vectors(**AT, topK=2, queryVector={"float32": [1, 0, 0]}, returnDistance=True,
                                      returnMetadata=True)
    except Exception as exc:
        print(json.dumps({"query": type(exc).__name__}))
        raise SystemExit(0)
    found = {
        "query": "answered",
        "metric": plain["distanceMetric"],
        "first": [(v["key"], round(v["distance"], 4), v["metadata"]["user"]) for v in plain["vectors"]],
        "all": keys(topK=10),
        "bare_key_only": sorted(vectors.query_vectors(**AT, topK=1, queryVector={"float32": [1, 0, 0]})["vectors"][0]),
        "eq": keys(topK=10, filter={"user": "u1"}),
        "and_implicit": keys(topK=10, filter={"user": "u1", "kind": "msg"}),
        "ne": keys(topK=10, filter={"kind": {"$ne": "msg"}}),
        "range": keys(topK=10, filter={"at": {"$gte": 20, "$lt": 30}}),
        "in": keys(topK=10, filter={"user": {"$in": ["u2", "u9"]}}),
        "nin": keys(topK=10, filter={"user": {"$nin": ["u1"]}}),
        "exists": keys(topK=10, filter={"at": {"$exists": False}}),
        "list_eq": keys(topK=10, filter={"tags": "y"}),
        "or": keys(topK=10, filter={"$or": [{"user": "u2"}, {"at": {"$lte": 10}}]}),
        "and": keys(topK=10, filter={"$and": [{"user": "u1"}, {"kind": {"$in": ["rec"]}}]}),
        "top_k_101": outcome(lambda: keys(topK=101)),
        "top_k_0": outcome(lambda: vectors.query_vectors(**AT, topK=0, queryVector={"float32": [1, 0, 0]})),
        "wrong_dimension": outcome(lambda: vectors.query_vectors(**AT, topK=1, queryVector={"float32": [1, 0]})),
        "non_filterable": outcome(lambda: keys(topK=1, filter={"note": "n"})),
        "bad_operator": outcome(lambda: keys(topK=1, filter={"user": {"$regex": "u"}})),
        "empty_or": outcome(lambda: keys(topK=1, filter={"$or": []})),
        "missing_index": outcome(lambda: vectors.query_vectors(vectorBucketName="memory-vectors", indexName="nope",
                                                                topK=1, queryVector={"float32": [1, 0, 0]})),
    }
    vectors.create_index(vectorBucketName="memory-vectors", indexName="euclid", dataType="float32", dimension=2,
                         distanceMetric="euclidean")
    vectors.put_vectors(vectorBucketName="memory-vectors", indexName="euclid",
                        vectors=[{"key": "p", "data": {"float32": [3, 4]}}, {"key": "q", "data": {"float32": [1, 1]}}])
    answer = vectors.query_vectors(vectorBucketName="memory-vectors", indexName="euclid", topK=2,
                                   queryVector={"float32": [0, 0]}, returnDistance=True)
    found["euclidean"] = [(v["key"], round(v["distance"], 4)) for v in answer["vectors"]]
    found["euclidean_metric"] = answer["distanceMetric"]
    print(json.dumps(found))
"""


def test_moto_alone_has_no_query_vectors():
    assert run(False, QUERY) == {"query": "EndpointConnectionError"}


def test_patched_moto_answers_query_vectors_exactly_with_the_filter_grammar():
    found = run(True, QUERY)
    assert found["metric"] == "cosine"
    assert found["first"] == [["a", 0.0, "u1"], ["b", round(1 - 0.9 / (0.82**0.5), 4), "u1"]]
    assert found["all"] == ["a", "b", "c", "d"]  # nearest first
    assert found["bare_key_only"] == ["key"]  # no distance or metadata unless asked
    assert found["eq"] == ["a", "b", "d"]
    assert found["and_implicit"] == ["a", "d"]
    assert found["ne"] == ["b"]
    assert found["range"] == ["b"]
    assert found["in"] == ["c"]
    assert found["nin"] == ["c"]
    assert found["exists"] == ["d"]
    assert found["list_eq"] == ["b"]  # $eq on a list matches any element
    assert found["or"] == ["a", "c"]
    assert found["and"] == ["b"]
    assert found["top_k_101"] == "ValidationException"
    assert found["top_k_0"] == "ParamValidationError"  # botocore refuses topK < 1 before sending
    assert found["wrong_dimension"] == "ValidationException"
    assert found["non_filterable"] == "ValidationException"
    assert found["bad_operator"] == "ValidationException"
    assert found["empty_or"] == "ValidationException"
    assert found["missing_index"] == "NotFoundException"
    assert found["euclidean"] == [["q", round(2**0.5, 4)], ["p", 5.0]]
    assert found["euclidean_metric"] == "euclidean"


LIMITS = """
    many = [{"key": f"k{i}", "data": {"float32": [1, 0, 0]}} for i in range(501)]
    found = {
        "put_501": outcome(lambda: vectors.put_vectors(**AT, vectors=many)),
        "get_101": outcome(lambda: vectors.get_vectors(**AT, keys=[f"k{i}" for i in range(101)])),
        "delete_501": outcome(lambda: vectors.delete_vectors(**AT, keys=[f"k{i}" for i in range(501)])),
        "key_1025": outcome(lambda: vectors.put_vectors(**AT, vectors=[{"key": "k" * 1025,
                                                                       "data": {"float32": [1, 0, 0]}}])),
        "filterable_over_2kb": outcome(lambda: vectors.put_vectors(**AT, vectors=[{"key": "f",
            "data": {"float32": [1, 0, 0]}, "metadata": {"digest": "x" * 2100}}])),
        "non_filterable_2kb_ok": outcome(lambda: vectors.put_vectors(**AT, vectors=[{"key": "g",
            "data": {"float32": [1, 0, 0]}, "metadata": {"note": "x" * 5000, "user": "u"}}])),
        "metadata_over_40kb": outcome(lambda: vectors.put_vectors(**AT, vectors=[{"key": "h",
            "data": {"float32": [1, 0, 0]}, "metadata": {"note": "x" * 41000}}])),
        "metadata_51_keys": outcome(lambda: vectors.put_vectors(**AT, vectors=[{"key": "i",
            "data": {"float32": [1, 0, 0]}, "metadata": {f"m{j}": j for j in range(51)}}])),
        "same_index_twice": outcome(lambda: vectors.create_index(**AT, dataType="float32", dimension=3,
                                                                 distanceMetric="cosine")),
        "index_name_upper": outcome(lambda: vectors.create_index(vectorBucketName="memory-vectors",
            indexName="Bad_Name", dataType="float32", dimension=3, distanceMetric="cosine")),
        "index_name_64": outcome(lambda: vectors.create_index(vectorBucketName="memory-vectors",
            indexName="a" * 64, dataType="float32", dimension=3, distanceMetric="cosine")),
        "non_filterable_11": outcome(lambda: vectors.create_index(vectorBucketName="memory-vectors",
            indexName="eleven", dataType="float32", dimension=3, distanceMetric="cosine",
            metadataConfiguration={"nonFilterableMetadataKeys": [f"n{j}" for j in range(11)]})),
        "wrong_dimension": outcome(lambda: vectors.put_vectors(**AT, vectors=[{"key": "w",
                                                                               "data": {"float32": [1, 0]}}])),
        "delete_missing_vector": outcome(lambda: vectors.delete_vectors(**AT, keys=["never-there"])),
        "zero_vector_cosine": outcome(lambda: vectors.put_vectors(**AT, vectors=[{"key": "z",
                                                                                  "data": {"float32": [0, 0, 0]}}])),
        "beyond_float32": outcome(lambda: vectors.put_vectors(**AT, vectors=[{"key": "b",
                                                                              "data": {"float32": [1e300, 0, 0]}}])),
        "float32_largest": outcome(lambda: vectors.put_vectors(**AT, vectors=[
            {"key": "l", "data": {"float32": [3.4028235e38, 0, 0]}}])),
        "zero_as_float32": outcome(lambda: vectors.put_vectors(**AT, vectors=[{"key": "t",
                                                                               "data": {"float32": [1e-46, 0, 0]}}])),
        "not_a_number": outcome(lambda: vectors.put_vectors(**AT, vectors=[
            {"key": "n", "data": {"float32": [float("nan"), 1, 0]}}])),
    }
    print(json.dumps(found))
"""


def test_moto_alone_accepts_what_s3_vectors_refuses():
    found = run(False, LIMITS)
    assert found == {
        "put_501": "accepted",
        "get_101": "accepted",
        "delete_501": "accepted",
        "key_1025": "accepted",
        "filterable_over_2kb": "accepted",
        "non_filterable_2kb_ok": "accepted",
        "metadata_over_40kb": "accepted",
        "metadata_51_keys": "accepted",
        "same_index_twice": "accepted",
        "index_name_upper": "accepted",
        "index_name_64": "accepted",
        "non_filterable_11": "accepted",
        "wrong_dimension": "ValidationException",  # moto does check this one
        "delete_missing_vector": "accepted",
        "zero_vector_cosine": "accepted",
        "beyond_float32": "accepted",
        "float32_largest": "accepted",
        "zero_as_float32": "accepted",
        "not_a_number": "accepted",
    }


def test_patched_moto_refuses_it_with_s3_vectors_error_codes():
    found = run(True, LIMITS)
    assert found == {
        "put_501": "ValidationException",
        "get_101": "ValidationException",
        "delete_501": "ValidationException",
        "key_1025": "ValidationException",
        "filterable_over_2kb": "ValidationException",
        "non_filterable_2kb_ok": "accepted",  # only filterable metadata has the 2 KB limit
        "metadata_over_40kb": "ValidationException",
        "metadata_51_keys": "ValidationException",
        "same_index_twice": "ConflictException",
        "index_name_upper": "ValidationException",
        "index_name_64": "ValidationException",
        "non_filterable_11": "ValidationException",
        "wrong_dimension": "ValidationException",
        "delete_missing_vector": "accepted",  # deleting a key that is not there succeeds
        "zero_vector_cosine": "ValidationException",  # no direction: no cosine
        "beyond_float32": "ValidationException",  # infinite once made a float32
        "float32_largest": "accepted",  # float32's largest value, spelled as numpy prints it
        "zero_as_float32": "ValidationException",  # 1e-46 is 0 as a float32
        "not_a_number": "ValidationException",
    }


INDEX_QUOTA = """
    if PATCHED:
        from memory_hub_local.aws.s3vectors import limits
        limits.MAX_INDEXES = 3  # the rule, at a size a test can reach (AWS: 10,000)
    made = [outcome(lambda i=i: vectors.create_index(vectorBucketName="memory-vectors", indexName=f"quota{i}",
                                                    dataType="float32", dimension=3, distanceMetric="cosine"))
            for i in range(3)]
    print(json.dumps({"made": made}))
"""


# Bodies no SDK sends (botocore checks its parameters first): put in place of the SDK's own, then signed.
BODIES = """
    from botocore.config import Config
    once = boto3.client("s3vectors", region_name="us-east-1", config=Config(retries={"total_max_attempts": 1}))
    once.put_vectors(**AT, vectors=[{"key": "a", "data": {"float32": [1, 0, 0]}}])
    def sent_as(operation, body):
        def swap(request, **_):
            request.data = body.encode()
        once.meta.events.register_first(f"before-sign.s3vectors.{operation}", swap, unique_id=operation)
        try:
            one = {"float32": [1, 0, 0]}
            call = {"QueryVectors": lambda: once.query_vectors(**AT, topK=1, queryVector=one),
                    "PutVectors": lambda: once.put_vectors(**AT, vectors=[{"key": "p", "data": one}]),
                    "CreateVectorBucket": lambda: once.create_vector_bucket(vectorBucketName="made-here")}
            return outcome(call[operation])
        finally:
            once.meta.events.unregister(f"before-sign.s3vectors.{operation}", unique_id=operation)
    def put(rest):
        return sent_as("PutVectors", '{"vectorBucketName": "memory-vectors", "indexName": "m1.e1", ' + rest + "}")
    def query(rest):
        return sent_as("QueryVectors", '{"vectorBucketName": "memory-vectors", "indexName": "m1.e1", ' + rest + "}")
    found = {
        "body_a_list": sent_as("PutVectors", "[]"),
        "values_strings": put('"vectors": [{"key": "s", "data": {"float32": ["a", "b", "c"]}}]'),
        "vectors_an_object": put('"vectors": {"a": 1}'),
        "vector_no_data": put('"vectors": [{"key": "n"}]'),
        "value_a_numeric_string": put('"vectors": [{"key": "t", "data": {"float32": ["0.5", 1, 0]}}]'),
        "value_a_boolean": put('"vectors": [{"key": "t", "data": {"float32": [true, 1, 0]}}]'),
        "body_cut_short": sent_as("PutVectors", '{"vectorBucketName": "memory-vectors", "indexName": '),
        "required_member_missing": sent_as("CreateVectorBucket", "{}"),
        "query_vector_a_list": query('"topK": 1, "queryVector": [1, 0, 0]'),
        "query_nulls": query('"topK": 1, "queryVector": {"float32": [null, null, null]}'),
        "query_nan": query('"topK": 1, "queryVector": {"float32": [NaN, 0, 0]}'),
        "top_k_a_string": query('"topK": "1", "queryVector": {"float32": [1, 0, 0]}'),
        "top_k_a_fraction": query('"topK": 1.5, "queryVector": {"float32": [1, 0, 0]}'),
        "well_formed": query('"topK": 1, "queryVector": {"float32": [1, 0, 0]}'),
    }
    print(json.dumps(found))
"""


BODY_CASES = (
    "body_a_list",
    "values_strings",
    "vectors_an_object",
    "vector_no_data",
    "value_a_numeric_string",
    "value_a_boolean",
    "body_cut_short",
    "required_member_missing",
    "query_vector_a_list",
    "query_nulls",
    "query_nan",
    "top_k_a_string",
    "top_k_a_fraction",
    "well_formed",
)


def test_moto_alone_fails_on_bodies_s3_vectors_refuses():
    found = run(False, BODIES)
    # moto's own code raises (a 500 from its server), where S3 Vectors answers the caller's error
    crashes = ("body_a_list", "values_strings", "vectors_an_object", "vector_no_data", "required_member_missing")
    assert {name: found[name] for name in crashes} == {
        "body_a_list": "AttributeError",
        "values_strings": "ValueError",
        "vectors_an_object": "AttributeError",
        "vector_no_data": "KeyError",
        "required_member_missing": "TypeError",
    }
    # and converts what S3 Vectors refuses: "0.5" and true are stored as 0.5 and 1.0
    assert (found["value_a_numeric_string"], found["value_a_boolean"]) == ("accepted", "accepted")
    assert found["well_formed"] == "EndpointConnectionError"  # and it has no QueryVectors at all


def test_patched_moto_refuses_such_bodies_as_validation_errors():
    found = run(True, BODIES)
    # "top_k_a_string": moto's parsing alone would read "1" as 1
    assert found == {name: "accepted" if name == "well_formed" else "ValidationException" for name in BODY_CASES}


def test_indexes_per_bucket_are_capped_only_when_patched():
    assert run(False, INDEX_QUOTA) == {"made": ["accepted"] * 3}
    # one index exists already: two more fit, the third is over the quota
    assert run(True, INDEX_QUOTA) == {"made": ["accepted", "accepted", "ServiceQuotaExceededException"]}


SHAPES = """
    created = vectors.create_index(vectorBucketName="memory-vectors", indexName="m2.e1", dataType="float32",
                                   dimension=3, distanceMetric="cosine")
    index = vectors.get_index(**AT)["index"]
    bucket = vectors.get_vector_bucket(vectorBucketName="memory-vectors")["vectorBucket"]
    for i in range(5):
        vectors.create_index(vectorBucketName="memory-vectors", indexName=f"m3.e{i}", dataType="float32",
                             dimension=3, distanceMetric="cosine")
    first = vectors.list_indexes(vectorBucketName="memory-vectors", prefix="m3.", maxResults=2)
    more = {"nextToken": first["nextToken"]} if first.get("nextToken") else {}
    rest = vectors.list_indexes(vectorBucketName="memory-vectors", prefix="m3.", maxResults=10, **more)
    vectors.put_vectors(**AT, vectors=[{"key": f"v{i:02d}", "data": {"float32": [1, i, 0]}} for i in range(7)])
    page = vectors.list_vectors(**AT, maxResults=3)
    seen = [v["key"] for v in page["vectors"]]
    while page.get("nextToken"):
        page = vectors.list_vectors(**AT, maxResults=3, nextToken=page["nextToken"])
        seen += [v["key"] for v in page["vectors"]]
    print(json.dumps({
        "create_answer": sorted(k for k in created if k != "ResponseMetadata"),
        "index_fields": sorted(index),
        "non_filterable": index.get("metadataConfiguration", {}).get("nonFilterableMetadataKeys"),
        "bucket_created": "creationTime" in bucket,
        "first_page": [i["indexName"] for i in first["indexes"]],
        "rest": [i["indexName"] for i in rest["indexes"]],
        "listed": seen,
    }))
"""


def test_moto_alone_leaves_out_fields_and_pages():
    found = run(False, SHAPES)
    assert found["create_answer"] == []  # CreateIndex answers nothing, AWS answers indexArn
    assert "creationTime" not in found["index_fields"] and "metadataConfiguration" not in found["index_fields"]
    assert found["bucket_created"] is False
    assert len(found["first_page"]) > 2  # neither prefix nor maxResults honoured


def test_patched_moto_answers_the_fields_and_pages_as_aws():
    found = run(True, SHAPES)
    assert found["create_answer"] == ["indexArn"]
    assert {"creationTime", "metadataConfiguration", "dimension", "distanceMetric"} <= set(found["index_fields"])
    assert found["non_filterable"] == ["note"]
    assert found["bucket_created"] is True
    assert found["first_page"] == ["m3.e0", "m3.e1"]
    assert found["rest"] == ["m3.e2", "m3.e3", "m3.e4"]
    assert found["listed"] == [f"v{i:02d}" for i in range(7)]  # every vector once, across pages


SNAPSHOT = """
    from memory_hub_local.aws import s3vectors
    vectors.put_vectors(**AT, vectors=[{"key": "a", "data": {"float32": [0.25, -1.5, 3.0]},
                                        "metadata": {"user": "u1", "note": "kept"}}])
    saved = json.loads(json.dumps(list(s3vectors.dump_records())))
    mock.stop()
    mock = mock_aws(); mock.start()  # a fresh account: what a restart of the local stack starts from
    vectors = boto3.client("s3vectors", region_name="us-east-1")
    empty = vectors.list_vector_buckets()["vectorBuckets"]
    for kind, record in saved:
        s3vectors.load_record(kind, record)
    got = vectors.get_vectors(**AT, keys=["a"], returnData=True, returnMetadata=True)["vectors"][0]
    index = vectors.get_index(**AT)["index"]
    hit = vectors.query_vectors(**AT, topK=1, queryVector={"float32": [0.25, -1.5, 3.0]}, filter={"user": "u1"})
    print(json.dumps({"empty": empty, "data": got["data"]["float32"], "metadata": got["metadata"],
                      "non_filterable": index["metadataConfiguration"]["nonFilterableMetadataKeys"],
                      "mode": index.get("indexMode"), "hit": [v["key"] for v in hit["vectors"]]}))
"""


def test_vector_buckets_indexes_and_vectors_survive_a_snapshot():
    found = run(True, SNAPSHOT)
    assert found == {
        "empty": [],
        "data": [0.25, -1.5, 3.0],
        "metadata": {"user": "u1", "note": "kept"},
        "non_filterable": ["note"],
        "mode": "ENHANCED",  # an index made again from a record is in the mode of every index here
        "hit": ["a"],
    }


TEMPLATE = """
    from memory_hub_local.aws import s3vectors
    cfn = {"Resources": {
        "Vectors": {"Type": "AWS::S3Vectors::VectorBucket", "Properties": {}},
        "Named": {"Type": "AWS::S3Vectors::VectorBucket", "Properties": {"VectorBucketName": "named-vectors"}},
        "Fixed": {"Type": "AWS::S3Vectors::Index", "Properties": {
            "VectorBucketName": {"Ref": "Named"}, "IndexName": "fixed", "DataType": "float32", "Dimension": 1024,
            "DistanceMetric": "cosine",
            "MetadataConfiguration": {"NonFilterableMetadataKeys": ["model"]}}},
        "Table": {"Type": "AWS::DynamoDB::Table", "Properties": {}},
    }}
    s3vectors.create_from_template(cfn, {"Vectors": "local-vectors", "Named": "Named", "Fixed": "Fixed"}, "us-east-1")
    names = sorted(b["vectorBucketName"] for b in vectors.list_vector_buckets()["vectorBuckets"])
    index = vectors.get_index(vectorBucketName="named-vectors", indexName="fixed")["index"]
    print(json.dumps({"buckets": names, "dimension": index["dimension"],
                      "non_filterable": index["metadataConfiguration"]["nonFilterableMetadataKeys"]}))
"""


def test_the_templates_vector_buckets_and_indexes_are_made_at_start():
    assert run(True, TEMPLATE) == {
        "buckets": ["local-vectors", "memory-vectors", "named-vectors"],
        "dimension": 1024,
        "non_filterable": ["model"],
    }


@pytest.mark.parametrize(
    ("where", "metadata", "expected"),
    [
        ({"n": {"$gt": 1, "$lt": 3}}, {"n": 2}, True),
        ({"n": {"$gt": 1, "$lt": 3}}, {"n": 3}, False),
        ({"n": {"$gte": 1}}, {"n": "2"}, False),  # a string is not a number
        ({"flag": True}, {"flag": 1}, False),  # a boolean is not a number
        ({"flag": {"$ne": True}}, {}, True),  # absent is not equal
        ({"k": {"$exists": True}}, {"k": None}, True),
        ({"$or": [{"a": 1}, {"$and": [{"b": 2}, {"c": {"$in": [3, 4]}}]}]}, {"b": 2, "c": 4}, True),
    ],
)
def test_filter_semantics(where, metadata, expected):
    from memory_hub_local.aws import s3vectors

    s3vectors.validate_filter(where, set())
    assert s3vectors.matches(where, metadata) is expected


def test_the_served_model_ids_come_from_the_template_or_the_environment():
    from memory_hub_local.aws import bedrock

    template = {"Parameters": {"EmbeddingModel": {"Type": "String", "Default": "amazon.titan-embed-text-v2:0"}}}
    assert bedrock.served_models(template, {}) == {"amazon.titan-embed-text-v2:0"}
    assert bedrock.served_models({"Parameters": {}}, {}) == {"amazon.titan-embed-text-v2:0"}
    listed = {"MEMORY_HUB_EMBEDDING_MODELS": "amazon.titan-embed-text-v2:0, my.model-v1:0"}
    assert bedrock.served_models(template, listed) == {"amazon.titan-embed-text-v2:0", "my.model-v1:0"}


CHANGES = """
    def nearest():
        answer = vectors.query_vectors(**AT, topK=1, queryVector={"float32": [0, 0, 1]}, returnDistance=True)
        return [(v["key"], round(v["distance"], 4)) for v in answer["vectors"]]
    vectors.put_vectors(**AT, vectors=[{"key": "far", "data": {"float32": [1, 0, 0]}}])
    seen = [nearest()]
    vectors.put_vectors(**AT, vectors=[{"key": "near", "data": {"float32": [0, 0.1, 1]}}])
    seen.append(nearest())
    vectors.put_vectors(**AT, vectors=[{"key": "far", "data": {"float32": [0, 0, 1]}}])  # overwritten
    seen.append(nearest())
    vectors.delete_vectors(**AT, keys=["far"])
    seen.append(nearest())
    print(json.dumps({"seen": seen}))
"""


def test_a_query_sees_every_put_overwrite_and_delete_before_it():
    assert run(True, CHANGES) == {
        "seen": [[["far", 1.0]], [["near", round(1 - 1 / 1.01**0.5, 4)]], [["far", 0.0]], [["near", 0.005]]]
    }


HELD_VALUES = """
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.s3vectors.models import s3vectors_backends
    given = [0.1, -0.2, 0.30000000000000004]
    vectors.put_vectors(**AT, vectors=[{"key": "f", "data": {"float32": given}},
                                       {"key": "i", "data": {"float32": [1, 0, 2]}}])
    index = next(i for b in s3vectors_backends[DEFAULT_ACCOUNT_ID]["aws"].vector_buckets.values()
                 for i in b.indexes.values())
    held = {k: type(next(iter(v.__dict__[n] for n in v.__dict__ if n != "key" and n != "metadata"))).__name__
            for k, v in index.vectors.items()}
    answer = vectors.get_vectors(**AT, keys=["f", "i"], returnData=True)["vectors"]
    back = {v["key"]: v["data"]["float32"] for v in answer}
    print(json.dumps({"held": held, "same": back == {"f": given, "i": [1, 0, 2]}}))
"""


def test_moto_alone_holds_every_vector_value_as_a_python_float():
    assert run(False, HELD_VALUES) == {"held": {"f": "dict", "i": "dict"}, "same": True}


def test_patched_moto_holds_float_vectors_packed_and_answers_them_exactly():
    assert run(True, HELD_VALUES) == {"held": {"f": "array", "i": "array"}, "same": True}


MATRIX = """
    import random
    import numpy as np
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.s3vectors.models import s3vectors_backends
    from memory_hub_local.aws.s3vectors import search
    rng = random.Random(3)
    rows = [{"key": f"k{i}", "data": {"float32": [rng.uniform(-2, 2) for _ in range(3)]}} for i in range(200)]
    rows.append({"key": "tiny", "data": {"float32": [1e-46, 3.4e38, -0.1]}})  # below and near float32's range
    vectors.put_vectors(**AT, vectors=rows)
    index = next(i for b in s3vectors_backends[DEFAULT_ACCOUNT_ID]["aws"].vector_buckets.values()
                 for i in b.indexes.values())
    def as_floats(held):  # the matrix made from Python floats, as before
        return np.asarray([v.data["float32"] for v in held], dtype=np.float32).reshape(len(held), 3)
    held = list(index.vectors.values())
    packed = all(search.PACKED in v.__dict__ for v in held)
    same = bool(np.array_equal(search._rows(held, 3), as_floats(held)))
    held[5].data = {"float32": [1, 2, 3]}  # values kept as given: not packed
    mixed = bool(np.array_equal(search._rows(held, 3), as_floats(held)))
    print(json.dumps({"packed": packed, "same": same, "mixed": mixed}))
"""


def test_the_query_matrix_read_from_packed_values_equals_the_one_made_from_floats():
    assert run(True, MATRIX) == {"packed": True, "same": True, "mixed": True}


KEPT_VALUES = """
    import numpy as np
    from memory_hub_local.aws.s3vectors import backend
    single = [float(x) for x in np.asarray([0.1, -2.7, 3.3], dtype=np.float32)]  # a model's values
    double = [0.1, -2.7, 3.3]  # not float32s: kept as doubles
    vectors.put_vectors(**AT, vectors=[{"key": "f", "data": {"float32": single}},
                                       {"key": "d", "data": {"float32": double}}])
    def got():
        answer = vectors.get_vectors(**AT, keys=["f", "d"], returnData=True)["vectors"]
        return {v["key"]: v["data"]["float32"] for v in answer}
    before = got()
    hit = vectors.query_vectors(**AT, topK=2, queryVector={"float32": single}, returnDistance=True)["vectors"]
    index = next(iter(next(iter(backend().vector_buckets.values())).indexes.values()))
    kept = {key: type(v.__dict__["_memory_hub_packed"]).__name__ for key, v in index.vectors.items()}
    print(json.dumps({"single": single, "double": double, "before": before, "after_query": got(),
                      "nearest": hit[0]["key"], "kept": kept}))
"""


def test_values_come_back_as_given_whether_kept_as_float32_or_as_doubles():
    found = run(True, KEPT_VALUES)
    assert found["before"] == found["after_query"] == {"f": found["single"], "d": found["double"]}
    assert found["nearest"] == "f"
    assert found["kept"] == {"f": "ndarray", "d": "array"}  # a row of the index's matrix; a copy of its own


TRAILING_ZEROS = """
    import math, random
    import numpy as np
    from memory_hub_local.aws.s3vectors import backend, search
    for metric in ("cosine", "euclidean"):
        vectors.create_index(vectorBucketName="memory-vectors", indexName=f"z-{metric}", dataType="float32",
                             dimension=8, distanceMetric=metric)
    rng = random.Random(5)
    def f32(xs):
        return [float(x) for x in np.asarray(xs, dtype=np.float32)]
    given = {
        "padded": f32([0.5, -0.25, 0.75] + [0.0] * 5),  # a small model's vector put at a larger size
        "negative_zero_last": f32([0.5, 0.25, 0.0, 0.0, 0.0, 0.0, 0.0, -0.0]),
        "all_zero": [0.0] * 8,
        "dense": f32([rng.uniform(-1, 1) for _ in range(8)]),
        "tiny_last": f32([0.1, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1e-45]),  # float32's smallest: kept
    }
    for _ in range(40):
        n = rng.randrange(0, 9)
        given[f"r{len(given)}"] = f32([rng.uniform(-1, 1) for _ in range(n)] + [0.0] * (8 - n))
    def spelled(values):  # repr tells -0.0 from 0.0
        return [repr(v) for v in values]
    found = {}
    for metric in ("cosine", "euclidean"):
        at = {"vectorBucketName": "memory-vectors", "indexName": f"z-{metric}"}
        put = {k: v for k, v in given.items() if metric == "euclidean" or any(v)}  # cosine: no zero vector
        vectors.put_vectors(**at, vectors=[{"key": k, "data": {"float32": v}} for k, v in put.items()])
        index = next(i for b in backend().vector_buckets.values() for n, i in b.indexes.items()
                     if n.endswith(f"/index/z-{metric}"))
        kept = {k: len(v.__dict__[search.PACKED]) for k, v in index.vectors.items()}
        def back():
            answer = vectors.get_vectors(**at, keys=list(put), returnData=True)["vectors"]
            return {v["key"]: spelled(v["data"]["float32"]) for v in answer}
        before = back()
        full = np.asarray(list(put.values()), dtype=np.float32)
        worst, orders = 0.0, 0
        for _ in range(20):
            probe = f32([rng.uniform(-1, 1) for _ in range(8)])
            answer = vectors.query_vectors(**at, topK=len(put), queryVector={"float32": probe}, returnDistance=True)
            got = {v["key"]: v["distance"] for v in answer["vectors"]}
            p = np.asarray(probe, dtype=np.float64)
            if metric == "cosine":
                norms = np.maximum(np.linalg.norm(full, axis=1) * np.linalg.norm(p), 1e-30)
                reference = 1.0 - (full.astype(np.float64) @ p) / norms
            else:
                reference = np.linalg.norm(full.astype(np.float64) - p, axis=1)
            for key, distance in zip(put, reference):
                worst = max(worst, abs(got[key] - distance))
            distances = [v["distance"] for v in answer["vectors"]]
            orders += len(got) == len(put) and distances == sorted(distances)  # all, nearest first
        found[metric] = {"kept": kept, "before": before == {k: spelled(v) for k, v in put.items()},
                         "after_query": back() == before, "worst": worst, "orders": orders}
    print(json.dumps(found))
"""


def test_a_vector_s_trailing_zeros_are_not_held_yet_come_back_and_count_in_every_distance():
    found = run(True, TRAILING_ZEROS)
    for metric in ("cosine", "euclidean"):
        result = found[metric]
        assert result["before"] and result["after_query"]  # every value as given, -0.0 included
        kept = result["kept"]
        assert (kept["padded"], kept["negative_zero_last"], kept.get("all_zero"), kept["dense"], kept["tiny_last"]) == (
            3,
            8,
            0 if metric == "euclidean" else None,  # a cosine index takes no zero vector
            8,
            8,
        )
        assert result["worst"] < 1e-5  # float32 arithmetic against a float64 reference on whole vectors
        assert result["orders"] == 20
