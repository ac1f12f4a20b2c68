"""Exact counters of a memory epoch: items and search tokens per user and layer.

A session's messages are counted when asked, from the ``by-session`` index: a counter per session
cost every add and every erasure of a message two write units (one item more in their transaction,
which bills twice) for a count few clients ask for. Epochs written before 2026-12-05 may still hold
such counters (keys starting ``S``, then the user's and the session's digests): nothing reads them,
and a user's erasure (``forget_user``) or the end of the epoch (``drop``) deletes them with the rest.

They change in the same transaction as the items they count, so counts never drift; the users of
a memory epoch are the users that have a counter (clear and cleanup enumerate them here).

An import counts what it writes as it writes it, and notes the same amounts on the counter under
its id (``staged``); a count subtracts the notes of the imports its ``Where`` says are still
running. So the counts move by a whole import in the one write that commits it (its id leaving the
asset's set), never while it runs, and an import that is rolled back leaves them as they were."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from pynamodb.exceptions import DeleteError
from pynamodb.expressions.operand import Path
from pynamodb.expressions.update import Action

from . import layout, vectors
from .concurrency import for_each
from .models import Counter
from .transactions import Transaction
from .views import Asset


@dataclass(frozen=True)
class Where:
    """One memory epoch: every counter and item key derives from it. ``staged``: the imports
    running into it, as its asset said when it was read — reads leave out what they wrote (their
    items and their share of the counters); empty for writers and erasures, which see everything.
    ``groups``: the memory's groups of users in its vector indexes (the asset's, fixed for its life);
    ``bucket``: the vector bucket pinned on its asset ('' for a memory of before: ``vector_bucket``);
    ``words``: its messages' words are indexed with their vectors (the asset's ``word_index``)."""

    team_id: str
    agent_id: str
    epoch: int
    memory_id: str = ""
    staged: frozenset[str] = field(default=frozenset())
    groups: int = 1
    bucket: str = ""
    words: bool = False

    @classmethod
    def of(cls, asset: Asset, staged: frozenset[str] = frozenset()) -> Where:
        """The asset's current epoch."""
        groups = int(asset.vector_groups or 1)
        bucket = asset.vector_bucket or ""
        words = asset.word_index == WORDS_IN_VECTORS
        return cls(asset.team_id, asset.agent_id, int(asset.epoch), asset.memory_id, staged, groups, bucket, words)

    @property
    def vector_bucket(self) -> str:
        """The vector bucket the memory's indexes are in ('' when the stack has none)."""
        return vectors.home(self.team_id, self.agent_id, self.bucket or None)

    def everything(self) -> Where:
        """The same epoch, staged items included (erasures reach what an import has written)."""
        return replace(self, staged=frozenset()) if self.staged else self

    def item_pk(self, layer: str, user_id: str) -> str:
        return layout.item_pk(layer, self.team_id, self.agent_id, self.epoch, user_id)

    @property
    def counter_pk(self) -> str:
        return layout.counter_pk(self.team_id, self.agent_id, self.epoch)


WORDS_IN_VECTORS = "vectors"  # an asset's ``word_index`` when its messages' words are in their vectors
TOKENS = ".t"  # suffix of an import's staged token count in ``Counter.staged``


def _staging(import_id: str | None, items: int, tokens: int) -> list[Action]:
    """The notes an import's write adds to a counter beside ``n``/``tl`` (the map exists: see
    ``prepare_staging``)."""
    if import_id is None:
        return []
    actions: list[Action] = []
    for key, amount in ((import_id, items), (import_id + TOKENS, tokens)):
        if amount:
            path = Path([Counter.staged.attr_name, key])
            actions.append(path.set((path | 0) + amount))
    return actions


def change(
    transaction: Transaction,
    where: Where,
    layer: str,
    user_id: str,
    items: int,
    tokens: int = 0,
    *,
    staged: str | None = None,
    shares: Mapping[str, tuple[int, int]] | None = None,
    posted: int = 0,
) -> None:
    """Move a user's counter of one layer; ``staged``: the import writing (or undoing) these items;
    ``shares``: of these items, (items, tokens) each running import staged (an erasure reaching
    them moves their notes with the count); ``posted``: of these items, those indexed by postings
    in a memory whose words are in its vectors (a search reads postings only while some are)."""
    if items == 0 and tokens == 0 and posted == 0:
        return
    actions: list[Action] = [Counter.user_id.set(user_id)]
    if items:
        actions.append(Counter.item_count.add(items))
    if tokens:
        actions.append(Counter.token_count.add(tokens))
    if posted:
        actions.append(Counter.posted.add(posted))
    actions += _staging(staged, items, tokens)
    for import_id, (share, share_tokens) in (shares or {}).items():
        actions += _staging(import_id, share, share_tokens)
    transaction.update("counter", Counter(where.counter_pk, layout.user_counter_sk(layer, user_id)), actions)


def prepare_staging(where: Where, layers: Iterable[tuple[str, str]]) -> None:
    """Before an import's first write: the counters it will move — (layer, user) — each get the map
    its notes go in (DynamoDB sets a map key only in a map that exists, and one update may not make
    the map and a key of it). Idempotent."""

    def one(key: tuple[str, str]) -> None:
        layer, user_id = key
        actions: list[Any] = [Counter.staged.set(Counter.staged | {}), Counter.user_id.set(user_id)]
        Counter(where.counter_pk, layout.user_counter_sk(layer, user_id)).update(actions=actions)

    for_each(one, list(dict.fromkeys(layers)), width=8)


def visible(counter: Counter, staged: frozenset[str]) -> tuple[int, int]:
    """(items, tokens) a counter holds, less what imports still running staged in it."""
    items, tokens = int(counter.item_count or 0), int(counter.token_count or 0)
    notes: dict[str, Any] = counter.staged.as_dict() if counter.staged is not None and staged else {}  # type: ignore[no-untyped-call]
    for import_id in staged:
        items -= int(notes.get(import_id, 0))
        tokens -= int(notes.get(import_id + TOKENS, 0))
    return max(items, 0), max(tokens, 0)


def of_user(where: Where, layer: str, user_id: str) -> tuple[int, int]:
    """(items, tokens) of one user in one layer."""
    found = held(where, layer, user_id)
    return found.items, found.tokens


@dataclass(frozen=True)
class Held:
    """What a user holds in one layer: items, search tokens, and — in a memory whose words are in
    its vectors — how many of the items have postings."""

    items: int
    tokens: int
    posted: int


def held(where: Where, layer: str, user_id: str) -> Held:
    """``of_user`` with the items that have postings (``posted``; an import's staged items count
    as posted while it runs: what it wrote has postings)."""
    try:
        counter = Counter.get(where.counter_pk, layout.user_counter_sk(layer, user_id), consistent_read=True)
    except Counter.DoesNotExist:
        return Held(0, 0, 0)
    return Held(*visible(counter, where.staged), int(counter.posted or 0))


def _all(where: Where) -> list[Counter]:
    return list(Counter.query(where.counter_pk, consistent_read=True))


def layer_totals(where: Where) -> dict[str, int]:
    """Items per layer in the memory epoch: the sum of its per-user counters (one Query)."""
    totals = {"L0": 0, "L1": 0}
    for counter in _all(where):
        layer, _, rest = counter.sk.partition(layout.SEP)
        if layer in totals and layout.SEP not in rest:
            totals[layer] += visible(counter, where.staged)[0]
    return totals


def users(where: Where) -> list[str]:
    """Every user that has (or had) items in the memory epoch."""
    return sorted({c.user_id for c in _all(where) if c.user_id is not None})


def _user_counters(where: Where, user_id: str) -> list[Counter]:
    """The counters of one user (its layers, and its sessions' of before) — erased with the user's memory."""
    marker = layout.digest(user_id)
    return [c for c in _all(where) if marker in c.sk.split(layout.SEP)[1:2]]


def drop(where: Where) -> int:
    """Delete every counter of the memory epoch (the end of its erasure)."""
    found = _all(where)
    with Counter.batch_write() as batch:
        for counter in found:
            batch.delete(counter)
    return len(found)


def forget_user(where: Where, user_id: str) -> int:
    """Delete a user's counters once they count nothing (after their memory was erased); a
    counter that a concurrent add moved on stays."""
    dropped = 0
    for counter in _user_counters(where, user_id):
        try:
            legacy = counter.sk.startswith(layout.SESSION_COUNTERS)  # a session's counter of before: no longer kept
            counter.delete(condition=None if legacy else Counter.item_count == 0)
            dropped += 1
        except DeleteError as exc:
            if exc.cause_response_code != "ConditionalCheckFailedException":
                raise
    return dropped
