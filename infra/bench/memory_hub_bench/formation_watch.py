"""The formation section's view of a stack while it forms: LoCoMo stored as the recall bench stores
it (``recall.add_turns``, one session's consecutive turns a request), each message's answer time
kept; a watcher that polls each user's formed records; the wait until every user's formation has
settled; and the final reads.

**Lag.** A message's lag runs from the moment its ``conversation/add`` answered (at the client) to
the first moment a record citing it existed, measured two ways: *seen* — when the watcher's poll
first returned such a record (every user's ``atomic/query`` for records updated since the previous
round, less an overlap of ``OVERLAP_S``, every ``poll_s``: its resolution is a round's period, the
interval or a round's own length when longer); and *written* — that record's ``updated_at`` at
first sight (the server's clock, the same machine's: milliseconds). A message is in a **full batch**
when its position in its session is below the largest multiple of the batch size there (a session's
messages are formed oldest first, a batch at a time, as soon as ``FormationBatch`` wait), else in
the session's **last partial batch**, which only the idle timer (``FormationIdleSeconds`` after the
session's last add) forms."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from .cases import Scope
from .client import BenchError
from .datasets import Corpus, Turn
from .recall import Endpoint, Loaded, add_turns, batches

OVERLAP_S = 10.0  # each poll reads records updated since the previous round began, less this
PAGE = 100  # atomic/query's largest page
SETTLE_POLL_S = 2.0
FULL, IDLE = "full batch", "partial batch (idle timer)"


def iso(moment: float) -> str:
    return datetime.fromtimestamp(moment, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def seconds_of(value: str) -> float:
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


def batch_kinds(turns: Sequence[Turn], batch: int) -> dict[str, str]:
    """Each turn's batch kind (by its key): FULL when its position in its session is below the
    largest multiple of ``batch`` there, else IDLE."""
    sizes: dict[str, int] = {}
    for turn in turns:
        sizes[turn.session] = sizes.get(turn.session, 0) + 1
    kinds: dict[str, str] = {}
    seen: dict[str, int] = {}
    for turn in turns:
        position = seen.get(turn.session, 0)
        seen[turn.session] = position + 1
        kinds[turn.key] = FULL if position < sizes[turn.session] // batch * batch else IDLE
    return kinds


@dataclass(frozen=True)
class Sent:
    """One stored message: whose, which turn, its role, its batch kind, when its add answered."""

    user: str
    turn: str
    role: str
    kind: str
    answered: float


@dataclass
class Stored:
    """Everything stored on one stack: per message id, what was sent; per user, its memory."""

    sent: dict[str, Sent] = field(default_factory=dict)
    loaded: dict[str, Loaded] = field(default_factory=dict)  # by user id
    seconds: float = 0.0


def store(endpoint: Endpoint, scope_of: Callable[[Corpus], Scope], corpora: Sequence[Corpus], batch: int,
          stored: Stored, progress: Callable[[str], None], *, sessions: int | None = None,
          pause: Callable[[], None] | None = None) -> None:  # fmt: skip
    """Every corpus's turns (of its first ``sessions`` sessions; all with None) through
    ``conversation/add`` as the recall bench sends them, one session's consecutive turns a request,
    each message's answer time kept; ``pause`` is called after each request."""
    began = time.perf_counter()
    for corpus in corpora:
        scope = scope_of(corpus)
        loaded = Loaded(corpus, scope)
        stored.loaded[scope.user] = loaded
        kept = first_sessions(corpus.turns, sessions)
        kinds = batch_kinds(kept, batch)
        progress(f"formation: storing {corpus.name} ({len(kept)} turns) as {scope.user}")
        for chunk in batches(kept):
            before = set(loaded.messages)
            add_turns(endpoint, loaded, chunk)
            answered = time.time()
            roles = {t.key: t.role for t in chunk}
            for message_id in set(loaded.messages) - before:
                (turn,) = loaded.messages[message_id]
                stored.sent[message_id] = Sent(scope.user, turn, roles[turn], kinds[turn], answered)
            if pause is not None:
                pause()
    stored.seconds = time.perf_counter() - began


def first_sessions(turns: Sequence[Turn], sessions: int | None) -> list[Turn]:
    """The turns of the first ``sessions`` sessions (all of them with None)."""
    if sessions is None:
        return list(turns)
    names = list(dict.fromkeys(t.session for t in turns))[:sessions]
    return [t for t in turns if t.session in names]


@dataclass
class Watcher:
    """Polls every user's formed records until stopped: when each message was first cited."""

    endpoint: Endpoint
    stored: Stored
    poll_s: float
    seen: dict[str, float] = field(default_factory=dict)  # message id → when a poll first saw it cited
    written: dict[str, float] = field(default_factory=dict)  # … that record's updated_at then
    rounds: list[float] = field(default_factory=list)  # each round's period (s)
    failures: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> Watcher:
        self._thread = threading.Thread(target=self._run, daemon=True, name="formation-watch")
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def _run(self) -> None:
        since: float | None = None
        while not self._stop.is_set():
            began = time.time()
            for loaded in list(self.stored.loaded.values()):
                self.poll(loaded.scope, None if since is None else since - OVERLAP_S)
            since = began
            self._stop.wait(max(0.0, self.poll_s - (time.time() - began)))
            self.rounds.append(time.time() - began)

    def poll(self, scope: Scope, updated_since: float | None) -> list[dict[str, Any]]:
        """The user's records updated since then (all of them with None), each source seen."""
        found: list[dict[str, Any]] = []
        extra = {} if updated_since is None else {"time_start": iso(updated_since)}
        while True:
            try:
                _, data = self.endpoint.post("/v3/atomic/query", scope.body(limit=PAGE, offset=len(found), **extra))
            except BenchError:
                self.failures += 1
                return found
            now = time.time()
            items = list(data.get("items") or [])
            for item in items:
                for message_id in item.get("source_message_ids") or []:
                    if message_id not in self.seen:
                        self.seen[message_id] = now
                        self.written[message_id] = seconds_of(str(item["updated_at"]))
            found += items
            if not items or len(found) >= int(data.get("total") or 0):
                return found


def status(endpoint: Endpoint, scope: Scope) -> dict[str, Any]:
    _, data = endpoint.post("/v3/formation/status", scope.body())
    return dict(data)


def settle(endpoint: Endpoint, stored: Stored, timeout_s: float,
           progress: Callable[[str], None]) -> tuple[dict[str, dict[str, Any]], float, bool]:  # fmt: skip
    """Wait until every user's formation is idle with nothing pending (or paused, or the time is
    up): (each user's last status, the seconds waited, whether all settled)."""
    began = time.perf_counter()
    last: dict[str, dict[str, Any]] = {}
    said = 0.0
    while True:
        for user, loaded in stored.loaded.items():
            if last.get(user, {}).get("state") in ("idle", "paused") and not last[user].get("pending_messages"):
                continue
            last[user] = status(endpoint, loaded.scope)
        waiting = sum(int(s.get("pending_messages") or 0) for s in last.values())
        busy = [u for u, s in last.items() if s.get("pending_messages") or s.get("state") not in ("idle", "paused")]
        waited = time.perf_counter() - began
        if not busy:
            return last, waited, True
        if waited > timeout_s:
            return last, waited, False
        if waited - said >= 30:
            said = waited
            progress(f"formation: {waiting} messages pending for {len(busy)} users after {waited:.0f} s")
        time.sleep(SETTLE_POLL_S)


def records(watcher: Watcher, stored: Stored) -> dict[str, list[dict[str, Any]]]:
    """Every user's records now, read whole (a source first seen here is counted as seen now)."""
    return {user: watcher.poll(loaded.scope, None) for user, loaded in stored.loaded.items()}
