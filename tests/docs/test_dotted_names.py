"""Every dotted Python name the docs cite resolves: a renamed or moved module, function or constant fails here.

Checked files: README.md, docs/*.md and results/*/README.md. A doc can cite a name in four ways, all checked:

- an inline code span that is a dotted name, alone or as a call: `experiments.sweeps.store`,
  `theory.bounds.rank_lower_bound(d, r)`;
- ``python -m MODULE`` and ``from MODULE import A, B`` / ``import MODULE`` in inline code or a fenced block.

Which names are Python names of this project (the rules, in order):

1. a name whose last segment is a file extension (:data:`FILE_EXTENSIONS`: ``report.md``, ``config.json``,
   ``results.sqlite``, ...) is a file name, not a Python name;
2. a span holding anything but identifiers, dots and a trailing call's parentheses (``encoder.layers.{l}.norm1``,
   ``TrainConfig.curriculum_*``, ``results.sqlite.damaged-<UTC ...``) is a pattern or a state-dict key template;
3. a name whose first segment is one of the project's packages (:data:`PACKAGES`) is resolved as written;
4. a name whose first segment is a room of ``experiments`` (``analysis.run_curves``, ``training.population``,
   ``sweeps.execute``: the docs write these inside the experiments package's own sections) is resolved as
   ``experiments.<name>``;
5. a name whose first segment is the last segment of a module the same file cited in full before it
   (``reference_data.shared_batches`` after ``experiments.samplers.reference_data``) is resolved in that module;
6. a name whose first segment is a class that exactly one module of the project defines at its top level
   (``TrainConfig.extends``, ``GramStatistics.reduced()``) is resolved in that module; an attribute an instance gets
   (a dataclass field without a default, ``self.device = ...`` in a method) counts as the class's;
7. everything else (``torch.load``, ``nn.MultiheadAttention``, a variable's attribute such as ``task.at_step(s)``, a
   state-dict key such as ``attention.bias``, a reference repository's ``task.NearestPointDataset``) is not ours and
   is skipped.

Resolving: import the longest prefix that is an importable module, then ``getattr`` the remaining segments one by
one. A prefix whose import fails for another reason than "no such module" is a failure too (the doc's module is
broken).
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import inspect
import pkgutil
import re
import textwrap
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

import experiments

ROOT = Path(__file__).resolve().parents[2]

PACKAGES = ("attnrank", "theory", "constructions", "experiments")
"""The project's top-level packages (pyproject.toml's import-linter root packages)."""

FILE_EXTENSIONS = frozenset(
    {"py", "json", "jsonl", "csv", "png", "md", "pt", "safetensors", "sqlite", "txt", "toml", "cff", "sh", "log"}
)
"""Last segments that make a dotted word a file name (rule 1)."""

_FENCE = re.compile(r"^(```|~~~).*?^\1[^\n]*$", re.M | re.S)
_SPAN = re.compile(r"`([^`]+)`")
_NAME = r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*"
_DOTTED_SPAN = re.compile(rf"({_NAME})(?:\(.*\)|\(.*)?", re.S)  # a name, or a call (possibly broken over lines)
_RUN_MODULE = re.compile(rf"python3? -m ({_NAME})")
_FROM_IMPORT = re.compile(rf"^\s*from ({_NAME}) import ([A-Za-z0-9_, ]+)", re.M)
_IMPORT = re.compile(rf"^\s*import ({_NAME})\s*$", re.M)


@dataclass(frozen=True)
class Citation:
    """One Python name a doc cites: the file, its line, the name as written and the full name resolved."""

    doc: str
    line: int
    written: str
    name: str


def doc_files() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "results").glob("*/README.md"))]


@cache
def rooms() -> frozenset[str]:
    """The subpackages and modules directly inside ``experiments`` (rule 4)."""
    return frozenset(info.name for info in pkgutil.iter_modules(experiments.__path__))


@cache
def classes() -> dict[str, str]:
    """Class name -> the module that defines it at top level, for the classes exactly one project module defines
    (rule 6); read from the source, so nothing is imported to build it."""
    defined: dict[str, set[str]] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            module = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
            for node in ast.parse(path.read_text(encoding="utf-8")).body:
                if isinstance(node, ast.ClassDef):
                    defined.setdefault(node.name, set()).add(module)
    return {name: next(iter(modules)) for name, modules in defined.items() if len(modules) == 1}


def _instance_attributes(cls: type) -> set[str]:
    """Attributes an instance of ``cls`` gets that the class itself may lack: dataclass fields, annotated names and
    ``self.NAME = ...`` assignments in the methods of ``cls`` and its bases."""
    names = {f.name for f in dataclasses.fields(cls)} if dataclasses.is_dataclass(cls) else set()
    for klass in cls.__mro__:
        names.update(getattr(klass, "__annotations__", {}))
        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(klass)))
        except (OSError, TypeError, SyntaxError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                if isinstance(node.value, ast.Name) and node.value.id == "self":
                    names.add(node.attr)
    return names


def _line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def _full_name(written: str, cited_modules: list[str]) -> str | None:
    """The full name ``written`` stands for under rules 1 to 6, or None when it is not one of ours."""
    segments = written.split(".")
    if segments[-1] in FILE_EXTENSIONS:
        return None
    if segments[0] in PACKAGES:
        return written
    if len(segments) > 1 and segments[0] in rooms():
        return f"experiments.{written}"
    for module in reversed(cited_modules):
        if len(segments) > 1 and module.rsplit(".", 1)[-1] == segments[0]:
            return f"{module.rsplit('.', 1)[0]}.{written}"
    if len(segments) > 1 and segments[0] in classes():
        return f"{classes()[segments[0]]}.{written}"
    return None


def citations(doc: Path, text: str) -> list[Citation]:
    """Every Python name of the project that ``text`` cites, in the order written (rules in the module docstring)."""
    relative = doc.relative_to(ROOT).as_posix() if doc.is_relative_to(ROOT) else doc.name
    found: list[tuple[int, str]] = []  # (offset, name as written)
    for block in _FENCE.finditer(text):
        for pattern in (_RUN_MODULE, _IMPORT):
            found += [(block.start() + m.start(1), m.group(1)) for m in pattern.finditer(block.group(0))]
        for m in _FROM_IMPORT.finditer(block.group(0)):
            found.append((block.start() + m.start(1), m.group(1)))
            found += [(block.start() + m.start(1), f"{m.group(1)}.{n.strip()}") for n in m.group(2).split(",")]
    prose = _FENCE.sub(lambda m: " " * len(m.group(0)), text)  # same offsets, fenced blocks blanked
    for span in _SPAN.finditer(prose):
        if "\n\n" in span.group(1):
            continue  # not a code span: a stray backtick paired across paragraphs
        content = span.group(1).strip()
        runs = [m.group(1) for m in _RUN_MODULE.finditer(content)]
        imports = [m.group(1) for m in _FROM_IMPORT.finditer(content)]
        if runs or imports:
            found += [(span.start(), name) for name in runs + imports]
            continue
        dotted = _DOTTED_SPAN.fullmatch(content)
        if dotted and "." in dotted.group(1):
            found.append((span.start(), dotted.group(1)))
    cited_modules: list[str] = []
    out: list[Citation] = []
    for offset, written in sorted(found, key=lambda item: item[0]):
        name = _full_name(written, cited_modules)
        if name is None:
            continue
        out.append(Citation(relative, _line_of(text, offset), written, name))
        if _is_module(name):
            cited_modules.append(name)
    return out


@cache
def _module_prefix(name: str) -> str | None:
    """The longest prefix of ``name`` that imports as a module; None when not even the first segment does.

    Raises what the import raises when a module that exists fails to import (a broken module is a failure)."""
    segments = name.split(".")
    for end in range(len(segments), 0, -1):
        candidate = ".".join(segments[:end])
        try:
            importlib.import_module(candidate)
        except ModuleNotFoundError as exc:
            if exc.name is not None and (candidate == exc.name or candidate.startswith(exc.name + ".")):
                continue  # this prefix (or a parent) is not a module: try a shorter one
            raise
        return candidate
    return None


def _is_module(name: str) -> bool:
    try:
        return _module_prefix(name) == name
    except Exception:  # noqa: BLE001 - a module that fails to import is reported where it is resolved
        return False


def resolution_problem(name: str) -> str | None:
    """Why ``name`` does not resolve to a Python object, or None when it does."""
    try:
        module_name = _module_prefix(name)
    except Exception as exc:  # noqa: BLE001 - any import failure of a cited module is the doc's problem to report
        return f"importing it fails: {type(exc).__name__}: {exc}"
    if module_name is None:
        return "no such module"
    target: object = importlib.import_module(module_name)
    walked = module_name
    for segment in name[len(module_name) :].lstrip(".").split(".") if name != module_name else ():
        if not hasattr(target, segment):
            if isinstance(target, type) and segment in _instance_attributes(target):
                return None  # an instance's attribute: nothing further to walk
            return f"{walked} has no attribute {segment!r}"
        target = getattr(target, segment)
        walked += "." + segment
    return None


def all_citations() -> list[Citation]:
    return [c for doc in doc_files() for c in citations(doc, doc.read_text(encoding="utf-8"))]


@pytest.mark.parametrize("doc", doc_files(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_cited_python_name_resolves(doc: Path) -> None:
    problems = []
    for cited in citations(doc, doc.read_text(encoding="utf-8")):
        why = resolution_problem(cited.name)
        if why is not None:
            shown = cited.written if cited.written == cited.name else f"{cited.written} (= {cited.name})"
            problems.append(f"line {cited.line}: `{shown}`: {why}")
    assert not problems, f"{doc.relative_to(ROOT)} cites names that do not exist:\n" + "\n".join(problems)


def test_the_docs_cite_many_names() -> None:
    """The extractor finds what the docs cite (a regex that silently matched nothing would pass every doc)."""
    names = {c.name for c in all_citations()}
    assert len(names) > 100, len(names)
    assert "experiments.sweeps.store" in names
    assert "experiments.analysis.run_curves" in names  # cited in full in a store README


def test_a_made_up_name_fails_and_the_rules_skip_what_is_not_ours() -> None:
    """Negative control, and the skip rules on a probe text."""
    probe = ROOT / "docs" / "probe.md"  # never written: citations() reads the text given
    text = (
        "See `experiments.studies.no_such_claim`, `theory.bounds.rank_lower_bound(d, r)`, `analysis.run_curves`"
        " and `experiments.samplers.reference_data`, then `reference_data.shared_batches`, `TrainConfig.extends`,"
        " `TrainConfig.no_such_field`.\n"
        "Not ours: `config.json`, `results.sqlite`, `attention.bias`, `torch.load`, `task.at_step(s)`,"
        " `encoder.layers.{l}.norm1.scale`, `TrainConfig.curriculum_*`.\n"
        "```\nfrom theory.sphere import sample_context, no_such_sampler\npython -m experiments.figures.nowhere\n```\n"
    )
    written = [(c.written, c.name) for c in citations(probe, text)]
    assert written == [
        ("experiments.studies.no_such_claim", "experiments.studies.no_such_claim"),
        ("theory.bounds.rank_lower_bound", "theory.bounds.rank_lower_bound"),
        ("analysis.run_curves", "experiments.analysis.run_curves"),
        ("experiments.samplers.reference_data", "experiments.samplers.reference_data"),
        ("reference_data.shared_batches", "experiments.samplers.reference_data.shared_batches"),
        ("TrainConfig.extends", "experiments.config.TrainConfig.extends"),
        ("TrainConfig.no_such_field", "experiments.config.TrainConfig.no_such_field"),
        ("theory.sphere", "theory.sphere"),
        ("theory.sphere.sample_context", "theory.sphere.sample_context"),
        ("theory.sphere.no_such_sampler", "theory.sphere.no_such_sampler"),
        ("experiments.figures.nowhere", "experiments.figures.nowhere"),
    ]
    assert resolution_problem("experiments.studies.no_such_claim") == (
        "experiments.studies has no attribute 'no_such_claim'"
    )
    assert resolution_problem("theory.sphere.no_such_sampler") == "theory.sphere has no attribute 'no_such_sampler'"
    assert resolution_problem("experiments.figures.nowhere") == "experiments.figures has no attribute 'nowhere'"
    assert resolution_problem("experiments.config.TrainConfig.no_such_field") == (
        "experiments.config.TrainConfig has no attribute 'no_such_field'"
    )
    assert resolution_problem("nosuchpackage_attnrank.x") == "no such module"
    for real in (
        "theory.bounds.rank_lower_bound",
        "experiments.analysis.run_curves",
        "theory.sphere.sample_context",
        "experiments.config.TrainConfig.extends",  # a dataclass field: an instance's attribute
    ):
        assert resolution_problem(real) is None, real
