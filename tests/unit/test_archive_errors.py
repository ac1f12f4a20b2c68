"""An upload that is not a .tar.gz is refused in the service's own words: the problem names the
upload and what is wrong with it, never a library's exception text."""

from __future__ import annotations

import gzip
import io
import tarfile

import pytest
from memory_hub.domain.transfer.archive import untar
from memory_hub.domain.transfer.shapes import Malformed


def _tar_gz() -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w:gz") as archive:
        info = tarfile.TarInfo("persona.md")
        info.size = 2
        archive.addfile(info, io.BytesIO(b"hi"))
    return raw.getvalue()


@pytest.mark.parametrize(
    "data",
    [
        b"this is not a tar.gz archive",
        gzip.compress(b"gzip, but not a tar inside"),
        _tar_gz()[:40],  # cut short
        b"\x1f\x8b" + b"\xff" * 200,  # a gzip magic number, then nonsense
    ],
    ids=["text", "gzip-of-text", "cut-short", "damaged-gzip"],
)
def test_an_unreadable_upload_is_named_without_the_librarys_words(data):
    with pytest.raises(Malformed) as raised:
        untar(data)
    (problem,) = raised.value.problems
    assert problem.startswith("(upload): not a tar.gz archive ("), problem
    for internal in ("Error", "method", "\n", "'", "Exception"):
        assert internal not in problem, problem


def test_a_readable_upload_still_unpacks():
    assert untar(_tar_gz()) == {"persona.md": b"hi"}
