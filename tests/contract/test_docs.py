"""The documents hold together: the README stays short and is the way into every doc, and no
relative link in the README, the contributing guide, the changelog or docs/ points at a file (or a
heading) that is not there."""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
README_MAX_LINES = 250

FENCE = re.compile(r"^(```|~~~).*?^\1", re.M | re.S)
CODE_SPAN = re.compile(r"(`+).+?\1", re.S)
# [text](target) or [text](target "title"); images too. Autolinks (<https://…>) are absolute.
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.M)
SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def _documents() -> list[Path]:
    docs = sorted((ROOT / "docs").glob("*.md"))
    return [README, ROOT / "CONTRIBUTING.md", ROOT / "CHANGELOG.md", *docs]


def _prose(text: str) -> str:
    """The text without fenced code blocks and code spans, where brackets are code, not links."""
    return CODE_SPAN.sub("", FENCE.sub("", text))


def links(path: Path) -> list[str]:
    return LINK.findall(_prose(path.read_text(encoding="utf-8")))


def slug(heading: str) -> str:
    """A heading's anchor as GitHub makes it: lower case, punctuation dropped (code marks and link
    syntax included), spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).strip().lower()
    kept = "".join(
        c for c in text if c in " -_" or unicodedata.category(c)[0] in "LN" or unicodedata.category(c) == "Mn"
    )
    return kept.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    found: set[str] = set()
    for heading in HEADING.findall(FENCE.sub("", path.read_text(encoding="utf-8"))):
        base = slug(heading)
        name, n = base, 0
        while name in found:
            n += 1
            name = f"{base}-{n}"
        found.add(name)
    return found


def broken(path: Path, folder: Path | None = None) -> list[str]:
    """The relative links of one document whose file, or heading in a Markdown file, is missing;
    ``folder``: where its links are resolved from (the document's own folder unless said)."""
    folder = folder or path.parent
    problems = []
    for target in links(path):
        if SCHEME.match(target):
            continue
        file_part, _, anchor = target.partition("#")
        if not file_part:
            if anchor not in anchors(path):
                problems.append(f"{target} (no such heading)")
            continue
        resolved = (folder / file_part).resolve()
        if not resolved.is_relative_to(ROOT):
            problems.append(f"{target} (outside the repository)")
        elif not resolved.exists():
            problems.append(f"{target} (no such file)")
        elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
            problems.append(f"{target} (no such heading)")
    return problems


def test_readme_is_short():
    lines = README.read_text(encoding="utf-8").count("\n")
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines; move detail into docs/"


@pytest.mark.parametrize("document", _documents(), ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_point_at_files_in_the_repository(document: Path):
    assert document.exists(), f"{document.relative_to(ROOT)} is missing"
    assert not broken(document), f"{document.relative_to(ROOT)}: " + ", ".join(broken(document))


def test_the_readme_links_every_doc():
    docs = sorted((ROOT / "docs").glob("*.md"))
    assert len(docs) >= 2, "docs/ holds the documents"
    linked = {(ROOT / t.partition("#")[0]).resolve() for t in links(README) if not SCHEME.match(t)}
    missing = [str(d.relative_to(ROOT)) for d in docs if d.resolve() not in linked]
    assert not missing, "README.md does not link: " + ", ".join(missing)


def test_the_checks_see_links_and_catch_broken_ones(tmp_path: Path):
    """The parser finds the README's links (not code), and a missing file, a missing heading (here
    or in another doc) and a path out of the repository are each reported."""
    assert len(links(README)) >= 10
    assert "docs/API.md" in links(README)
    probe = tmp_path / "probe.md"  # read as if it lived in docs/, written outside the repository
    probe.write_text(
        "# Title\n\n[ok](#title) [here](#nothing) [gone](nowhere.md) [heading](API.md#no-such-heading) "
        "[out](../../elsewhere.md) [web](https://example.com/x.md) `[code](missing.md)`\n"
        "```\n[fenced](missing.md)\n```\n",
        encoding="utf-8",
    )
    assert links(probe) == [
        "#title",
        "#nothing",
        "nowhere.md",
        "API.md#no-such-heading",
        "../../elsewhere.md",
        "https://example.com/x.md",
    ]
    assert broken(probe, ROOT / "docs") == [
        "#nothing (no such heading)",
        "nowhere.md (no such file)",
        "API.md#no-such-heading (no such heading)",
        "../../elsewhere.md (outside the repository)",
    ]
    assert slug("Export and import (`memory-tdai`)") == "export-and-import-memory-tdai"
    assert slug("Command line (`.venv/bin/memory-hub`)") == "command-line-venvbinmemory-hub"
