"""Every relative link and every repository path cited in the overview docs resolves.

Checked files: README.md, docs/*.md, results/**/README.md and benchmarks/**/README.md. Checked references:

- markdown links ``[text](target)`` that are not URLs: the file or folder must exist (relative to the linking file),
  and an ``#anchor`` must name a heading of the target markdown file (GitHub's slugs) or of the linking file itself;
- repository paths cited in the text or in code (``tests/theory/test_bounds.py``, ``experiments/sweeps/``, ...): a
  path whose first part is a top-level folder of the repository must exist (relative to the repository root, or to
  the citing file's folder for a README inside results/ or benchmarks/). Patterns (``tests/test_*.py``,
  ``results/<store>/``) are not paths and are skipped.

In a git checkout "exists" means tracked by git (a file only present on this machine, such as a live sweep's store,
does not count); outside git, present on disk. Generated outputs that the docs name but the repository does not hold
are declared in :data:`GENERATED`.
"""

from __future__ import annotations

import re
import subprocess
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

GENERATED = {
    "reports/check.md": "written by `attnrank check`",
    "reports/theorem2_bound.png": "drawn by `attnrank check --full` (paper_checks/test_theorem2_bound.py)",
    "reports/depth": "the figures folder `attnrank figure depth --out reports/depth` writes",
}
"""Repository-relative paths the docs cite that are written by a command, not committed."""

_FENCE = re.compile(r"^(```|~~~).*?^\1", re.M | re.S)
_LINK = re.compile(r"(?<!!)\[(?:[^\]\[]|\[[^\]]*\])*\]\(([^()\s]+(?:\([^()\s]*\))?)(?:\s+\"[^\"]*\")?\)")
_IMAGE = re.compile(r"!\[[^\]]*\]\(([^()\s]+)\)")
_PATH = re.compile(r"(?<![\w/.<>{}$~-])((?>(?:[A-Za-z0-9_.-]+/)+[A-Za-z0-9_.-]*))(?![*<>{}$])")


def doc_files() -> list[Path]:
    files = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    files += sorted((ROOT / "results").glob("**/README.md")) + sorted((ROOT / "benchmarks").glob("**/README.md"))
    tracked = _tracked()
    return [f for f in files if tracked is None or f.relative_to(ROOT).as_posix() in tracked[0]]


@cache
def _tracked() -> tuple[frozenset[str], frozenset[str]] | None:
    """(tracked files, folders holding them), repository-relative; None outside a git checkout."""
    try:
        done = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, text=True, check=False)
    except OSError:
        return None
    if done.returncode != 0:
        return None
    files = frozenset(name for name in done.stdout.split("\0") if name)
    folders = {""}
    for name in files:
        parts = name.split("/")[:-1]
        folders.update("/".join(parts[: i + 1]) for i in range(len(parts)))
    return files, frozenset(folders)


def _exists(path: Path) -> bool:
    try:
        relative = path.resolve().relative_to(ROOT).as_posix()
    except ValueError:
        return path.exists()
    if relative == ".":
        relative = ""
    tracked = _tracked()
    if tracked is None:
        return path.exists()
    return relative in tracked[0] or relative in tracked[1]


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, markup and punctuation dropped, spaces as hyphens."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip())  # a link in a heading keeps its text
    text = text.replace("`", "").lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


@cache
def anchors(path: Path) -> frozenset[str]:
    return text_anchors(path.read_text(encoding="utf-8"))


def text_anchors(text: str) -> frozenset[str]:
    found: set[str] = set()
    counts: dict[str, int] = {}
    for line in _FENCE.sub("", text).splitlines():
        match = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if match:
            slug = _slug(match.group(1))
            n = counts.get(slug, 0)
            counts[slug] = n + 1
            found.add(slug if n == 0 else f"{slug}-{n}")
        found.update(re.findall(r"<a\s+(?:name|id)=\"([^\"]+)\"", line))
    return frozenset(found)


def link_problems(doc: Path, text: str) -> list[str]:
    prose = _FENCE.sub("", text)
    prose = re.sub(r"`[^`\n]*`", "", prose)  # inline code is not a link
    problems = []
    for target in [*_LINK.findall(prose), *_IMAGE.findall(prose)]:
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto:, ...
            continue
        file_part, _, anchor = target.partition("#")
        if not file_part:
            if anchor not in text_anchors(text):
                problems.append(f"{target}: no heading with anchor #{anchor} in this file")
            continue
        linked = doc.parent / file_part
        if not _exists(linked):
            problems.append(f"{target}: no such file or folder")
        elif anchor and linked.suffix == ".md" and linked.is_file() and anchor not in anchors(linked):
            problems.append(f"{target}: no heading with anchor #{anchor} in {linked.relative_to(ROOT)}")
    return problems


@cache
def _top_folders() -> frozenset[str]:
    tracked = _tracked()
    names = {p.name for p in ROOT.iterdir() if p.is_dir()} if tracked is None else tracked[1]
    return frozenset(n for n in names if n and "/" not in n and not n.startswith((".git", ".venv")))


def path_problems(doc: Path, text: str) -> list[str]:
    text = re.sub(r"\]\([^)]*\)", "]", text)  # link targets are checked by link_problems
    text = re.sub(r"https?://\S+", "", text)
    problems = []
    for cited in sorted(set(_PATH.findall(text))):
        cited = cited.rstrip(".")
        top = cited.split("/", 1)[0]
        if top not in _top_folders() or cited.rstrip("/") in GENERATED:
            continue
        if not (_exists(ROOT / cited) or _exists(doc.parent / cited)):
            problems.append(f"{cited}: cited, but no such path in the repository")
    return problems


@pytest.mark.parametrize("doc", doc_files(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_links_and_cited_paths_resolve(doc: Path) -> None:
    text = doc.read_text(encoding="utf-8")
    problems = link_problems(doc, text) + path_problems(doc, text)
    assert not problems, f"{doc.relative_to(ROOT)}:\n" + "\n".join(problems)


def test_the_checker_catches_broken_references() -> None:
    """Negative control: a missing file, a missing anchor and a cited path that moved are each reported."""
    doc = ROOT / "docs" / "sweeps.md"
    assert "grades" in anchors(doc)  # README.md links docs/sweeps.md#grades
    probe = ROOT / "docs" / "probe.md"  # never written: the checkers read the text given
    text = (
        "# Probe\n\n[a](missing.md) [b](sweeps.md#no-such-heading) [c](#probe) [d](../README.md#set-up-two-commands)"
        " [e](#nowhere)\n\nSee tests/test_bounds.py and tests/theory/test_bounds.py and `tests/test_*.py`.\n"
    )
    found = link_problems(probe, text) + path_problems(probe, text)
    assert found == [
        "missing.md: no such file or folder",
        "sweeps.md#no-such-heading: no heading with anchor #no-such-heading in docs/sweeps.md",
        "#nowhere: no heading with anchor #nowhere in this file",
        "tests/test_bounds.py: cited, but no such path in the repository",
    ]
