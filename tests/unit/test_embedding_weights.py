"""The local embedding model's word-piece table is mapped from the model file, not read into memory:
the same numbers as safetensors' own reader, pages that belong to the file, and a clear refusal of a
tensor it cannot map."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from memory_hub_local.aws import embedding_model
from safetensors.numpy import load_file, save_file


def test_the_mapped_word_pieces_are_the_files_numbers_and_stay_in_the_file():
    path = embedding_model.model_dir() / "model.safetensors"
    table = embedding_model.mapped(path, embedding_model.WORD_PIECES)
    assert isinstance(table, np.memmap) and not table.flags.writeable
    assert table.shape == (30522, embedding_model.DIMENSION)
    assert np.array_equal(table, load_file(str(path))[embedding_model.WORD_PIECES])


def test_the_model_holds_its_word_pieces_mapped():
    model = embedding_model.MiniLM()
    assert isinstance(model.weights[embedding_model.WORD_PIECES], np.memmap)
    # every other weight is an ordinary array: read once, used by every forward pass
    assert not any(isinstance(v, np.memmap) for k, v in model.weights.items() if k != embedding_model.WORD_PIECES)


def test_a_tensor_between_others_is_mapped_at_its_own_offset(tmp_path: Path):
    path = tmp_path / "small.safetensors"
    tensors = {
        "a": np.arange(6, dtype=np.float32).reshape(2, 3),
        "b": np.linspace(-1, 1, 20, dtype=np.float32).reshape(4, 5),
        "c": np.array([7.5], dtype=np.float32),
    }
    save_file(tensors, str(path))
    for name, expected in tensors.items():
        assert np.array_equal(embedding_model.mapped(path, name), expected)


def test_a_tensor_that_is_not_float32_is_refused(tmp_path: Path):
    path = tmp_path / "ints.safetensors"
    save_file({"ids": np.arange(4, dtype=np.int64)}, str(path))
    with pytest.raises(ValueError, match="I64, not F32"):
        embedding_model.mapped(path, "ids")
