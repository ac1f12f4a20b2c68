"""One set of field rules (domain.fields): what the request models and the import validator both
apply — lengths in code points, control characters, unpaired surrogates, ids, times, versions,
metadata that DynamoDB can store — and the tar tree reader's names and size accounting."""

from __future__ import annotations

import gzip
import io
import tarfile

import pytest
from memory_hub.domain import fields
from memory_hub.domain.transfer import archive, tree
from memory_hub.edge.schemas.memory import AtomicAdd
from memory_hub.edge.schemas.scenario import CoreWrite, ScenarioWrite
from pydantic import ValidationError

ISOLATION = {"team_id": "t", "agent_id": "a", "user_id": "u"}


@pytest.mark.parametrize(
    ("kind", "value", "problem"),
    [
        (fields.Content, "x" * 8193, "must be at most 8,192 characters"),
        (fields.Content, "", "must not be empty"),
        (fields.Content, "bad \ud800", "must not contain unpaired surrogates"),
        (fields.FreeId, "u\x07", "must not contain control characters"),
        (fields.FreeId, "u\udfff", "must not contain unpaired surrogates"),
        (fields.Summary, "a\x1bb", "must not contain control characters"),
        (fields.Summary, "s" * 1025, "must be at most 1,024 characters"),
        (fields.Version, True, "must be a whole number"),
        (fields.Version, 0, "must be at least 1"),
        (fields.Version, 2**53 + 1, "must be at most 2^53"),
        (fields.Version, 10**40, "must be at most 2^53"),
        (fields.Time, "not a time", "must be YYYY-MM-DDTHH:MM:SS[.fraction] followed by Z or +HH:MM/-HH:MM"),
        (fields.Time, {"x": 1}, "must be a string"),
        (fields.Tags, ["a", ""], "1: must not be empty"),
        (
            fields.Metadata,
            {"n": float("nan")},
            "holds a number that is not finite (NaN or Infinity is not JSON)",
        ),
        (fields.Metadata, {"k": "\ud800"}, "must not contain unpaired surrogates"),
        (fields.Metadata, {"k": "x" * 4090}, "must be at most 4096 bytes as compact JSON"),
    ],
)
def test_a_value_breaking_a_rule_is_named(kind, value, problem):
    assert fields.problems_of(kind, value) == [problem]


@pytest.mark.parametrize(
    ("kind", "value"),
    [
        (fields.Content, "x" * 8192),
        (fields.Content, "😀" * 8192),  # code points, not UTF-16 units or bytes
        (fields.Version, 2**53),
        (fields.Time, "2026-01-01T08:00:00+08:00"),
        (fields.Metadata, {"n": 10**40, "f": 1.7976931348623157e308, "g": -1e-300, "nested": [{"x": None}]}),
        (fields.Summary, ""),
    ],
)
def test_a_value_within_the_rules_passes(kind, value):
    assert fields.problems_of(kind, value) == []


def test_the_request_models_use_the_same_rules():
    with pytest.raises(ValidationError, match="at most 8192 characters"):
        AtomicAdd.model_validate({**ISOLATION, "content": "x" * 8193})
    with pytest.raises(ValidationError, match="at most 20 items"):
        AtomicAdd.model_validate({**ISOLATION, "content": "x", "tags": ["t"] * 21})
    with pytest.raises(ValidationError, match="must not contain control characters"):
        ScenarioWrite.model_validate({**ISOLATION, "path": "a.md", "content": "", "summary": "a\rb"})
    with pytest.raises(ValidationError, match="at most 1000000 characters"):
        CoreWrite.model_validate({**ISOLATION, "content": "p" * 1_000_001})
    with pytest.raises(ValidationError, match="not finite"):
        AtomicAdd.model_validate({**ISOLATION, "content": "x", "metadata": {"n": float("inf")}})


def test_heat_that_only_looks_like_digits_is_zero():
    assert tree.heat_of("-----META-START-----\nheat: ²\n-----META-END-----\n\nx") == 0
    assert tree.heat_of("-----META-START-----\nheat: 7\n-----META-END-----\n\nx") == 7


@pytest.mark.parametrize(
    ("raw", "name"), [("./", ""), (".", ""), ("./.metadata/x.json", ".metadata/x.json"), ("./a/b", "a/b"), ("a", "a")]
)
def test_member_names_as_tar_dot_writes_them(raw, name):
    assert tree.member_name(raw) == name


def _archive(members: dict[str, bytes]) -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w:gz", format=tarfile.PAX_FORMAT) as archive:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return raw.getvalue()


def test_a_tar_dot_archive_keeps_its_dot_folders():
    files = tree.untar(_archive({"./.metadata/memory-hub.json": b"{}", "./.backup/persona/p.md": b"p"}))
    assert files == {".metadata/memory-hub.json": b"{}", ".backup/persona/p.md": b"p"}


@pytest.mark.parametrize("name", ["./../persona.md", "/persona.md", "a/../../b", "a//b"])
def test_a_name_leaving_the_tree_is_refused(name):
    with pytest.raises(tree.Malformed):
        tree.untar(_archive({name: b"x"}))


def test_a_long_pax_record_is_refused_before_it_is_read():
    header = bytearray(512)
    header[:13] = b"PaxHeader/big"
    header[124:136] = f"{300 * 2**20:011o}\0".encode()
    header[156:157] = b"x"
    header[148:156] = b" " * 8
    header[148:156] = f"{sum(header):06o}\0 ".encode()
    with pytest.raises(tree.Malformed, match="tar header record"):
        tree.measure(gzip.compress(bytes(header) + b"a" * 4096))


def test_headers_count_toward_the_unpacked_limit(monkeypatch):
    monkeypatch.setattr(archive, "MAX_TREE_BYTES", 100 * 512)  # the limit measure() reads
    small = _archive({f"f{i}.md": b"" for i in range(40)})  # 40 empty files: 40+ header blocks
    tree.measure(small)
    with pytest.raises(tree.Malformed, match="unpacks to more than"):
        tree.measure(_archive({f"f{i}.md": b"" for i in range(120)}))
