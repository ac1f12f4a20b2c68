"""QueryVectors' search: the exact k nearest neighbours of a vector in an index, by the index's
distance metric (cosine: 1 - cosine similarity; euclidean: the Euclidean distance), nearest first,
a metadata filter applied as rows come. AWS answers approximately, this answers exactly."""

from __future__ import annotations

from typing import Any

import numpy as np

from .filters import matches

PACKED = "_memory_hub_packed"  # a vector's values as kept (an array of float32 or doubles; see patches.packed_vectors)
LENGTH = "_memory_hub_length"  # a float32 vector's length when its trailing zeros are not kept


def _single(packed: Any) -> bool:
    """Values kept as float32 (an ``array("f")`` as put, or a row of an index's matrix)."""
    return isinstance(packed, np.ndarray) or getattr(packed, "typecode", "") == "f"


def _rows(rows: list[Any], dimension: int) -> np.ndarray:
    """The vectors' values as one float32 matrix, as wide as the longest values kept: a vector's
    trailing zeros are not kept (see patches.packed_vectors), and a shorter row is zero-filled.
    Packed values are read as kept (float32 as they are; a double cast to float32 as numpy casts
    the same floats from a list, not made into Python floats first)."""
    packed = [v.__dict__.get(PACKED) for v in rows]
    if rows and all(p is not None for p in packed):
        width = max(len(p) for p in packed)
        if all(_single(p) and len(p) == width for p in packed):
            return np.frombuffer(b"".join(packed), dtype=np.float32).reshape(len(rows), width)
        data = np.zeros((len(rows), width), dtype=np.float32)
        for at, values in enumerate(packed):
            data[at, : len(values)] = np.frombuffer(values, dtype=np.float32 if _single(values) else np.float64)
        return data
    return np.asarray([v.data["float32"] for v in rows], dtype=np.float32).reshape(len(rows), dimension)


def _matrix(index: Any) -> tuple[list[Any], np.ndarray, np.ndarray]:
    """The index's vectors as one float32 matrix with their norms, kept until the index changes. A
    vector kept as float32 then holds its row of the matrix (a view), not a copy of its own: the
    values are held once."""
    version = getattr(index, "_memory_hub_version", 0)
    cached = getattr(index, "_memory_hub_matrix", None)
    if cached is None or cached[0] != version:
        index._memory_hub_matrix = None  # the old matrix goes as its rows are replaced
        rows = list(index.vectors.values())
        data = _rows(rows, index.dimension)
        data.setflags(write=False)
        for vector, values in zip(rows, data, strict=True):
            if _single(vector.__dict__.get(PACKED)):
                vector.__dict__[PACKED] = values
        cached = (version, rows, data, np.linalg.norm(data, axis=1))
        index._memory_hub_matrix = cached
    return cached[1], cached[2], cached[3]


def rows(index: Any) -> list[Any]:
    """The index's vectors in the order of its matrix (kept until the index changes)."""
    return _matrix(index)[0]


def changed(index: Any) -> None:
    """The index's vectors changed: its matrix is made again on the next query."""
    index._memory_hub_version = getattr(index, "_memory_hub_version", 0) + 1


def query(index: Any, vector: list[float], top_k: int, where: dict[str, Any] | None) -> list[tuple[Any, float]]:
    """The ``top_k`` nearest vectors of the index (exactly), nearest first, with their distances."""
    rows, data, norms = _matrix(index)
    if not rows:
        return []
    probe = np.asarray(vector, dtype=np.float32)
    # the matrix leaves out the dimensions where every vector is zero: there the probe adds nothing to
    # a dot product, and its own squares to every distance
    head, rest = probe[: data.shape[1]], probe[data.shape[1] :]
    distances: np.ndarray
    if index.distance_metric == "cosine":
        distances = 1.0 - (data @ head) / np.maximum(norms * np.linalg.norm(probe), np.float32(1e-30))
    elif rest.size:
        distances = np.sqrt(np.sum((data - head) ** 2, axis=1) + np.float32(rest @ rest))
    else:
        distances = np.linalg.norm(data - probe, axis=1)
    found: list[tuple[Any, float]] = []
    for at in np.argsort(distances, kind="stable"):  # nearest first; a filter is checked as rows come
        row = rows[int(at)]
        if where is None or matches(where, row.metadata if row.metadata else {}):
            found.append((row, float(distances[at])))
            if len(found) == top_k:
                break
    return found
