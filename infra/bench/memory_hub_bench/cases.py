"""One workload per route: what is stored first (not timed), then the body of the i-th timed
request."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from memory_hub_tools.client import memory_id_for

from .client import Target

SEARCH = {"query": "green tea mountains", "limit": 5}  # the workload's conversation search

Body = dict[str, Any]


@dataclass
class Scope:
    team: str
    agent: str
    user: str

    @classmethod
    def fresh(cls, tag: str) -> Scope:
        suffix = uuid.uuid4().hex[:8]
        return cls(f"bench{suffix}", f"{tag}{suffix}", f"user-{suffix}")

    def body(self, **fields: Any) -> Body:
        return {"team_id": self.team, "agent_id": self.agent, "user_id": self.user, **fields}

    @property
    def memory_id(self) -> str:
        return memory_id_for(self.team, self.agent)


@dataclass
class Case:
    route: str
    body: Callable[[int], Body]
    before: Callable[[int], None] = lambda i: None  # not timed: what the i-th request needs


def messages(n: int, words: str = "a conversation about green tea and mountains") -> list[Body]:
    return [{"role": "user" if i % 2 == 0 else "assistant", "content": f"{words} {i}"} for i in range(n)]


FileMaker = Callable[[Scope, dict[str, str]], None]


@dataclass
class Workload:
    seed: Callable[[], None]  # what the memory holds before any route is timed
    cases: list[Case]

    def by_route(self) -> dict[str, Case]:
        return {case.route: case for case in self.cases}


class _Memory:
    """The memory the timed requests run against: its scope, and the ids the untimed steps made
    (the delete routes take one each, the update route cycles through the records)."""

    def __init__(self, target: Target) -> None:
        self.s = Scope.fresh("routes")
        self.post = target.post
        self.found: dict[str, list[str]] = {"messages": [], "records": [], "keys": [], "memories": []}
        self.files = {f"notes/file{i}.md": f"# Note {i}\ngreen tea" for i in range(20)}
        self.files.update({f"bench/w{i}.md": "# Bench" for i in range(5)})

    def seed(self, *, ours: bool, make_files: FileMaker | None, files_too: bool) -> None:
        s, post = self.s, self.post
        for _ in range(2):
            _, data = post("/v3/conversation/add", s.body(session_id="s1", messages=messages(100)))
            self.found["messages"] += data["accepted_ids"]
        if not files_too:
            pass
        elif make_files is not None:
            make_files(s, self.files)
        else:
            for path, content in self.files.items():
                post("/v3/scenario/write", s.body(path=path, content=content))
        post("/v3/core/write", s.body(content="The agent answers briefly."))
        if ours:
            for i in range(50):
                _, data = post("/v3/atomic/add", s.body(content=f"prefers green tea, fact {i}", type="persona"))
                self.found["records"].append(data["id"])

    def write_file(self, path: str) -> None:
        self.post("/v3/scenario/write", self.s.body(path=path, content="x"))

    def fresh_message(self, i: int) -> None:
        _, data = self.post("/v3/conversation/add", self.s.body(session_id="del", messages=messages(1, "to delete")))
        self.found["messages"].append(data["accepted_ids"][0])

    def fresh_record(self, i: int) -> None:
        _, data = self.post("/v3/atomic/add", self.s.body(content=f"a record to delete {uuid.uuid4().hex}"))
        self.found["records"].append(data["id"])

    def fresh_memory(self, i: int) -> None:
        other = Scope.fresh("mem")
        self.post("/v3/conversation/add", other.body(session_id="s", messages=messages(3)))
        self.found["memories"].append(other.memory_id)

    def fresh_key(self, i: int) -> None:
        _, data = self.post("/v3/admin/keys/create", {"role": "reader", "team_ids": [self.s.team]})
        self.found["keys"].append(data["key_id"])


def _shared_cases(m: _Memory) -> list[Case]:
    """The v3 routes another gateway serves too."""
    s, found = m.s, m.found
    return [
        Case("/v3/scenario/write", lambda i: s.body(path=f"bench/w{i % 5}.md", content=f"# Bench\nwrite {i}")),
        Case("/v3/scenario/read", lambda i: s.body(path=f"notes/file{i % 20}.md")),
        Case("/v3/scenario/ls", lambda i: s.body(path_prefix="notes/")),
        Case("/v3/scenario/count", lambda i: s.body(path_prefix="notes/")),
        Case("/v3/core/write", lambda i: s.body(content=f"The agent answers briefly ({i}).")),
        Case("/v3/core/read", lambda i: s.body()),
        Case("/v3/core/count", lambda i: s.body()),
        Case("/v3/conversation/add", lambda i: s.body(session_id=f"add{i % 3}", messages=messages(2))),
        Case("/v3/conversation/query", lambda i: s.body(limit=20)),
        Case("/v3/conversation/search", lambda i: s.body(**SEARCH)),
        Case("/v3/conversation/count", lambda i: s.body()),
        Case(
            "/v3/conversation/delete", lambda i: s.body(message_ids=[found["messages"].pop()]), before=m.fresh_message
        ),
    ]


def _our_cases(m: _Memory) -> list[Case]:
    """The rest of Memory Hub's routes (timed on Memory Hub only)."""
    s, found = m.s, m.found
    return [
        Case(
            "/v3/scenario/rm",
            lambda i: s.body(path=f"rm/f{i}.md"),
            before=lambda i: m.write_file(f"rm/f{i}.md"),
        ),
        Case("/v3/atomic/add", lambda i: s.body(content=f"new fact {uuid.uuid4().hex}", type="episodic")),
        Case("/v3/atomic/query", lambda i: s.body(limit=20)),
        Case("/v3/atomic/search", lambda i: s.body(query="green tea", limit=5)),
        Case("/v3/atomic/count", lambda i: s.body()),
        Case("/v3/atomic/update", lambda i: s.body(id=found["records"][i % 50], content=f"prefers green tea, v{i}")),
        Case("/v3/atomic/delete", lambda i: s.body(ids=[found["records"].pop()]), before=m.fresh_record),
        Case("/v3/memory/get", lambda i: {"memory_id": s.memory_id}),
        Case("/v3/memory/list", lambda i: {"team_id": s.team, "limit": 20}),
        Case("/v3/memory/update", lambda i: {"memory_id": s.memory_id, "name": f"bench {i}"}),
        Case("/v3/memory/create", lambda i: {"team_id": s.team, "agent_id": f"created{i}{uuid.uuid4().hex[:6]}"}),
        Case("/v3/user-memory/delete", lambda i: {"memory_id": s.memory_id, "user_id": f"nobody-{i}"}),
        Case("/v3/chat-memory/clear", lambda i: {"memory_ids": [found["memories"].pop()]}, before=m.fresh_memory),
        Case("/v3/memory/delete", lambda i: {"memory_id": found["memories"].pop()}, before=m.fresh_memory),
        Case("/v3/admin/keys/create", lambda i: {"role": "reader", "team_ids": [s.team]}),
        Case("/v3/admin/keys/list", lambda i: {}),
        Case("/v3/admin/keys/revoke", lambda i: {"key_id": found["keys"].pop()}, before=m.fresh_key),
        Case("/v3/audit/query", lambda i: {"memory_id": s.memory_id, "limit": 20}),
        Case("/v3/memory/export", lambda i: {"memory_id": s.memory_id}),
    ]


def cases(target: Target, *, ours: bool, make_files: FileMaker | None = None, files_too: bool = True) -> Workload:
    """The routes' workloads on ``target``. ``ours``: every route of Memory Hub, on a memory with
    L0, L1, L2 and L3. Otherwise the v3 routes another gateway serves too, on a memory holding
    the same L0, L2 and L3 on both sides (TencentDB's v3 has no atomic/add, and its scenario/write
    only updates a file that exists: ``make_files`` puts the files in place there; without files,
    ``files_too=False`` leaves the scenario routes out)."""
    memory = _Memory(target)

    def seed() -> None:
        memory.seed(ours=ours, make_files=make_files, files_too=files_too)

    listed = _shared_cases(memory)
    if not files_too:
        listed = [case for case in listed if not case.route.startswith("/v3/scenario/")]
    if not ours:
        return Workload(seed, listed)
    return Workload(seed, [*listed, *_our_cases(memory)])
