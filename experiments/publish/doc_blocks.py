"""Generated blocks in the docs: tables and numbers written from their sources, so they cannot drift.

A doc (README.md, docs/*.md, results/README.md and results/<store>/README.md) marks a generated block with two lines,

    <!-- BEGIN GENERATED: NAME -->
    ...
    <!-- END GENERATED: NAME -->

and ``attnrank report --docs ROOT`` (ROOT the repository root) rewrites what lies between them from NAME's source,
leaving every other byte of the doc as it is. NAME is a kind and its arguments joined by colons; the arguments name
what the block reads (a store, a folder, a recorded run's date), so the doc declares its sources. A kind is declared
by the module that owns its source (`experiments.reporting.doc_sources.DocBlockKind`), and :data:`BLOCK_KINDS`
collects them: the committed stores' blocks (`experiments.publish.store_blocks`: ``store-facts``, ``store-claims``,
``best-losses``, ``regime-control``; `experiments.publish.scaling_blocks`: ``long-scale``;
`experiments.publish.deep_columns_block`: ``deep-columns``), a GPU call's archived runs
(`experiments.publish.gpu_call_blocks`: ``gpu-step-costs``), the recorded benchmark runs
(`experiments.publish.benchmark_blocks`: ``random-features-curve``, ``bench-attention``) and the studies' own
(`experiments.studies.DOC_BLOCK_KINDS`: the tightness study's ``tightness``).

Rewriting is all or nothing: every block of every doc is computed before a file is written, and a doc whose markers
do not pair (a BEGIN without its END, an END without a BEGIN, a nested BEGIN, names that differ) or that names an
unknown kind is refused with one line naming the file and line. The text depends only on the sources (no clock is
read), so writing twice gives the same bytes, and a test compares every committed doc with what this module writes
now (tests/experiments/reporting/test_doc_blocks.py). The results index (``results/README.md``'s block between its own
markers, `experiments.publish.results_index`) is written by ``attnrank report --index`` and left alone here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from experiments.publish import benchmark_blocks, deep_columns_block, gpu_call_blocks, scaling_blocks, store_blocks
from experiments.reporting.doc_sources import RESULTS_NAME, DocBlockKind, DocSources
from experiments.studies import DOC_BLOCK_KINDS, PRESETS

BEGIN_PREFIX = "<!-- BEGIN GENERATED: "
END_PREFIX = "<!-- END GENERATED: "
MARKER_SUFFIX = " -->"
_MARKER = re.compile(r"^<!-- (BEGIN|END) GENERATED: ([A-Za-z0-9_.:-]+) -->$")


def _registry(*declared: tuple[DocBlockKind, ...]) -> dict[str, DocBlockKind]:
    """Kind name -> kind, over every declaring module; a name declared twice is a bug (ValueError naming it)."""
    kinds: dict[str, DocBlockKind] = {}
    for kind in (kind for group in declared for kind in group):
        if kind.name in kinds:
            raise ValueError(f"generated block kind {kind.name!r} is declared twice")
        kinds[kind.name] = kind
    return kinds


BLOCK_KINDS = _registry(
    store_blocks.DOC_BLOCKS,
    scaling_blocks.DOC_BLOCKS,
    gpu_call_blocks.DOC_BLOCKS,
    benchmark_blocks.DOC_BLOCKS,
    deep_columns_block.DOC_BLOCKS,
    DOC_BLOCK_KINDS,
)
"""Block kind -> its declaration (module docstring)."""


@dataclass(frozen=True)
class Block:
    """One generated block of a doc: its name and the 0-based lines of its two markers."""

    name: str
    begin: int
    end: int


def block_lines(root: Path, name: str, where: str = "") -> list[str]:
    """The lines generated for block NAME (``kind:argument:...``) of a doc under ``root``."""
    kind_name, *arguments = name.split(":")
    if kind_name not in BLOCK_KINDS:
        raise ValueError(f"{where}unknown generated block {name!r} (kinds: {', '.join(sorted(BLOCK_KINDS))})")
    kind = BLOCK_KINDS[kind_name]
    if not kind.fewest <= len(arguments) <= kind.most or any(not a for a in arguments):
        raise ValueError(
            f"{where}block {name!r}: {kind_name} takes {kind.fewest} to {kind.most} arguments after its name"
        )
    try:
        return kind.lines(DocSources(Path(root), PRESETS), *arguments)
    except ValueError as exc:
        raise ValueError(f"{where}block {name!r}: {exc}") from None


def find_blocks(text: str, path: Path | str) -> list[Block]:
    """The generated blocks of a doc's text; ValueError naming the file and line when the markers do not pair."""
    blocks: list[Block] = []
    open_name: str | None = None
    open_line = 0
    for number, line in enumerate(text.splitlines()):
        stripped = line.strip()
        if not stripped.startswith((BEGIN_PREFIX, END_PREFIX)):
            continue
        match = _MARKER.match(stripped)
        if match is None:
            raise ValueError(f"{path}:{number + 1}: malformed generated-block marker (expected {BEGIN_PREFIX}NAME -->)")
        side, name = match.groups()
        if side == "BEGIN":
            if open_name is not None:
                raise ValueError(
                    f"{path}:{number + 1}: BEGIN {name} inside block {open_name} (opened at line {open_line + 1})"
                )
            open_name, open_line = name, number
        else:
            if open_name is None:
                raise ValueError(f"{path}:{number + 1}: END {name} without its BEGIN")
            if name != open_name:
                raise ValueError(
                    f"{path}:{number + 1}: END {name} closes block {open_name} (opened at line {open_line + 1})"
                )
            blocks.append(Block(name, open_line, number))
            open_name = None
    if open_name is not None:
        raise ValueError(f"{path}:{open_line + 1}: BEGIN {open_name} without its END")
    return blocks


def doc_files(root: Path) -> list[Path]:
    """The docs that may hold generated blocks: README.md, docs/*.md, results/README.md, results/*/README.md."""
    root = Path(root)
    files = [root / "README.md", *sorted((root / "docs").glob("*.md")), root / RESULTS_NAME / "README.md"]
    files += sorted((root / RESULTS_NAME).glob("*/README.md"))
    return [f for f in files if f.is_file()]


def render_doc(root: Path, path: Path) -> str:
    """The text ``path`` would have with every generated block rewritten from its source."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    shown = _relative(root, path)
    blocks = find_blocks(text, shown)
    if not blocks:
        return text
    lines = text.splitlines()
    out: list[str] = []
    previous = 0
    for block in blocks:
        out += lines[previous : block.begin + 1]
        out += block_lines(root, block.name, f"{shown}:{block.begin + 1}: ")
        previous = block.end
    out += lines[previous:]
    return "\n".join(out) + ("\n" if text.endswith("\n") else "")


def _relative(root: Path, path: Path) -> str:
    try:
        return path.resolve().relative_to(Path(root).resolve()).as_posix()
    except ValueError:
        return str(path)


def rendered_docs(root: Path) -> dict[Path, tuple[str, str]]:
    """Every doc under ``root`` with generated blocks: path -> (text now, text with the blocks rewritten)."""
    out = {}
    for path in doc_files(root):
        now = path.read_text(encoding="utf-8", errors="replace")
        if BEGIN_PREFIX not in now and END_PREFIX not in now:
            continue
        out[path] = (now, render_doc(root, path))
    return out


def write_docs(root: Path | str) -> tuple[list[Path], int]:
    """Rewrite every generated block under ``root`` (all computed before any file is written); the docs whose text
    changed and the number of blocks found."""
    root = Path(root)
    if not root.is_dir():
        raise ValueError(f"DIR: repository root not found: {root}")
    if not (root / "README.md").is_file() or not (root / "docs").is_dir():
        raise ValueError(f"DIR: {root} is not the repository root (it needs README.md and docs/)")
    rendered = rendered_docs(root)
    blocks = sum(len(find_blocks(new, path)) for path, (_, new) in rendered.items())
    changed = []
    for path, (now, new) in rendered.items():
        if new != now:
            path.write_text(new, encoding="utf-8")
            changed.append(path)
    return changed, blocks
