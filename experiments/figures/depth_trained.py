"""The depth preset's figure: trained one- and two-layer rank-1 models against Theorem 2's bound and Theorem 5's curve.

One panel per d: error (log axis) against heads per layer H (log2 axis). Four curves:

- trained two-layer rank-1 theory models with positional scratch (fresh Monte Carlo error; the line joins the best
  seed, the band spans best to worst seed, error bars are 4 standard errors of the best seed);
- trained one-layer rank-1 theory models (Theorem 2's class) with the same H, drawn the same way;
- Theorem 2's certified lower bound ``rank_lower_bound(d, 1, H)`` for every one-layer rank-1 model;
- Theorem 5's exact error ``majority_vote_error(d, H)`` of the two-layer majority-vote construction.

Records are those of `experiments.sweeps.claims.depth_trained` (spec fields merged with metrics).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

from experiments.analysis.best_seed import Record
from experiments.sweeps.claims import depth_fresh_error, depth_heads
from theory.bounds import rank_lower_bound
from theory.majority_vote_error import majority_vote_error
from theory.monte_carlo import DEFAULT_Z

_STYLES = {2: ("tab:blue", "trained, 2 layers (scratch)"), 1: ("tab:orange", "trained, 1 layer")}


def depth_series(records: Sequence[Record]) -> dict[tuple[int, int], dict[int, list[tuple[float, float]]]]:
    """(d, layers) -> H -> [(error, stderr) per seed] of the finished rank-1 theory runs on nearest neighbour."""
    series: dict[tuple[int, int], dict[int, list[tuple[float, float]]]] = {}
    for r in records:
        if r.get("model") != "theory" or r.get("task") != "nearest" or r.get("rank") != 1:
            continue
        fresh = depth_fresh_error(r)
        if fresh is None or not np.isfinite(fresh[0]):
            continue
        series.setdefault((int(r["d"]), int(r["layers"])), {}).setdefault(depth_heads(r), []).append(fresh)
    return series


def plot_depth_trained(records: Sequence[Record], path: Path, title: str) -> Path:
    """Draw the depth figure to ``path`` (PNG) and return it; ValueError when no run can be drawn."""
    series = depth_series(records)
    dims = sorted({d for d, _ in series})
    if not dims:
        raise ValueError("no finished rank-1 theory runs on nearest neighbour to draw")
    fig, axes = plt.subplots(1, len(dims), figsize=(6.4 * len(dims), 4.6), squeeze=False)
    for ax, d in zip(axes[0], dims, strict=True):
        heads = sorted({H for (dd, _), by_h in series.items() if dd == d for H in by_h})
        grid = np.unique(np.round(np.geomspace(min(heads), max(heads), 25)).astype(int))  # (G,) head counts
        odd = np.unique(grid | 1)  # (G',) odd H: an even vote count adds ties, which makes the curve zigzag
        ax.plot(grid, [rank_lower_bound(d, 1, int(H)).lower for H in grid], "k--", label="1-layer bound (Thm 2)")
        ax.plot(odd, [majority_vote_error(d, int(H)) for H in odd], "g-", label="majority vote (Thm 5, odd H)")
        for layers in (2, 1):
            by_h = series.get((d, layers))
            if not by_h:
                continue
            color, label = _STYLES.get(layers, ("tab:gray", f"trained, {layers} layers"))
            hs = sorted(by_h)
            best = [min(by_h[H]) for H in hs]
            low = [min(e for e, _ in by_h[H]) for H in hs]
            high = [max(e for e, _ in by_h[H]) for H in hs]
            seeds = max(len(by_h[H]) for H in hs)
            ax.errorbar(
                hs,
                [e for e, _ in best],
                yerr=[DEFAULT_Z * s for _, s in best],
                color=color,
                marker="o",
                capsize=3,
                label=f"{label}, best of {seeds} seed{'s' if seeds != 1 else ''}",
            )
            ax.fill_between(hs, low, high, color=color, alpha=0.2, linewidth=0)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xticks(heads)
        ax.set_xticklabels([str(H) for H in heads])
        ax.set_xlabel("heads per layer H (rank 1)")
        ax.set_ylabel("fresh error (nearest neighbour, N = 2, D_2)")
        ax.set_title(f"d = {d}")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
