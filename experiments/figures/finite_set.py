"""The finite-set study's figure (drawing only; `experiments.studies.finite_set` holds the runs and the claim):
per head count, each run's training loss (its best epoch loss on its fixed set) and its population error against the
set size K, fresh batches at the right, with Theorem 2's certified bound as a horizontal line."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

from experiments.analysis.records import Record, evaluation
from experiments.sweeps.preset_kit import Figure
from experiments.training.run_record import TheoremTwoBound


def _value(record: Record, key: str) -> float | None:
    value = record.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def _bound(record: Record) -> TheoremTwoBound | None:
    """The bound record of a finished, evaluated run (`experiments.analysis.records.evaluation`), or None."""
    found = evaluation(record)
    return None if found is None else found.theorem2


def _lower_bound(record: Record) -> float:
    bound = _bound(record)
    assert bound is not None  # runs are filtered on it
    return bound.lower


def plot_finite_set(records: Sequence[Record], path: Path, title: str) -> Path:
    """One panel per head count H: training loss (filled) and population error (open, 4 s.e. bars) against K on a log2
    axis, the fresh-batch runs at 4 K_max ("fresh"), the certified bound dashed; return ``path``."""
    runs = [r for r in records if _bound(r) is not None]
    heads = sorted({int(r["heads"]) for r in runs})
    sizes = sorted({int(r.get("train_batches") or 0) for r in runs} - {0})
    fresh_at = 4 * max(sizes, default=1)
    fig, axes = plt.subplots(1, max(len(heads), 1), figsize=(5.2 * max(len(heads), 1), 4.4), squeeze=False)
    for ax, H in zip(axes[0], heads, strict=False):
        mine = [r for r in runs if int(r["heads"]) == H]
        for kind, key, marker, colour in (
            ("training loss", "best_loss", "o", "tab:blue"),
            ("population error", "population_error", "s", "tab:red"),
        ):
            points = [(int(r.get("train_batches") or 0) or fresh_at, _value(r, key), r) for r in mine]
            points = [(x, y, r) for x, y, r in points if y is not None]
            xs = np.array([x for x, _, _ in points], dtype=float)
            ys = np.array([y for _, y, _ in points], dtype=float)
            face = colour if key == "best_loss" else "none"
            if key == "population_error":
                errors = [4 * (_value(r, "population_stderr") or 0.0) for _, _, r in points]
                ax.errorbar(xs, ys, yerr=errors, fmt="none", ecolor=colour, elinewidth=0.8)
            ax.scatter(xs, ys, marker=marker, facecolors=face, edgecolors=colour, label=kind, zorder=3)
            means = sorted({x: float(np.mean(ys[xs == x])) for x in set(xs.tolist())}.items())
            ax.plot([x for x, _ in means], [y for _, y in means], color=colour, linewidth=0.8)
        bound = _lower_bound(mine[0])
        ax.axhline(bound, color="black", linestyle="--", linewidth=1, label=f"Theorem 2 bound {bound:.3g}")
        ax.set_xscale("log", base=2)
        ticks = [*sizes, fresh_at]
        ax.set_xticks(ticks, [*(str(k) for k in sizes), "fresh"])
        ax.set_yscale("symlog", linthresh=1e-2)  # a memorised set's training loss reaches 0
        ax.set_ylim(bottom=0)
        ax.set_xlabel("batches in the fixed training set, K")
        ax.set_ylabel("error")
        ax.set_title(f"H = {H}", fontsize=10)
        ax.legend(fontsize=7)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


FINITE_SET = Figure("finite-set", plot_finite_set)
"""The figure as the finite-set preset holds it."""
