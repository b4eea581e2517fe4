"""Every link in the README, the docs and the library's docstrings resolves.

Relative Markdown links (``[text](path)`` and ``[text](path#anchor)``) must name a file or
folder of the repository, and an anchor must match a heading of the Markdown file it points
into (GitHub's slug rules: lower case, punctuation dropped, spaces to hyphens). Paths that
docstrings and comments name in backquotes (```functx/...```, ```docs/...```,
```tests/...```, ```benchmarks/...```, ```examples/...```) must exist too, so a file that
moves cannot leave a stale pointer behind.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MARKDOWN = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md"),
                   *(ROOT / "benchmarks").glob("*.md")])
LINK = re.compile(r"\]\(([^)\s]+)\)")
PATH = re.compile(r"`((?:functx|docs|tests|benchmarks|examples)/[\w./-]*\w)`")


def _slug(heading: str) -> str:
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def _anchors(md: Path) -> set[str]:
    return {_slug(m.group(1)) for m in re.finditer(r"^#+\s+(.*)$", md.read_text(), re.M)}


def _exists(rel: str) -> bool:
    rel = rel.rstrip("/")
    # ``functx/primitives/cuda/{elementwise,indexing}.py``-style names are not paths
    return "{" in rel or "*" in rel or (ROOT / rel).exists()


@pytest.mark.parametrize("md", MARKDOWN, ids=lambda p: str(p.relative_to(ROOT)))
def test_markdown_links_resolve(md: Path) -> None:
    broken = []
    for target in LINK.findall(md.read_text()):
        if re.match(r"[a-z]+:", target):  # http:, https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        dest = (md.parent / path).resolve() if path else md
        if not dest.exists():
            broken.append(f"{target} (no such file)")
        elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
            broken.append(f"{target} (no heading #{anchor} in {dest.relative_to(ROOT)})")
    assert not broken, f"{md.relative_to(ROOT)} has broken links: {broken}"


def test_paths_named_in_the_library_exist() -> None:
    missing = []
    for py in sorted((ROOT / "functx").rglob("*.py")):
        for rel in PATH.findall(py.read_text()):
            if not _exists(rel):
                missing.append(f"{py.relative_to(ROOT)} names {rel}")
    for md in MARKDOWN:
        for rel in PATH.findall(md.read_text()):
            if not _exists(rel):
                missing.append(f"{md.relative_to(ROOT)} names {rel}")
    assert not missing, "paths that do not exist:\n" + "\n".join(missing)
