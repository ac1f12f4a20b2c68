"""What an erasure by id removes besides its items. Apart from ``assets`` so that the functions that
never erase by id (scenario files, keys, the clear) do not load the meaning and search modules at
their cold start."""

from __future__ import annotations

from ..storage.concurrency import parallel
from ..storage.counters import Where
from ..storage.models import Asset
from . import meaning
from .assets import forget_exports


def forget_erased(asset: Asset, where: Where, ids: list[str]) -> None:
    """Both before the request answers and at once (one round trip less): the erased items'
    vectors and every export of the memory (an export may hold what was deleted)."""
    parallel(lambda: meaning.erase(where, ids), lambda: forget_exports(asset))
