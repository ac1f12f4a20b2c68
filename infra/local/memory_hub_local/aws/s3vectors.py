"""Amazon S3 Vectors as the functions use it, over moto 5.2.5's ``s3vectors`` (buckets, indexes and
vectors, but no QueryVectors and few of the service's limits). ``install()`` patches moto's
S3 Vectors request handler; ``dump_state``/``load_state`` carry every vector bucket, index and
vector (with its metadata) through the local stack's snapshot.

Every patch is a claim about moto 5.2.5 and about AWS (tests/contract/test_moto_vectors.py shows
moto alone lacks each one):

- ``QueryVectors``: exact k-nearest neighbours over the index's vectors with its distance metric
  (cosine: 1 - cosine similarity; euclidean: the Euclidean distance), nearest first; ``topK`` 1 to
  100; ``queryVector.float32`` of the index's dimension; ``filter`` in the metadata filter grammar
  (``$eq $ne $gt $gte $lt $lte $in $nin $exists $and $or``; a bare value is ``$eq``, several keys
  are ``$and``; ``$eq`` on a list value matches any element); a filter on a non-filterable key is a
  ValidationException; ``returnMetadata`` and ``returnDistance``; the answer carries
  ``distanceMetric``. AWS answers approximately, this answers exactly.
- Limits AWS enforces and moto does not: at most 500 vectors a PutVectors and 500 keys a
  DeleteVectors, 100 keys a GetVectors; keys 1 to 1,024 characters; metadata at most 40 KB a
  vector of which the filterable part at most 2 KB (sized as compact JSON), at most 50 keys; at
  most 10 non-filterable keys an index; index names 3 to 63 characters of a-z, 0-9, '-' and '.',
  beginning and ending with a letter or digit, unique in their bucket (ConflictException); at most
  10,000 indexes a bucket (ServiceQuotaExceededException); ListVectors pages of at most 1,000
  (500 by default) and ListIndexes pages of at most 500 with ``prefix``, both with ``nextToken``.
- Shapes moto leaves out: CreateIndex answers ``indexArn``; GetIndex ``creationTime`` and
  ``metadataConfiguration``; ListIndexes ``creationTime``; GetVectorBucket ``creationTime``.

As on AWS, DeleteVectors of keys that do not exist succeeds, and GetVectors leaves them out.
"""

from __future__ import annotations

import base64
import json
import math
import re
from datetime import UTC, datetime
from typing import Any

import numpy as np

MAX_PUT, MAX_DELETE, MAX_GET, MAX_TOP_K = 500, 500, 100, 100
MAX_KEY = 1024
MAX_METADATA, MAX_FILTERABLE, MAX_METADATA_KEYS, MAX_NON_FILTERABLE_KEYS = 40 * 1024, 2 * 1024, 50, 10
MAX_INDEXES = 10_000
LIST_VECTORS_DEFAULT, LIST_VECTORS_MAX, LIST_INDEXES_MAX = 500, 1000, 500
INDEX_NAME = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
_COMPARISONS = ("$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$in", "$nin", "$exists")


def error(code: str, message: str, status: int) -> Any:
    """An S3 Vectors error as the service sends it (rest-json): for injected faults and refusals."""
    from .faithful import Refusal

    body = json.dumps({"message": message}).encode()
    return Refusal(status, body, "application/json", {"x-amzn-ErrorType": code}, code)


def backend() -> Any:
    from moto.core.models import DEFAULT_ACCOUNT_ID
    from moto.s3vectors.models import s3vectors_backends

    return s3vectors_backends[DEFAULT_ACCOUNT_ID]["aws"]


_ERRORS: dict[str, type[Exception]] = {}


def _error(code: str, message: str) -> Exception:
    """An error moto serialises as S3 Vectors does (status from the service model, by its code)."""
    from moto.core.exceptions import ServiceException

    if code not in _ERRORS:
        # moto finds the service of an error by the module that defines its class
        _ERRORS[code] = type(code, (ServiceException,), {"code": code, "__module__": "moto.s3vectors.exceptions"})
    return _ERRORS[code](message)


def _invalid(message: str) -> Exception:
    return _error("ValidationException", message)


# ---------------------------------------------------------------- metadata and filters


def _non_filterable(index: Any) -> set[str]:
    config = getattr(index, "metadata_configuration", None) or {}
    return set(config.get("nonFilterableMetadataKeys") or [])


def _size(value: Any) -> int:
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8"))


def check_metadata(index: Any, key: str, metadata: Any) -> None:
    if metadata is None:
        return
    if not isinstance(metadata, dict):
        raise _invalid(f"Invalid record for key '{key}': metadata must be a JSON object")
    if len(metadata) > MAX_METADATA_KEYS:
        raise _invalid(
            f"Invalid record for key '{key}': metadata has {len(metadata)} keys, more than the "
            f"{MAX_METADATA_KEYS} allowed"
        )
    if _size(metadata) > MAX_METADATA:
        raise _invalid(f"Invalid record for key '{key}': metadata exceeds the {MAX_METADATA} bytes allowed")
    hidden = _non_filterable(index)
    filterable = {k: v for k, v in metadata.items() if k not in hidden}
    if filterable and _size(filterable) > MAX_FILTERABLE:
        raise _invalid(f"Invalid record for key '{key}': Filterable metadata must have at most {MAX_FILTERABLE} bytes")


def _primitive(value: Any) -> bool:
    return isinstance(value, (str, bool, int, float))


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    return bool(a == b)


def _values(metadata: dict[str, Any], field: str) -> list[Any]:
    value = metadata.get(field)
    if value is None:
        return []
    return list(value) if isinstance(value, list) else [value]


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _condition(field: str, operator: str, operand: Any, metadata: dict[str, Any]) -> bool:
    values = _values(metadata, field)
    if operator == "$eq":
        return any(_same(v, operand) for v in values)
    if operator == "$ne":
        return not any(_same(v, operand) for v in values)
    if operator in ("$gt", "$gte", "$lt", "$lte"):
        numbers = [v for v in values if _number(v)]
        if operator == "$gt":
            return any(v > operand for v in numbers)
        if operator == "$gte":
            return any(v >= operand for v in numbers)
        if operator == "$lt":
            return any(v < operand for v in numbers)
        return any(v <= operand for v in numbers)
    if operator == "$in":
        return any(_same(v, o) for v in values for o in operand)
    if operator == "$nin":
        return not any(_same(v, o) for v in values for o in operand)
    return (field in metadata) == bool(operand)  # $exists


def validate_filter(node: Any, hidden: set[str]) -> None:
    """Refuse a filter the grammar does not allow (ValidationException)."""
    if not isinstance(node, dict) or not node:
        raise _invalid("Invalid query filter: a filter must be a non-empty JSON object")
    for name, value in node.items():
        if name in ("$and", "$or"):
            if not isinstance(value, list) or not value:
                raise _invalid(f"Invalid query filter: {name} takes a non-empty array of filters")
            for inner in value:
                validate_filter(inner, hidden)
        elif name.startswith("$"):
            raise _invalid(f"Invalid query filter: unsupported operator {name}")
        else:
            if name in hidden:
                raise _invalid(f"Invalid query filter: metadata key '{name}' is not filterable")
            operators = value if isinstance(value, dict) else {"$eq": value}
            if not operators:
                raise _invalid(f"Invalid query filter: no condition for '{name}'")
            for operator, operand in operators.items():
                if operator not in _COMPARISONS:
                    raise _invalid(f"Invalid query filter: unsupported operator {operator}")
                if operator in ("$eq", "$ne") and not _primitive(operand):
                    raise _invalid(f"Invalid query filter: {operator} takes a string, number or boolean")
                if operator in ("$gt", "$gte", "$lt", "$lte") and not _number(operand):
                    raise _invalid(f"Invalid query filter: {operator} takes a number")
                if operator in ("$in", "$nin") and (
                    not isinstance(operand, list) or not operand or not all(_primitive(o) for o in operand)
                ):
                    raise _invalid(f"Invalid query filter: {operator} takes a non-empty array of primitives")
                if operator == "$exists" and not isinstance(operand, bool):
                    raise _invalid("Invalid query filter: $exists takes a boolean")


def matches(node: dict[str, Any], metadata: dict[str, Any]) -> bool:
    """Whether a vector's metadata satisfies a (validated) filter."""
    for name, value in node.items():
        if name == "$and":
            if not all(matches(inner, metadata) for inner in value):
                return False
        elif name == "$or":
            if not any(matches(inner, metadata) for inner in value):
                return False
        else:
            operators = value if isinstance(value, dict) else {"$eq": value}
            if not all(_condition(name, op, operand, metadata) for op, operand in operators.items()):
                return False
    return True


# ---------------------------------------------------------------- queries


def _matrix(index: Any) -> tuple[list[Any], np.ndarray, np.ndarray]:
    """The index's vectors as one float32 matrix with their norms, kept until the index changes."""
    version = getattr(index, "_memory_hub_version", 0)
    cached = getattr(index, "_memory_hub_matrix", None)
    if cached is None or cached[0] != version:
        rows = list(index.vectors.values())
        data = np.asarray([v.data["float32"] for v in rows], dtype=np.float32).reshape(len(rows), index.dimension)
        cached = (version, rows, data, np.linalg.norm(data, axis=1))
        index._memory_hub_matrix = cached
    return cached[1], cached[2], cached[3]


def changed(index: Any) -> None:
    index._memory_hub_version = getattr(index, "_memory_hub_version", 0) + 1


def query(index: Any, vector: list[float], top_k: int, where: dict[str, Any] | None) -> list[tuple[Any, float]]:
    """The ``top_k`` nearest vectors of the index (exactly), nearest first, with their distances."""
    rows, data, norms = _matrix(index)
    if not rows:
        return []
    probe = np.asarray(vector, dtype=np.float32)
    distances: np.ndarray
    if index.distance_metric == "cosine":
        distances = 1.0 - (data @ probe) / np.maximum(norms * np.linalg.norm(probe), np.float32(1e-30))
    else:
        distances = np.linalg.norm(data - probe, axis=1)
    found: list[tuple[Any, float]] = []
    for at in np.argsort(distances, kind="stable"):  # nearest first; a filter is checked as rows come
        row = rows[int(at)]
        if where is None or matches(where, row.metadata if row.metadata else {}):
            found.append((row, float(distances[at])))
            if len(found) == top_k:
                break
    return found


# ---------------------------------------------------------------- the patches


def _once(owner: Any, flag: str) -> bool:
    if getattr(owner, flag, False):
        return False
    setattr(owner, flag, True)
    return True


def _index_of(response: Any) -> Any:
    return response.s3vectors_backend.get_index(
        response._get_param("vectorBucketName"), response._get_param("indexName"), response._get_param("indexArn")
    )


def _page(items: list[Any], name: Any, token: str | None, limit: int) -> tuple[list[Any], str | None]:
    """One page of ``items`` (sorted by ``name``) after the token; the token of the next page."""
    ordered = sorted(items, key=name)
    if token:
        try:
            after = base64.urlsafe_b64decode(token.encode()).decode("utf-8")
        except ValueError:
            raise _invalid("Invalid nextToken") from None
        ordered = [i for i in ordered if name(i) > after]
    page = ordered[:limit]
    more = len(ordered) > limit
    return page, (base64.urlsafe_b64encode(name(page[-1]).encode()).decode() if more and page else None)


def install() -> None:
    from moto.core.responses import ActionResult, EmptyResult
    from moto.s3vectors import urls
    from moto.s3vectors.models import S3VectorsBackend, VectorBucket
    from moto.s3vectors.responses import S3VectorsResponse

    if not _once(S3VectorsResponse, "_memory_hub_vectors"):
        return
    urls.url_paths["{0}/QueryVectors$"] = S3VectorsResponse.dispatch

    original_bucket_init = VectorBucket.__init__

    def bucket_init(self: Any, *args: Any, **kwargs: Any) -> None:
        original_bucket_init(self, *args, **kwargs)
        self.creation_time = datetime.now(UTC)

    VectorBucket.__init__ = bucket_init  # type: ignore[method-assign]

    original_create_index = S3VectorsResponse.create_index

    def create_index(self: Any) -> ActionResult:
        name = str(self._get_param("indexName") or "")
        if not INDEX_NAME.match(name):
            raise _invalid(
                "Invalid index name: index names must be 3 to 63 characters of lowercase letters, numbers, "
                "hyphens and dots, and begin and end with a letter or number"
            )
        config = self._get_param("metadataConfiguration") or {}
        if len(config.get("nonFilterableMetadataKeys") or []) > MAX_NON_FILTERABLE_KEYS:
            raise _invalid(
                "1 validation error detected: Value at 'metadataConfiguration.nonFilterableMetadataKeys' "
                f"failed to satisfy constraint: Member must have length less than or equal to {MAX_NON_FILTERABLE_KEYS}"
            )
        bucket = self.s3vectors_backend.get_vector_bucket(
            self._get_param("vectorBucketName"), self._get_param("vectorBucketArn")
        )
        if any(i.index_name == name for i in bucket.indexes.values()):
            raise _error("ConflictException", "An index with the specified name already exists")
        if len(bucket.indexes) >= MAX_INDEXES:
            raise _error("ServiceQuotaExceededException", f"A vector bucket can hold at most {MAX_INDEXES} indexes")
        original_create_index(self)
        index = next(i for i in bucket.indexes.values() if i.index_name == name)
        index.creation_time = datetime.now(UTC)
        index.metadata_configuration = {
            "nonFilterableMetadataKeys": list(config.get("nonFilterableMetadataKeys") or [])
        }
        return ActionResult({"indexArn": index.index_arn})

    def list_indexes(self: Any) -> ActionResult:
        if self._get_param("vectorBucketName") and self._get_param("vectorBucketArn"):
            raise _invalid("Must specify either vectorBucketName or vectorBucketArn but not both")
        limit = int(self._get_param("maxResults") or LIST_INDEXES_MAX)
        if not 1 <= limit <= LIST_INDEXES_MAX:
            raise _invalid(f"maxResults must be between 1 and {LIST_INDEXES_MAX}")
        prefix = self._get_param("prefix") or ""
        indexes = self.s3vectors_backend.list_indexes(
            self._get_param("vectorBucketName"), self._get_param("vectorBucketArn")
        )
        chosen = [i for i in indexes if i.index_name.startswith(prefix)]
        page, token = _page(chosen, lambda i: i.index_name, self._get_param("nextToken"), limit)
        result: dict[str, Any] = {
            "indexes": [
                {
                    "vectorBucketName": i.vectorBucketName,
                    "indexName": i.index_name,
                    "indexArn": i.index_arn,
                    "creationTime": getattr(i, "creation_time", None) or datetime.now(UTC),
                }
                for i in page
            ]
        }
        if token:
            result["nextToken"] = token
        return ActionResult(result)

    backend_put, backend_delete = S3VectorsBackend.put_vectors, S3VectorsBackend.delete_vectors

    def put_into(self: Any, vector_bucket_name: str, index_name: str, index_arn: str, vectors: Any) -> None:
        backend_put(self, vector_bucket_name, index_name, index_arn, vectors)
        changed(self.get_index(vector_bucket_name, index_name, index_arn))

    def delete_from(self: Any, vector_bucket_name: str, index_name: str, index_arn: str, keys: Any) -> None:
        backend_delete(self, vector_bucket_name, index_name, index_arn, keys)
        changed(self.get_index(vector_bucket_name, index_name, index_arn))

    S3VectorsBackend.put_vectors = put_into  # type: ignore[method-assign]
    S3VectorsBackend.delete_vectors = delete_from  # type: ignore[method-assign]

    original_put = S3VectorsResponse.put_vectors

    def put_vectors(self: Any) -> ActionResult:
        vectors = self._get_param("vectors") or []
        if not 1 <= len(vectors) <= MAX_PUT:
            raise _invalid(
                "1 validation error detected: Value at 'vectors' failed to satisfy constraint: Member must "
                f"have length between 1 and {MAX_PUT}"
            )
        index = _index_of(self)
        for vector in vectors:
            key = str(vector.get("key", ""))
            if not 1 <= len(key) <= MAX_KEY:
                raise _invalid(
                    "1 validation error detected: Value at 'vectors.member.key' failed to satisfy constraint: "
                    f"Member must have length between 1 and {MAX_KEY}"
                )
            data = (vector.get("data") or {}).get("float32") or []
            if not all(isinstance(x, (int, float)) and math.isfinite(x) for x in data):
                raise _invalid(f"Invalid record for key '{key}': vector values must be finite float32 numbers")
            check_metadata(index, key, vector.get("metadata"))
        result: ActionResult = original_put(self)
        return result

    original_get = S3VectorsResponse.get_vectors

    def get_vectors(self: Any) -> ActionResult:
        keys = self._get_param("keys") or []
        if not 1 <= len(keys) <= MAX_GET:
            raise _invalid(
                "1 validation error detected: Value at 'keys' failed to satisfy constraint: Member must have "
                f"length between 1 and {MAX_GET}"
            )
        result: ActionResult = original_get(self)
        return result

    original_delete = S3VectorsResponse.delete_vectors

    def delete_vectors(self: Any) -> ActionResult:
        keys = self._get_param("keys") or []
        if not 1 <= len(keys) <= MAX_DELETE:
            raise _invalid(
                "1 validation error detected: Value at 'keys' failed to satisfy constraint: Member must have "
                f"length between 1 and {MAX_DELETE}"
            )
        if any(not 1 <= len(str(k)) <= MAX_KEY for k in keys):
            raise _invalid(
                "1 validation error detected: Value at 'keys.member' failed to satisfy constraint: Member must "
                f"have length between 1 and {MAX_KEY}"
            )
        result: ActionResult = original_delete(self)
        return result

    def list_vectors(self: Any) -> ActionResult:
        self._validate_index_params(
            self._get_param("indexArn"), self._get_param("indexName"), self._get_param("vectorBucketName")
        )
        limit = int(self._get_param("maxResults") or LIST_VECTORS_DEFAULT)
        if not 1 <= limit <= LIST_VECTORS_MAX:
            raise _invalid(f"maxResults must be between 1 and {LIST_VECTORS_MAX}")
        index = _index_of(self)
        items = list(index.vectors.values())
        segments = self._get_param("segmentCount")
        if segments is not None:
            segment = int(self._get_param("segmentIndex") or 0)
            if not 1 <= int(segments) <= 16 or not 0 <= segment < int(segments):
                raise _invalid("segmentCount must be 1 to 16 and segmentIndex below it")
            ordered = sorted(items, key=lambda v: v.key)
            items = ordered[segment :: int(segments)]
        page, token = _page(items, lambda v: v.key, self._get_param("nextToken"), limit)
        with_data = self._get_bool_param("returnData", False)
        with_metadata = self._get_bool_param("returnMetadata", False)
        result: dict[str, Any] = {
            "vectors": [
                {
                    "key": v.key,
                    "data": v.data if with_data else None,
                    "metadata": (v.metadata or {}) if with_metadata else None,
                }
                for v in page
            ]
        }
        if token:
            result["nextToken"] = token
        return ActionResult(result)

    def query_vectors(self: Any) -> ActionResult:
        self._validate_index_params(
            self._get_param("indexArn"), self._get_param("indexName"), self._get_param("vectorBucketName")
        )
        top_k = self._get_param("topK")
        if not isinstance(top_k, int) or not 1 <= top_k <= MAX_TOP_K:
            raise _invalid(
                "1 validation error detected: Value at 'topK' failed to satisfy constraint: Member must be "
                f"between 1 and {MAX_TOP_K}, inclusive"
            )
        index = _index_of(self)
        probe = (self._get_param("queryVector") or {}).get("float32")
        if not probe:
            raise _invalid("queryVector must be given")
        if len(probe) != index.dimension:
            raise _invalid(
                f"Query vector contains invalid values or is invalid for this index: vector must have length "
                f"{index.dimension}, but has length {len(probe)}"
            )
        where = self._get_param("filter")
        if where is not None:
            validate_filter(where, _non_filterable(index))
        with_distance = self._get_bool_param("returnDistance", False)
        with_metadata = self._get_bool_param("returnMetadata", False)
        found = query(index, probe, top_k, where)
        return ActionResult(
            {
                "vectors": [
                    {
                        "key": v.key,
                        "distance": distance if with_distance else None,
                        "metadata": (v.metadata or {}) if with_metadata else None,
                    }
                    for v, distance in found
                ],
                "distanceMetric": index.distance_metric,
            }
        )

    S3VectorsResponse.create_index = create_index  # type: ignore[method-assign]
    S3VectorsResponse.list_indexes = list_indexes  # type: ignore[method-assign]
    S3VectorsResponse.put_vectors = put_vectors  # type: ignore[method-assign]
    S3VectorsResponse.get_vectors = get_vectors  # type: ignore[method-assign]
    S3VectorsResponse.delete_vectors = delete_vectors  # type: ignore[method-assign]
    S3VectorsResponse.list_vectors = list_vectors  # type: ignore[method-assign]
    S3VectorsResponse.query_vectors = query_vectors  # type: ignore[attr-defined]
    _ = EmptyResult


# ---------------------------------------------------------------- snapshot


def _pack(values: list[float]) -> str:
    return base64.b64encode(np.asarray(values, dtype="<f4").tobytes()).decode()


def _unpack(text: str) -> list[float]:
    return [float(x) for x in np.frombuffer(base64.b64decode(text), dtype="<f4").tolist()]


def dump_state() -> dict[str, Any]:
    """Every vector bucket, index and vector as plain data (call under the AWS lock)."""
    buckets = []
    for bucket in backend().vector_buckets.values():
        indexes = []
        for index in bucket.indexes.values():
            indexes.append(
                {
                    "name": index.index_name,
                    "dimension": index.dimension,
                    "dataType": index.data_type,
                    "distanceMetric": index.distance_metric,
                    "metadataConfiguration": getattr(index, "metadata_configuration", None) or {},
                    "created": getattr(index, "creation_time", datetime.now(UTC)).isoformat(),
                    "vectors": [
                        {"key": v.key, "data": _pack(v.data["float32"]), "metadata": v.metadata}
                        for v in index.vectors.values()
                    ],
                }
            )
        buckets.append(
            {
                "name": bucket.vector_bucket_name,
                "arn": bucket.vector_bucket_arn,
                "encryption": bucket.encryption_configuration,
                "created": getattr(bucket, "creation_time", datetime.now(UTC)).isoformat(),
                "indexes": indexes,
            }
        )
    return {"format": 1, "buckets": buckets}


def load_state(saved: dict[str, Any]) -> None:
    """Put a dumped state back (buckets the template already made are filled, not made again)."""
    from moto.s3vectors.models import Index, Vector, VectorBucket

    vectors_backend = backend()
    for entry in saved.get("buckets", []):
        bucket = vectors_backend.vector_buckets.get(entry["arn"])
        if bucket is None:
            bucket = VectorBucket(arn=entry["arn"], name=entry["name"], encryption_configuration=entry["encryption"])
            vectors_backend.vector_buckets[entry["arn"]] = bucket
        bucket.creation_time = datetime.fromisoformat(entry["created"])
        for saved_index in entry.get("indexes", []):
            index: Any = Index(
                bucket=bucket,
                name=saved_index["name"],
                dimension=saved_index["dimension"],
                data_type=saved_index["dataType"],
                distance_metric=saved_index["distanceMetric"],
            )
            index.creation_time = datetime.fromisoformat(saved_index["created"])
            index.metadata_configuration = saved_index.get("metadataConfiguration") or {}
            for v in saved_index.get("vectors", []):
                index.vectors[v["key"]] = Vector(v["key"], {"float32": _unpack(v["data"])}, v.get("metadata"))
            bucket.indexes[index.index_arn] = index


# ---------------------------------------------------------------- the template's resources


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
