"""Recall: how often search finds the turns that answer a question, on public data with labelled
evidence (``datasets``), measured over the HTTP API only, so it runs against any v3 endpoint.

Method. Each run uses one fresh team + agent; each corpus (a LoCoMo conversation, a group of
LongMemEval instances) is one user. Its turns go in through ``/v3/conversation/add`` session by
session (batches of at most 100, each message with its own time), and the returned
``accepted_ids`` are mapped back to the data set's turn ids. LoCoMo's own session observations
(each names the turns it comes from) go in through ``/v3/atomic/add`` as L1 records. Then every
question is asked through ``/v3/conversation/search`` and ``/v3/atomic/search`` with ``limit`` 10.
A question is a hit@k when any of its evidence turns is among the first k results (for L1: a record
whose source turns include an evidence turn). Questions without evidence are skipped and counted.
Latency is measured at the client; on the local stack, the DynamoDB items each search read come
from the emulated AWS side's call log.

Memory size: the first LoCoMo conversation's questions are asked again after the same user
received nine times its turns (and records) more, taken in order from the other conversations with
their two speakers' names replaced by this conversation's (so the distractors talk about the same
people); items read and latency at 1x and 10x, and their ratio.

Reference (``bm25``): textbook BM25 (k1 = 1.2, b = 0.75, idf = ln(1 + (N - df + 0.5) / (df + 0.5))) over the
same turns of the same user, in this process: once with English Snowball stems and an English
stop-word list, once on plain lower-cased words.

``mode``: each mode asked (``keyword``, ``hybrid``, ``semantic``) is sent as the request's ``mode``
and ``data.mode_used`` is recorded; a server that answers 400 to ``mode`` is asked without it (and
the table says so)."""

from __future__ import annotations

import math
import re
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any

from .bm25 import BM25, stemmed, words
from .cases import Scope
from .client import BenchError, Target
from .datasets import Corpus, Dataset, Record, Turn, load_locomo, load_longmemeval
from .measure import CallLog

KS = (1, 5, 10)
MAX_SOURCES = 100  # what atomic/add takes
TURNS_ONLY = "L0 messages, no records"
WITH_RECORDS = "L0 messages, observations as records"
LIMIT = 10
BATCH = 100
GROWTH = 10  # the larger memory holds GROWTH times the turns of the base conversation
MODES = ("keyword", "hybrid", "semantic")
WRITERS = 4  # concurrent atomic/add requests while loading (not measured)
RETRIES = 2  # a request answered 429 or 5xx is sent again, this many times, after RETRY_SECONDS x attempt
RETRY_SECONDS = 1.0
QUICK_GROWTH_QUESTIONS = 60  # --quick asks only this many of the base's questions at 1x and 10x

# ---------------------------------------------------------------- hits


def first_hit(results: Sequence[Iterable[str]], evidence: frozenset[str]) -> int | None:
    """The 1-based rank of the first result naming an evidence turn (None: no result does)."""
    for rank, keys in enumerate(results, start=1):
        if evidence.intersection(keys):
            return rank
    return None


def read_units(calls: Sequence[dict[str, Any]]) -> float:
    """DynamoDB read units of these calls, as the emulated DynamoDB counted them (AWS's rules): a
    search's true read cost, where ``read`` counts items whatever their size (a waiting vector's
    row is ~1.3 KB, a posting a tenth of that)."""
    return sum(float(e.get("ReadCapacityUnits", 0.0)) for c in calls for e in c.get("capacity") or [])


def percentile(values: Sequence[float], fraction: float) -> float:
    """Nearest-rank percentile (NaN for no values)."""
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[max(0, math.ceil(fraction * len(ordered)) - 1)]


@dataclass
class Tally:
    """hit@k, latency and items read of one system over one set of questions."""

    dataset: str
    level: str  # "L0 messages" or "L1 records"
    system: str
    mode: str = "–"
    questions: int = 0
    hits: dict[int, int] = field(default_factory=lambda: dict.fromkeys(KS, 0))
    latencies: list[float] = field(default_factory=list)
    reads: list[float] = field(default_factory=list)
    units: list[float] = field(default_factory=list)  # DynamoDB read units a search used
    modes_used: Counter[str] = field(default_factory=Counter)
    failed: int = 0  # searches that failed after retries: counted as misses
    kinds: dict[str, list[int]] = field(default_factory=dict)  # question kind -> [questions, hits@10]

    def add(
        self,
        rank: int | None,
        ms: float | None = None,
        read: float | None = None,
        used: str | None = None,
        kind: str | None = None,
        units: float | None = None,
    ) -> None:
        self.questions += 1
        if kind is not None:
            counted = self.kinds.setdefault(kind, [0, 0])
            counted[0] += 1
            counted[1] += rank is not None and rank <= 10
        for k in KS:
            if rank is not None and rank <= k:
                self.hits[k] += 1
        if ms is not None:
            self.latencies.append(ms)
        if read is not None:
            self.reads.append(read)
        if units is not None:
            self.units.append(units)
        if used is not None:
            self.modes_used[used] += 1

    def rate(self, k: int) -> float:
        return self.hits[k] / self.questions if self.questions else math.nan

    @property
    def mode_used(self) -> str:
        return ", ".join(f"{m} {n}" if len(self.modes_used) > 1 else m for m, n in self.modes_used.most_common())

    def row(self) -> dict[str, Any]:
        return {
            "dataset": self.dataset,
            "level": self.level,
            "system": self.system,
            "mode": self.mode,
            "mode_used": self.mode_used,
            "questions": self.questions,
            "failed": self.failed,
            **{f"hit@{k}": round(self.rate(k), 4) for k in KS},
            "p50_ms": round(percentile(self.latencies, 0.5), 1),
            "p95_ms": round(percentile(self.latencies, 0.95), 1),
            "items_read_p50": percentile(self.reads, 0.5),
            "items_read_p95": percentile(self.reads, 0.95),
            "read_units_p50": percentile(self.units, 0.5),
            "read_units_p95": percentile(self.units, 0.95),
            "hit@10_by_kind": {k: round(h / n, 4) for k, (n, h) in sorted(self.kinds.items()) if n},
            "hits": {str(k): self.hits[k] for k in KS},  # the counts the tables' rates are printed from
            "kinds": {k: [n, h] for k, (n, h) in sorted(self.kinds.items()) if n},
        }


# ---------------------------------------------------------------- reference


def reference(dataset: Dataset) -> list[Tally]:
    """Textbook BM25 (stemmed + stop words, and plain words) over each corpus's turns and records."""
    tallies = []
    for name, analyze in (("BM25 stemmed, stop words", stemmed), ("BM25 plain words", words)):
        l0 = Tally(dataset.name, "L0 messages", f"reference {name}")
        l1 = Tally(dataset.name, "L1 records", f"reference {name}")
        for corpus in dataset.corpora:
            index = BM25([t.content for t in corpus.turns], analyze)
            for question in corpus.questions:
                found = [{corpus.turns[i].key} for i in index.rank(question.text, LIMIT)]
                l0.add(first_hit(found, question.evidence), kind=question.kind)
            if corpus.records:
                records = BM25([r.content for r in corpus.records], analyze)
                for question in corpus.questions:
                    found_records = [corpus.records[i].sources for i in records.rank(question.text, LIMIT)]
                    l1.add(first_hit(found_records, question.evidence), kind=question.kind)
        tallies += [t for t in (l0, l1) if t.questions]
    return tallies


# ---------------------------------------------------------------- over HTTP


@dataclass
class Loaded:
    """One corpus as stored on one endpoint: its user, and ids mapped back to turn ids."""

    corpus: Corpus
    scope: Scope
    messages: dict[str, frozenset[str]] = field(default_factory=dict)
    records: dict[str, frozenset[str]] = field(default_factory=dict)


@dataclass
class Endpoint:
    """A v3 endpoint under test, what it lacks, and (ours) its AWS call log."""

    target: Target
    log: CallLog | None
    team: str
    notes: list[str] = field(default_factory=list)
    no_mode: bool = False  # answered 400 to ``mode``: asked without it
    no_timestamps: bool = False
    no_records: bool = False
    retries: int = 0

    def post(self, path: str, body: dict[str, Any]) -> tuple[float, Any]:
        """The target's answer, a 429 or 5xx sent again up to RETRIES times."""
        for attempt in range(RETRIES + 1):
            try:
                return self.target.post(path, body)
            except BenchError as error:
                if attempt == RETRIES or not re.search(r"HTTP (429|5\d\d)", str(error)):
                    raise
                self.retries += 1
                time.sleep(RETRY_SECONDS * (attempt + 1))
        raise AssertionError("unreachable")

    def note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)


def batches(turns: Sequence[Turn]) -> Iterable[list[Turn]]:
    """Consecutive turns of one session, at most BATCH at a time."""
    batch: list[Turn] = []
    for turn in turns:
        if batch and (turn.session != batch[0].session or len(batch) == BATCH):
            yield batch
            batch = []
        batch.append(turn)
    if batch:
        yield batch


def add_turns(endpoint: Endpoint, loaded: Loaded, turns: Sequence[Turn], prefix: str = "") -> None:
    for batch in batches(turns):
        messages = [{"role": t.role, "content": t.content, "timestamp": t.timestamp} for t in batch]
        if endpoint.no_timestamps:
            messages = [{k: v for k, v in m.items() if k != "timestamp"} for m in messages]
        body = loaded.scope.body(session_id=prefix + batch[0].session, messages=messages)
        try:
            _, data = endpoint.post("/v3/conversation/add", body)
        except BenchError as error:
            if endpoint.no_timestamps or "HTTP 400" not in str(error):
                raise
            endpoint.no_timestamps = True
            endpoint.note(f"{endpoint.target.name}: message timestamps refused (400); added without them")
            add_turns(endpoint, loaded, batch, prefix)
            continue
        for turn, message_id in zip(batch, data["accepted_ids"], strict=True):
            loaded.messages[message_id] = frozenset({turn.key})


def add_records(endpoint: Endpoint, loaded: Loaded, records: Sequence[Record], prefix: str = "") -> None:
    """One ``atomic/add`` per record, WRITERS at a time (records are independent), each citing the
    messages its turns were stored as (``source_message_ids``)."""
    by_turn: dict[str, list[str]] = {}
    for message_id, keys in loaded.messages.items():
        for key in keys:
            by_turn.setdefault(key, []).append(message_id)

    def add(record: Record) -> str | None:
        if endpoint.no_records:
            return None
        cited = sorted({m for key in record.sources for m in by_turn.get(key, ())})[-MAX_SOURCES:]
        body = loaded.scope.body(
            content=record.content,
            session_id=prefix + record.session,
            metadata={"source_turns": sorted(record.sources)},
            source_message_ids=cited,
        )
        try:
            _, data = endpoint.post("/v3/atomic/add", body)
        except BenchError as error:
            endpoint.no_records = True
            endpoint.note(f"{endpoint.target.name}: atomic/add failed ({str(error)[:120]}); no L1 recall there")
            return None
        return str(data["id"])

    with ThreadPoolExecutor(WRITERS) as pool:
        for record, record_id in zip(records, pool.map(add, records), strict=True):
            if record_id is not None:
                # The same content again is the same record (natural key): it stands for both sources.
                loaded.records[record_id] = loaded.records.get(record_id, frozenset()) | record.sources


def load(endpoint: Endpoint, dataset: Dataset, corpus: Corpus, with_records: bool = True) -> Loaded:
    """One corpus as one user: its turns, and (``with_records``) its observations as records citing
    their turns — another user without them, so both are asked the same questions."""
    suffix = "" if with_records or not corpus.records else "-turns-only"
    scope = Scope(endpoint.team, "recall", f"{dataset.name.lower()}-{corpus.name}{suffix}")
    loaded = Loaded(corpus, scope)
    add_turns(endpoint, loaded, corpus.turns)
    if with_records:
        add_records(endpoint, loaded, corpus.records)
    return loaded


def ask(
    endpoint: Endpoint, route: str, scope: Scope, query: str, mode: str | None, asked: str | None = None
) -> tuple[float, list[str], str | None]:
    """(ms, result ids best first, mode_used) of one search with limit 10; ``asked``: when the
    question is asked, sent as a conversation search's ``reference_time``."""
    body = scope.body(query=query, limit=LIMIT)
    if asked is not None and route.startswith("/v3/conversation"):
        body["reference_time"] = asked
    if mode is not None and not endpoint.no_mode:
        body["mode"] = mode
    try:
        ms, data = endpoint.post(route, body)
    except BenchError as error:
        if "mode" not in body or "HTTP 400" not in str(error):
            raise
        endpoint.no_mode = True
        endpoint.note(f"{endpoint.target.name}: `mode` refused (400); asked without it")
        return ask(endpoint, route, scope, query, None, asked)
    items = data.get("messages") if route.startswith("/v3/conversation") else data.get("items")
    used = data.get("mode_used")
    return ms, [str(item["id"]) for item in items or []], str(used) if used is not None else None


def questions_pass(
    endpoint: Endpoint,
    loaded: Iterable[Loaded],
    level: str,
    dataset: str,
    mode: str | None,
    progress: Callable[[str], None] = lambda text: None,
) -> Tally:
    """Every question of ``loaded`` asked once at ``level`` (L0 or L1)."""
    route = "/v3/conversation/search" if level.startswith("L0") else "/v3/atomic/search"
    tally = Tally(dataset, level, endpoint.target.name, mode or "–")
    for memory in loaded:
        sources = memory.messages if level.startswith("L0") else memory.records
        if not sources:
            continue
        try:
            ask(endpoint, route, memory.scope, "warm up", mode)
        except BenchError:
            pass  # counted when a question fails
        for question in memory.corpus.questions:
            if endpoint.log is not None:
                endpoint.log.take()
            try:
                ms, ids, used = ask(endpoint, route, memory.scope, question.text, mode, question.asked)
            except BenchError as error:
                tally.failed += 1
                tally.add(None, kind=question.kind)
                if tally.failed == 1:
                    endpoint.note(f"{endpoint.target.name}: first failed search: {str(error)[:160]}")
                continue
            calls = endpoint.log.take() if endpoint.log is not None else None
            read = sum(c["read"] for c in calls) if calls is not None else None
            units = read_units(calls) if calls is not None else None
            found = [sources.get(i, frozenset()) for i in ids]
            tally.add(first_hit(found, question.evidence), ms, read, used, question.kind, units)
    row = tally.row()
    progress(
        f"recall: {endpoint.target.name}: {dataset} {level} ({tally.questions} questions, mode {tally.mode}): "
        f"hit@1/5/10 {row['hit@1']}/{row['hit@5']}/{row['hit@10']}, p50/p95 {row['p50_ms']}/{row['p95_ms']} ms, "
        f"items read p50 {row['items_read_p50']}, read units p50 {row['read_units_p50']}"
    )
    if tally.failed:
        endpoint.note(f"{endpoint.target.name}: {dataset} {level}: {tally.failed} searches failed, counted as misses")
    if endpoint.no_mode and mode is not None:
        tally.mode = f"{mode} (refused: none sent)"
    return tally


# ---------------------------------------------------------------- memory size


def rename(text: str, names: dict[str, str]) -> str:
    if not names:
        return text
    pattern = re.compile(r"\b(" + "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True)) + r")\b")
    return pattern.sub(lambda m: names[m.group(1)], text)


def distractors(base: Corpus, others: Sequence[Corpus], factor: int) -> tuple[list[Turn], list[Record]]:
    """``factor`` times the base's turns (and records) from ``others`` in order, their speakers
    renamed to the base's speakers and their sessions and turn ids kept apart."""
    turns: list[Turn] = []
    records: list[Record] = []
    want_turns, want_records = factor * len(base.turns), factor * len(base.records)
    for other in others:
        names = dict(zip(other.speakers, base.speakers, strict=True)) if all(other.speakers) else {}
        tag = f"x-{other.name}-"
        for turn in other.turns:
            if len(turns) < want_turns:
                content = rename(turn.content, names)
                turns.append(Turn(tag + turn.key, tag + turn.session, turn.role, content, turn.timestamp))
        for record in other.records:
            if len(records) < want_records:
                sources = frozenset(tag + s for s in record.sources)
                records.append(Record(rename(record.content, names), sources, tag + record.session))
    return turns, records


# ---------------------------------------------------------------- the section


@dataclass
class Settings:
    quick: bool
    modes: list[str | None]
    locomo_conversations: int | None  # None: all
    longmemeval_groups: int | None


def settings(quick: bool, modes: Sequence[str]) -> Settings:
    return Settings(quick, list(modes) or [None], 2 if quick else None, 2 if quick else None)


def run(
    ours: Target,
    log: CallLog | None,
    theirs: Target | None,
    config: Settings,
    progress: Callable[[str], None],
) -> dict[str, Any]:
    """The section's results (``recall_print.render`` prints them)."""
    began = time.perf_counter()
    every = load_locomo()
    locomo = Dataset("LoCoMo", every.corpora[: config.locomo_conversations])
    lme = load_longmemeval(limit=config.longmemeval_groups)
    datasets = [locomo, lme]
    summary = {
        d.name: {
            "corpora": len(d.corpora),
            "turns": sum(len(c.turns) for c in d.corpora),
            "questions": sum(len(c.questions) for c in d.corpora),
            "skipped_without_evidence": d.skipped,
            "records": sum(len(c.records) for c in d.corpora),
        }
        for d in datasets
    }
    tallies: list[Tally] = []
    for dataset in datasets:
        tallies += reference(dataset)
    endpoints = [Endpoint(ours, log, Scope.fresh("recall").team)]
    if theirs is not None:
        endpoints.append(Endpoint(theirs, None, Scope.fresh("recall").team))
    size_rows: list[dict[str, Any]] = []
    for endpoint in endpoints:
        for dataset in sorted(datasets, key=lambda d: d is locomo):  # the small one first
            loaded, asked = ask_dataset(endpoint, dataset, config.modes, progress)
            tallies += asked
            if dataset is locomo and loaded:
                size_rows += grow(endpoint, loaded[0], every, config, progress)
    seconds = round(time.perf_counter() - began, 1)
    for endpoint in endpoints:
        if endpoint.retries:
            endpoint.note(f"{endpoint.target.name}: {endpoint.retries} requests answered 429/5xx and were sent again")
    notes = [n for e in endpoints for n in e.notes]
    return {
        "datasets": summary,
        "rows": [t.row() for t in tallies],
        "size": size_rows,
        "notes": notes,
        "seconds": seconds,
    }


def ask_dataset(
    endpoint: Endpoint, dataset: Dataset, modes: Iterable[str | None], progress: Callable[[str], None]
) -> tuple[list[Loaded], list[Tally]]:
    """Load ``dataset`` into fresh users (those with records twice: with and without them) and ask
    every question at each level, in each mode: the memories loaded with their records, and the
    tallies that asked something."""
    name = endpoint.target.name
    loaded, bare = [], []
    for corpus in dataset.corpora:
        progress(f"recall: {name}: loading {dataset.name} {corpus.name} ({len(corpus.turns)} turns)")
        loaded.append(load(endpoint, dataset, corpus))
        if corpus.records:  # the same turns again for a user without the records
            bare.append(load(endpoint, dataset, corpus, with_records=False))
    questions = sum(len(c.questions) for c in dataset.corpora)
    tallies = []
    for mode in modes:
        progress(f"recall: {name}: asking {questions} questions (mode {mode})")
        passes = [(WITH_RECORDS if bare else "L0 messages", loaded), ("L1 records", loaded)]
        passes += [(TURNS_ONLY, bare)] if bare else []
        for level, memories in passes:
            tally = questions_pass(endpoint, memories, level, dataset.name, mode, progress)
            if tally.questions:
                tallies.append(tally)
    return loaded, tallies


def grow(
    endpoint: Endpoint, base: Loaded, every: Dataset, config: Settings, progress: Callable[[str], None]
) -> list[dict[str, Any]]:
    """The base conversation's questions at 1x, then with GROWTH x its turns (and records)."""
    if config.quick:
        base = replace(base, corpus=replace(base.corpus, questions=base.corpus.questions[:QUICK_GROWTH_QUESTIONS]))
    others = [c for c in every.corpora if c.name != base.corpus.name]
    turns, records = distractors(base.corpus, others, GROWTH - 1)
    levels = ("L0 messages", "L1 records")
    before = {
        mode: {lvl: questions_pass(endpoint, [base], lvl, "LoCoMo", mode, progress) for lvl in levels}
        for mode in config.modes
    }
    progress(
        f"recall: {endpoint.target.name}: growing {base.corpus.name} by {len(turns)} turns, {len(records)} records"
    )
    add_turns(endpoint, base, turns)
    add_records(endpoint, base, records)
    rows = []
    for mode in config.modes:
        for level in levels:
            small = before[mode][level]
            if not small.questions:
                continue
            large = questions_pass(endpoint, [base], level, "LoCoMo", mode, progress)
            rows.append(size_row(endpoint.target.name, small, large, base.corpus, turns, records))
    if endpoint.log is not None:  # the in-process reference, once
        grown = replace(base.corpus, turns=base.corpus.turns + turns, records=base.corpus.records + records)
        pairs = zip(reference(Dataset("LoCoMo", [base.corpus])), reference(Dataset("LoCoMo", [grown])), strict=True)
        rows += [size_row(small.system, small, large, base.corpus, turns, records) for small, large in pairs]
    return rows


def size_row(
    system: str, small: Tally, large: Tally, base: Corpus, turns: list[Turn], records: list[Record]
) -> dict[str, Any]:
    count = len(base.turns) if small.level.startswith("L0") else len(base.records)
    extra = len(turns) if small.level.startswith("L0") else len(records)
    return {
        "system": system,
        "mode": small.mode,
        "level": small.level,
        "corpus": base.name,
        "items_1x": count,
        "items_10x": count + extra,
        "questions": small.questions,
        "1x": small.row(),
        "10x": large.row(),
    }
