"""The public data sets the recall benchmark asks questions of, read from ``infra/bench/data``.

Both come with labelled evidence: for every question, the turns of the conversation that hold its
answer. A loader turns a data set into *corpora*: one corpus is what one user's memory holds (its
turns in time order, its questions, and for LoCoMo the data set's own per-session observations as
L1 records with the turns they come from).

- LoCoMo (``locomo10.zip``, as published): one corpus per conversation. A turn is stored as
  ``"<speaker>: <text>"`` (both speakers are people, so the name is part of what was said; the first
  speaker is the ``user`` role, the second ``assistant``), with ``[photo: <caption>]`` appended when
  the turn shared an image (the data set's caption: the images themselves are not published). Its
  time is the session's date and time plus 30 s per turn. Evidence is the question's ``evidence``
  dialogue ids that name a turn of the conversation; a question left with none is skipped.
- LongMemEval (``longmemeval_oracle_sample.jsonl.gz``, a sample of the oracle split): every
  instance holds the sessions with its evidence. Instances are dealt round-robin (in
  ``question_id`` order) into ``groups`` corpora, so each question's own sessions sit among the
  other questions' sessions of its corpus; evidence is the turns marked ``has_answer``. Roles and
  contents are kept as given; a turn's time is its session's date plus 30 s per turn. There are no
  L1 records.
"""

from __future__ import annotations

import gzip
import json
import re
import zipfile
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from . import bm25

DATA = Path(__file__).resolve().parents[1] / "data"
LOCOMO = DATA / "locomo10.zip"
LONGMEMEVAL = DATA / "longmemeval_oracle_sample.jsonl.gz"
TURN_SECONDS = 30
DIA_ID = re.compile(r"D\d+:\d+")


@dataclass(frozen=True)
class Turn:
    key: str  # the data set's id of the turn (LoCoMo dia_id; LongMemEval "<session id>#<index>")
    session: str
    role: str
    content: str
    timestamp: str  # RFC 3339, UTC


@dataclass(frozen=True)
class Question:
    id: str
    text: str
    evidence: frozenset[str]
    kind: str
    asked: str | None = None  # when it is asked (RFC 3339): sent as the search's reference_time


@dataclass(frozen=True)
class Record:
    content: str
    sources: frozenset[str]
    session: str


@dataclass
class Corpus:
    name: str
    turns: list[Turn]
    questions: list[Question]
    records: list[Record] = field(default_factory=list)
    speakers: tuple[str, str] = ("", "")
    skipped: int = 0  # questions without evidence that names a turn


@dataclass
class Dataset:
    name: str
    corpora: list[Corpus]

    @property
    def skipped(self) -> int:
        return sum(c.skipped for c in self.corpora)


def rfc3339(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def locomo_time(text: str) -> datetime:
    """``"1:56 pm on 8 May, 2023"`` (LoCoMo's session dates), read as UTC."""
    return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)


def longmemeval_time(text: str) -> datetime:
    """``"2023/05/20 (Sat) 02:21"`` (LongMemEval's session dates), read as UTC."""
    return datetime.strptime(text.strip(), "%Y/%m/%d (%a) %H:%M").replace(tzinfo=UTC)


def dia_ids(value: Any) -> list[str]:
    """The dialogue ids named in an evidence entry (a string, possibly several ids, or a list)."""
    if isinstance(value, list):
        return [found for item in value for found in dia_ids(item)]
    return DIA_ID.findall(str(value))


def _session_numbers(conversation: dict[str, Any]) -> list[int]:
    numbers = []
    for key, value in conversation.items():
        match = re.fullmatch(r"session_(\d+)", key)
        if match and isinstance(value, list) and value:
            numbers.append(int(match.group(1)))
    return sorted(numbers)


def locomo_corpus(name: str, conversation: dict[str, Any], qa: list[dict[str, Any]]) -> Corpus:
    """One LoCoMo conversation (its sessions, ``qa`` and ``session_<n>_observation``)."""
    speakers = (str(conversation["speaker_a"]), str(conversation["speaker_b"]))
    turns: list[Turn] = []
    records: list[Record] = []
    for number in _session_numbers(conversation):
        session = f"session_{number}"
        start = locomo_time(conversation[f"{session}_date_time"])
        for index, turn in enumerate(conversation[session]):
            content = f"{turn['speaker']}: {turn['text']}"
            if turn.get("blip_caption"):
                content += f" [photo: {turn['blip_caption']}]"
            role = "user" if turn["speaker"] == speakers[0] else "assistant"
            moment = start + timedelta(seconds=TURN_SECONDS * index)
            turns.append(Turn(str(turn["dia_id"]), session, role, content, rfc3339(moment)))
    known = {t.key for t in turns}
    for number in _session_numbers(conversation):
        observations = conversation.get(f"session_{number}_observation") or {}
        for facts in observations.values():
            for fact in facts:
                text, sources = (fact[0], fact[1:]) if isinstance(fact, list) else (fact, [])
                found = frozenset(dia_ids(sources)) & known
                if isinstance(text, str) and text.strip() and found:
                    records.append(Record(text.strip(), found, f"session_{number}"))
    questions: list[Question] = []
    skipped = 0
    asked = turns[-1].timestamp if turns else None  # LoCoMo's questions come after its last session
    for index, item in enumerate(qa):
        evidence = frozenset(dia_ids(item.get("evidence") or [])) & known
        if not evidence:
            skipped += 1
            continue
        kind = f"category {item.get('category', '?')}"
        questions.append(Question(f"{name}/q{index}", str(item["question"]), evidence, kind, asked))
    return Corpus(name, turns, questions, records, speakers, skipped)


def load_locomo(path: Path = LOCOMO, limit: int | None = None) -> Dataset:
    """LoCoMo's conversations (in the archive's file-name order), the first ``limit`` of them."""
    corpora: list[Corpus] = []
    with zipfile.ZipFile(path) as archive:
        names = sorted((n for n in archive.namelist() if n.endswith(".json")), key=_numeric_name)
        for member in names[:limit]:
            sample = json.loads(archive.read(member))
            qa = sample.pop("qa", [])
            corpora.append(locomo_corpus(f"conv-{Path(member).stem}", sample, qa))
    return Dataset("LoCoMo", corpora)


def _numeric_name(name: str) -> tuple[int, str]:
    stem = Path(name).stem
    return (int(stem), stem) if stem.isdigit() else (1 << 30, stem)


def longmemeval_corpus(name: str, instances: list[dict[str, Any]]) -> Corpus:
    """Several LongMemEval instances as one memory: every session once, in time order."""
    sessions: dict[str, tuple[datetime, list[dict[str, Any]]]] = {}
    questions: list[Question] = []
    skipped = 0
    for item in instances:
        evidence: set[str] = set()
        for sid, date, turns in zip(
            item["haystack_session_ids"], item["haystack_dates"], item["haystack_sessions"], strict=True
        ):
            sessions.setdefault(str(sid), (longmemeval_time(date), turns))
            evidence.update(f"{sid}#{i}" for i, turn in enumerate(turns) if turn.get("has_answer"))
        if not evidence:
            skipped += 1
            continue
        asked = rfc3339(longmemeval_time(item["question_date"])) if item.get("question_date") else None
        questions.append(
            Question(
                str(item["question_id"]), str(item["question"]), frozenset(evidence), str(item["question_type"]), asked
            )
        )
    turns_out: list[Turn] = []
    for sid, (start, turns) in sorted(sessions.items(), key=lambda entry: (entry[1][0], entry[0])):
        for index, turn in enumerate(turns):
            moment = start + timedelta(seconds=TURN_SECONDS * index)
            turns_out.append(Turn(f"{sid}#{index}", sid, str(turn["role"]), str(turn["content"]), rfc3339(moment)))
    return Corpus(name, turns_out, questions, skipped=skipped)


def load_longmemeval(path: Path = LONGMEMEVAL, groups: int = 6, limit: int | None = None) -> Dataset:
    """The LongMemEval sample dealt into ``groups`` memories, the first ``limit`` of them."""
    with gzip.open(path, "rt", encoding="utf-8") as lines:
        instances = [json.loads(line) for line in lines if line.strip()]
    instances.sort(key=lambda item: str(item["question_id"]))
    dealt: list[list[dict[str, Any]]] = [[] for _ in range(groups)]
    for index, item in enumerate(instances):
        dealt[index % groups].append(item)
    corpora = [longmemeval_corpus(f"lme-{i + 1}", chunk) for i, chunk in enumerate(dealt) if chunk]
    return Dataset("LongMemEval", corpora[:limit])


def typical(texts: list[str], low: int = 0, high: int = 1 << 30) -> list[str]:
    """Of ``texts`` of ``low`` to ``high`` UTF-8 bytes, those with their median number of distinct
    stems (``bm25.stemmed``: words that are not stop words), the nearest to their median length
    first (data order on a tie). What the cost section writes and erases, so that its units are
    those of real text: the word index writes one posting per distinct term."""
    within = [t for t in texts if low <= len(t.encode()) <= high]
    if not within:
        raise ValueError(f"no text of {low} to {high} bytes")
    stems = [len(set(bm25.stemmed(t))) for t in within]
    middle_stems = sorted(stems)[len(stems) // 2]
    middle_bytes = sorted(len(t.encode()) for t in within)[len(within) // 2]
    alike = [t for t, n in zip(within, stems, strict=True) if n == middle_stems]
    return sorted(dict.fromkeys(alike), key=lambda t: abs(len(t.encode()) - middle_bytes))


def user_like(turns: int) -> Corpus:
    """The LoCoMo conversation whose turns are nearest ``turns`` (the first by name on a tie): one
    real user's memory of about that size, with its own questions."""
    return min(load_locomo().corpora, key=lambda c: (abs(len(c.turns) - turns), c.name))


def typical_turn_and_records(size: int = 200, spread: int = 20) -> tuple[str, list[str]]:
    """A typical LoCoMo turn of ``size`` ± ``spread`` bytes (the cost section's one-message add,
    whose turn is 200 bytes) and typical LoCoMo observations (its records: facts of ~90 bytes),
    the most typical first — distinct, since a record of the same text as one held reinforces it."""
    locomo = load_locomo()
    turns = [t.content for c in locomo.corpora for t in c.turns]
    records = [r.content for c in locomo.corpora for r in c.records]
    return typical(turns, size - spread, size + spread)[0], typical(records)
