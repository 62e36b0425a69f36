"""The compute-scaling figure of a long sweep: each rule's two cells, best loss against samples seen, with the fits.

One panel per scaling rule (`experiments.studies.SCALING_RULES`), drawn from the verdicts computed by
`experiments.analysis.compute_scaling` (drawing only): log-log axes; each run a marker (its best_loss at its budget);
the seeds of a budget joined by a band (best to worst seed); the fitted law floor + a n^-b of each cell as a dashed
curve from the smallest budget to beyond the paper's budget (dotted vertical line); the rule's ceiling, where it has
one, as a horizontal line; the verdict in the panel title.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

from experiments.analysis.compute_scaling import PAPER_SAMPLES, samples_seen
from experiments.analysis.records import Record
from experiments.figures.sweeps import plain_log_labels
from experiments.sweeps.grading import matches
from experiments.sweeps.scaling_verdicts import ScalingVerdict

_COLOURS = {"worse": "tab:red", "better": "tab:blue"}


def _cell_label(selector: dict) -> str:
    return ", ".join(f"{'L' if k == 'layers' else k}={v}" for k, v in selector.items())


def plot_scaling(verdicts: Sequence[ScalingVerdict], records: Sequence[Record], path: Path, title: str) -> Path:
    """Draw one panel per verdict into ``path`` (PNG) and return it."""
    columns = min(len(verdicts), 3)
    rows = -(-len(verdicts) // columns)
    fig, axes = plt.subplots(rows, columns, figsize=(5.2 * columns, 4.2 * rows), squeeze=False)
    for ax, verdict in zip(axes.flat, verdicts, strict=False):
        rule = verdict.rule
        ns: list[float] = []
        for cell, selector in (("worse", rule.worse), ("better", rule.better)):
            runs = [r for r in records if matches(r, selector) and r.get("status") == "finished"]
            by_n: dict[int, list[float]] = {}
            for r in runs:
                by_n.setdefault(samples_seen(r), []).append(float(r["best_loss"]))
            if not by_n:
                continue
            n = np.array(sorted(by_n), dtype=float)
            low = np.array([min(by_n[int(v)]) for v in n])
            high = np.array([max(by_n[int(v)]) for v in n])
            colour = _COLOURS[cell]
            ax.fill_between(n, low, high, color=colour, alpha=0.2, linewidth=0)
            for v in n:
                ax.scatter([v] * len(by_n[int(v)]), by_n[int(v)], color=colour, s=14, zorder=3)
            ax.plot([], [], color=colour, marker="o", linestyle="none", label=f"{cell}: {_cell_label(dict(selector))}")
            fit = verdict.fits.get(cell)
            if fit is not None:
                grid = np.geomspace(n.min(), 2.0 * PAPER_SAMPLES, 200)
                ax.plot(grid, fit(grid), color=colour, linestyle="--", linewidth=1)
            ns += list(n)
        ax.axvline(PAPER_SAMPLES, color="black", linestyle=":", linewidth=1, label="paper's budget (100k x 256)")
        if rule.ceiling is not None:
            ax.axhline(rule.ceiling, color="grey", linestyle="-.", linewidth=1, label=f"ceiling {rule.ceiling:g}")
        ax.set_xscale("log")
        ax.set_yscale("log")
        plain_log_labels(ax)
        ax.set_xlabel("samples seen (steps x batch)", fontsize=8)
        ax.set_ylabel("best loss", fontsize=8)
        ax.tick_params(axis="x", labelsize=7)
        heading = f"{rule.name}: {verdict.kind}"
        ax.set_title("\n".join(textwrap.wrap(heading, 52)), fontsize=8)
        ax.legend(fontsize=6, loc="lower left")
    for ax in list(axes.flat)[len(verdicts) :]:
        ax.axis("off")
    fig.suptitle("\n".join(textwrap.wrap(title, 110)), fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
