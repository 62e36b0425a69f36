"""Figures draw only: importing a figure module leaves the matplotlib backend to the command line."""

from __future__ import annotations

import os
import subprocess
import sys

FIGURE_MODULES = ("biased", "bound", "depth", "sweeps", "trained")


def _backend_after(code: str) -> str:
    env = {**os.environ, "MPLBACKEND": "svg"}  # a non-interactive backend other than Agg
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    return result.stdout.strip().lower()


def test_importing_figures_does_not_choose_a_backend() -> None:
    imports = "; ".join(f"import experiments.figures.{name}" for name in FIGURE_MODULES)
    assert _backend_after(f"{imports}; import matplotlib; print(matplotlib.get_backend())") == "svg"


def test_use_file_backend_selects_agg() -> None:
    """Negative control: the command-line switch does change the backend, so the check above can fail."""
    code = "from experiments.figures import use_file_backend; use_file_backend(); import matplotlib; "
    assert _backend_after(code + "print(matplotlib.get_backend())") == "agg"
