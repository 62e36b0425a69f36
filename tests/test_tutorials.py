"""The tutorials under tutorials/ execute, and their committed outputs are what executing them produces.

Each notebook is re-executed exactly as scripts/execute_tutorials.py executes it for the commit (kernel in
tutorials/, the short training step count, coalesced streams) into a copy under the test's temporary directory, and
compared with the committed file: every code cell's text outputs exactly, its figures by presence. A notebook edited
without re-running the script, or whose numbers changed with the code, fails here; the failure message names the first
cell that differs and the copy to diff against.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "execute_tutorials.py"
MAX_NOTEBOOK_BYTES = 200_000
"""A committed notebook stays small: text and a few modest figures (each under 60 kB at 72 dpi)."""


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("execute_tutorials", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


EXECUTE = _script()
NOTEBOOKS = EXECUTE.notebooks()


def test_there_are_three_tutorials() -> None:
    assert [path.name[:3] for path in NOTEBOOKS] == ["01-", "02-", "03-"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[path.stem for path in NOTEBOOKS])
def test_the_committed_outputs_are_what_execution_produces(path: Path, tmp_path: Path) -> None:
    committed = nbformat.read(path, as_version=4)
    executed = EXECUTE.execute(path)
    copy = tmp_path / path.name
    nbformat.write(executed, copy)
    expected, got = EXECUTE.comparable(committed), EXECUTE.comparable(executed)
    assert len(got) == len(expected), f"{path.name}: code cells differ in number (re-executed copy: {copy})"
    for index, (want, have) in enumerate(zip(expected, got, strict=True)):
        assert have == want, (
            f"{path.name}, code cell {index + 1}: the outputs differ from the committed ones; run "
            f"`python scripts/execute_tutorials.py {path.relative_to(ROOT)}` (re-executed copy: {copy})"
        )
    assert all(output["output_type"] != "error" for cell in executed.cells for output in cell.get("outputs", []))
    figures = [o for c in committed.cells for o in c.get("outputs", []) if "image/png" in o.get("data", {})]
    assert figures, f"{path.name}: no figure committed"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[path.stem for path in NOTEBOOKS])
def test_a_committed_notebook_is_small_and_executed(path: Path) -> None:
    assert path.stat().st_size <= MAX_NOTEBOOK_BYTES, f"{path.name}: {path.stat().st_size} bytes"
    notebook = nbformat.read(path, as_version=4)
    nbformat.validate(notebook)
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    assert [cell.execution_count for cell in code] == list(range(1, len(code) + 1)), "not executed top to bottom"


def test_the_readme_lists_every_tutorial_first_under_learn() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    learn = readme.split("\n## Learn\n", 1)[1].split("\n## ", 1)[0]
    linked = re.findall(r"\]\((tutorials/[^)]+\.ipynb)\)", learn)
    assert linked[: len(NOTEBOOKS)] == [f"tutorials/{path.name}" for path in NOTEBOOKS]
