"""Figure: trained one-layer error against Theorem 2's lower bound, one curve per rank.

Reads trained-vs-bound records (the "theorem2" entry that `attnrank analyze` writes to DIR/analysis.json, or the same
dictionaries built in memory) and draws, for each rank r, the bound rank_lower_bound(d, r, H) as a function of the
head count H and the trained errors at their H with 4-standard-error bars. A point below its rank's curve would
contradict the theorem.

    attnrank figure trained --runs RUN_DIR [RUN_DIR ...] --out DIR

draws DIR/trained_vs_bound.png from the runs' analysis.json (`experiments.analysis.trained.records_from_runs`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import numpy as np

from experiments.analysis.bound_curves import bound_curve
from theory.monte_carlo import DEFAULT_Z

REQUIRED = ("d", "r", "H", "error", "error_stderr")


def plot_trained_vs_bound(
    records: Sequence[Mapping[str, Any]], path: Path, *, max_heads: int | None = None, title: str | None = None
) -> Path:
    """Draw trained errors (with 4 s.e. bars) and the bound curves H -> rank_lower_bound(d, r, H), per rank.

    Args:
        records: dicts with d, r, H, error, error_stderr (one d for all).
        path: output image file.
        max_heads: right end of the H axis (default: 4 times the largest H among the records).
        title: figure title (default: names d); the sweep report adds the runs' parameters.

    Returns:
        the path written.
    """
    if not records:
        raise ValueError("records must hold at least one trained-vs-bound record")
    for record in records:
        missing = [k for k in REQUIRED if k not in record]
        if missing:
            raise ValueError(f"record {dict(record)} is missing {', '.join(missing)}")
    dims = {int(r["d"]) for r in records}
    if len(dims) != 1:
        raise ValueError(f"records must share one dimension d, got {sorted(dims)}")
    d = dims.pop()
    top = max_heads or 4 * max(int(r["H"]) for r in records)
    grid = np.unique(np.geomspace(1, top, 24).round().astype(int))  # (n_grid,) head counts
    figure, axis = plt.subplots(figsize=(6.0, 4.0))
    for index, rank in enumerate(sorted({int(r["r"]) for r in records})):
        colour = f"C{index % 10}"
        bound = bound_curve(d, rank, grid)  # (n_grid,)
        axis.plot(grid, bound, color=colour, label=f"certified bound r = {rank}")
        points = [r for r in records if int(r["r"]) == rank]
        axis.errorbar(
            [int(p["H"]) for p in points],
            [float(p["error"]) for p in points],
            yerr=[DEFAULT_Z * float(p["error_stderr"]) for p in points],
            fmt="o",
            color=colour,
            capsize=3,
            label=f"trained r = {rank}",
        )
    axis.set_xscale("log", base=2)
    axis.set_yscale("log", nonpositive="mask")  # a bound of 0 (H large enough) is not drawn
    axis.set_xlabel("heads H")
    axis.set_ylabel("E ||f - f*||^2 (nearest, N = 2, D_2)")
    heading = f"Trained one-layer attention vs Theorem 2 bound, d = {d}"
    axis.set_title(heading if title is None else f"{heading}\n{title}", fontsize=9)
    axis.grid(True, which="both", alpha=0.3)
    axis.legend(fontsize=7)
    figure.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return path
