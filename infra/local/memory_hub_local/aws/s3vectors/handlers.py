"""What each S3 Vectors operation the patches change answers, as a method of moto's
``S3VectorsResponse`` (``response``: the request being answered). A handler that adds checks or
fields to moto's answer is given moto's own handler (``own``) to call; the others replace it.

Imported by ``patches.install`` only: importing it imports moto."""

from __future__ import annotations

import base64
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from moto.core.responses import ActionResult

from . import limits, text
from .filters import validate_filter
from .search import query, rows
from .service import invalid, service_error

Own = Callable[[Any], Any]


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
            raise invalid("Invalid nextToken") from None
        ordered = [i for i in ordered if name(i) > after]
    page = ordered[:limit]
    more = len(ordered) > limit
    return page, (base64.urlsafe_b64encode(name(page[-1]).encode()).decode() if more and page else None)


def _paged(result: dict[str, Any], token: str | None) -> ActionResult:
    if token:
        result["nextToken"] = token
    return ActionResult(result)


# ---------------------------------------------------------------- indexes


def create_index(response: Any, own: Own) -> ActionResult:
    """moto's CreateIndex behind the name rules, uniqueness and the quota; answers ``indexArn`` and
    keeps the creation time and the metadata configuration."""
    name = str(response._get_param("indexName") or "")
    config = response._get_param("metadataConfiguration") or {}
    limits.check_index(name, config)
    bucket = response.s3vectors_backend.get_vector_bucket(
        response._get_param("vectorBucketName"), response._get_param("vectorBucketArn")
    )
    if any(i.index_name == name for i in bucket.indexes.values()):
        raise service_error("ConflictException", "An index with the specified name already exists")
    if len(bucket.indexes) >= limits.MAX_INDEXES:
        raise service_error(
            "ServiceQuotaExceededException", f"A vector bucket can hold at most {limits.MAX_INDEXES} indexes"
        )
    own(response)
    index = next(i for i in bucket.indexes.values() if i.index_name == name)
    index.creation_time = datetime.now(UTC)
    index.metadata_configuration = {"nonFilterableMetadataKeys": list(config.get("nonFilterableMetadataKeys") or [])}
    texts = config.get("textSearchConfigurations") or []
    if texts:
        index.metadata_configuration["textSearchConfigurations"] = _serving(texts)
    return ActionResult({"indexArn": index.index_arn})


def _serving(configurations: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Searchable keys as GetIndex shows them: ``ACTIVE`` at once (their terms are read as vectors
    are written, and the vectors already written on the first query: no backfill to wait for)."""
    return [{**c, "status": "ACTIVE"} for c in configurations]


def update_metadata_configuration(response: Any) -> ActionResult:
    """UpdateMetadataConfiguration, which moto lacks: full-text searchable keys added (each new, at
    most 10 in all; ``_serving``) or deleted (each present) — not both."""
    response._validate_index_params(
        response._get_param("indexArn"), response._get_param("indexName"), response._get_param("vectorBucketName")
    )
    index = _index_of(response)
    add, delete = response._get_param("add"), response._get_param("delete")
    if (add is None) == (delete is None):
        raise invalid("Specify either add or delete, but not both")
    config = index.metadata_configuration = getattr(index, "metadata_configuration", None) or {}
    present = list(config.get("textSearchConfigurations") or [])
    if add is not None:
        added = add.get("textSearchConfigurations") or []
        limits.check_text_configurations(present + added)
        present += _serving(added)
    else:
        gone = {c["metadataKey"] for c in delete.get("textSearchConfigurations") or []}
        absent = gone - {c["metadataKey"] for c in present}
        if absent:
            raise invalid(f"No text search configuration for metadata key(s): {', '.join(sorted(absent))}")
        present = [c for c in present if c["metadataKey"] not in gone]
    config["textSearchConfigurations"] = present
    text.forget(index)
    return ActionResult({"indexArn": index.index_arn})


def list_indexes(response: Any) -> ActionResult:
    """ListIndexes with ``prefix``, pages of at most 500 and ``creationTime``."""
    if response._get_param("vectorBucketName") and response._get_param("vectorBucketArn"):
        raise invalid("Must specify either vectorBucketName or vectorBucketArn but not both")
    limit = int(response._get_param("maxResults") or limits.LIST_INDEXES_MAX)
    limits.check_max_results(limit, limits.LIST_INDEXES_MAX)
    prefix = response._get_param("prefix") or ""
    indexes = response.s3vectors_backend.list_indexes(
        response._get_param("vectorBucketName"), response._get_param("vectorBucketArn")
    )
    chosen = [i for i in indexes if i.index_name.startswith(prefix)]
    page, token = _page(chosen, lambda i: i.index_name, response._get_param("nextToken"), limit)
    listed = [
        {
            "vectorBucketName": i.vectorBucketName,
            "indexName": i.index_name,
            "indexArn": i.index_arn,
            "creationTime": getattr(i, "creation_time", None) or datetime.now(UTC),
        }
        for i in page
    ]
    return _paged({"indexes": listed}, token)


# ---------------------------------------------------------------- vectors


def put_vectors(response: Any, own: Own) -> ActionResult:
    vectors = response._get_param("vectors") or []
    limits.check_vector_count(vectors)
    limits.check_vectors(_index_of(response), vectors)
    result: ActionResult = own(response)
    return result


def get_vectors(response: Any, own: Own) -> ActionResult:
    limits.check_get(response._get_param("keys") or [])
    result: ActionResult = own(response)
    return result


def delete_vectors(response: Any, own: Own) -> ActionResult:
    limits.check_delete(response._get_param("keys") or [])
    result: ActionResult = own(response)
    return result


def list_vectors(response: Any) -> ActionResult:
    """ListVectors in pages of at most 1,000 (500 by default), by segment when asked."""
    response._validate_index_params(
        response._get_param("indexArn"), response._get_param("indexName"), response._get_param("vectorBucketName")
    )
    limit = int(response._get_param("maxResults") or limits.LIST_VECTORS_DEFAULT)
    limits.check_max_results(limit, limits.LIST_VECTORS_MAX)
    index = _index_of(response)
    items = list(index.vectors.values())
    segments = response._get_param("segmentCount")
    if segments is not None:
        segment = int(response._get_param("segmentIndex") or 0)
        limits.check_segment(int(segments), segment)
        ordered = sorted(items, key=lambda v: v.key)
        items = ordered[segment :: int(segments)]
    page, token = _page(items, lambda v: v.key, response._get_param("nextToken"), limit)
    with_data = response._get_bool_param("returnData", False)
    with_metadata = response._get_bool_param("returnMetadata", False)
    listed = [
        {
            "key": v.key,
            "data": v.data if with_data else None,
            "metadata": (v.metadata or {}) if with_metadata else None,
        }
        for v in page
    ]
    return _paged({"vectors": listed}, token)


def query_vectors(response: Any) -> ActionResult:
    """QueryVectors, which moto lacks: the exact nearest neighbours (``search.query``), a full-text
    search (``queryTexts`` alone) or a hybrid one (both; ``text.search``)."""
    response._validate_index_params(
        response._get_param("indexArn"), response._get_param("indexName"), response._get_param("vectorBucketName")
    )
    top_k = limits.check_top_k(response._get_param("topK"))
    index = _index_of(response)
    texts = response._get_param("queryTexts")
    given = response._get_param("queryVector")
    if texts is None and given is None:
        raise invalid("A request must include queryVector, queryTexts, or both")
    if response._get_param("queryMode") not in (None, text.ENHANCED):
        raise invalid("queryMode CLASSIC cannot be specified for an index in ENHANCED mode")
    probe = None if given is None else limits.check_query_vector(index, given.get("float32"))
    if texts is not None:
        limits.check_query_texts(texts, set(text.searchable(index)))
    where = response._get_param("filter")
    if where is not None:
        validate_filter(where, limits.non_filterable(index))
    with_distance = response._get_bool_param("returnDistance", False)
    with_metadata = response._get_bool_param("returnMetadata", False)
    if texts is None:
        found = [text.Found(v, distance) for v, distance in query(index, probe or [], top_k, where)]
    else:
        nearest = None if probe is None else query(index, probe, top_k, where)
        found = text.search(index, rows(index), texts, nearest, top_k, where)
    with_scores = response._get_bool_param("returnScores", False) and texts is not None
    vectors = [
        {
            "key": f.row.key,
            "distance": f.distance if with_distance else None,
            "metadata": (f.row.metadata or {}) if with_metadata else None,
            "scores": _scores(f) if with_scores else None,
        }
        for f in found
    ]
    return ActionResult({"vectors": vectors, "distanceMetric": index.distance_metric})


def _scores(found: text.Found) -> dict[str, Any]:
    """``returnScores``: the BM25 score of each key the vector matched; in a hybrid answer the
    fused (RRF) score and, when the vector search found it, its distance."""
    scores: dict[str, Any] = {"bm25Scores": [{"metadataKey": k, "score": s} for k, s in found.bm25.items()]}
    if found.fused is not None:
        scores["fused"] = found.fused
        if found.distance is not None:
            scores["vectorDistance"] = found.distance
    return scores


def update_index_mode(response: Any) -> ActionResult:
    """UpdateIndexMode, which moto lacks: ENHANCED is every index's mode already (``patches``);
    CLASSIC is refused, as AWS refuses it for an index of a vector bucket made on or after 30
    September 2026 — every bucket here is."""
    response._validate_index_params(
        response._get_param("indexArn"), response._get_param("indexName"), response._get_param("vectorBucketName")
    )
    _index_of(response)
    mode = response._get_param("indexMode")
    if mode != text.ENHANCED:
        raise invalid(
            f"indexMode {mode} can only be specified for an index in a vector bucket created before September 30, 2026"
        )
    return ActionResult({})


# The operations by moto's name for them: those whose handler wraps moto's own, and those whose
# handler replaces it (QueryVectors: adds it).
WRAPPED: dict[str, Callable[[Any, Own], ActionResult]] = {
    "create_index": create_index,
    "put_vectors": put_vectors,
    "get_vectors": get_vectors,
    "delete_vectors": delete_vectors,
}
REPLACED: dict[str, Callable[[Any], ActionResult]] = {
    "list_indexes": list_indexes,
    "list_vectors": list_vectors,
    "query_vectors": query_vectors,
    "update_metadata_configuration": update_metadata_configuration,
    "update_index_mode": update_index_mode,
}
