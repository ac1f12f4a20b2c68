"""The bill: what each route costs on AWS at list prices (``prices``), from what it does on the
local stack, and what a month of a stated workload costs beside the peers' list prices.

Per route, the mean of ``n`` requests (after two untimed ones; the erasures of a held memory:
``HELD_REQUESTS``, each once the stack is quiet) of the routes section's workload —
with typical text where a route writes or erases one item (``typical_cases``: a real 200-byte
LoCoMo turn and a real LoCoMo observation of the median number of distinct terms, since the word
index writes a posting per distinct term; the workload's own few words would understate them):

- the calls to every service, from the emulated AWS side's call log;
- DynamoDB read and write request units as AWS charges them (the emulated DynamoDB counts
  capacity by AWS's rules, failed conditions included: ``memory_hub_local.aws.capacity``);
- S3 requests by price class (PUT, COPY, POST, LIST vs GET and the rest; DELETE is free);
- S3 Vectors: each PutVectors billed at its 128 KB minimum (a request's few vectors are far below
  it), each QueryVectors per call plus the data it processes — (vector + key + filterable
  metadata) bytes × the vectors of the index it reads — priced at the bench's own index and at 6
  million vectors in the memory (``GROUP_INDEX`` in the index of the user's group);
- Bedrock: one InvokeModel per text embedded, tokens estimated as 4 characters each;
- Lambda: one request per API call plus one per queued message (SQS) or Invoke; billed duration
  estimated as the CPU the function processes used for it (/proc) plus its sequential AWS round
  trips (counted as the routes section counts them: every call delayed 30 ms, the extra time ÷ 30 ms)
  × ``ROUND_TRIP_MS``, an in-region AWS call's typical wait, at the template's 512 MB;
- API Gateway (REST): one call.

The month: ``USERS`` users, each adding ``ADDS`` one-message conversation turns and searching
``SEARCHES`` times a month, everything kept a year (a steady state holding 12 months of turns, all
in one memory: USERS × ADDS × 12 vectors, spread over the template's ``VectorGroups`` default of
groups of users, so a search reads an index of ``GROUP_INDEX`` vectors)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from . import datasets, measure, prices, recall
from .cases import Case, Scope, Workload
from .client import Hooks, Target
from .cost_cases import (
    HELD_MESSAGES,
    MEMORY_CLEAR,
    ONE_MESSAGE_ADD,
    ONE_MESSAGE_DELETE,
    ONE_RECORD_ADD,
    ONE_RECORD_DELETE,
    SESSION_DELETE,
    SESSION_MESSAGES,
    USER_DELETE,
    held_erasures,
    one_message_add,
    session_delete,
    typical_cases,
)

ROUND_TRIP_MS = 10.0
HELD_REQUESTS = 2  # a held memory's clear and user erasure: each fills 1,000 messages first
LAMBDA_GB = 0.5  # the template's MemorySize (512 MB)
VECTOR_BYTES = 1024 * 4 + 300  # float32 × the default 1,024 dimensions, plus key and filterable metadata
PUT_VECTORS_MIN_BYTES = 128 * 1024
CHARS_PER_TOKEN = 4
GB, TB = 1024**3, 1024**4
USERS, ADDS, SEARCHES, MONTHS_KEPT = 10_000, 50, 20, 12
LARGE_INDEX = USERS * ADDS * MONTHS_KEPT  # 6 million vectors in the memory
GROUPS = 128  # the template's VectorGroups default: a memory's users spread over this many indexes
GROUP_INDEX = LARGE_INDEX // GROUPS  # what a search reads at 6 million (10,000 users spread evenly)
GROUP_CHOICES = (1, 16, 64, 128)  # VectorGroups the report prices the month's search at
SEARCH = "/v3/conversation/search"
TURNS_SEARCH = SEARCH + " (a LoCoMo user, turns only)"
RECORDS_SEARCH = SEARCH + " (a LoCoMo user, with records)"
BATCHED = ", VectorWrites Batched"
BATCHED_ADD = ONE_MESSAGE_ADD + BATCHED
BATCHED_RECORD_ADD = ONE_RECORD_ADD + BATCHED
BATCHED_SEARCH = TURNS_SEARCH + BATCHED
BATCH_WINDOW_S = 300  # the template's VectorBatchSeconds default (with VectorDrainMinutes 0)
WINDOW_CHOICES = (60, 120, 300)  # VectorBatchSeconds the report prices the batched add at (300: its maximum)
BATCH_SIZE = 100  # the template's EmbedQueue batch with VectorWrites Batched: a batch ends at 100 messages
DRAIN_MINUTES = 60  # the template's VectorDrainMinutes default: EmbedFunction drains its queue hourly
DRAIN_CHOICES = (15, 30, 60)  # VectorDrainMinutes the report prices the batched add at
DRAIN_ROUND = 1_000  # memory_hub.domain.vector_upkeep.DRAIN_ROUND: a drain puts a round of this many messages
DRAIN_WAIT_TRIPS = 100  # a drain's last receive long-polls 1 s for an empty queue (× ROUND_TRIP_MS)
BATCH_SEQUENTIAL_CALLS = 3  # a batch's consumer: read the items, embed them (in parallel), put the vectors
S3_PUT_CLASS = {"PutObject", "CopyObject", "PostObject", "ListObjectsV2", "ListObjects", "CreateMultipartUpload"}
S3_FREE = {"DeleteObject", "DeleteObjects"}


@dataclass
class RouteCost:
    """One route's mean use of each service per request, and what it comes to."""

    route: str
    calls: dict[str, float] = field(default_factory=dict)  # service → calls a request
    rru: float = 0.0
    wru: float = 0.0
    s3_put: float = 0.0
    s3_get: float = 0.0
    vector_puts: float = 0.0
    vector_queries: float = 0.0
    embed_calls: float = 0.0
    tokens: float = 0.0
    lambda_requests: float = 1.0
    queued: float = 0.0
    cpu_ms: float = 0.0
    round_trips: float = 0.0

    @property
    def billed_ms(self) -> float:
        return math.ceil(self.cpu_ms + self.round_trips * ROUND_TRIP_MS)

    def dollars(self, index_vectors: int) -> dict[str, float]:
        """USD a request, by service, with the memory's vector index holding ``index_vectors``."""
        per_query_tb = query_tb(index_vectors)
        return {
            "DynamoDB": self.wru * _per(prices.DYNAMODB_WRITE) + self.rru * _per(prices.DYNAMODB_READ),
            "S3": self.s3_put * prices.S3_PUT_CLASS.usd / 1000 + self.s3_get * prices.S3_GET_CLASS.usd / 1000,
            "S3 Vectors": self.vector_puts * PUT_VECTORS_MIN_BYTES / GB * prices.S3_VECTORS_PUT.usd
            + self.vector_queries * (_per(prices.S3_VECTORS_QUERY_CALL) + per_query_tb),
            "Bedrock": self.tokens / 1000 * prices.TITAN_EMBED_V2.usd,
            "Lambda": self.lambda_requests * _per(prices.LAMBDA_REQUEST)
            + self.billed_ms / 1000 * LAMBDA_GB * prices.LAMBDA_ARM_GB_S.usd,
            "SQS": self.queued * _per(prices.SQS_REQUEST),
            "API Gateway": _per(prices.API_GATEWAY_REST),
        }


def _per(price: prices.Price) -> float:
    """USD of one unit of a price quoted per million."""
    return price.usd / 1_000_000


def query_tb(index_vectors: int) -> float:
    """USD of the data one QueryVectors processes over an index of ``index_vectors`` vectors."""
    first = min(index_vectors, 100_000) * VECTOR_BYTES / TB * prices.S3_VECTORS_QUERY_TB.usd
    rest = max(index_vectors - 100_000, 0) * VECTOR_BYTES / TB * prices.S3_VECTORS_QUERY_TB_OVER.usd
    return first + rest


def _texts(body: Any) -> int:
    """Characters of the texts a request would embed (message contents, a record, a query)."""
    if isinstance(body, dict):
        return sum(len(v) if k in ("content", "query") and isinstance(v, str) else _texts(v) for k, v in body.items())
    if isinstance(body, list):
        return sum(_texts(v) for v in body)
    return 0


def _tally(row: RouteCost, requests: list[list[dict[str, Any]]], chars: float) -> None:
    n = len(requests) or 1
    for calls in requests:
        for call in calls:
            service, operation = call["service"], call["operation"]
            row.calls[service] = row.calls.get(service, 0.0) + 1 / n
            for element in call.get("capacity") or []:
                row.rru += element.get("ReadCapacityUnits", 0.0) / n
                row.wru += element.get("WriteCapacityUnits", 0.0) / n
            if service == "s3" and operation not in S3_FREE:
                row.s3_put += (operation in S3_PUT_CLASS) / n
                row.s3_get += (operation not in S3_PUT_CLASS) / n
            row.vector_puts += (service == "s3vectors" and operation == "PutVectors") / n
            row.vector_queries += (service == "s3vectors" and operation == "QueryVectors") / n
            if service == "bedrock" and operation == "InvokeModel":
                row.embed_calls += 1 / n
            row.queued += (service == "sqs" and operation.startswith("SendMessage")) / n
            row.lambda_requests += (service == "lambda" and operation == "Invoke") / n
    row.lambda_requests += row.queued
    row.tokens = chars / CHARS_PER_TOKEN if row.embed_calls else 0.0


def route_cost(case: Case, target: Target, n: int, hooks: Hooks, log: measure.CallLog, warm: int = 2) -> RouteCost:
    """One route's use per request (warmed by ``warm`` requests first)."""
    for i in range(-warm, 0):
        case.before(i)
        target.post(case.route, case.body(i))
    requests, times, chars, cpu = [], [], [], 0.0
    for i in range(n):
        case.before(i)
        log.take()
        body = case.body(i)  # once: a body may take what it names (an id to delete)
        chars.append(_texts(body))
        used = measure.cpu_ms_by_kind()["functions"]
        elapsed, _ = target.post(case.route, body)
        cpu += measure.cpu_ms_by_kind()["functions"] - used
        times.append(elapsed)
        requests.append(log.take())
    row = RouteCost(case.route, cpu_ms=cpu / n)
    _tally(row, requests, statistics.mean(chars))
    hook = hooks.delay_every_call(measure.ROUND_TRIP_S)
    try:
        delayed = []
        for i in range(n, 2 * n):
            case.before(i)
            delayed.append(target.post(case.route, case.body(i))[0])
    finally:
        hooks.remove(hook)
    row.round_trips = max(0.0, round((measure.p50(delayed) - measure.p50(times)) / (measure.ROUND_TRIP_S * 1000), 1))
    return row


def workload_batch(window_s: float = BATCH_WINDOW_S, most: int = BATCH_SIZE) -> float:
    """Adds one batch of the embedding queue's event source gathers at the month's rate, all in one
    memory: adds a second × the batching window (≈ 57.9 at 300 s), at most a batch of the queue's
    (``most``: a drain's round instead, ``drained_batch``)."""
    return min(USERS * ADDS / (30 * 86_400) * window_s, most)


def drained_batch(minutes: int = DRAIN_MINUTES) -> float:
    """Adds a drain every ``minutes`` puts together at the month's rate (≈ 694 hourly), at most a round."""
    return workload_batch(minutes * 60, DRAIN_ROUND)


def _batch_shares(b: float, drained: bool = True) -> tuple[float, float, float, float]:
    """An add's share of a batch of ``b`` adds: (PutVectors, Lambda requests, SQS requests, round
    trips) — a drain also makes the receives and deletes itself (the event source's are Lambda's)
    and waits out its last receive's long poll."""
    own = DRAIN_WAIT_TRIPS + 2 * math.ceil(b / 10) if drained else 0
    trips = (BATCH_SEQUENTIAL_CALLS + own) / b
    return puts_per_add(b), 1 + 1 / b, 1 + 2 * math.ceil(b / 10) / b, trips


def rebatched(row: RouteCost, b: float, drained: bool) -> RouteCost:
    """``row`` (a batched add priced at the default drain's batch) with a batch of ``b`` adds."""
    was, now = _batch_shares(drained_batch()), _batch_shares(b, drained)
    return replace(
        row,
        calls=row.calls | {"s3vectors": now[0]},
        vector_puts=now[0],
        lambda_requests=now[1],
        queued=now[2],
        round_trips=row.round_trips - was[3] + now[3],
    )


def puts_per_add(batch: float, groups: int = GROUPS) -> float:
    """PutVectors an add costs when a batch of ``batch`` adds (at random, by users spread evenly)
    is put index by index: a group with at least one add in the window takes one PutVectors —
    ``groups × (1 − e^(−batch ÷ groups))`` a batch, ≈ 0.18 an add with the defaults (an hourly drain
    of 694 adds over 128 groups)."""
    return groups * (1 - math.exp(-batch / groups)) / batch


def batched_add(
    case: Case,
    label: str,
    target: Target,
    n: int,
    hooks: Hooks,
    log: measure.CallLog,
    vectors_batched: Callable[[bool], None],
) -> tuple[RouteCost, float]:
    """An add (``case``: one new item a request) with ``VectorWrites: Batched``: the request's own
    calls (measured: the write, its model call, its vector kept waiting and one SendMessage), and
    its share of the queue consumer's (measured over every add it put: reads, the waiting vector's
    delete, a model call only for a vector that did not wait; then priced per batch of
    ``drained_batch()`` adds, the template's default drain: a PutVectors per group of users with an
    add in it (``puts_per_add``; side by side), one Lambda request of ``BATCH_SEQUENTIAL_CALLS``
    round trips and its last receive's wait, a receive and a delete per 10 messages). Returns the
    row (its tokens: the texts the requests sent, as for the other rows) and the adds per
    PutVectors seen here."""
    vectors_batched(True)
    try:
        log.take()
        since = log.seq
        row = route_cost(case, target, n, hooks, _Requests(log))  # the consumer apart
        consumer = _drained(hooks, since)
    finally:
        vectors_batched(False)
    adds = 2 * n + 2  # two warm-up adds, n timed, n delayed
    per_item = RouteCost("consumer")
    _tally(per_item, [[c for c in consumer if c["service"] in ("dynamodb", "bedrock")]], 0.0)
    chars = float(_texts(case.body(0)))  # what each request sent to be embedded
    row.route = label + BATCHED
    row.rru += per_item.rru / adds
    row.wru += per_item.wru / adds
    row.embed_calls += per_item.embed_calls / adds
    row.tokens = row.embed_calls * chars / CHARS_PER_TOKEN
    row.calls["bedrock"] = row.embed_calls
    # its share of a batch: PutVectors, the consumer's invocation beside the API call, the send with
    # a share of the receives and deletes, the consumer's round trips
    puts, row.lambda_requests, row.queued, trips = _batch_shares(drained_batch())
    row.calls["s3vectors"] = row.vector_puts = puts
    row.round_trips += trips
    puts = sum(1 for c in consumer if c["operation"] == "PutVectors" and c["status"] == 200)
    return row, adds / max(puts, 1)


class _Requests(measure.CallLog):
    """The calls of the requests themselves: the embedding queue's consumer, running meanwhile, apart."""

    def __init__(self, log: measure.CallLog) -> None:
        self.log = log

    def take(self) -> list[dict[str, Any]]:
        return [c for c in self.log.take() if c.get("function") != "EmbedFunction"]


def _drained(hooks: Hooks, since: int, quiet_s: float = 4.0, timeout_s: float = 120.0) -> list[dict[str, Any]]:
    """The embedding consumer's calls since ``since`` once it has put vectors and gone quiet."""
    import time

    began, last, seen = time.monotonic(), time.monotonic(), -1
    while time.monotonic() - began < timeout_s:
        consumer = [
            c for c in hooks.calls(since) if c.get("function") == "EmbedFunction" and c["operation"] != "ReceiveMessage"
        ]
        if len(consumer) != seen:
            seen, last = len(consumer), time.monotonic()
        elif any(c["operation"] == "PutVectors" for c in consumer) and time.monotonic() - last > quiet_s:
            return consumer
        time.sleep(0.5)
    raise TimeoutError("the embedding queue was not drained")


def quiet(hooks: Hooks, quiet_s: float = 2.0, timeout_s: float = 120.0) -> None:
    """Wait until the functions have made no call but their queues' polls for ``quiet_s``: what a
    request left running (a queue's consumer, an embedding retried) is not billed to the next."""
    import time

    began, last = time.monotonic(), time.monotonic()
    seq = max((c["seq"] for c in hooks.calls(0)), default=0)
    while time.monotonic() - began < timeout_s:
        time.sleep(0.5)
        calls = hooks.calls(seq)
        if calls:
            seq = max(c["seq"] for c in calls)
        if any(c.get("function") and c["operation"] != "ReceiveMessage" for c in calls):
            last = time.monotonic()
        elif time.monotonic() - last >= quiet_s:
            return
    raise TimeoutError("the functions did not go quiet")


def dynamodb_client(hooks: Hooks) -> Any:
    """A DynamoDB client on the emulated account, as its operator (whose calls the call log leaves out)."""
    import botocore.session

    operator = hooks.operator
    return botocore.session.get_session().create_client(
        "dynamodb",
        endpoint_url=hooks.transport.endpoint,
        region_name=operator.region,
        aws_access_key_id=operator.access_key,
        aws_secret_access_key=operator.secret,
    )


def dynamodb_bytes(client: Any) -> int:
    """Bytes every DynamoDB table holds, as AWS bills storage (item size + 100 bytes an item)."""
    from memory_hub_local.aws.capacity import item_size

    total = 0
    for table in client.list_tables()["TableNames"]:
        for page in client.get_paginator("scan").paginate(TableName=table):
            total += sum(item_size(item) + 100 for item in page["Items"])
    return total


def measure_routes(
    workload: Workload,
    target: Target,
    n: int,
    hooks: Hooks,
    log: measure.CallLog,
    progress: Callable[[str], None],
    vectors_batched: Callable[[bool], None] | None = None,
) -> tuple[list[RouteCost], float, float | None]:
    """Every route's use, the DynamoDB bytes a one-message add leaves stored and (given the switch
    of ``VectorWrites``) the adds per PutVectors the batched add saw here."""
    workload.seed()
    turn, records = datasets.typical_turn_and_records()
    typical = typical_cases(target, Scope.fresh("typical"), turn, records)
    rows = []
    for case in workload.cases:
        label, case = typical.get(case.route, (case.route, case))
        progress(f"  cost: {label}")
        rows.append(replace(route_cost(case, target, n, hooks, log), route=label))
    progress(f"  cost: {ONE_MESSAGE_ADD}")
    client = dynamodb_client(hooks)
    scope = Scope.fresh("cost")
    single = one_message_add(target, scope, turn)
    before = dynamodb_bytes(client)
    row = route_cost(single, target, n, hooks, log)
    stored = (dynamodb_bytes(client) - before) / (2 * n + 2)  # two warm-up adds, n timed, n delayed
    row.route = ONE_MESSAGE_ADD
    rows.append(row)
    progress(f"  cost: {SESSION_DELETE}")
    rows.append(replace(route_cost(session_delete(target, scope, turn), target, n, hooks, log), route=SESSION_DELETE))
    for label, case in held_erasures(target, turn, lambda: quiet(hooks)):  # the routes are warm already
        progress(f"  cost: {label}")
        rows.append(replace(route_cost(case, target, HELD_REQUESTS, hooks, log, warm=0), route=label))
    # the month's search as its users make it: over a real user's year of turns (formation off, the
    # template's default, forms no record: no vector query for records), then with its records
    progress(f"  cost: {TURNS_SEARCH} (loading a LoCoMo conversation)")
    questions, add_its_records = real_user(target)
    row = route_cost(Case(SEARCH, questions), target, n, hooks, log)
    row.route = TURNS_SEARCH
    rows.append(row)
    seen = None
    if vectors_batched is not None:
        record_label, record_add = typical["/v3/atomic/add"]
        for case, label in [(single, ONE_MESSAGE_ADD), (record_add, record_label)]:
            progress(f"  cost: {label}{BATCHED}")
            batched, adds_per_put = batched_add(case, label, target, n, hooks, log, vectors_batched)
            seen = adds_per_put if seen is None else seen
            rows.append(batched)
        # batched, a search also reads the user's vectors still waiting (one Query a meaning half)
        progress(f"  cost: {BATCHED_SEARCH}")
        vectors_batched(True)
        try:
            row = route_cost(Case(SEARCH, questions), target, n, hooks, _Requests(log))
        finally:
            vectors_batched(False)
        row.route = BATCHED_SEARCH
        rows.append(row)
    progress(f"  cost: {RECORDS_SEARCH} (adding its observations as records)")
    add_its_records()
    row = route_cost(Case(SEARCH, questions), target, n, hooks, log)
    row.route = RECORDS_SEARCH
    rows.append(row)
    return rows, stored, seen


def real_user(target: Target) -> tuple[Callable[[int], dict[str, Any]], Callable[[], None]]:
    """The month's user as real data: the LoCoMo conversation whose turns are nearest the
    ``ADDS × MONTHS_KEPT`` (600) the month's user holds (conv-42: 629 turns), stored as one user's
    turns with their times; its questions (the i-th search asks the i-th, as the recall section
    does: ``limit`` 10, asked when the data set says); and what adds its observations as its
    records, citing their turns. A search's read units follow what the user
    holds and what is asked: a handful of identical turns asked their own words would understate
    them."""
    corpus = datasets.user_like(ADDS * MONTHS_KEPT)
    endpoint = recall.Endpoint(target, None, "cost")
    loaded = recall.Loaded(corpus, Scope.fresh("user"))
    recall.add_turns(endpoint, loaded, corpus.turns)
    asked = corpus.questions

    def question(i: int) -> dict[str, Any]:
        q = asked[i % len(asked)]
        body = loaded.scope.body(query=q.text, limit=recall.LIMIT)
        return body | ({"reference_time": q.asked} if q.asked else {})

    return question, lambda: recall.add_records(endpoint, loaded, corpus.records)


# ---------------------------------------------------------------- the month


@dataclass
class Month:
    adds: float
    searches: float
    requests_usd: float
    storage_usd: float
    bytes_per_message: float

    @property
    def total(self) -> float:
        return self.requests_usd + self.storage_usd


def month(add: RouteCost, search: RouteCost, dynamodb_bytes_per_message: float) -> Month:
    """The stated workload's monthly bill at steady state (a year of turns held)."""
    adds, searches = USERS * ADDS, USERS * SEARCHES
    requests = adds * sum(add.dollars(GROUP_INDEX).values()) + searches * sum(search.dollars(GROUP_INDEX).values())
    held = LARGE_INDEX
    storage = held * dynamodb_bytes_per_message / GB * prices.DYNAMODB_STORAGE.usd
    storage += held * VECTOR_BYTES / GB * prices.S3_VECTORS_STORAGE.usd
    return Month(adds, searches, requests, storage, dynamodb_bytes_per_message)


def peers() -> list[tuple[str, str, str]]:
    """(peer, monthly USD for the workload or why not, the prices used)."""
    events = USERS * ADDS
    retrievals = USERS * SEARCHES
    low_records, high_records = LARGE_INDEX * 0.1, LARGE_INDEX * 0.5  # records extracted per turn: 0.1 to 0.5
    base = events / 1000 * prices.AGENTCORE_EVENT.usd + retrievals / 1000 * prices.AGENTCORE_RETRIEVAL.usd
    low = base + low_records / 1000 * prices.AGENTCORE_RECORD.usd
    high = base + high_records / 1000 * prices.AGENTCORE_RECORD.usd
    agentcore = (
        f"${low:,.0f}–{high:,.0f}",
        f"${prices.AGENTCORE_EVENT.usd} per 1,000 events, ${prices.AGENTCORE_RETRIEVAL.usd} per 1,000 retrievals, "
        f"${prices.AGENTCORE_RECORD.usd} per 1,000 records a month, 0.1–0.5 records kept per turn "
        f"({prices.AGENTCORE_EVENT.source})",
    )
    zep = (
        "not verified",
        f"Flex ${prices.ZEP_FLEX.usd:.0f} a month for 20,000 credits; the workload adds {events:,} turns a month "
        f"and the price of credits past the plan was not found ({prices.ZEP_FLEX.source})",
    )
    mem0 = (
        "not verified",
        f"Pro ${prices.MEM0_PRO.usd:.0f} a month; its limits at this volume were not found ({prices.MEM0_PRO.source})",
    )
    return [("Bedrock AgentCore Memory", *agentcore), ("Zep", *zep), ("mem0", *mem0)]


# ---------------------------------------------------------------- the report

SMALL_INDEX = 1_000


def _largest(row: RouteCost, index_vectors: int) -> list[tuple[str, float]]:
    """The three services a request spends most on (USD a request), the largest first."""
    spent = sorted(row.dollars(index_vectors).items(), key=lambda kv: -kv[1])
    return [(name, usd) for name, usd in spent[:3] if usd > 0]


def report(rows: list[RouteCost], stored: float, adds_per_put: float | None = None) -> dict[str, Any]:
    """The section's results: every route's use and its price, the month and the peers (``render``
    prints them; what it shows is all here, so a record renders the same after prices.py changes)."""
    by_route = {row.route: row for row in rows}
    search = by_route.get(TURNS_SEARCH, by_route[SEARCH])  # a record of before has no turns-only row
    batched = by_route.get(BATCHED_ADD)
    # the template's default, VectorWrites Batched: its add, and its search (which reads what waits)
    add, default_search = batched or by_route[ONE_MESSAGE_ADD], by_route.get(BATCHED_SEARCH, search)
    bill = month(add, default_search, stored)
    extra = default_search.dollars(GROUP_INDEX)["DynamoDB"] - search.dollars(GROUP_INDEX)["DynamoDB"]
    records_search = by_route.get(RECORDS_SEARCH, by_route[SEARCH])  # a record of before has no real user
    with_records = month(add, records_search, stored)
    with_records.requests_usd += with_records.searches * 2 * max(extra, 0.0)  # each meaning half reads what waits
    immediate = month(by_route[ONE_MESSAGE_ADD], search, stored) if batched is not None else None
    return {
        "routes": [row.__dict__ | {"billed_ms": row.billed_ms,
                                   "usd_per_million": sum(row.dollars(SMALL_INDEX).values()) * 1e6,
                                   "usd_per_million_6m_vectors": sum(row.dollars(GROUP_INDEX).values()) * 1e6,
                                   "largest": _largest(row, SMALL_INDEX)}
                   for row in rows],
        "month": bill.__dict__ | {"total": bill.total, "with_records": with_records.total,
                                  "search": default_search.route, "add": add.route,
                                  "records_search": records_search.route},
        "search_by_groups": {str(g): sum(default_search.dollars(LARGE_INDEX // g).values()) * 1e6
                             for g in GROUP_CHOICES},
        "batched_add_by_window": _by_window(batched),
        "batched_record_add_by_window": _by_window(by_route.get(BATCHED_RECORD_ADD)),
        "month_immediate": None if immediate is None else immediate.__dict__ | {
            "total": immediate.total, "adds_per_batch": drained_batch(), "drain_minutes": DRAIN_MINUTES,
            "adds_per_put_here": adds_per_put},
        "workload": {"users": USERS, "adds": ADDS, "searches": SEARCHES, "months_kept": MONTHS_KEPT,
                     "turns_held": LARGE_INDEX, "vector_bytes": VECTOR_BYTES, "groups": GROUPS,
                     "group_index": GROUP_INDEX},
        "erasure_per_item": {label: by_route[label].wru / items for label, items in
                             ((ONE_MESSAGE_DELETE, 1), (ONE_RECORD_DELETE, 1), (SESSION_DELETE, SESSION_MESSAGES),
                              (MEMORY_CLEAR, HELD_MESSAGES), (USER_DELETE, HELD_MESSAGES))
                             if label in by_route},
        "peers": peers(),
        "prices_checked": prices.CHECKED,
        "unverified": [p.per for p in _all_prices() if not p.verified],
    }  # fmt: skip


def _by_window(batched: RouteCost | None) -> dict[str, list[float]] | None:
    """A batched add's price by drain (``60 min``: ``VectorDrainMinutes``) and by the event source's
    window (``300 s``: ``VectorBatchSeconds``, ``VectorDrainMinutes`` 0): [adds a batch, PutVectors
    an add, $ per 1M]."""
    if batched is None:
        return None
    batches = [(f"{m} min", drained_batch(m), True) for m in DRAIN_CHOICES]
    batches += [(f"{w} s", workload_batch(w), False) for w in WINDOW_CHOICES]
    return {
        name: [b, puts_per_add(b), sum(rebatched(batched, b, drained).dollars(SMALL_INDEX).values()) * 1e6]
        for name, b, drained in batches
    }


def _all_prices() -> list[prices.Price]:
    return [value for value in vars(prices).values() if isinstance(value, prices.Price)]
