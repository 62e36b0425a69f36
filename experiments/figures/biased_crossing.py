"""The figure of Theorem 3 at reachable sizes (drawing only; `experiments.analysis.biased_crossing` measures the rows,
``attnrank figure biased-crossing`` runs both): per d, error against H for the construction, the rank-r dictionaries
and the trained models, with the sawtooth energy and the error levels as horizontal lines."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import matplotlib.pyplot as plt

from experiments.analysis.biased_crossing import FAMILIES, CrossingRow
from theory.monte_carlo import DEFAULT_Z


def draw(
    rows: Sequence[CrossingRow], energies: Mapping[int, float], levels: Mapping[int, Sequence[float]], path: Path
) -> Path:
    """One panel per d: error (4 s.e. bars) against H; construction solid black, constructed dashed, trained dots
    (every seed) with their per-H minimum joined; the sawtooth energy and the levels as horizontal lines."""
    dims = sorted({row.d for row in rows})
    fig, axes = plt.subplots(1, len(dims), figsize=(5.6 * len(dims), 4.4), squeeze=False)
    floor = 1e-6  # where an error of (numerically) 0 is drawn on the log axis
    for ax, d in zip(axes[0], dims, strict=True):
        mine = [row for row in rows if row.d == d]
        ranks = sorted({row.r for row in mine}, reverse=True)
        colours = {r: f"C{i % 10}" for i, r in enumerate(ranks)}
        for family in FAMILIES:
            for r in ranks:
                part = sorted((row for row in mine if row.family == family and row.r == r), key=lambda row: row.H)
                if not part:
                    continue
                if family == "trained":
                    ax.scatter(
                        [row.H for row in part],
                        [max(row.error, floor) for row in part],
                        s=9,
                        color=colours[r],
                        alpha=0.5,
                    )
                    hs = sorted({row.H for row in part})
                    best = [min(row.error for row in part if row.H == H) for H in hs]
                    ax.plot(
                        hs,
                        [max(b, floor) for b in best],
                        color=colours[r],
                        marker="o",
                        ms=3,
                        lw=1,
                        label=f"trained r = {r}" + (" (full rank, no score bias)" if r == d else ""),
                    )
                    continue
                ax.errorbar(
                    [row.H for row in part],
                    [max(row.error, floor) for row in part],
                    yerr=[DEFAULT_Z * row.stderr for row in part],
                    color="black" if family == "construction" else colours[r],
                    ls="-" if family == "construction" else "--",
                    marker="s" if family == "construction" else "^",
                    ms=4,
                    capsize=2,
                    label="Theorem 3's construction (full rank, biases)"
                    if family == "construction"
                    else f"constructed r = {r} (LS, simple part free)",
                )
        ax.annotate("0 (exact) drawn at 1e-6", (min(row.H for row in mine), floor), fontsize=7, va="bottom")
        ax.axhline(energies[d], color="grey", ls=":", lw=1, label=f"sawtooth energy ||O'||^2 = {energies[d]:.3f}")
        for level in levels[d]:
            ax.axhline(level, color="red", lw=0.6, alpha=0.6)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("heads H")
        ax.set_ylabel("held-out error E ||f - F||^2 (4 s.e. bars)", fontsize=8)
        ax.set_title(
            f"d = {d} (M = {2 * d * d + 1}); red: levels {', '.join(f'{x:.3g}' for x in levels[d])}", fontsize=9
        )
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=6)
    fig.suptitle("Theorem 3 at reachable sizes: full rank vs rank r, error against H", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
