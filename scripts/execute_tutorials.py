"""Execute the tutorials in place, so that the outputs committed with them are what executing them produces.

The notebooks under tutorials/ are committed with their outputs (a newcomer reads them on GitHub before running
anything). Those outputs come from this script's execution, the same one the test suite repeats
(tests/test_tutorials.py compares each re-execution with the committed outputs, so they cannot go stale):

- the kernel starts in tutorials/ (the notebooks read committed stores as ``../results/...``);
- :data:`QUICK_ENVIRONMENT` is set for the kernel: the training notebook reads ``ATTNRANK_TUTORIAL_STEPS`` and trains
  a few seconds' worth of steps instead of its default (about a minute), so the whole execution fits the test budget;
- streams are coalesced (one stdout output per cell, however the kernel flushed it), no timing is recorded, and the
  notebook's metadata is reduced to the kernel's name, so re-executing an unchanged notebook changes no byte of text.

Usage, after editing a notebook (from the repository root):

    python scripts/execute_tutorials.py             # every notebook under tutorials/
    python scripts/execute_tutorials.py tutorials/02-train-against-the-bound.ipynb

It prints each notebook's wall time. A cell that raises stops the script with exit status 1 and writes nothing.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

TUTORIALS = Path(__file__).resolve().parents[1] / "tutorials"
QUICK_ENVIRONMENT = {"ATTNRANK_TUTORIAL_STEPS": "512"}
"""Set for the kernel of every execution: the training notebook's step count (its default is 8192)."""
CELL_TIMEOUT_S = 300
"""Seconds one cell may run before the execution is abandoned (the slowest takes a few seconds)."""
METADATA = {
    "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
    "language_info": {"name": "python"},
}
"""The whole notebook metadata after execution (the kernel's version details would differ between machines)."""


def notebooks() -> list[Path]:
    """Every tutorial notebook, in reading order (their names start with a number)."""
    return sorted(TUTORIALS.glob("*.ipynb"))


@contextlib.contextmanager
def _environment(values: dict[str, str]) -> Iterator[None]:
    """``values`` in os.environ while the block runs (a kernel started inside inherits them), then as before."""
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def execute(path: Path) -> nbformat.NotebookNode:
    """The notebook at ``path`` executed as the committed outputs are (module docstring); the file is not changed.

    Raises:
        CellExecutionError: a cell raised (the message shows the cell and the traceback).
    """
    notebook = nbformat.read(path, as_version=4)
    client = NotebookClient(
        notebook,
        timeout=CELL_TIMEOUT_S,
        kernel_name="python3",
        resources={"metadata": {"path": str(path.resolve().parent)}},
        record_timing=False,
        coalesce_streams=True,
    )
    with _environment(QUICK_ENVIRONMENT):
        client.execute()
    notebook.metadata = nbformat.from_dict(METADATA)
    return notebook


def comparable(notebook: nbformat.NotebookNode) -> list[tuple[Any, ...]]:
    """What must agree between two executions of a notebook: every code cell's source, execution count and outputs,
    with text compared exactly and images by their presence (PNG bytes depend on the matplotlib build)."""
    cells = []
    for cell in notebook.cells:
        if cell.cell_type != "code":
            continue
        outputs: list[tuple[Any, ...]] = []
        for output in cell.get("outputs", []):
            kind = output["output_type"]
            if kind == "stream":
                outputs.append((kind, output["name"], output["text"]))
            elif kind in ("execute_result", "display_data"):
                data = output.get("data", {})
                outputs.append((kind, tuple(sorted(data)), data.get("text/plain")))
            else:  # an error
                outputs.append((kind, output.get("ename"), output.get("evalue")))
        cells.append((cell.source, cell.get("execution_count"), tuple(outputs)))
    return cells


def main(argv: list[str]) -> int:
    paths = [Path(argument) for argument in argv] or notebooks()
    for path in paths:
        if path.suffix != ".ipynb" or not path.is_file():
            print(f"execute_tutorials: {path}: not a notebook file (.ipynb)", file=sys.stderr)
            return 2
    total = 0.0
    for path in paths:
        start = time.perf_counter()
        try:
            executed = execute(path)
        except CellExecutionError as exc:
            print(f"execute_tutorials: {path}: a cell raised; nothing written\n{exc}", file=sys.stderr)
            return 1
        seconds = time.perf_counter() - start
        total += seconds
        nbformat.write(executed, path)
        print(f"{path.name}: executed in {seconds:.1f} s")
    print(f"all: {total:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
