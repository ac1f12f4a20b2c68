"""The wiring of the S3 Vectors patches into moto: ``install()`` routes QueryVectors, gives vector
buckets a creation time, marks an index changed when its vectors are written, holds a vector's
values packed (4 bytes a dimension when each is a float32, 8 otherwise, not a Python float object
each: 1,024 dimensions took ~33 KB, now 4 KB; the same values are answered), and puts the
functions of ``handlers`` in place of moto's, as its tables name them. Installing twice changes
nothing."""

from __future__ import annotations

from array import array
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from .search import LENGTH, PACKED, changed
from .text import ENHANCED


def _once(owner: Any, flag: str) -> bool:
    if getattr(owner, flag, False):
        return False
    setattr(owner, flag, True)
    return True


def install() -> None:
    from moto.s3vectors.responses import S3VectorsResponse

    if not _once(S3VectorsResponse, "_memory_hub_vectors"):
        return
    route_query_vectors()
    enhanced_indexes()
    readable_bodies()
    stamp_vector_buckets()
    track_index_changes()
    packed_vectors()
    answer_operations()


def packed_vectors() -> None:
    """A vector's ``data`` ({"float32": [...]}) is kept packed when every value is a float: 4 bytes a
    value when each is a float32 exactly (an embedding model's are), else 8 (a double each); so every
    value comes back exactly as it was given. Anything else is kept as given. A float32 vector's
    trailing zeros (+0.0) are not kept, only its length: a 384-dimension model's vectors put at
    1,024 dimensions (zero-padded) hold 1.5 KB, not 4."""
    from moto.s3vectors.models import Vector

    def get_data(self: Any) -> Any:
        packed = self.__dict__.get(PACKED)
        if packed is None:
            return self.__dict__.get("_memory_hub_data")
        values = packed.tolist()
        return {"float32": values + [0.0] * (self.__dict__.get(LENGTH, len(values)) - len(values))}

    def set_data(self: Any, value: Any) -> None:
        values = value.get("float32") if isinstance(value, dict) and len(value) == 1 else None
        self.__dict__.pop(LENGTH, None)
        if isinstance(values, list) and all(type(v) is float for v in values):
            single = array("f", values)
            if single.tolist() == values:
                # the values up to the last byte that is not zero (-0.0 is kept: its sign bit is set)
                kept = (len(single.tobytes().rstrip(b"\0")) + single.itemsize - 1) // single.itemsize
                if kept < len(single):
                    single = single[:kept]
                    self.__dict__[LENGTH] = len(values)
                self.__dict__[PACKED] = single
            else:
                self.__dict__[PACKED] = array("d", values)
            self.__dict__.pop("_memory_hub_data", None)
        else:
            self.__dict__["_memory_hub_data"] = value
            self.__dict__.pop(PACKED, None)

    Vector.data = property(get_data, set_data)  # type: ignore[assignment]


def route_query_vectors() -> None:
    """moto's S3 Vectors routes have no QueryVectors, UpdateMetadataConfiguration nor
    UpdateIndexMode: they go to the same dispatcher as the others."""
    from moto.s3vectors import urls
    from moto.s3vectors.responses import S3VectorsResponse

    for operation in ("QueryVectors", "UpdateMetadataConfiguration", "UpdateIndexMode"):
        urls.url_paths[f"{{0}}/{operation}$"] = S3VectorsResponse.dispatch


def enhanced_indexes() -> None:
    """Every index is in ENHANCED mode (GetIndex's ``indexMode``), however it was made — by
    CreateIndex, from the template or from a snapshot: the service model lets an index be CLASSIC
    only in a vector bucket made before 30 September 2026, and ENHANCED is the mode that serves
    full-text and hybrid queries."""
    from moto.s3vectors.models import Index

    Index.index_mode = ENHANCED  # type: ignore[attr-defined]


def readable_bodies() -> None:
    """Each request read by ``parsing.Strict``: a body that is not the operation's input (not a JSON
    object, not UTF-8, a string or boolean where a number goes, a list where an object does, a
    required member missing) is S3 Vectors' ValidationException, never converted by moto's parser
    into something else nor a 500 from it."""
    from moto.core.responses import ActionResult
    from moto.core.utils import get_service_model
    from moto.s3vectors.responses import S3VectorsResponse

    from .parsing import Strict, Unreadable
    from .service import invalid

    own_call = S3VectorsResponse.call_action

    def parse_parameters(self: Any, request: Any) -> None:
        self._memory_hub_unreadable = None
        operation = get_service_model(self.boto3_service_name).operation_model(self._get_action())
        parser = Strict(operation, map_type=self.PROTOCOL_PARSER_MAP_TYPE)
        try:
            self.params = parser.parse(
                {
                    "method": request.method,
                    "values": request.values,
                    "headers": request.headers,
                    "body": request.data,
                    "url_path": request.path,
                    "url_params": self.uri_match,
                }
            )
        except Unreadable as exc:
            self._memory_hub_unreadable = str(exc)
            self.params = {}

    def call_action(self: Any) -> Any:
        unreadable = getattr(self, "_memory_hub_unreadable", None)
        if unreadable is None:
            return own_call(self)
        status, headers, body = self.serialized(ActionResult(invalid(unreadable)))
        headers, body = self._enrich_response(headers, body)
        return status, headers, body

    S3VectorsResponse.parse_parameters = parse_parameters  # type: ignore[method-assign]
    S3VectorsResponse.call_action = call_action  # type: ignore[method-assign]


def stamp_vector_buckets() -> None:
    """A vector bucket keeps the time it was made (GetVectorBucket's ``creationTime``)."""
    from moto.s3vectors.models import VectorBucket

    original_bucket_init = VectorBucket.__init__

    def bucket_init(self: Any, *args: Any, **kwargs: Any) -> None:
        original_bucket_init(self, *args, **kwargs)
        self.creation_time = datetime.now(UTC)

    VectorBucket.__init__ = bucket_init  # type: ignore[method-assign]


def track_index_changes() -> None:
    """Every write of an index's vectors marks it changed, so a query's matrix is made again."""
    from moto.s3vectors.models import S3VectorsBackend

    backend_put, backend_delete = S3VectorsBackend.put_vectors, S3VectorsBackend.delete_vectors

    def put_into(self: Any, vector_bucket_name: str, index_name: str, index_arn: str, vectors: Any) -> None:
        backend_put(self, vector_bucket_name, index_name, index_arn, vectors)
        changed(self.get_index(vector_bucket_name, index_name, index_arn))

    def delete_from(self: Any, vector_bucket_name: str, index_name: str, index_arn: str, keys: Any) -> None:
        backend_delete(self, vector_bucket_name, index_name, index_arn, keys)
        changed(self.get_index(vector_bucket_name, index_name, index_arn))

    S3VectorsBackend.put_vectors = put_into  # type: ignore[method-assign]
    S3VectorsBackend.delete_vectors = delete_from  # type: ignore[method-assign]


def _wrapping(handler: Callable[[Any, Any], Any], own: Any) -> Callable[[Any], Any]:
    def method(self: Any) -> Any:
        return handler(self, own)

    return method


def answer_operations() -> None:
    """Each operation in the tables of ``handlers`` answered by its function there."""
    from moto.s3vectors.responses import S3VectorsResponse

    from . import handlers

    for name, handler in handlers.WRAPPED.items():
        setattr(S3VectorsResponse, name, _wrapping(handler, getattr(S3VectorsResponse, name)))
    for name, replacement in handlers.REPLACED.items():
        setattr(S3VectorsResponse, name, replacement)
