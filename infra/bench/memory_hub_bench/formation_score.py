"""How the formed records of a conversation compare with LoCoMo's own session observations (facts
per speaker, each naming the turns it came from): a sanity check of what a model forms.

Both sides are lists of (user, text, turns): an observation's turns are its ``dia_id``s; a formed
record's are the turns of its ``source_message_ids`` (the message ids the bench stored, mapped
back). Texts are compared by meaning: the cosine of their sentence embeddings (by default the
local stack's own model, all-MiniLM-L6-v2 — ``memory_hub_local.aws.embedding_model``), only
within one user (one LoCoMo conversation). With the threshold ``t``:

- an observation is **found** when a formed record of its user is at cosine ≥ t, and **found and
  cited** when such a record also cites one of the observation's turns (recall-like, lenient and
  strict);
- a formed record is **supported** when an observation of its user is at cosine ≥ t, and
  **supported and cited** when such an observation also names one of the record's turns
  (precision-like, lenient and strict);
- **provenance**: of the observations whose best record (highest cosine) is at ≥ t, the share whose
  best record cites one of the observation's turns.

Why ``THRESHOLD`` = 0.5 (measured on LoCoMo with this model, 2,541 observations against the 5,882
turns of their conversations): an observation reaches 0.5 with one of its own source turns (a text
that states the same fact in other words) in 87% of cases and with a random other turn of its
conversation in 6.4%; 0.6 would keep 66% of the true pairs, 0.4 lets in 21% of random ones. But the
best non-source turn of the same conversation reaches 0.5 in 98% of cases (a conversation says
similar things often), so meaning alone says "the same topic", not "the same fact": the strict
figures, which also ask that the record and the observation share a source turn, are the ones to
read."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

THRESHOLD = 0.5
EMBED_BATCH = 32  # texts per forward pass (sorted by length first: less padding)

Embed = Callable[[list[str]], np.ndarray]  # texts → one L2-normalised row each


@dataclass(frozen=True)
class Fact:
    """An observation or a formed record: whose, what it says, and the turns it came from."""

    user: str
    text: str
    turns: frozenset[str]


@dataclass
class Score:
    threshold: float
    observations: int = 0
    records: int = 0
    found: int = 0
    found_cited: int = 0
    supported: int = 0
    supported_cited: int = 0
    best_matched: int = 0  # observations whose best record is at >= threshold
    best_cites: int = 0  # … and that best record cites one of the observation's turns
    best_cosines: list[float] = field(default_factory=list)  # each observation's best cosine (0: none)

    @staticmethod
    def _share(part: int, whole: int) -> float:
        return part / whole if whole else float("nan")

    def figures(self) -> dict[str, Any]:
        best = sorted(self.best_cosines)
        return {
            "threshold": self.threshold,
            "observations": self.observations,
            "records": self.records,
            "recall_lenient": round(self._share(self.found, self.observations), 4),
            "recall_strict": round(self._share(self.found_cited, self.observations), 4),
            "precision_lenient": round(self._share(self.supported, self.records), 4),
            "precision_strict": round(self._share(self.supported_cited, self.records), 4),
            "provenance": round(self._share(self.best_cites, self.best_matched), 4),
            "best_cosine_p50": round(best[len(best) // 2], 3) if best else float("nan"),
        }


def score(observations: Sequence[Fact], records: Sequence[Fact], embed: Embed, threshold: float = THRESHOLD) -> Score:
    """Observations against formed records, user by user (see the module docstring)."""
    result = Score(threshold, len(observations), len(records))
    users = sorted({f.user for f in observations} | {f.user for f in records})
    for user in users:
        mine = [f for f in observations if f.user == user]
        formed = [f for f in records if f.user == user]
        if not mine or not formed:
            result.best_cosines += [0.0] * len(mine)
            continue
        vectors = embed([f.text for f in mine] + [f.text for f in formed])
        cosines = vectors[: len(mine)] @ vectors[len(mine) :].T  # observations x records
        shares = np.array([[bool(o.turns & r.turns) for r in formed] for o in mine], dtype=bool)
        close = cosines >= threshold
        result.found += int(close.any(axis=1).sum())
        result.found_cited += int((close & shares).any(axis=1).sum())
        result.supported += int(close.any(axis=0).sum())
        result.supported_cited += int((close & shares).any(axis=0).sum())
        best = cosines.argmax(axis=1)
        for i, j in enumerate(best):
            result.best_cosines.append(float(cosines[i, j]))
            if close[i, j]:
                result.best_matched += 1
                result.best_cites += int(shares[i, j])
    return result


def local_embed(texts: list[str]) -> np.ndarray:
    """The local stack's sentence embeddings (384 dimensions, L2-normalised), in batches of texts
    of similar length."""
    from memory_hub_local.aws import embedding_model

    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    out = np.zeros((len(texts), embedding_model.DIMENSION), dtype=np.float32)
    for start in range(0, len(order), EMBED_BATCH):
        chunk = order[start : start + EMBED_BATCH]
        vectors = embedding_model.embed([texts[i] for i in chunk], embedding_model.DIMENSION, True).vectors
        out[chunk] = vectors
    return out
