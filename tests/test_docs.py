"""The documents stay short enough to read and lead nowhere that is not there: the README
fits on a few screens, each page in docs/ is one topic, and every relative link in them
and in SECURITY.md opens a file (and a heading) that exists."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.processes import REPO

README_MAX_LINES = 250
PAGE_MAX_LINES = 300
PAGES = sorted((REPO / "docs").glob("*.md"))
DOCUMENTS = [REPO / "README.md", REPO / "SECURITY.md", *PAGES]
# [text](target) and ![alt](target); the text may hold `code` but no closing bracket.
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
EXTERNAL = re.compile(r"^(?:[a-z][a-z0-9+.-]*:|//)", re.IGNORECASE)


def relative_links(document: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", document.read_text(), flags=re.DOTALL)
    return [target for target in LINK.findall(text) if not EXTERNAL.match(target)]


def heading_anchors(document: Path) -> set[str]:
    """The anchors a Markdown renderer gives the headings, as GitHub makes them."""
    anchors = set()
    for line in document.read_text().splitlines():
        if match := re.match(r"#{1,6} (.+)", line):
            words = re.sub(r"[^\w\- ]", "", match.group(1).strip().lower())
            anchors.add(words.replace(" ", "-"))
    return anchors


def broken(document: Path, target: str) -> str | None:
    path, _, anchor = target.partition("#")
    file = (document.parent / path).resolve() if path else document
    if not file.exists():
        return f"{target} (no such file)"
    if anchor and file.suffix == ".md" and anchor not in heading_anchors(file):
        return f"{target} (no such heading)"
    return None


def test_the_readme_fits_in_250_lines() -> None:
    lines = len((REPO / "README.md").read_text().splitlines())

    assert lines <= README_MAX_LINES, f"README.md has {lines} lines: move a topic to docs/"


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_each_docs_page_fits_in_300_lines(page: Path) -> None:
    lines = len(page.read_text().splitlines())

    assert lines <= PAGE_MAX_LINES, f"docs/{page.name} has {lines} lines: split it by topic"


def test_there_are_docs_pages() -> None:
    assert len(PAGES) >= 5, "the topics the README points to live in docs/"


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda document: str(document.relative_to(REPO)))
def test_every_relative_link_opens_a_file_that_exists(document: Path) -> None:
    assert [problem for target in relative_links(document) if (problem := broken(document, target))] == []


def test_the_link_check_catches_a_missing_file_and_a_missing_heading(tmp_path: Path) -> None:
    (tmp_path / "page.md").write_text("# A page\n\n## Using it\n")
    document = tmp_path / "index.md"
    document.write_text(
        "[ok](page.md#using-it) [gone](missing.md) [bad](page.md#nowhere) [web](https://example.com) "
        "![image](page.md) [here](#top)\n```\n[in code](not-a-link.md)\n```\n# Top\n"
    )

    assert relative_links(document) == ["page.md#using-it", "missing.md", "page.md#nowhere", "page.md", "#top"]
    assert [target for target in relative_links(document) if broken(document, target)] == [
        "missing.md",
        "page.md#nowhere",
    ]


def test_every_test_security_md_names_exists_where_it_says() -> None:
    """SECURITY.md makes no claim without a test: each one it names must be there to run."""
    text = (REPO / "SECURITY.md").read_text()
    cited = re.findall(r"(tests/[\w/]+\.py)::(test_\w+)", text)
    bare = set(re.findall(r"`(test_\w+)`", text))
    every_test = {
        name for file in (REPO / "tests").rglob("test_*.py") for name in re.findall(r"def (test_\w+)", file.read_text())
    }

    assert len(cited) >= 40, "SECURITY.md names the test behind each claim"
    assert [f"{path}::{name}" for path, name in cited if f"def {name}(" not in _text_of(REPO / path)] == []
    assert sorted(bare - every_test) == []


def _text_of(path: Path) -> str:
    return path.read_text() if path.exists() else ""


def test_no_document_keeps_a_table_of_settings() -> None:
    """A setting is described in .env.example alone: a document may name one, never give it
    a row of its own to describe it again."""
    settings = set(re.findall(r"^([A-Z][A-Z0-9_]*)=", (REPO / ".env.example").read_text(), re.MULTILINE))
    rows = [
        f"{document.name}: {line}"
        for document in DOCUMENTS
        for line in document.read_text().splitlines()
        if (match := re.match(r"\|\s*`([A-Z][A-Z0-9_]*)`", line)) and match.group(1) in settings
    ]

    assert rows == []
