"""The project's Markdown links: every relative link in README.md, CHANGELOG.md, CONTRIBUTING.md and docs/ names
a file that exists and, for a Markdown file, a heading it has (GitHub's anchors), so that a renamed results
section cannot leave a README row pointing nowhere."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", ROOT / "CHANGELOG.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")
CODE = re.compile(r"```.*?```", re.DOTALL)


def _slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """The anchors of a Markdown file's headings; a repeated heading gets `-1`, `-2`, ... as on GitHub."""
    seen: dict[str, int] = {}
    found = set()
    for heading in re.findall(r"^#{1,6} (.*)$", CODE.sub("", path.read_text(encoding="utf-8")), re.MULTILINE):
        slug = _slug(heading)
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        found.add(slug if count == 0 else f"{slug}-{count}")
    return found


def broken_links(doc: Path) -> list[str]:
    """The relative links of `doc` (outside code blocks) whose file or heading does not exist."""
    broken = []
    for target in LINK.findall(CODE.sub("", doc.read_text(encoding="utf-8"))):
        if re.match(r"[a-z]+:", target):  # https:, mailto:
            continue
        file, _, anchor = target.partition("#")
        path = (doc.parent / file).resolve() if file else doc
        if not path.exists():
            broken.append(f"{target} (no such file)")
        elif anchor and path.suffix == ".md" and anchor not in anchors(path):
            broken.append(f"{target} (no such heading)")
    return broken


def test_anchors_follow_github(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("# Results\n### bf16 on the CPU\n### Cross-lingual (WordNet and CWN)\n## Notes\n## Notes\n")
    assert anchors(page) == {"results", "bf16-on-the-cpu", "cross-lingual-wordnet-and-cwn", "notes", "notes-1"}
    page.write_text("[a](#results) [b](other.md#x) [c](https://example.com/#y)\n# Results\n")
    assert broken_links(page) == ["other.md#x (no such file)"]


@pytest.mark.parametrize("doc", DOCS, ids=lambda path: path.relative_to(ROOT).as_posix())
def test_every_relative_link_resolves(doc: Path) -> None:
    assert broken_links(doc) == []
