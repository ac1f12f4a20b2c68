"""Formation: what forming memory from LoCoMo's conversations costs — model calls, tokens and
characters, records formed, dropped entries, and the lag from a message's ``conversation/add`` to a
record citing it — measured on a local stack of its own.

Method. A stack of its own (``Stack.with_hooks``: ephemeral, the template's ``Embeddings`` as the
bench's other sections use it, ``Formation`` Enabled, ``FormationBatch`` the template's default,
``FormationIdleSeconds`` ``IDLE_S``) relays Bedrock's ``Converse`` through a counting relay
(``formation_meter``) to the model: the scripted model (``memory_hub_local.scripted_llm``, in this
process: one ``episodic`` record per user-role message, "The user said: …", so its tokens are a
count of characters ÷ 4 and its records mirror the messages) or, with ``--formation-url``, a real
OpenAI-compatible server. LoCoMo's conversations are stored as the recall bench stores them (one
user each, a session's turns a request at their real dates; ``formation_watch``), while a watcher
polls each user's records; then the bench waits until every user's formation has settled
(``formation/status``: nothing pending, idle) and reads the records and statuses. Stored back to
back, the conversations are a backlog, and their lag measures how fast the stack forms it; so a
*paced* probe follows on the same stack, otherwise idle: the first conversation's first sessions
again as a user of their own, each session added once the one before is formed (its model calls
are not counted in the figures per 1,000 messages).

Per 1,000 stored messages (both roles): model calls, input and output tokens (as the model server
reports them), characters sent and received, records formed; the cost at the list price of the
template's default model (``prices``); dropped entries; lag p50/p95 for messages
in a full batch and in a session's last partial batch (formed by the idle timer). With ``all``
(``--formation-layers all``, a stack of its own: the memory created with ``formation: all``), the
scene and persona calls are counted apart. Then the formed records are scored against LoCoMo's
session observations (``formation_score``) — with the scripted model a sanity check of the
scoring, not a result."""

from __future__ import annotations

import copy
import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from memory_hub_local import scripted_llm

from . import formation_meter, formation_score, prices
from .cases import Scope
from .client import Target
from .datasets import Corpus, load_locomo
from .formation_watch import FULL, IDLE, Stored, Watcher, records, settle, store
from .recall import Endpoint, percentile

IDLE_S = 5  # FormationIdleSeconds for the bench (the template's default is 600)
POLL_S = 1.0  # the watcher's round: each user's records polled once a round
SETTLE_TIMEOUT_S = 3600.0
PROBE_SESSIONS = 8  # the paced probe: this many sessions of the first conversation, one at a time
QUICK_PROBE_SESSIONS = 4
PROBE_POLL_S = 0.25  # its watcher's round (one user)
QUICK_CONVERSATIONS = 2
SAVE = scripted_llm.SAVE_MEMORIES
IDLE_BOUND_S = 60  # the API promises: an idle batch runs no later than FormationIdleSeconds + this

# Nova Lite's on-demand list prices live with every other price, in ``prices`` (source and date there).
PRICE_MODEL = prices.NOVA_LITE_MODEL
PRICE_INPUT_PER_1K_TOKENS = prices.NOVA_LITE_INPUT.usd
PRICE_OUTPUT_PER_1K_TOKENS = prices.NOVA_LITE_OUTPUT.usd
PRICE_SOURCE = f"{prices.NOVA_LITE_INPUT.source} (on-demand, us-east-1, checked {prices.CHECKED})"


def cost(input_tokens: float, output_tokens: float) -> float:
    """USD at PRICE_MODEL's on-demand list price."""
    return input_tokens / 1000 * PRICE_INPUT_PER_1K_TOKENS + output_tokens / 1000 * PRICE_OUTPUT_PER_1K_TOKENS


@dataclass
class Settings:
    quick: bool
    embeddings: str
    key: str  # the stack's bootstrap admin key
    conversations: int | None = None  # None: all 10
    url: str | None = None  # a real OpenAI-compatible model (None: the scripted one)
    model: str = ""  # the name sent there
    model_key: str = ""
    layers: tuple[str, ...] = ("records",)
    idle_s: int = IDLE_S
    poll_s: float = POLL_S

    @property
    def model_label(self) -> str:
        return f"{self.model or PRICE_MODEL} at {self.url}" if self.url else "scripted (memory_hub_local.scripted_llm)"


def settings(quick: bool, embeddings: str, key: str, args: Any) -> Settings:
    conversations = getattr(args, "formation_conversations", None)
    return Settings(
        quick,
        embeddings,
        key,
        conversations if conversations else (QUICK_CONVERSATIONS if quick else None),
        getattr(args, "formation_url", None) or None,
        getattr(args, "formation_model", None) or "",
        getattr(args, "formation_key", None) or "",
        tuple(getattr(args, "formation_layers", None) or ("records",)),
    )


def template_batch() -> int:
    """The template's FormationBatch default (the batch the bench runs with)."""
    from memory_hub_local.template import load_raw

    return int(load_raw()["Parameters"]["FormationBatch"]["Default"])


# ---------------------------------------------------------------- one pass: one stack, one layers setting


@dataclass
class Pass:
    layers: str
    stored: Stored
    watcher: Watcher
    usage: formation_meter.Usage
    statuses: dict[str, dict[str, Any]]
    formed: dict[str, list[dict[str, Any]]]
    settle_s: float
    settled: bool
    batch: int
    idle_s: int
    missed: int  # messages first seen cited in the final read, not by a poll (their "seen" lag is late)
    probe: Probe


@dataclass
class Probe:
    """The paced lag probe: one more user, one session at a time on a stack otherwise idle."""

    stored: Stored
    watcher: Watcher
    sessions: int


def one_pass(config: Settings, layers: str, corpora: list[Corpus], progress: Callable[[str], None]) -> Pass:
    """A stack of its own with formation on, LoCoMo stored and formed, everything read back."""
    from memory_hub_local.stack import Stack

    scripted = None
    upstream = config.url
    if upstream is None:
        scripted, upstream = scripted_llm.serve()
    meter = formation_meter.start(upstream, config.model_key)
    batch = template_batch()
    model_name = config.model if config.url else "scripted"
    with open(os.devnull, "wb") as quiet:
        stack = Stack.with_hooks(
            quiet,
            config.embeddings,
            llm_url=meter.url,
            llm_model=model_name or None,
            formation_batch=batch,
            formation_idle_s=config.idle_s,
        )
        try:
            stack.start()
            progress(f"formation ({layers}): stack up (batch {batch}, idle {config.idle_s} s, {config.model_label})")
            return _form(stack.api_url, config, layers, corpora, batch, meter, progress)
        finally:
            stack.stop()
            formation_meter.stop(meter)
            if scripted is not None:
                scripted_llm.stop(scripted)


def _form(api_url: str, config: Settings, layers: str, corpora: list[Corpus], batch: int,
          meter: formation_meter.MeterServer, progress: Callable[[str], None]) -> Pass:  # fmt: skip
    target = Target("memory-hub", api_url, config.key)
    team = Scope.fresh("formation").team
    endpoint = Endpoint(target, None, team)
    agent = f"formation-{layers}"
    if layers == "all":
        endpoint.post("/v3/memory/create", {"team_id": team, "agent_id": agent, "formation": "all"})
    stored = Stored()
    watcher = Watcher(endpoint, stored, config.poll_s).start()
    try:
        store(endpoint, lambda c: Scope(team, agent, f"locomo-{c.name}"), corpora, batch, stored, progress)
        progress(f"formation ({layers}): {len(stored.sent)} messages stored in {stored.seconds:.0f} s; forming")
        statuses, waited, settled = settle(endpoint, stored, SETTLE_TIMEOUT_S, progress)
        time.sleep(config.poll_s * 2)  # the watcher's last rounds
    finally:
        watcher.stop()
    polled = len(watcher.seen)
    formed = records(watcher, stored)
    progress(f"formation ({layers}): settled after {waited:.0f} s" if settled else "formation: did not settle")
    missed = len(watcher.seen) - polled
    with meter.lock:
        usage = copy.deepcopy(meter.usage)  # the probe's calls are not counted
    probe = _probe(endpoint, Scope(team, agent, "probe"), corpora[0], batch, config, progress)
    return Pass(layers, stored, watcher, usage, statuses, formed, waited, settled, batch, config.idle_s, missed, probe)


def _probe(endpoint: Endpoint, scope: Scope, corpus: Corpus, batch: int, config: Settings,
           progress: Callable[[str], None]) -> Probe:  # fmt: skip
    """Lag on a stack with nothing else to form: the first conversation's first sessions again, as
    a user of their own, each session stored once the one before is formed (as a live conversation
    comes, sessions apart)."""
    sessions = QUICK_PROBE_SESSIONS if config.quick else PROBE_SESSIONS
    stored = Stored()
    watcher = Watcher(endpoint, stored, PROBE_POLL_S).start()

    def formed() -> None:
        settle(endpoint, stored, SETTLE_TIMEOUT_S, lambda text: None)

    user = f"{scope.user}-{corpus.name}"
    try:
        store(endpoint, lambda c: Scope(scope.team, scope.agent, user), [corpus], batch, stored, progress,
              sessions=sessions, pause=formed)  # fmt: skip
        time.sleep(PROBE_POLL_S * 4)  # the watcher's last rounds
    finally:
        watcher.stop()
    return Probe(stored, watcher, sessions)


# ---------------------------------------------------------------- figures


def lags(stored: Stored, watcher: Watcher, idle_s: int) -> dict[str, dict[str, Any]]:
    """Lag p50/p95 (seen by the watcher, and written) per batch kind, how many were cited, and how
    many were cited later than the contract's bound for an idle batch."""
    out: dict[str, dict[str, Any]] = {}
    for kind in (FULL, IDLE):
        ids = [m for m, s in stored.sent.items() if s.kind == kind]
        seen = [watcher.seen[m] - stored.sent[m].answered for m in ids if m in watcher.seen]
        written = [watcher.written[m] - stored.sent[m].answered for m in ids if m in watcher.written]
        out[kind] = {
            "messages": len(ids),
            "cited": len(seen),
            "written_after_idle_plus_60_s": sum(1 for s in written if s > idle_s + IDLE_BOUND_S),
            "seen_p50_s": round(percentile(seen, 0.5), 2),
            "seen_p95_s": round(percentile(seen, 0.95), 2),
            "written_p50_s": round(percentile(written, 0.5), 2),
            "written_p95_s": round(percentile(written, 0.95), 2),
        }
    return out


def per_thousand(value: float, messages: int) -> float:
    return 1000 * value / messages if messages else math.nan


def figures(done: Pass, config: Settings) -> dict[str, Any]:
    messages = len(done.stored.sent)
    records_now = sum(int(s.get("records_formed") or 0) for s in done.statuses.values())
    errors = [s["last_error"] for s in done.statuses.values() if s.get("last_error")]
    rounds = done.watcher.rounds
    tools: dict[str, dict[str, float]] = {
        "records (save_memories)": done.usage.summary((SAVE,)),
        "scenes and persona": done.usage.summary(tuple(t for t in done.usage.calls if t != SAVE)),
        "all calls": done.usage.summary(),
    }
    for row in tools.values():
        row["cost_usd"] = round(cost(row["input_tokens"], row["output_tokens"]), 6)
        for name in ("calls", "input_tokens", "output_tokens", "input_chars", "output_chars", "cost_usd"):
            row[f"{name}_per_1000"] = round(per_thousand(row[name], messages), 6 if name == "cost_usd" else 1)
    return {
        "layers": done.layers,
        "model": config.model_label,
        "batch": done.batch,
        "idle_s": config.idle_s,
        "embeddings": config.embeddings,
        "users": len(done.stored.loaded),
        "messages": messages,
        "user_messages": sum(1 for s in done.stored.sent.values() if s.role == "user"),
        "calls_by_function": dict(done.usage.calls),
        "calls": tools,
        "tokens_estimated_calls": done.usage.estimated,
        "model_seconds_p50": round(percentile(done.usage.seconds, 0.5), 3),
        "records_formed": records_now,
        "records_per_1000": round(per_thousand(records_now, messages), 1),
        "dropped": sum(int(s.get("dropped") or 0) for s in done.statuses.values()),
        "paused_users": sum(1 for s in done.statuses.values() if s.get("state") == "paused"),
        "last_errors": errors,
        "lag": lags(done.stored, done.watcher, done.idle_s),
        "paced": {
            "user": next(iter(done.probe.stored.loaded), None),
            "sessions": done.probe.sessions,
            "messages": len(done.probe.stored.sent),
            "poll_s": PROBE_POLL_S,
            "poll_round_p95_s": round(percentile(done.probe.watcher.rounds, 0.95), 2),
            "lag": lags(done.probe.stored, done.probe.watcher, done.idle_s),
        },
        "not_cited": messages - len(done.watcher.seen.keys() & done.stored.sent.keys()),
        "poll_s": config.poll_s,
        "poll_round_p50_s": round(percentile(rounds, 0.5), 2),
        "poll_round_p95_s": round(percentile(rounds, 0.95), 2),
        "poll_failures": done.watcher.failures,
        "missed_by_polling": done.missed,
        "store_s": round(done.stored.seconds, 1),
        "settle_s": round(done.settle_s, 1),
        "settled": done.settled,
    }


def facts(done: Pass) -> tuple[list[formation_score.Fact], list[formation_score.Fact]]:
    """LoCoMo's observations and the formed records, as the scorer takes them (records' sources
    mapped to the data set's turn ids)."""
    observations = [
        formation_score.Fact(user, record.content, record.sources)
        for user, loaded in done.stored.loaded.items()
        for record in loaded.corpus.records
    ]
    formed = []
    for user, items in done.formed.items():
        to_turn = done.stored.loaded[user].messages
        for item in items:
            if item.get("formed"):
                turns = frozenset(t for m in item.get("source_message_ids") or [] for t in to_turn.get(m, ()))
                formed.append(formation_score.Fact(user, str(item["content"]), turns))
    return observations, formed


# ---------------------------------------------------------------- the section


def run(config: Settings, progress: Callable[[str], None]) -> dict[str, Any]:
    """The section's results (``formation_print.render`` prints them)."""
    began = time.perf_counter()
    every = load_locomo()
    corpora = every.corpora[: config.conversations]
    passes: list[dict[str, Any]] = []
    scores: dict[str, Any] = {}
    for layers in config.layers:
        done = one_pass(config, layers, corpora, progress)
        passes.append(figures(done, config))
        if layers == config.layers[0]:
            observations, formed = facts(done)
            progress(f"formation: scoring {len(formed)} formed records against {len(observations)} observations")
            scored = formation_score.score(observations, formed, formation_score.local_embed)
            scores = scored.figures() | {"model": config.model_label, "scripted": config.url is None}
    price = {
        "model": PRICE_MODEL,
        "input_per_1k_tokens_usd": PRICE_INPUT_PER_1K_TOKENS,
        "output_per_1k_tokens_usd": PRICE_OUTPUT_PER_1K_TOKENS,
        "source": PRICE_SOURCE,
    }
    return {
        "conversations": len(corpora),
        "scripted": config.url is None,
        "passes": passes,
        "score": scores,
        "price": price,
        "seconds": round(time.perf_counter() - began, 1),
    }
