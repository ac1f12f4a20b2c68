"""Text search by S3 Vectors itself: what a search would find if a message's words were indexed by
S3 Vectors with its vector (a searchable metadata key) instead of postings in DynamoDB — the
redesign the bill's targets need (docs/performance.md, "The bill's targets"). Measured before it
is built, on the recall section's public data, so the decision rests on labelled answers.

Method. One S3 Vectors index per data set on the emulated AWS side, in this process (moto with the
local stack's patches: ``QueryVectors`` with ``queryTexts`` answered by BM25, RRF for hybrid
queries; infra/local/memory_hub_local/aws/s3vectors/text.py says what is modelled), holding every
user's turns as a group index holds many users'. Each turn is one vector: the local embedding
model's vector of its text (all-MiniLM-L6-v2, 384 dimensions: the cosines of the 1,024 the stack
stores, which are zero-padded), its user (the corpus) as a filterable key, and two searchable,
non-filterable keys: its text (S3 Vectors' English analyzer) and its terms as this service's
analyzer makes them, as digests (``terms_text``; the standard analyzer only splits them). Each
question is asked of its user's turns (``SYSTEMS``): by words, by meaning, by both fused by RRF,
and through the service's own ranking (``retrieval.combine`` with the turns' sessions and times
and the time the question names) over the halves each way gives — its own exact BM25 (the best
``WORDS_DEPTH``) and a vector query (the best ``MEANING_DEPTH``), as it searches today less the
records' leads and the waiting vectors; S3 Vectors' BM25 (``WORDS_DEPTH``) and a vector query;
or one hybrid query of ``MEANING_DEPTH``, every candidate holding a query term in the word half
(up to ``MEANING_DEPTH``), scored by S3 Vectors, by the user's own statistics, or by what a search
could know of them without postings (``_User.estimated``). A query without a term the service
counts finds nothing by the service's ranking, as a hybrid search answers. A question is a hit@k
as in the recall section."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from memory_hub.analysis import query_terms, term_counts
from memory_hub.clock import lower_bound_ms, now_ms
from memory_hub.domain import timewords
from memory_hub.domain.retrieval import combine
from memory_hub.domain.search import Stats, idf, rank, saturation
from memory_hub.storage.postings import SAMPLE, digest, share

from .datasets import Dataset, Question, load_locomo, load_longmemeval
from .recall import LIMIT, Tally, first_hit

BUCKET, TEXT, TERMS, DIMENSION = "text-search", "text", "terms", 384
EMBED_BATCH, PUT_BATCH = 64, 500
MAX_TEXT = 1024  # QueryVectors' longest query text
WORDS_DEPTH, MEANING_DEPTH = 20, 80  # what the service's hybrid search reads of each half for limit 10
SYSTEMS = (  # (name, how it asks, the searchable key it asks, topK)
    ("S3 Vectors' English analyzer: words", "words", TEXT, LIMIT),
    ("S3 Vectors, the service's terms: words", "words", TERMS, LIMIT),
    ("S3 Vectors: meaning", "meaning", TERMS, LIMIT),
    ("S3 Vectors, the service's terms: hybrid (RRF)", "hybrid", TERMS, LIMIT),
    ("the service's ranking: its own BM25 and a vector query (today)", "ours", TERMS, MEANING_DEPTH),
    ("the service's ranking: a words query and a vector query", "two", TERMS, MEANING_DEPTH),
    (f"the service's ranking: one hybrid query, topK {MEANING_DEPTH}", "fused", TERMS, MEANING_DEPTH),
    (
        f"the service's ranking: one hybrid query, topK {MEANING_DEPTH}, words scored by the user's statistics",
        "rescored",
        TERMS,
        MEANING_DEPTH,
    ),
    (
        f"the service's ranking: one hybrid query, topK {MEANING_DEPTH}, words scored by the user's sampled counts",
        "sampled",
        TERMS,
        MEANING_DEPTH,
    ),
    (f"the service's ranking: one hybrid query, English analyzer, topK {MEANING_DEPTH}", "fused", TEXT, MEANING_DEPTH),
)


def terms_text(text: str) -> str:
    """What the service would make searchable of a text: its terms as this service's analyzer makes
    them (stems, its stop words out, CJK pairs), each as its digest, as often as it occurs — for
    S3 Vectors' standard analyzer to split on the spaces and find again from a query made the same
    way (``query_terms_text``), whatever S3 Vectors' own analyzers would make of the words."""
    return " ".join(digest(term) for term, count in term_counts(text).items() for _ in range(count))


def query_terms_text(text: str) -> str:
    """A query's terms as ``terms_text`` makes a turn's, as many whole digests as a query text holds."""
    digests = [digest(term) for term in query_terms(text)]
    fit = (MAX_TEXT + 1) // (len(digests[0]) + 1) if digests else 0
    return " ".join(digests[:fit])


@contextmanager
def emulated_vectors() -> Iterator[Any]:
    """An S3 Vectors client of the emulated AWS side, in this process, for the block's length (moto
    sets credentials of its own meanwhile, and puts the environment back after)."""
    import boto3
    from memory_hub_local.aws import moto_patches
    from moto import mock_aws

    moto_patches.install()
    with mock_aws():
        client = boto3.client("s3vectors", region_name="us-east-1")
        client.create_vector_bucket(vectorBucketName=BUCKET)
        yield client


def _embed(texts: list[str]) -> list[list[float]]:
    from memory_hub_local.aws.embedding_model import embed

    out: list[list[float]] = []
    for at in range(0, len(texts), EMBED_BATCH):
        out += embed(texts[at : at + EMBED_BATCH], DIMENSION, normalise=True).vectors.tolist()
    return out


def _load(client: Any, dataset: Dataset, name: str) -> dict[str, str]:
    """The data set's turns put into an index of their own; the turn id of each vector key."""
    client.create_index(
        vectorBucketName=BUCKET,
        indexName=name,
        dataType="float32",
        dimension=DIMENSION,
        distanceMetric="cosine",
        metadataConfiguration={
            "nonFilterableMetadataKeys": [TEXT, TERMS],
            "textSearchConfigurations": [{"metadataKey": TEXT, "language": "en"}, {"metadataKey": TERMS}],
        },
    )
    rows = [
        (_key(c, t), corpus.name, turn)
        for c, corpus in enumerate(dataset.corpora)
        for t, turn in enumerate(corpus.turns)
    ]
    values = _embed([turn.content for _, _, turn in rows])
    vectors = [
        {
            "key": key,
            "data": {"float32": v},
            "metadata": {"user": user, TEXT: turn.content, TERMS: terms_text(turn.content)},
        }
        for (key, user, turn), v in zip(rows, values, strict=True)
    ]
    for at in range(0, len(vectors), PUT_BATCH):
        client.put_vectors(vectorBucketName=BUCKET, indexName=name, vectors=vectors[at : at + PUT_BATCH])
    return {key: turn.key for key, _, turn in rows}


def _key(corpus: int, turn: int) -> str:
    """The vector key of a data set's turn: its corpus's place and its own."""
    return f"{corpus}/{turn}"


@dataclass
class _User:
    """One corpus as its questions are asked: its turns' texts and places, and its name."""

    index: str
    name: str
    docs: list[tuple[str, str]]  # (vector key, text)
    places: dict[str, tuple[str, int]]  # vector key -> (session, epoch ms)
    # from the docs, as the service's counters keep them: the user's turns and their terms; term
    # digest -> the turns holding it; term digest -> its sampled count (``share``)
    stats: Stats = field(init=False)
    frequencies: Counter[str] = field(init=False)
    sampled: Counter[str] = field(init=False)

    def __post_init__(self) -> None:
        held = {key: Counter(terms_text(text).split()) for key, text in self.docs}
        self.stats = Stats(len(held), sum(sum(c.values()) for c in held.values()))
        self.frequencies = Counter(t for c in held.values() for t in c)
        self.sampled = Counter()
        for key, counted in held.items():
            for t in counted:
                self.sampled[t] += share(key, t)

    def bm25(self, asked: list[str], terms: str, frequencies: Mapping[str, int]) -> float:
        """A turn's BM25 for the query's term digests over the user's own statistics (the service's
        per-user counters), from the terms its vector carries."""
        held = Counter(terms.split())
        length = sum(held.values())
        return sum(
            idf(self.stats.items, frequencies[t]) * saturation(held[t], length, self.stats.average_length)
            for t in asked
            if t in held
        )

    def estimated(self, asked: list[str], found: list[str]) -> dict[str, int]:
        """Each query term's count as a search could know it without postings: the candidates found
        holding it — all of them, for a rare term, which ranks its few items first — and its sampled
        counter once that holds more than one sample (one sample of ``SAMPLE`` is noise)."""
        holding = Counter(t for terms in found for t in set(terms.split()))
        return {t: max(self.sampled[t], holding[t]) if self.sampled[t] > SAMPLE else holding[t] for t in asked}


def _query(client: Any, user: _User, top_k: int, **asked: Any) -> list[dict[str, Any]]:
    answer = client.query_vectors(
        vectorBucketName=BUCKET,
        indexName=user.index,
        topK=top_k,
        filter={"user": user.name},
        returnDistance=True,
        **asked,
    )
    found: list[dict[str, Any]] = answer["vectors"]
    return found


def _fused(
    user: _User, question: Question, by_words: list[tuple[str, float]], by_meaning: list[tuple[str, float]]
) -> list[str]:
    """The service's hybrid ranking (``retrieval.combine``) of these halves, with the turns' sessions
    and times and the time the question names (read against when it was asked)."""
    asked = lower_bound_ms(question.asked) if question.asked else now_ms()
    span = timewords.window(question.text, asked)
    return [key for key, _ in combine(by_words, by_meaning, WORDS_DEPTH, user.places, None, span)[:LIMIT]]


HYBRID_WAYS = ("fused", "rescored", "sampled")  # one hybrid query, its words scored by S3 Vectors or the user
SERVICE_WAYS = ("ours", "two", *HYBRID_WAYS)  # the service's ranking over two halves


def answer(
    client: Any, user: _User, question: Question, vector: list[float], system: tuple[str, str, str, int]
) -> list[str]:
    """The vector keys one system answers a question with, best first (at most ``LIMIT``)."""
    _, how, key, top_k = system
    said = question.text[:MAX_TEXT] if key == TEXT else query_terms_text(question.text)
    words = [{"text": said, "metadataKey": key}] if said else []
    probe = {"float32": vector}
    if how in SERVICE_WAYS and not query_terms(question.text):
        return []  # nothing the service counts as a word: its hybrid search finds nothing
    if how == "words":
        return [v["key"] for v in _query(client, user, top_k, queryTexts=words)][:LIMIT] if words else []
    if how == "hybrid":
        asked = {"queryTexts": words} if words else {}
        return [v["key"] for v in _query(client, user, top_k, queryVector=probe, **asked)]
    if how in HYBRID_WAYS:
        found = _query(client, user, top_k, queryTexts=words, queryVector=probe, returnScores=True, returnMetadata=True)
        return _fused(user, question, *_halves(user, said.split(), found, how))
    if how == "meaning":
        return [k for k, _ in _nearest(client, user, top_k, probe)][:LIMIT]
    if how == "ours":
        return _fused(user, question, rank(question.text, user.docs, WORDS_DEPTH), _nearest(client, user, top_k, probe))
    if how != "two":
        raise ValueError(f"no such way to ask: {how}")
    scored = _query(client, user, WORDS_DEPTH, queryTexts=words, returnScores=True) if words else []
    by_words = [(v["key"], sum(s["score"] for s in v["scores"]["bm25Scores"])) for v in scored]
    return _fused(user, question, by_words, _nearest(client, user, top_k, probe))


def _nearest(client: Any, user: _User, top_k: int, probe: dict[str, Any]) -> list[tuple[str, float]]:
    return [(v["key"], 1.0 - v["distance"]) for v in _query(client, user, top_k, queryVector=probe)]


def _halves(
    user: _User, asked: list[str], found: list[dict[str, Any]], how: str
) -> tuple[list[tuple[str, float]], list[tuple[str, float]]]:
    """One hybrid query's answer as the service's two halves: its candidates' BM25 (S3 Vectors'
    scores, or the user's own over the terms each vector carries: exact, or from the sampled
    counters) and their similarity, each best first."""
    if how == "fused":
        scored = [(v["key"], sum(s["score"] for s in v["scores"]["bm25Scores"])) for v in found]
    else:
        terms = [v["metadata"][TERMS] for v in found]
        counts = user.frequencies if how == "rescored" else user.estimated(asked, terms)
        scored = [(v["key"], user.bm25(asked, held, counts)) for v, held in zip(found, terms, strict=True)]
    by_words = sorted(((k, score) for k, score in scored if score > 0), key=lambda pair: -pair[1])
    near = [(v["key"], 1.0 - v["scores"]["vectorDistance"]) for v in found if "vectorDistance" in v["scores"]]
    return by_words, sorted(near, key=lambda pair: -pair[1])


def measure(client: Any, dataset: Dataset, progress: Callable[[str], None]) -> list[Tally]:
    index = dataset.name.lower()
    turn_of = _load(client, dataset, index)
    tallies = [Tally(dataset.name, "L0 messages", system[0]) for system in SYSTEMS]
    users = [
        _User(
            index,
            corpus.name,
            [(_key(c, t), turn.content) for t, turn in enumerate(corpus.turns)],
            {_key(c, t): (turn.session, lower_bound_ms(turn.timestamp)) for t, turn in enumerate(corpus.turns)},
        )
        for c, corpus in enumerate(dataset.corpora)
    ]
    questions = [(user, q) for user, corpus in zip(users, dataset.corpora, strict=True) for q in corpus.questions]
    vectors = _embed([q.text for _, q in questions])
    progress(f"text search: {dataset.name}, {len(turn_of)} turns, {len(questions)} questions")
    for (user, question), vector in zip(questions, vectors, strict=True):
        if not question.text.strip():
            continue
        for tally, system in zip(tallies, SYSTEMS, strict=True):
            keys = answer(client, user, question, vector, system)
            tally.add(first_hit([{turn_of[k]} for k in keys], question.evidence), kind=question.kind)
    return tallies


def run(quick: bool, progress: Callable[[str], None]) -> dict[str, Any]:
    """The section's results: rows shaped as the recall section's (``recall_print`` prints them)."""
    began = time.perf_counter()
    datasets = [load_locomo(limit=2 if quick else None), load_longmemeval(limit=2 if quick else None)]
    tallies: list[Tally] = []
    with emulated_vectors() as client:
        for dataset in datasets:
            tallies += measure(client, dataset, progress)
    return {
        "rows": [t.row() for t in tallies],
        "datasets": {d.name: {"turns": sum(len(c.turns) for c in d.corpora)} for d in datasets},
        "seconds": round(time.perf_counter() - began, 1),
    }


def render(result: dict[str, Any], say: Callable[[str], None]) -> None:
    """The section's table from its results (``run``'s, as bench-results.json keeps them)."""
    from .recall_print import kinds, pct

    say("\n### Text search by S3 Vectors itself (hit@k of each question's user's turns, limit 10)\n")
    say(", ".join(f"{name}: {s['turns']} turns" for name, s in result["datasets"].items()) + ".\n")
    say("| data set | system | questions | hit@1 | hit@5 | hit@10 |")
    say("|---|---|---:|---:|---:|---:|")
    for r in result["rows"]:
        rates = " | ".join(pct(r["hits"][str(k)] / r["questions"]) for k in (1, 5, 10))
        say(f"| {r['dataset']} | {r['system']} | {r['questions']} | {rates} |")
    kinds(result["rows"], say)
