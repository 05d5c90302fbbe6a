"""Code comments cite documents inside the repository: every `docs/….md` a source file names
exists, every section it cites (`docs/protocol.md §8.3`, `docs/api.md §3`) is a heading there,
and no source file cites the shared documents beside the repository by their own names."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
OUTSIDE = re.compile(r"(?<![\w/])(API\.md|ARCHITECTURE\.md|protocol\.txt|original-behaviour)")
CITED_FILE = re.compile(r"docs/([\w-]+\.md)")
# A cited section and the ones listed after it: "docs/protocol.md §6.4, §6.6, §7.2".
CITED_SECTIONS = re.compile(r"docs/([\w-]+\.md) (§[\d.]+(?:(?:, |–| and )§?[\d.]+)*)")


def _sources() -> list[Path]:
    """The repository's own Python and TypeScript sources (no dependencies, nothing built)."""
    here = Path(__file__).resolve()  # names the outside documents to look for them
    roots = [REPO / name for name in ("api", "core", "tests", "bench")]
    roots += [REPO / "clients" / "typescript" / "src", REPO / "web" / "src"]
    skip = {"node_modules", "web_dist", "__pycache__"}
    built = REPO / "web" / "src" / "c2"  # generated and copied there by `make web`
    return [
        path
        for root in roots
        for pattern in ("*.py", "*.ts", "*.tsx")
        for path in root.rglob(pattern)
        if not skip & set(path.relative_to(REPO).parts)
        and not path.is_relative_to(built)
        and path != here
    ]


def _headings(doc: Path) -> set[str]:
    """The section numbers of a document's headings ("## 3. Ops" → "3", "### 8.3 …" → "8.3")."""
    found = re.findall(r"(?m)^#+ (\d+(?:\.\d+)*)\.? ", doc.read_text(encoding="utf-8"))
    return set(found)


def test_sources_cite_no_document_outside_the_repository() -> None:
    """API.md, ARCHITECTURE.md, protocol.txt and original-behaviour are cited as their copies
    in docs/, never by the names they have beside the repository."""
    offenders = [
        f"{path.relative_to(REPO)}:{number}"
        for path in _sources()
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if OUTSIDE.search(line)
    ]
    assert not offenders, offenders


def test_cited_documents_and_sections_exist() -> None:
    """Each docs/ file a source names exists, and so does each numbered section it cites."""
    cited = 0
    for path in _sources():
        text = path.read_text(encoding="utf-8")
        for name in CITED_FILE.findall(text):
            assert (REPO / "docs" / name).is_file(), f"{path.relative_to(REPO)} cites {name}"
        for name, sections in CITED_SECTIONS.findall(text):
            headings = _headings(REPO / "docs" / name)
            for section in re.findall(r"[\d.]+", sections):
                cited += 1
                where = f"{path.relative_to(REPO)} cites {name} §{section}"
                assert section.rstrip(".") in headings, where
    assert cited > 50  # the citations are found at all
