"""Amazon S3 Vectors as the functions use it, over moto 5.2.5's ``s3vectors`` (buckets, indexes and
vectors, but no QueryVectors and few of the service's limits). ``install()`` patches moto's
S3 Vectors request handler; ``dump_records``/``load_record`` carry every vector bucket, index and
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
- Full-text and hybrid search: an index's ``textSearchConfigurations`` (at most 10 keys, each once,
  a language among en fr es pt it de nl zh ja ko or none) kept and answered by GetIndex with status
  ``ACTIVE`` and ``indexMode`` ``ENHANCED``; QueryVectors' ``queryTexts`` (1 to 10, each of 1 to
  1,024 characters on a distinct searchable key) ranks by BM25, alone or fused with ``queryVector``
  by RRF, and ``returnScores`` answers ``bm25Scores``, ``fused`` and ``vectorDistance``; a request
  with neither ``queryVector`` nor ``queryTexts`` is a ValidationException; UpdateMetadataConfiguration
  adds searchable keys (served at once, the vectors already written included) or deletes them, not
  both. What AWS does not publish (its analyzers, how deep each fused ranking is) is modelled in
  ``text``.
- Limits AWS enforces and moto does not: at most 500 vectors a PutVectors and 500 keys a
  DeleteVectors, 100 keys a GetVectors; keys 1 to 1,024 characters; metadata at most 40 KB a
  vector of which the filterable part at most 2 KB (sized as compact JSON), at most 50 keys; at
  most 10 non-filterable keys an index; index names 3 to 63 characters of a-z, 0-9, '-' and '.',
  beginning and ending with a letter or digit, unique in their bucket (ConflictException); at most
  10,000 indexes a bucket (ServiceQuotaExceededException); ListVectors pages of at most 1,000
  (500 by default) and ListIndexes pages of at most 500 with ``prefix``, both with ``nextToken``.
- Requests read as the service reads them: a body that is not a JSON object of the operation's
  input (not UTF-8, not JSON, ``NaN``, a string or boolean where a number goes, a list where an
  object does, a required member missing) is a ValidationException — moto's parser would convert
  it, or fail with a 500; vector values finite as float32 (in puts and queries), and no zero
  vector in a cosine index.
- Shapes moto leaves out: CreateIndex answers ``indexArn``; GetIndex ``creationTime`` and
  ``metadataConfiguration``; ListIndexes ``creationTime``; GetVectorBucket ``creationTime``.

As on AWS, DeleteVectors of keys that do not exist succeeds, and GetVectors leaves them out.

The modules, one job each:

- ``service``: moto's S3 Vectors backend, and errors sent as the service sends them;
- ``limits``: the limits above, each a check that raises AWS's ValidationException;
- ``parsing``: moto's request parser held to the operation's shapes (imports moto);
- ``filters``: the metadata filter grammar (``validate_filter``) and its meaning (``matches``);
- ``search``: the exact nearest-neighbour search of QueryVectors (``query``);
- ``text``: its full-text and hybrid search (``search``) and the analyzers (``analyze``);
- ``handlers``: what each changed operation answers, in moto's response class (imports moto);
- ``patches``: ``install()``, which puts the handlers and model changes into moto;
- ``snapshot``: ``dump_records`` and ``load_record`` (one record at a time), and ``load_state``
  (the nested vectors of a format 1 or 2 snapshot);
- ``resources``: the template's vector buckets and indexes (``create_from_template``).
"""

from __future__ import annotations

from .filters import matches, validate_filter
from .limits import check_metadata
from .patches import install
from .resources import create_from_template
from .search import changed, query
from .service import backend, error
from .snapshot import dump_records, load_record, load_state

__all__ = [
    "backend",
    "changed",
    "check_metadata",
    "create_from_template",
    "dump_records",
    "error",
    "install",
    "load_record",
    "load_state",
    "matches",
    "query",
    "validate_filter",
]
