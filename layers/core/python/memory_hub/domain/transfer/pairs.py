"""Which (team, agent) a tree's lines and profile folders belong to, and whose lines an import takes."""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import unquote

from .shapes import Selection

DEFAULT = "default"  # TencentDB's team and agent when a line names none
PROFILE = re.compile(r"profiles/([^/]+)/(.+)")


def _pair(line: dict[str, Any]) -> tuple[str, str] | None:
    """The (team, agent) a line names — TencentDB's "default" for the one it leaves out — or None
    when it names neither (such a line belongs to whichever pair is imported)."""
    team, agent = line.get("teamId"), line.get("agentId")
    team = team if isinstance(team, str) and team else None
    agent = agent if isinstance(agent, str) and agent else None
    if team is None and agent is None:
        return None
    return team or DEFAULT, agent or DEFAULT


def pairs_of(files: dict[str, bytes]) -> set[tuple[str, str]]:
    """The (team, agent) pairs a tree's lines and profile folders name."""
    found: set[tuple[str, str]] = set()
    for name, data in files.items():
        if name.startswith(("conversations/", "records/")) and name.endswith(".jsonl"):
            for raw in data.decode("utf-8", "replace").splitlines():
                try:
                    line = json.loads(raw)
                except ValueError:
                    continue
                pair = _pair(line) if isinstance(line, dict) else None
                if pair is not None:
                    found.add(pair)
        match = PROFILE.fullmatch(name)
        if match:
            team, _, agent = unquote(match.group(1)).partition("|")
            found.add((team.removeprefix("team:"), agent.removeprefix("agent:")))
    return found


def selected(line: dict[str, Any], selection: Selection) -> bool:
    pair = _pair(line)
    return selection.from_team is None or pair is None or pair == (selection.from_team, selection.from_agent)
