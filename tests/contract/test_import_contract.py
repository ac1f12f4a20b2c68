"""The runtime package's import contract (memory_hub_tools.imports): layers import only downward,
only storage speaks to AWS, no cycles — checked on the real tree, and the checker itself shown to
catch each kind of breach."""

from __future__ import annotations

from pathlib import Path

from memory_hub_tools import imports
from memory_hub_tools.imports import Import, breaches, cycles

HERE = imports.PACKAGE / "x.py"


def _imp(source: str, target: str) -> Import:
    return Import(source, target, HERE, 1)


def test_the_package_keeps_its_import_contract(capsys):
    assert imports.main() == 0, capsys.readouterr().out


def test_an_upward_import_is_a_breach():
    assert breaches([_imp("memory_hub.storage.records", "memory_hub.domain.atomic")])
    assert breaches([_imp("memory_hub.domain.atomic", "memory_hub.edge.pipeline")])
    assert breaches([_imp("memory_hub.clock", "memory_hub.storage.layout")])
    assert breaches([_imp("functions.memory.app", "memory_hub.storage.records")])


def test_the_edge_reaches_storage_only_through_its_named_seams():
    assert not breaches([_imp("memory_hub.edge.errors", "memory_hub.storage.errors")])
    assert breaches([_imp("memory_hub.edge.pipeline", "memory_hub.storage.models")])


def test_only_storage_imports_the_aws_sdks():
    for sdk in ("boto3", "botocore.config", "pynamodb.models"):
        assert breaches([_imp("memory_hub.domain.clear", sdk)]), sdk
        assert not breaches([_imp("memory_hub.storage.aws", sdk)]), sdk


def test_downward_imports_are_allowed():
    assert not breaches(
        [
            _imp("memory_hub.edge.pipeline", "memory_hub.domain.errors"),
            _imp("memory_hub.domain.atomic", "memory_hub.storage.records"),
            _imp("memory_hub.storage.records", "memory_hub.clock"),
            _imp("functions.memory.app", "memory_hub.edge.resolver"),
        ]
    )


def test_cycles_are_found_even_through_several_modules():
    found = cycles(
        [
            _imp("memory_hub.domain.a", "memory_hub.domain.b"),
            _imp("memory_hub.domain.b", "memory_hub.domain.c"),
            _imp("memory_hub.domain.c", "memory_hub.domain.a"),
            _imp("memory_hub.domain.c", "memory_hub.clock"),
        ]
    )
    assert found == [["memory_hub.domain.a", "memory_hub.domain.b", "memory_hub.domain.c"]]
    assert cycles([_imp("memory_hub.domain.a", "memory_hub.domain.b")]) == []


def test_function_level_imports_are_read(tmp_path: Path):
    source = tmp_path / "probe.py"
    source.write_text("import json\n\n\ndef f():\n    from ..edge import pipeline\n    return pipeline\n")
    found = imports.imports_of(source, {"memory_hub.edge.pipeline"}, module="memory_hub.domain.probe")
    assert [(i.target, i.line) for i in found] == [("json", 1), ("memory_hub.edge.pipeline", 5)]
    assert breaches(found)
