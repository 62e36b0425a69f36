"""Figure: trained one-layer error against Theorem 2's lower bound, one curve per rank.

Reads evaluations of the one metric record (`experiments.training.run_record.Evaluation`: the population error and
the bound record ``theorem2``, from a sweep's records or from the analysis.json that `attnrank analyze` writes) and
draws, for each rank r, the bound rank_lower_bound(d, r, H) as a function of the
head count H and the trained errors at their H with 4-standard-error bars. A point below its rank's curve would
contradict the theorem.

    attnrank figure trained --runs RUN_DIR [RUN_DIR ...] --out DIR

draws DIR/trained_vs_bound.png from the runs' analysis.json (`experiments.analysis.trained.records_from_runs`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

from experiments.analysis.bound_curves import bound_curve
from experiments.training.run_record import Evaluation, TheoremTwoBound
from theory.monte_carlo import DEFAULT_Z


def plot_trained_vs_bound(
    evaluations: Sequence[Evaluation], path: Path, *, max_heads: int | None = None, title: str | None = None
) -> Path:
    """Draw trained errors (with 4 s.e. bars) and the bound curves H -> rank_lower_bound(d, r, H), per rank.

    Args:
        evaluations: trained models' evaluations, each with its bound record (one d for all).
        path: output image file.
        max_heads: right end of the H axis (default: 4 times the largest H among the records).
        title: figure title (default: names d); the sweep report adds the runs' parameters.

    Returns:
        the path written.
    """
    if not evaluations:
        raise ValueError("evaluations must hold at least one trained model's evaluation")
    bounds: list[TheoremTwoBound] = []
    for index, evaluation in enumerate(evaluations):
        if evaluation.theorem2 is None:
            raise ValueError(f"evaluations[{index}] has no bound record (Theorem 2 does not apply to its run)")
        bounds.append(evaluation.theorem2)
    dims = {bound.d for bound in bounds}
    if len(dims) != 1:
        raise ValueError(f"evaluations must share one dimension d, got {sorted(dims)}")
    d = dims.pop()
    top = max_heads or 4 * max(bound.H for bound in bounds)
    grid = np.unique(np.geomspace(1, top, 24).round().astype(int))  # (n_grid,) head counts
    figure, axis = plt.subplots(figsize=(6.0, 4.0))
    for index, rank in enumerate(sorted({bound.r for bound in bounds})):
        colour = f"C{index % 10}"
        curve = bound_curve(d, rank, grid)  # (n_grid,)
        axis.plot(grid, curve, color=colour, label=f"certified bound r = {rank}")
        points = [(bound, e.population) for bound, e in zip(bounds, evaluations, strict=True) if bound.r == rank]
        axis.errorbar(
            [bound.H for bound, _ in points],
            [population.error for _, population in points],
            yerr=[DEFAULT_Z * population.stderr for _, population in points],
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
