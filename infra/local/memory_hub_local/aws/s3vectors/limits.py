"""The limits AWS enforces on S3 Vectors requests and moto does not: each check raises the
ValidationException AWS answers (the handlers call them before moto's own code runs).

The limits are read when a request is checked, so a test can lower one here (``limits.MAX_INDEXES``)
to a size it can reach."""

from __future__ import annotations

import json
import math
import re
from array import array
from typing import Any

from .service import invalid

MAX_PUT, MAX_DELETE, MAX_GET, MAX_TOP_K = 500, 500, 100, 100
MAX_KEY = 1024
MAX_METADATA, MAX_FILTERABLE, MAX_METADATA_KEYS, MAX_NON_FILTERABLE_KEYS = 40 * 1024, 2 * 1024, 50, 10
MAX_INDEXES = 10_000
LIST_VECTORS_DEFAULT, LIST_VECTORS_MAX, LIST_INDEXES_MAX = 500, 1000, 500
MAX_SEGMENTS = 16
MAX_TEXT_KEYS, MAX_QUERY_TEXTS, MAX_QUERY_TEXT = 10, 10, 1024
LANGUAGES = ("en", "fr", "es", "pt", "it", "de", "nl", "zh", "ja", "ko")
INDEX_NAME = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")


def non_filterable(index: Any) -> set[str]:
    """The index's metadata keys a filter may not name (and that do not count to the 2 KB)."""
    config = getattr(index, "metadata_configuration", None) or {}
    return set(config.get("nonFilterableMetadataKeys") or [])


def _size(value: Any) -> int:
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8"))


def check_metadata(index: Any, key: str, metadata: Any) -> None:
    if metadata is None:
        return
    if not isinstance(metadata, dict):
        raise invalid(f"Invalid record for key '{key}': metadata must be a JSON object")
    if len(metadata) > MAX_METADATA_KEYS:
        raise invalid(
            f"Invalid record for key '{key}': metadata has {len(metadata)} keys, more than the "
            f"{MAX_METADATA_KEYS} allowed"
        )
    if _size(metadata) > MAX_METADATA:
        raise invalid(f"Invalid record for key '{key}': metadata exceeds the {MAX_METADATA} bytes allowed")
    hidden = non_filterable(index)
    filterable = {k: v for k, v in metadata.items() if k not in hidden}
    if filterable and _size(filterable) > MAX_FILTERABLE:
        raise invalid(f"Invalid record for key '{key}': Filterable metadata must have at most {MAX_FILTERABLE} bytes")


def check_index(name: str, config: dict[str, Any]) -> None:
    """CreateIndex: the index name's form and the number of non-filterable keys."""
    if not INDEX_NAME.match(name):
        raise invalid(
            "Invalid index name: index names must be 3 to 63 characters of lowercase letters, numbers, "
            "hyphens and dots, and begin and end with a letter or number"
        )
    check_text_configurations(config.get("textSearchConfigurations") or [])
    if len(config.get("nonFilterableMetadataKeys") or []) > MAX_NON_FILTERABLE_KEYS:
        raise invalid(
            "1 validation error detected: Value at 'metadataConfiguration.nonFilterableMetadataKeys' "
            f"failed to satisfy constraint: Member must have length less than or equal to {MAX_NON_FILTERABLE_KEYS}"
        )


def _distinct_keys(keys: list[str], length: tuple[int, int], where: str, repeated: str) -> None:
    """A list of entries each naming a metadata key: how many (``length``: least, most), each key once."""
    least, most = length
    if not least <= len(keys) <= most:
        bound = f"between {least} and {most}" if least else f"less than or equal to {most}"
        raise invalid(
            f"1 validation error detected: Value at '{where}' failed to satisfy constraint: Member must have "
            f"length {bound}"
        )
    if len(set(keys)) != len(keys):
        raise invalid(repeated)


def check_text_configurations(configurations: list[Any]) -> None:
    """CreateIndex: at most 10 full-text searchable keys, each named once, each language one of
    the analyzers' (or none: the standard analyzer)."""
    _distinct_keys(
        [c["metadataKey"] for c in configurations],
        (0, MAX_TEXT_KEYS),
        "metadataConfiguration.textSearchConfigurations",
        "Each text search configuration must name a distinct metadata key",
    )
    for config in configurations:
        language = config.get("language")
        if language is not None and language not in LANGUAGES:
            raise invalid(
                f"Invalid language '{language}' for metadata key '{config['metadataKey']}': "
                f"must be one of {', '.join(LANGUAGES)}"
            )


def check_query_texts(texts: list[Any], searchable: set[str]) -> None:
    """QueryVectors: 1 to 10 full-text queries, each of 1 to 1,024 characters on a distinct key the
    index makes full-text searchable."""
    _distinct_keys(
        [t["metadataKey"] for t in texts],
        (1, MAX_QUERY_TEXTS),
        "queryTexts",
        "Each queryTexts entry must target a distinct metadata key",
    )
    for entry in texts:
        if not 1 <= len(entry["text"]) <= MAX_QUERY_TEXT:
            raise invalid(
                "1 validation error detected: Value at 'queryTexts.member.text' failed to satisfy constraint: "
                f"Member must have length between 1 and {MAX_QUERY_TEXT}"
            )
        if entry["metadataKey"] not in searchable:
            raise invalid(f"Metadata key '{entry['metadataKey']}' is not configured for full-text search")


def check_max_results(limit: int, most: int) -> None:
    if not 1 <= limit <= most:
        raise invalid(f"maxResults must be between 1 and {most}")


def check_segment(segments: int, segment: int) -> None:
    """ListVectors: ``segmentCount`` 1 to 16 and ``segmentIndex`` below it."""
    if not 1 <= segments <= MAX_SEGMENTS or not 0 <= segment < segments:
        raise invalid("segmentCount must be 1 to 16 and segmentIndex below it")


def check_vector_count(vectors: list[Any]) -> None:
    """PutVectors: 1 to 500 vectors (checked before the index is looked up)."""
    if not 1 <= len(vectors) <= MAX_PUT:
        raise invalid(
            "1 validation error detected: Value at 'vectors' failed to satisfy constraint: Member must "
            f"have length between 1 and {MAX_PUT}"
        )


def check_vectors(index: Any, vectors: list[Any]) -> None:
    """PutVectors: each key 1 to 1,024 characters, float32 data with every value finite as a
    float32 and not all zeros for a cosine index, and the metadata's limits (the shapes — objects,
    a string key, numbers — ``parsing.Strict`` has checked)."""
    for vector in vectors:
        key = vector["key"]
        if not 1 <= len(key) <= MAX_KEY:
            raise invalid(
                "1 validation error detected: Value at 'vectors.member.key' failed to satisfy constraint: "
                f"Member must have length between 1 and {MAX_KEY}"
            )
        values = vector["data"].get("float32")
        if values is None:
            raise invalid(f"Invalid record for key '{key}': data must hold the vector's float32 values")
        if not finite_float32(values):
            raise invalid(f"Invalid record for key '{key}': vector values must be finite float32 numbers")
        if index.distance_metric == "cosine" and not any(array("f", values)):  # zero once made float32
            raise invalid(f"Invalid record for key '{key}': a zero vector is not allowed with the cosine metric")
        check_metadata(index, key, vector.get("metadata"))


FLOAT32_OVERFLOW = 2.0**128 - 2.0**103  # float32's largest value plus half a unit: from here a double rounds to inf


def finite_float32(values: list[float]) -> bool:
    """Every value stays finite once made a float32, as S3 Vectors keeps it (NaN and infinities do
    not; nor a double that rounds past float32's largest value)."""
    return all(math.isfinite(x) and abs(x) < FLOAT32_OVERFLOW for x in values)


def check_get(keys: list[Any]) -> None:
    """GetVectors: how many keys."""
    if not 1 <= len(keys) <= MAX_GET:
        raise invalid(
            "1 validation error detected: Value at 'keys' failed to satisfy constraint: Member must have "
            f"length between 1 and {MAX_GET}"
        )


def check_delete(keys: list[Any]) -> None:
    """DeleteVectors: how many keys, and each key's length."""
    if not 1 <= len(keys) <= MAX_DELETE:
        raise invalid(
            "1 validation error detected: Value at 'keys' failed to satisfy constraint: Member must have "
            f"length between 1 and {MAX_DELETE}"
        )
    if any(not 1 <= len(str(k)) <= MAX_KEY for k in keys):
        raise invalid(
            "1 validation error detected: Value at 'keys.member' failed to satisfy constraint: Member must "
            f"have length between 1 and {MAX_KEY}"
        )


def check_top_k(top_k: Any) -> int:
    """QueryVectors: ``topK`` an integer from 1 to 100, as sent (checked before the index is looked up)."""
    if not isinstance(top_k, int) or isinstance(top_k, bool) or not 1 <= top_k <= MAX_TOP_K:
        raise invalid(
            "1 validation error detected: Value at 'topK' failed to satisfy constraint: Member must be "
            f"between 1 and {MAX_TOP_K}, inclusive"
        )
    return top_k


def check_query_vector(index: Any, probe: Any) -> list[float]:
    """QueryVectors: a query vector of the index's dimension (given back, checked)."""
    if not probe:
        raise invalid("queryVector must be given")
    if not finite_float32(probe):
        raise invalid("Query vector contains invalid values: each must be a finite float32 number")
    if len(probe) != index.dimension:
        raise invalid(
            f"Query vector contains invalid values or is invalid for this index: vector must have length "
            f"{index.dimension}, but has length {len(probe)}"
        )
    checked: list[float] = probe
    return checked
