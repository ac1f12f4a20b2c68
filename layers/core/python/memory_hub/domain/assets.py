"""Memory assets: one per (team, agent), created by the first write, never by a read.

Two pairs that spell the same memory_id (team ``a-b`` + agent ``c``; team ``a`` + agent ``b-c``)
are two memories: each has its own asset and content, and neither blocks the other. A route that
names a memory_id acts on the pairs that spell it, have an asset and lie within the key's teams:
exactly one → that one; none → 403 (404 for a ``*`` key); several → 409 ``memory_id ambiguous``
with the candidates, unless the body names ``team_id`` and ``agent_id`` too."""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar, cast

from ..clock import format_ms, now_ms
from ..memory_ids import memory_id_of
from ..settings import get_settings
from ..storage import assets as stored
from ..storage import blobs, bucket, counters, scenes, vectors
from ..storage.audit import EventContext, NewEvent, event_items
from ..storage.concurrency import parallel
from ..storage.views import Asset
from . import tokens
from .errors import Conflict, DomainError, Forbidden, Invalid, NotFound
from .principal import Authorize, Principal
from .results import FormationLayers, Visibility, fitting
from .results_admin import Asset as AssetAnswer
from .results_admin import Assets, AssetWithCounts, LayerCounts
from .scope import Scope

Shown = TypeVar("Shown", bound=AssetAnswer)
Read = TypeVar("Read")
AMBIGUOUS = "memory_id ambiguous"
UNKNOWN = "memory_id: unknown memory"
OUTSIDE = "memory_id: outside this key's teams"


def new_epoch(previous: int) -> int:
    """A content epoch never used before for this memory id, even across a delete and re-create:
    microseconds since 1970, and always above the previous one."""
    return max(int(previous) + 1, time.time_ns() // 1000)


def read_only() -> None:
    """Declare, at a function's cold start, that its role only reads AssetsTable: assets stored
    by the earlier key design are used where they are, never moved from this function."""
    stored.read_only()


def of_pair(team_id: str, agent_id: str) -> Asset | None:
    """The pair's asset. Another pair that spells the same memory_id has its own."""
    return stored.get_pair(team_id, agent_id)


def of_scope(scope: Scope) -> Asset | None:
    return stored.get_pair(scope.team_id, scope.agent_id)


def where_of(asset: Asset) -> counters.Where:
    """The asset's content epoch: where its items and counters are — with the imports running into
    it, whose items and counts every read through this ``Where`` leaves out (nothing of an import
    is visible until it commits). The set rides on the asset every request reads anyway, so the
    filter costs no request; a remembered epoch whose set differs is read again, as after a clear."""
    return counters.Where.of(asset, frozenset(asset.importing or ()))


# The content epoch this execution environment last saw for each pair. A read starts at it beside
# the asset's lookup, so a warm read is one round trip instead of two; it reads again, at the
# asset's epoch, only when the asset says otherwise (a clear since, or a pair not seen yet).
SEEN_PAIRS = 1024
_seen: OrderedDict[tuple[str, str], counters.Where] = OrderedDict()
_seen_lock = threading.Lock()
_MISSED = object()


def _remember(pair: tuple[str, str], where: counters.Where | None) -> None:
    with _seen_lock:
        if where is None:
            _seen.pop(pair, None)
            return
        _seen[pair] = where
        _seen.move_to_end(pair)
        while len(_seen) > SEEN_PAIRS:
            _seen.popitem(last=False)


def read_at_epoch(
    scope: Scope, authorize: Authorize, read: Callable[[counters.Where], Read]
) -> tuple[Asset | None, Read | None]:
    """The pair's asset (None: no memory yet, nothing read) and ``read`` at its content epoch.
    ``read`` only reads (it may run at an epoch the asset no longer has, and its result is then
    dropped) and is never answered before ``authorize`` passed."""
    pair = (scope.team_id, scope.agent_id)
    with _seen_lock:
        guess = _seen.get(pair)
    if guess is None:
        raw, early = of_scope(scope), _MISSED
    else:
        early, raw = parallel(lambda: _attempt(read, guess), lambda: of_scope(scope))
    authorize()
    asset = owned_by(raw, scope.team_id, scope.agent_id)
    where = where_of(asset) if asset is not None else None
    _remember(pair, where)
    if where is None:
        return None, None
    if early is _MISSED or where != guess:
        return asset, read(where)
    return asset, cast(Read, early)


def _attempt(read: Callable[[counters.Where], Read], where: counters.Where) -> Any:
    """``read`` at a guessed epoch; a failure is not the request's (it reads again at the asset's)."""
    try:
        return read(where)
    except Exception:  # noqa: BLE001 - the read is made again once the asset is known
        return _MISSED


def owned_by(asset: Asset | None, team_id: str, agent_id: str) -> Asset | None:
    """The asset if it belongs to this pair."""
    if asset is not None and asset.team_id == team_id and asset.agent_id == agent_id:
        return asset
    return None


def forget_exports(asset: Asset) -> int:
    """Erase every export of a memory: every erasure also erases the exports that may hold what it
    deleted (called once the erasure committed); how many it erased.

    Every export puts the memory's export marker before its archive, and an export whose archive
    is checked after an erasure commits finds the erasure itself and deletes its archive
    (``transfer.exporting``). So an archive this erasure must erase was put, marker first, before
    the erasure committed: when the marker is not there now, there is no such archive, and a
    ``HeadObject`` (a GET-class request) takes the place of the listing (PUT-class, 12.5 times its
    price). A memory created before the marker (``export_marks`` absent) may hold archives without
    one: its exports are listed each time. The marker stays while exports may remain (the
    cleanup drops it a while after the last export)."""
    marker = bucket.export_marker(asset.team_id, asset.agent_id)
    if asset.export_marks and blobs.head(marker) is None:
        return 0
    keys = [key for key in blobs.keys_under(bucket.export_prefix(asset.team_id, asset.agent_id)) if key != marker]
    return blobs.delete_many(keys) if keys else 0


def ensure(
    asset: Asset | None, team_id: str, agent_id: str, owner: str, *, hidden_by: str | None = None, **fields: Any
) -> Asset:
    """The pair's asset, creating it (with its fence) when ``asset`` (the pair's, as just read) is
    None. A conditional create decides a race between creators of the same pair; another pair that
    spells the same memory_id never stands in the way. ``hidden_by``: the import creating it (the
    asset shows once it commits). A write that finds an asset an import created and has not
    committed makes it its own (``stored.claim``)."""
    memory_id = memory_id_of(team_id, agent_id)
    asset = owned_by(asset, team_id, agent_id)
    while True:
        if asset is not None and asset.hidden_by is not None and hidden_by is None:
            asset = stored.claim(asset, owner, format_ms(now_ms()), fields)  # None: the import dropped it
        if asset is not None:
            break
        stamp = format_ms(now_ms())
        candidate = stored.new(
            memory_id=memory_id,
            team_id=team_id,
            agent_id=agent_id,
            owner=owner,
            created_at=stamp,
            updated_at=stamp,
            epoch=new_epoch(0),
            vector_groups=_groups(),
            vector_bucket=vectors.bucket_of(team_id, agent_id) or None,
            word_index=_word_index(),
            hidden_by=hidden_by,
            **fields,
        )
        if stored.create(candidate):
            return candidate
        asset = stored.get_pair(team_id, agent_id)  # someone else created it (or created and deleted it) meanwhile
    return stored.fence(asset)  # an asset of before gets its fence at its first write


def _word_index() -> str | None:
    """Where a new memory's messages are indexed by words, fixed for its life: with their vectors
    when the stack says so and has meaning on (absent: postings, as on the memories of before)."""
    settings = get_settings()
    in_vectors = settings.word_index == counters.WORDS_IN_VECTORS and settings.embeddings
    return counters.WORDS_IN_VECTORS if in_vectors else None


def _groups() -> int | None:
    """A new memory's groups of users in its vector indexes: the stack's, fixed for the memory's
    life (absent when one, as on the memories of before)."""
    groups = get_settings().vector_groups
    return groups if groups > 1 else None


@dataclass(frozen=True)
class Named:
    """A memory as a request names it: its memory_id, and the pair when the body gives one."""

    memory_id: str
    team_id: str | None = None
    agent_id: str | None = None

    @property
    def pair(self) -> tuple[str, str] | None:
        return None if self.team_id is None or self.agent_id is None else (self.team_id, self.agent_id)


def _unknown(principal: Principal) -> DomainError:
    """Unknown → 404 for a ``*`` key and 403 for a team key, so a team admin cannot probe other
    teams' ids."""
    return NotFound(UNKNOWN) if principal.all_teams else Forbidden(OUTSIDE)


def candidates(principal: Principal, named: Named) -> list[Asset]:
    """The assets ``named`` may mean for this key: those of the pairs that spell its memory_id,
    exist, and lie within the key's teams — only the named pair's when the body names one."""
    if named.pair is not None:
        team_id, agent_id = named.pair
        if memory_id_of(team_id, agent_id) != named.memory_id or not principal.covers_team(team_id):
            return []
        asset = stored.get_pair(team_id, agent_id)
        return [] if asset is None or asset.hidden_by is not None else [asset]
    found = stored.spelling(named.memory_id)
    return [a for a in found if principal.covers_team(a.team_id) and a.hidden_by is None]  # hidden: not there yet


def pick(principal: Principal, named: Named, found: list[Asset]) -> Asset:
    """Exactly one → that one; none → 403 (404 for a ``*`` key); several → 409 ambiguous, with the
    candidates, unless the body named the pair."""
    if not found:
        raise _unknown(principal)
    if len(found) > 1:
        raise Conflict(
            AMBIGUOUS,
            {
                "memory_id": named.memory_id,
                "candidates": [{"team_id": a.team_id, "agent_id": a.agent_id} for a in found],
            },
        )
    return found[0]


def resolve(principal: Principal, named: Named) -> Asset:
    """The one asset a route that names a memory_id acts on (see the module's docstring)."""
    return pick(principal, named, candidates(principal, named))


def resolve_all(principal: Principal, names: list[Named]) -> list[Asset]:
    """Every named memory, read at once and checked in order before anything is done: the first
    one outside the key's teams or unknown answers (403/404), then the first ambiguous one (409)."""
    found = parallel(*[lambda n=n: candidates(principal, n) for n in names]) if names else []
    if any(not assets for assets in found):
        raise _unknown(principal)
    return [pick(principal, named, assets) for named, assets in zip(names, found, strict=True)]


def as_answer(asset: Asset) -> AssetAnswer:
    return _answer(AssetAnswer, asset)


def _answer(kind: type[Shown], asset: Asset, **extra: Any) -> Shown:
    """The asset as answered (``AssetWithCounts`` with ``counts=…`` for memory/get)."""
    return kind(
        memory_id=asset.memory_id,
        team_id=asset.team_id,
        agent_id=asset.agent_id,
        owner=asset.owner,
        name=asset.name,
        visibility=cast(Visibility, asset.visibility),
        acl=asset.acl,
        bindings=asset.bindings,
        status=asset.status,
        retention_days=None if asset.retention_days is None else int(asset.retention_days),
        formation=cast(FormationLayers, asset.formation or "records"),
        created_at=asset.created_at,
        updated_at=asset.updated_at,
        last_cleared_at=asset.last_cleared_at,
        **extra,
    )


def counts(asset: Asset) -> LayerCounts:
    where = where_of(asset)
    totals, files, persona = parallel(
        lambda: counters.layer_totals(where),
        lambda: scenes.count(asset.team_id, asset.agent_id, int(asset.epoch), ""),
        lambda: blobs.head(bucket.persona_key(asset.team_id, asset.agent_id)),
    )
    has_persona = persona is not None and persona.metadata.get("epoch") == str(int(asset.epoch))
    return LayerCounts(l0=totals["L0"], l1=totals["L1"], l2=files, l3=int(has_persona))


def create(principal: Principal, team_id: str, agent_id: str, fields: dict[str, Any]) -> AssetAnswer:
    principal.require_team(team_id)
    asset = ensure(stored.get_pair(team_id, agent_id), team_id, agent_id, principal.key_id, **fields)
    return as_answer(asset)


def describe(principal: Principal, named: Named) -> AssetWithCounts:
    asset = resolve(principal, named)
    return _answer(AssetWithCounts, asset, counts=counts(asset))


# memory/list order: memory_id, then team_id, then agent_id. Within one team a memory_id names one
# pair, so a position is (memory_id, team_id).
Position = tuple[str, str]


def list_assets(principal: Principal, team_id: str | None, limit: int, next_token: str | None) -> Assets:
    filters: dict[str, Any] = {"route": "memory/list", "order": "memory_id,team_id,agent_id", "team": team_id}
    filters["teams"] = sorted(principal.team_ids)
    after = _position(tokens.decode(next_token, filters)) if next_token is not None else None
    want = limit + 1
    if team_id is not None:
        principal.require_team(team_id)
        found = _of_teams([team_id], after, want)
    elif principal.all_teams:
        found = _all(after, want)
    else:
        found = _of_teams(list(principal.team_ids), after, want)
    page = found[:limit]
    stored_assets = stored.of_pairs([(t, a) for _, t, a in page])
    shown = {pair: a for pair, a in stored_assets.items() if a.hidden_by is None}  # hidden: not there yet
    listed = [(p, as_answer(shown[(p[1], p[2])])) for p in page if (p[1], p[2]) in shown]
    fit = fitting([answer for _, answer in listed])  # a page of assets at their limits stops short of 6 MB
    last = listed[fit - 1][0] if fit < len(listed) else page[-1] if len(found) > limit else None
    more = tokens.encode([last[0], last[1]], filters) if last is not None else None
    return Assets(items=[answer for _, answer in listed[:fit]], next_token=more)


def _position(value: Any) -> Position:
    if not (isinstance(value, list) and len(value) == 2 and all(isinstance(v, str) for v in value)):
        raise Invalid(tokens.INVALID)
    return value[0], value[1]


def _after(entry: tuple[str, str, str], after: Position | None) -> bool:
    return after is None or (entry[0], entry[1]) > after


def _of_teams(team_ids: list[str], after: Position | None, want: int) -> list[tuple[str, str, str]]:
    """(memory_id, team, agent) of the teams' memories in list order, after ``after``."""
    listed = parallel(*[lambda t=t: stored.of_team(t, after[0] if after else None, want + 1) for t in team_ids])
    entries = [
        (memory_id, team, _agent_of(memory_id, team))
        for team, ids in zip(team_ids, listed, strict=True)
        for memory_id in ids
    ]
    return sorted(e for e in entries if _after(e, after))[:want]


def _agent_of(memory_id: str, team_id: str) -> str:
    return memory_id[len(memory_id_of(team_id, "")) :]


def _all(after: Position | None, want: int) -> list[tuple[str, str, str]]:
    """Every asset in list order (a '*' key without a team: a scan, sorted)."""
    entries = sorted({(a.memory_id, a.team_id, a.agent_id) for a in stored.everything()})
    return [e for e in entries if _after(e, after)][:want]


def update(principal: Principal, named: Named, changes: dict[str, Any], request_id: str) -> AssetAnswer:
    asset = resolve(principal, named)
    context = EventContext(asset.team_id, principal.key_id, request_id, asset.agent_id, asset.memory_id)
    events = event_items([NewEvent("memory_update", "asset", asset.memory_id, len(changes))], context)
    updated = stored.update(asset, changes, format_ms(now_ms()), events)
    if updated is None:
        raise NotFound(UNKNOWN) if principal.all_teams else Forbidden(OUTSIDE)
    return as_answer(updated)
