"""What the unit tier's use-case tests share: a memory of their own and a writer's key for it."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from memory_hub.domain.principal import Authorize, Principal, already
from memory_hub.domain.scope import Scope


def fresh_scope(user_id: str = "u", session_id: str | None = "s") -> Scope:
    """A (team, agent) no other test uses."""
    suffix = uuid.uuid4().hex[:10]
    return Scope(f"team{suffix}", f"agent{suffix}", user_id, session_id)


def writer(scope: Scope) -> Authorize:
    """A writer key of the scope's team, already authenticated."""
    return already(Principal(f"key-writer-{scope.team_id}", "writer", (scope.team_id,)))


def jsonl(rows: list[dict[str, Any]]) -> bytes:
    return "".join(json.dumps(row) + "\n" for row in rows).encode()


@contextmanager
def meaning_on(monkeypatch: Any, env: dict[str, str], model: Callable[..., list[Any]]) -> Iterator[Any]:
    """The settings of ``env`` (read again), ``model`` answering every embedding and no query
    remembered; all put back after."""
    from memory_hub.domain import meaning
    from memory_hub.settings import get_settings
    from memory_hub.storage import embeddings

    for name, value in env.items():
        monkeypatch.setenv(name, value)
    get_settings.cache_clear()
    monkeypatch.setattr(embeddings, "embed_many", model)
    meaning._QUERIES.clear()
    yield monkeypatch
    for name in env:
        monkeypatch.delenv(name)
    get_settings.cache_clear()
