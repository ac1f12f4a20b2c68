"""Vectors in Amazon S3 Vectors: indexes per memory, content epoch, vector size and group of users.

Layout. The stack has a few vector buckets (``Settings.vector_buckets``). A memory (team + agent)
lives in one of them, chosen by a digest of the pair among the stack's buckets when the memory is
created and pinned on its asset (``Where.bucket``), so a bucket added to the stack later takes new
memories and moves none; a memory of before has no pin and lives where that rule put it over the
stack's first ``LEGACY_BUCKETS`` (the four every stack had then). Its users are spread over ``groups`` groups
by a digest of the user id (fixed for the memory's life: the stack's ``VectorGroups`` when the
memory was created, 1 for a memory of before), and each content epoch, vector size and group has
its own index there, created by the first write into it:

- ``m<32 hex of sha256(team:agent)>-<epoch in base 36>-<dimensions>`` for a memory of one group;
- ``…-<dimensions>-<group>of<groups>`` for a memory of more (``17of64``).

Names are 3–63 of ``[a-z0-9-]``, starting and ending with a letter or digit, as S3 Vectors
requires (at most 61 characters for any epoch below 2^64 and 256 groups). So:

- a search queries only its own memory's index of its user's group: no other tenant's vector can
  appear in the answer, and what a query processes — S3 Vectors bills a query by the size of the
  index it reads — grows with the vectors of the user's group, not with every user of the memory;
- a clear or memory delete drops its old epoch's indexes whole; every index of a memory is found by
  one ``ListIndexes`` with the memory's prefix (stale epochs, an old vector size);
- a change of vector size starts new indexes (an index has one dimension for life);
- a name says its group and the memory's number of groups, so an erasure finds a user's index
  from the names alone.

A vector's key is its item's id (``msg-…``/``atom-…``). Its metadata holds ids and digests only,
never content. Filterable (well under S3 Vectors' 2 KB): ``layer`` (L0/L1), ``user``/``session``/
``task`` (32-hex digests; ``-`` for none), ``type`` (L1), ``at`` (item time, epoch ms) and
``model`` (``<model id>/<dimensions>``). In a memory whose messages' words are indexed with their
vectors (``Index.words``), a message's vector also holds ``terms`` — its search terms as the word
index names them (``layout.term_digest``), each as often as the message holds it, distinct ones
first, at most ``MAX_TERMS`` — and ``length``, its number of search terms: both non-filterable,
``terms`` searchable by full text under the standard analyzer, which splits it on the spaces, so a
``QueryVectors`` given a query's digests the same way (``query``'s ``texts``) finds the vectors
holding them (BM25, fused with the vector search by RRF when it has a vector too).

Limits honoured here (S3 Vectors): ≤ 500 vectors per ``PutVectors`` and keys per
``DeleteVectors``, ``topK`` ≤ 100, ≤ 1,000 vectors per ``ListVectors`` page, ≤ 500 indexes per
``ListIndexes`` page, 10,000 indexes per vector bucket (a memory takes at most one per group it
has users in, per vector size; past the quota a write's vectors wait in the queue and its items are
found by words — counted, ``VectorIndexQuotaReached``, and alarmed).
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..observability import count_event, logger
from ..settings import get_settings
from . import aws, layout
from .concurrency import in_batches, parallel

PUT_BATCH = 500
DELETE_BATCH = 500
MAX_TOP_K = 100
LIST_PAGE = 1_000
NONE = "-"  # the digest field of an absent session or task
MAX_GROUPS = 256
PUT_BILLED_MIN = 128 * 1024  # S3 Vectors bills every PutVectors at least this many bytes
VECTOR_OVERHEAD = 300  # a vector's key and filterable metadata, about
_DIGITS = "0123456789abcdefghijklmnopqrstuvwxyz"
INDEX_QUOTA_METRIC = "VectorIndexQuotaReached"  # a bucket refused an index: it holds its quota
LEGACY_BUCKETS = 4  # the buckets of every stack before memories were pinned to theirs
TERMS = "terms"  # a message's search terms as digests (a memory whose words are in its vectors)
LENGTH = "length"  # a message's number of search terms (beside ``terms``)
MAX_TERMS = 1_024  # digests a vector's ``terms`` holds at most (~21 KB of S3 Vectors' 40 KB of metadata)
MAX_QUERY_TEXT = 1_024  # characters of one ``queryTexts`` entry


def holds_all(terms: Mapping[str, int]) -> bool:
    """Whether a vector's ``terms`` hold every distinct term of an item: one with more (a long CJK
    text: a term a character pair) keeps postings, so that each of its words finds it."""
    return len(terms) <= MAX_TERMS


@dataclass(frozen=True)
class Index:
    bucket: str
    name: str
    words: bool = field(default=False, compare=False)  # created with ``terms`` searchable


@dataclass(frozen=True)
class Vector:
    key: str
    data: list[float]
    metadata: dict[str, Any]


def _base36(number: int) -> str:
    number = int(number)
    if number < 0:
        raise ValueError("an epoch is never negative")
    out = ""
    while True:
        number, rest = divmod(number, 36)
        out = _DIGITS[rest] + out
        if number == 0:
            return out


def prefix(team_id: str, agent_id: str) -> str:
    """Every index name of one memory starts with this."""
    return "m" + hashlib.sha256(layout.pair(team_id, agent_id).encode("utf-8")).hexdigest()[:32] + "-"


def epoch_prefix(team_id: str, agent_id: str, epoch: int) -> str:
    return f"{prefix(team_id, agent_id)}{_base36(epoch)}-"


def group_of(user_id: str, groups: int) -> int:
    """The group of a user among a memory's ``groups`` (0 for a memory of one group)."""
    groups = int(groups)
    if not 1 <= groups <= MAX_GROUPS:
        raise ValueError(f"a memory has 1..{MAX_GROUPS} groups of users")
    return int(layout.digest(user_id)[:8], 16) % groups


def index_name(team_id: str, agent_id: str, epoch: int, dimensions: int, group: int = 0, groups: int = 1) -> str:
    """The name of one index: a memory of one group has no group suffix (the layout of before)."""
    name = f"{epoch_prefix(team_id, agent_id, epoch)}{int(dimensions)}"
    return name if int(groups) == 1 else f"{name}-{int(group)}of{int(groups)}"


def bucket_of(team_id: str, agent_id: str, buckets: Sequence[str] | None = None) -> str:
    """The vector bucket the digest rule gives a memory among ``buckets`` (the stack's by default;
    '' when there are none): where a new memory is pinned."""
    names = list(buckets if buckets is not None else get_settings().vector_buckets)
    if not names:
        return ""
    digest = hashlib.sha256(layout.pair(team_id, agent_id).encode("utf-8")).hexdigest()
    return names[int(digest[:8], 16) % len(names)]


def home(team_id: str, agent_id: str, pinned: str | None) -> str:
    """The vector bucket a memory lives in: the one pinned on its asset, or — a memory of before,
    with no pin — the digest rule's over the stack's first ``LEGACY_BUCKETS``."""
    if pinned:
        return pinned
    return bucket_of(team_id, agent_id, get_settings().vector_buckets[:LEGACY_BUCKETS])


def index_of(
    bucket: str,
    team_id: str,
    agent_id: str,
    epoch: int,
    dimensions: int,
    user_id: str,
    groups: int = 1,
    words: bool = False,
) -> Index:
    """The index of ``bucket`` that holds ``user_id``'s vectors of this size in a memory of ``groups``
    groups (``words``: a memory whose messages' words are indexed with their vectors)."""
    group = group_of(user_id, groups)
    return Index(bucket, index_name(team_id, agent_id, epoch, dimensions, group, groups), words)


@dataclass(frozen=True)
class Name:
    """What an index name of this layout says."""

    prefix: str  # the memory's
    epoch: int
    dimensions: int
    group: int = 0
    groups: int = 1

    def holds(self, user_id: str) -> bool:
        """Whether this index is where the user's vectors go."""
        return group_of(user_id, self.groups) == self.group


def parse_name(name: str) -> Name | None:
    """What an index name of this layout says, else None."""
    parts = name.split("-")
    if len(parts) not in (3, 4) or not parts[0].startswith("m"):
        return None
    try:
        group, groups = (int(n) for n in parts[3].split("of")) if len(parts) == 4 else (0, 1)
        if len(parts) == 4 and not (1 < groups <= MAX_GROUPS and 0 <= group < groups):
            return None
        return Name(parts[0] + "-", int(parts[1], 36), int(parts[2]), group, groups)
    except ValueError:
        return None


def metadata(
    *,
    layer: str,
    user_id: str,
    session_id: str | None,
    task_id: str | None,
    type_: str | None,
    at_ms: int,
    model: str,
    terms: Mapping[str, int] | None = None,
) -> dict[str, Any]:
    """A vector's metadata: ids as digests, never content; with ``terms`` (a message's search terms
    and their frequencies, in a memory whose words are in its vectors) those as digests too."""
    found: dict[str, Any] = {
        "layer": layer,
        "user": layout.digest(user_id),
        "session": layout.digest(session_id) if session_id is not None else NONE,
        "task": layout.digest(task_id) if task_id is not None else NONE,
        "type": type_ or NONE,
        "at": int(at_ms),
        "model": model,
    }
    if terms is not None:
        found[TERMS] = terms_text(terms)
        found[LENGTH] = sum(terms.values())
    return found


def terms_text(terms: Mapping[str, int]) -> str:
    """A message's terms as ``terms`` holds them: each term's digest as often as the message holds
    it, every distinct term once before any repeat (so each is found whatever is cut), at most
    ``MAX_TERMS``."""
    counted = sorted(((layout.term_digest(t), n) for t, n in terms.items()), key=lambda pair: -pair[1])
    rounds = max((n for _, n in counted), default=0)
    spelt = [d for round_ in range(rounds) for d, n in counted if n > round_]
    return " ".join(spelt[:MAX_TERMS])


def held_terms(metadata: Mapping[str, Any]) -> tuple[Counter[str], int] | None:
    """A stored message's terms (digest → frequency) and its length, from its vector's metadata;
    None when it holds none (a vector of a memory of postings, or of a record)."""
    text, length = metadata.get(TERMS), metadata.get(LENGTH)
    if not isinstance(text, str) or not isinstance(length, int | float):
        return None
    return Counter(text.split()), int(length)


TEXT_FIT = (MAX_QUERY_TEXT + 1) // (layout.TERM_DIGEST + 1)  # whole digests one query text holds (48)


def text_chunks(digests: Sequence[str]) -> list[list[str]]:
    """A query's distinct term digests in the parts one ``QueryVectors`` text each holds: a query
    names one text a metadata key, and the terms are one key (a search's 64 terms: two parts)."""
    distinct = list(dict.fromkeys(digests))
    return [distinct[i : i + TEXT_FIT] for i in range(0, len(distinct), TEXT_FIT)]


def query_texts(digests: Sequence[str]) -> list[dict[str, str]]:
    """Term digests (at most ``TEXT_FIT``: one of ``text_chunks``) as ``QueryVectors``' ``queryTexts``."""
    if len(set(digests)) > TEXT_FIT:
        raise ValueError(f"one query text holds {TEXT_FIT} terms: ask in parts (text_chunks)")
    return [{"metadataKey": TERMS, "text": " ".join(dict.fromkeys(digests))}]


def search_filter(
    *,
    layer: str,
    user_id: str,
    model: str | None,
    session_id: str | None = None,
    task_id: str | None = None,
    type_: str | None = None,
    start_ms: int | None = None,
    end_ms: int | None = None,
) -> dict[str, Any]:
    """The hard filter of a search: this layer, user and model — narrowed to a session, task or
    type when the request names one, and to a span of item times (``at``, inclusive)."""
    terms: list[dict[str, Any]] = [{"layer": {"$eq": layer}}, {"user": {"$eq": layout.digest(user_id)}}]
    if model is not None:  # None: a query of words, which any model's vector carries
        terms.append({"model": {"$eq": model}})
    if session_id is not None:
        terms.append({"session": {"$eq": layout.digest(session_id)}})
    if task_id is not None:
        terms.append({"task": {"$eq": layout.digest(task_id)}})
    if type_ is not None:
        terms.append({"type": {"$eq": type_}})
    if start_ms is not None:
        terms.append({"at": {"$gte": int(start_ms)}})
    if end_ms is not None:
        terms.append({"at": {"$lte": int(end_ms)}})
    return {"$and": terms}


def fills_a_put(count: int, dimensions: int) -> bool:
    """Whether ``count`` vectors of ``dimensions`` reach what a ``PutVectors`` is billed at least
    (30 at 1,024 dimensions): putting them together wastes nothing of the minimum."""
    return count * (4 * dimensions + VECTOR_OVERHEAD) >= PUT_BILLED_MIN


def passes(metadata: dict[str, Any], where: dict[str, Any]) -> bool:
    """Whether metadata passes a filter of ``search_filter``'s form (``$and`` of ``$eq``, ``$gte``
    and ``$lte``), as S3 Vectors would judge it: for a vector not stored there yet (``waiting_vectors``)."""
    return all(_holds(metadata.get(name), test) for term in where["$and"] for name, test in term.items())


def _holds(value: Any, test: Mapping[str, Any]) -> bool:
    [(operator, wanted)] = test.items()
    if operator == "$eq":
        return bool(value == wanted)
    if not isinstance(value, int | float):
        return False
    return bool(value >= wanted if operator == "$gte" else value <= wanted)


def _client() -> Any:
    return aws.client("s3vectors")


def _missing(exc: BaseException) -> bool:
    return aws.error_code(exc) == "NotFoundException"


def create_index(index: Index, dimensions: int) -> None:
    """Create the index (cosine, float32; with ``words``, ``terms`` searchable and the index
    ENHANCED, the mode that serves text queries); one that exists already — a racing creator — is fine.
    A bucket that holds its quota of indexes refuses it: counted (``VectorIndexQuotaReached``,
    ``VectorIndexQuotaAlarm``) and raised, so the vectors wait in their queue (found by words, and
    by meaning while they wait in DynamoDB) until the quota is raised."""
    words: dict[str, Any] = {}
    if index.words:  # a message's terms: searchable by full text (the standard analyzer), not filterable
        words["metadataConfiguration"] = {
            "nonFilterableMetadataKeys": [TERMS, LENGTH],
            "textSearchConfigurations": [{"metadataKey": TERMS}],
        }
    try:
        _client().create_index(
            vectorBucketName=index.bucket,
            indexName=index.name,
            dataType="float32",
            dimension=int(dimensions),
            distanceMetric="cosine",
            **words,
        )
    except Exception as exc:
        code = aws.error_code(exc)
        if code == "ServiceQuotaExceededException":
            logger.warning("vector bucket full: index not created", extra={"bucket": index.bucket})
            count_event(INDEX_QUOTA_METRIC, 1)
        if code != "ConflictException":
            raise
    if index.words:  # a bucket made before 30 September 2026 makes its indexes CLASSIC: no text query
        _client().update_index_mode(vectorBucketName=index.bucket, indexName=index.name, indexMode="ENHANCED")


def put(index: Index, dimensions: int, vectors: Sequence[Vector]) -> None:
    """Write (or overwrite) vectors, creating the index on its first write."""

    def one(chunk: list[Vector]) -> None:
        body = [{"key": v.key, "data": {"float32": v.data}, "metadata": v.metadata} for v in chunk]
        try:
            _client().put_vectors(vectorBucketName=index.bucket, indexName=index.name, vectors=body)
        except Exception as exc:
            if not _missing(exc):
                raise
            create_index(index, dimensions)
            _client().put_vectors(vectorBucketName=index.bucket, indexName=index.name, vectors=body)

    if index.bucket and vectors:
        parallel(*[lambda chunk=chunk: one(chunk) for chunk in in_batches(list(vectors), PUT_BATCH)])


def delete(index: Index, keys: Sequence[str]) -> int:
    """Delete vectors by key (absent keys and a missing index are fine); the number of calls made."""
    if not index.bucket or not keys:
        return 0

    def one(chunk: list[str]) -> None:
        try:
            _client().delete_vectors(vectorBucketName=index.bucket, indexName=index.name, keys=chunk)
        except Exception as exc:
            if not _missing(exc):
                raise

    chunks = in_batches(list(dict.fromkeys(keys)), DELETE_BATCH)
    parallel(*[lambda chunk=chunk: one(chunk) for chunk in chunks])
    return len(chunks)


@dataclass(frozen=True)
class Match:
    """One vector a query found: its key, its cosine distance, and its metadata when asked for."""

    key: str
    distance: float | None  # None: found by its words only (a query with ``texts``)
    metadata: dict[str, Any]


def query(
    index: Index,
    vector: list[float] | None,
    top_k: int,
    where: dict[str, Any],
    *,
    with_metadata: bool = False,
    texts: Sequence[str] = (),
) -> list[Match]:
    """The nearest vectors that pass ``where``, nearest first (with their metadata when
    ``with_metadata``: the same call, a larger answer). With ``texts`` (term digests: an index of
    ``words``) the vectors holding them too, in the same call — S3 Vectors' ``topK`` best of the
    two rankings fused, those only the words found without a distance (``Match.distance`` None),
    after the others; with no ``vector``, those holding the words alone. A memory without an index
    yet has no vectors: []."""
    if not index.bucket:
        return []
    asked: dict[str, Any] = {} if vector is None else {"queryVector": {"float32": vector}}
    if texts:
        asked["queryTexts"] = query_texts(texts)
    try:
        answer = _client().query_vectors(
            vectorBucketName=index.bucket,
            indexName=index.name,
            topK=max(1, min(MAX_TOP_K, int(top_k))),
            filter=where,
            returnDistance=True,
            returnMetadata=with_metadata,
            **asked,
        )
    except Exception as exc:
        if _missing(exc):
            return []
        raise
    found = [
        Match(str(v["key"]), None if v.get("distance") is None else float(v["distance"]), dict(v.get("metadata") or {}))
        for v in answer.get("vectors", [])
    ]
    return nearest_first(found)


def nearest_first(matches: Iterable[Match]) -> list[Match]:
    """Nearest first; those found by their words only (no distance) after them."""
    return sorted(matches, key=lambda match: (match.distance is None, match.distance or 0.0))


def drop(index: Index) -> bool:
    """Delete a whole index (its vectors with it); False when there was none."""
    if not index.bucket:
        return False
    try:
        _client().delete_index(vectorBucketName=index.bucket, indexName=index.name)
        return True
    except Exception as exc:
        if _missing(exc):
            return False
        raise


def indexes(bucket: str, name_prefix: str) -> list[str]:
    """Names of the bucket's indexes that start with ``name_prefix``."""
    if not bucket:
        return []
    names: list[str] = []
    token: str | None = None
    while True:
        extra = {"nextToken": token} if token else {}
        answer = _client().list_indexes(vectorBucketName=bucket, prefix=name_prefix, maxResults=500, **extra)
        names += [str(i["indexName"]) for i in answer.get("indexes", [])]
        token = answer.get("nextToken")
        if not token:
            return names


def keys(index: Index) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every vector of the index: (key, metadata), page by page (nothing when there is no index)."""
    if not index.bucket:
        return
    token: str | None = None
    while True:
        extra = {"nextToken": token} if token else {}
        try:
            answer = _client().list_vectors(
                vectorBucketName=index.bucket, indexName=index.name, maxResults=LIST_PAGE, returnMetadata=True, **extra
            )
        except Exception as exc:
            if _missing(exc):
                return
            raise
        for v in answer.get("vectors", []):
            yield str(v["key"]), dict(v.get("metadata") or {})
        token = answer.get("nextToken")
        if not token:
            return


def drop_epoch(bucket: str, team_id: str, agent_id: str, epoch: int) -> int:
    """Drop every index of one content epoch of a memory in its ``bucket`` (any vector size or group):
    the number dropped. A stack without vector buckets — or a bucket that does not exist — has
    nothing to drop."""
    if not bucket:
        return 0
    try:
        names = indexes(bucket, epoch_prefix(team_id, agent_id, epoch))
    except Exception as exc:
        if _missing(exc):
            return 0
        raise
    return sum(1 for name in names if drop(Index(bucket, name)))
