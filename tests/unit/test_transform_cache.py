"""infra/local template.expanded: the SAM transform's result is kept on disk between starts, keyed
by what it depends on, and never read half-written or stale."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from memory_hub_local import template


@pytest.fixture
def cache(tmp_path, monkeypatch):
    folder = tmp_path / "cache"
    monkeypatch.setenv("MEMORY_HUB_CACHE_DIR", str(folder))
    template._expanded.cache_clear()
    yield folder
    template._expanded.cache_clear()


def _no_transform(*args, **kwargs):
    raise AssertionError("transformed again")


def test_a_second_start_reads_the_kept_transform(cache, monkeypatch):
    first = template.expanded("us-east-1")
    (kept,) = cache.glob("transform-*.json")
    assert json.loads(kept.read_bytes()) == first
    template._expanded.cache_clear()  # a new process
    monkeypatch.setattr(subprocess, "run", _no_transform)
    assert template.expanded("us-east-1") == first


def test_another_region_or_template_is_transformed_again(cache, tmp_path):
    template.expanded("us-east-1")
    other = template.expanded("eu-west-1")
    assert other["Resources"].keys() == template.expanded("us-east-1")["Resources"].keys()
    changed = tmp_path / "template.yaml"
    changed.write_text(template.TEMPLATE.read_text(encoding="utf-8") + "\n# a change\n", encoding="utf-8")
    template.expanded("us-east-1", changed)
    assert len(list(cache.glob("transform-*.json"))) == 3
    assert not list(cache.glob(".transform-*"))  # no temporary file left


def test_an_unreadable_kept_file_is_replaced(cache):
    good = template.expanded("us-east-1")
    (kept,) = cache.glob("transform-*.json")
    kept.write_bytes(b'{"Resources": ')  # cut short
    template._expanded.cache_clear()
    assert template.expanded("us-east-1") == good
    assert json.loads(kept.read_bytes()) == good


def test_a_folder_that_cannot_be_written_only_costs_the_transform(tmp_path, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("MEMORY_HUB_CACHE_DIR", str(Path(blocker) / "cache"))
    template._expanded.cache_clear()
    try:
        assert "Resources" in template.expanded("us-east-1")
    finally:
        template._expanded.cache_clear()
