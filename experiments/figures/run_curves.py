"""Training curves of a prefix sweep and the depth ladder (drawing only; the numbers come from
`experiments.reporting.curve_sections`).

- :func:`plot_prefix_curves`: one line per run, epoch-mean training loss against step (log y), the fitted law of each
  curve after the warm-up dashed out to the schedule's end, the paper's values as horizontal lines, the warm-up's end
  and the schedule's end as vertical lines;
- :func:`plot_depth_ladder`: the ratio (L = 1 loss) / (L = 3 loss) at rank d/2 against d, at the largest step both
  runs of a d reached, with the paper's ratio at d = 64 for reference.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.lines import Line2D

from experiments.analysis.compute_scaling import PowerLawFit


@dataclass(frozen=True)
class DrawnCurve:
    """One run's line: its label, (step, loss) rows, and the fit to extend (None: not fitted)."""

    label: str
    curve: Sequence[tuple[int, float]]
    fit: PowerLawFit | None
    batch_size: int


def plot_prefix_curves(
    lines: Sequence[DrawnCurve],
    paper: Sequence[tuple[str, float]],
    warmup_step: int,
    end_step: int,
    path: Path,
    title: str,
) -> Path:
    """Draw every curve of ``lines`` with its dashed fit to ``end_step`` and the paper's levels; return ``path``."""
    fig, ax = plt.subplots(figsize=(8.5, 5.2))
    colours = plt.get_cmap("tab10")
    for index, line in enumerate(lines):
        colour = colours(index % 10)
        steps = np.array([s for s, _ in line.curve], dtype=float)
        losses = np.array([v for _, v in line.curve], dtype=float)
        ax.plot(steps, losses, color=colour, linewidth=1.2, label=line.label)
        if line.fit is not None and len(steps):
            ahead = np.linspace(steps.max(), end_step, 100)
            ax.plot(ahead, line.fit(ahead * line.batch_size), color=colour, linestyle="--", linewidth=1)
    for label, value in paper:
        ax.axhline(value, color="grey", linestyle=":", linewidth=1)
        ax.annotate(f"paper: {label}", (end_step, value), fontsize=7, ha="right", va="bottom", color="dimgray")
    ax.axvline(warmup_step, color="black", linestyle=":", linewidth=0.8)
    ax.axvline(end_step, color="black", linestyle="-.", linewidth=0.8)
    ax.set_yscale("log")
    ax.set_xlabel("step (dashed: each curve's fitted floor + a n^-b after the warm-up, to the schedule's end)")
    ax.set_ylabel("epoch-mean training loss")
    ax.set_title(title, fontsize=10)
    # Outside the axes: a store of many runs has a long legend, and inside it would hide the curves it names.
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return path


def plot_depth_ladder(
    rows: Sequence[tuple[int, float, float, int]], paper_ratio: float | None, path: Path, title: str
) -> Path:
    """Draw (d, L = 1 loss, L = 3 loss, step) rows as the ratio L1 / L3 against d; return ``path``."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4.2))
    ds = np.array([r[0] for r in rows], dtype=float)
    one = np.array([r[1] for r in rows])
    three = np.array([r[2] for r in rows])
    left.plot(ds, one, marker="o", label="L = 1, r = d/2")
    left.plot(ds, three, marker="s", label="L = 3, r = d/2")
    left.set_xscale("log", base=2)
    left.set_yscale("log")
    left.set_xlabel("d")
    left.set_ylabel("best epoch loss up to the step compared")
    left.legend(fontsize=8)
    right.plot(ds, one / three, marker="o", color="black", label="ours: L = 1 / L = 3")
    if paper_ratio is not None:
        right.scatter([64], [paper_ratio], marker="*", s=120, color="tab:red", label="paper, d = 64")
    right.axhline(1.0, color="grey", linestyle=":", linewidth=1)
    right.set_xscale("log", base=2)
    right.set_yscale("log")
    right.set_xlabel("d")
    right.set_ylabel("ratio (> 1: depth helps half rank)")
    right.legend(fontsize=8)
    for d, _, _, step in rows:
        right.annotate(f"{step:,} steps", (d, 1.0), fontsize=7, ha="center", va="top")
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


@dataclass(frozen=True)
class TrainingAndPopulation:
    """One run's two curves: the epoch-mean training loss and the population error where it was measured."""

    label: str
    training: Sequence[tuple[int, float]]
    population: Sequence[tuple[int, float]]


def plot_training_vs_population(
    runs: Sequence[TrainingAndPopulation], paper: Sequence[tuple[str, float]], path: Path, title: str
) -> Path:
    """Each run's training loss (solid) and population error (dashed, markers) against step, log y, with the
    paper's levels (its figure plots training losses); return ``path``."""
    fig, ax = plt.subplots(figsize=(8.5, 5.2))
    colours = plt.get_cmap("tab10")
    for index, run in enumerate(runs):
        colour = colours(index % 10)
        ax.plot(
            [s for s, _ in run.training],
            [v for _, v in run.training],
            color=colour,
            linewidth=1.2,
            label=run.label,
        )
        if run.population:
            ax.plot(
                [s for s, _ in run.population],
                [v for _, v in run.population],
                color=colour,
                linestyle="--",
                marker="o",
                markersize=2.5,
                linewidth=1,
            )
    right = max((s for run in runs for s, _ in run.training), default=1)
    for label, value in paper:
        ax.axhline(value, color="grey", linestyle=":", linewidth=1)
        ax.annotate(f"paper: {label}", (right, value), fontsize=7, ha="right", va="bottom", color="dimgray")
    ax.set_yscale("log")
    ax.set_xlabel("step")
    ax.set_ylabel("error (training loss on the set; population error on held-out samples)")
    ax.set_title(title, fontsize=10)
    # One entry per run (its colour), then the two line styles; outside the axes, where it hides no curve.
    styles = [
        Line2D([], [], color="black", linewidth=1.2, label="solid: training loss on the set"),
        Line2D([], [], color="black", linestyle="--", marker="o", markersize=2.5, label="dashed: population error"),
    ]
    handles = [*ax.get_legend_handles_labels()[0], *styles]
    ax.legend(handles=handles, fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)
    return path
