"""Figures of the tightness preset: the band between Theorem 2's certified bound and the best model found.

Drawing only; the numbers come from `experiments.analysis.tightness`. Two kinds:

- :func:`plot_tightness` (the sweep's figure, ``FIGURES["tightness"]``): one panel per d, error against H (log-log),
  per rank the certified bound (line), the best trained seed (filled markers, 4 s.e. bars) and the least-squares
  construction (hollow markers), and Theorem 5's two-layer majority vote for r = 1 (dotted);
- :func:`plot_tightness_dimension` (one per d, written by the report): the same band, the ratio best found / bound
  against H, and the training curves of the best seeds (with the plateau control at H = 64).
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Mapping, Sequence
from pathlib import Path

import matplotlib.pyplot as plt
from matplotlib.axes import Axes

from experiments.analysis.records import Record
from experiments.analysis.tightness import Curve, TightnessCell, tightness_cells
from experiments.figures.sweeps import parameter_line, plain_log_labels
from experiments.sweeps.preset_kit import Figure
from theory.monte_carlo import DEFAULT_Z


def _by_rank(cells: Sequence[TightnessCell]) -> dict[int, list[TightnessCell]]:
    ranks: dict[int, list[TightnessCell]] = {}
    for cell in cells:
        ranks.setdefault(cell.r, []).append(cell)
    return {r: sorted(group, key=lambda c: c.H) for r, group in sorted(ranks.items())}


def draw_band(ax: Axes, cells: Sequence[TightnessCell], d: int) -> None:
    """Error against H at one d: bound per rank (line), best trained seed (filled, 4 s.e.), construction (hollow),
    majority vote (r = 1, dotted black)."""
    for index, (r, group) in enumerate(_by_rank([c for c in cells if c.d == d]).items()):
        colour = f"C{index % 10}"
        hs = [c.H for c in group]
        ax.plot(
            hs,
            [max(c.bound, 1e-4) for c in group],
            color=colour,
            linewidth=1.5,
            marker="x",
            markersize=4,
            label=f"r={r}: certified bound",
        )
        trained = [c for c in group if c.trained is not None]
        if trained:
            ax.errorbar(
                [c.H for c in trained],
                [c.trained.error for c in trained if c.trained is not None],
                yerr=[DEFAULT_Z * c.trained.stderr for c in trained if c.trained is not None],
                fmt="o",
                color=colour,
                markersize=5,
                capsize=2,
                label=f"r={r}: best trained seed",
            )
        built = [c for c in group if c.construction is not None]
        if built:
            ax.plot(
                [c.H for c in built],
                [c.construction[0] for c in built if c.construction is not None],
                marker="s",
                markerfacecolor="none",
                linestyle="--",
                linewidth=0.8,
                color=colour,
                label=f"r={r}: random heads, least squares",
            )
        votes = [c for c in group if c.majority_vote is not None]
        if votes:
            ax.plot(
                [c.H for c in votes],
                [c.majority_vote for c in votes if c.majority_vote is not None],
                color="black",
                linestyle=":",
                marker=".",
                label="two layers, r=1: Theorem 5 vote",
            )
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    plain_log_labels(ax)
    ax.set_xlabel("heads H", fontsize=8)
    ax.set_ylabel("error on D_2 (fresh Monte Carlo)", fontsize=8)
    ax.set_title(f"d={d}", fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=6)


def plot_tightness(records: Sequence[Record], path: Path, title: str) -> Path:
    """The sweep's figure: one band panel per d (see the module docstring)."""
    cells = tightness_cells(records)
    dims = sorted({c.d for c in cells})
    fig, axes = plt.subplots(1, max(1, len(dims)), figsize=(5.0 * max(1, len(dims)), 4.4), squeeze=False)
    for ax, d in zip(axes[0], dims, strict=False):
        draw_band(ax, cells, d)
    width = int(14 * fig.get_figwidth())
    fig.suptitle(f"{title}\n{textwrap.fill(parameter_line(records), width)}", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_tightness_dimension(
    cells: Sequence[TightnessCell], curves: Mapping[str, Curve], d: int, path: Path, title: str
) -> Path:
    """One d: the band, the ratio best found / bound against H, and the best seeds' training curves.

    Args:
        cells: tightness cells (any d; those of ``d`` are drawn).
        curves: run hash -> training curve (runs without a curve are left out of the third panel).
        d: the dimension drawn. path: PNG path. title: the figure's title.
    """
    mine = [c for c in cells if c.d == d]
    fig, axes = plt.subplots(1, 3, figsize=(15.0, 4.4))
    draw_band(axes[0], mine, d)
    ratio_ax, curve_ax = axes[1], axes[2]
    for index, (r, group) in enumerate(_by_rank(mine).items()):
        colour = f"C{index % 10}"
        points = [(c.H, c.ratio) for c in group if c.bound > 0 and math.isfinite(c.ratio)]
        if points:
            ratio_ax.plot(*zip(*points, strict=True), marker="o", color=colour, label=f"r={r}")
        for cell in group:
            if cell.trained is not None and cell.trained.hash in curves:
                steps, losses = zip(*curves[cell.trained.hash], strict=True)
                alpha = 0.35 + 0.65 * (math.log2(cell.H) / 10.0 if cell.H > 1 else 0.0)
                curve_ax.plot(steps, losses, color=colour, alpha=min(alpha, 1.0), linewidth=0.9)
            for control in cell.controls:
                if control.hash in curves:
                    steps, losses = zip(*curves[control.hash], strict=True)
                    label = f"r={r}, H={cell.H}: {control.steps} steps (control)"
                    curve_ax.plot(steps, losses, color=colour, linestyle="--", linewidth=1.2, label=label)
        curve_ax.plot([], [], color=colour, label=f"r={r}: best seed per H (darker: larger H)")
    ratio_ax.axhline(1.0, color="black", linewidth=0.8)
    ratio_ax.set_xscale("log", base=2)
    ratio_ax.set_yscale("log")
    plain_log_labels(ratio_ax)
    ratio_ax.set_xlabel("heads H", fontsize=8)
    ratio_ax.set_ylabel("best found / certified bound", fontsize=8)
    ratio_ax.set_title("how far above the bound", fontsize=9)
    ratio_ax.grid(True, which="both", alpha=0.3)
    ratio_ax.legend(fontsize=7)
    curve_ax.set_yscale("log")
    plain_log_labels(curve_ax)
    curve_ax.set_xlabel("step", fontsize=8)
    curve_ax.set_ylabel("epoch-mean training loss", fontsize=8)
    curve_ax.set_title("training curves (plateau)", fontsize=9)
    curve_ax.grid(True, which="both", alpha=0.3)
    curve_ax.legend(fontsize=6)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


TIGHTNESS = Figure("tightness", plot_tightness)
"""The tightness preset's figure: the band of every d (`experiments.reporting.tightness_report` adds one per d)."""
