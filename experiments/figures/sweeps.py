"""One PNG per sweep figure, drawn from the results store only (the paper's axes and log scales).

Each figure kind of `experiments.sweeps.presets` maps to a drawing function ``(records, path, title) -> path``.
A record is one run's spec fields merged with its metrics (see `experiments.reporting.sweep_report.sweep_records`);
training figures plot the
best seed's lowest epoch-mean training loss, as the paper does.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from experiments.figures.trained import plot_trained_vs_bound  # noqa: E402

Record = Mapping[str, Any]


def best_over_seeds(records: Sequence[Record], keys: Sequence[str]) -> dict[tuple[Any, ...], float]:
    """min over seeds of best_loss, per distinct value of ``keys`` (finished runs with a finite loss only)."""
    best: dict[tuple[Any, ...], float] = {}
    for record in records:
        loss = record.get("best_loss")
        if record.get("status") != "finished" or not isinstance(loss, (int, float)) or not np.isfinite(loss):
            continue
        key = tuple(record[k] for k in keys)
        best[key] = min(best.get(key, np.inf), float(loss))
    return best


def _line_figure(
    records: Sequence[Record],
    path: Path,
    title: str,
    *,
    x: str,
    series: str,
    panel: str | None,
    xlabel: str,
    logx: bool = True,
    logy: bool = True,
    base: int = 2,
) -> Path:
    keys = [k for k in (panel, series, x) if k is not None]
    best = best_over_seeds(records, keys)
    panels = sorted({k[0] for k in best}) if panel else [None]
    fig, axes = plt.subplots(1, max(len(panels), 1), figsize=(4.2 * max(len(panels), 1), 3.6), squeeze=False)
    for ax, p in zip(axes[0], panels, strict=False):
        lines: dict[Any, list[tuple[Any, float]]] = defaultdict(list)
        for key, loss in best.items():
            if panel and key[0] != p:
                continue
            s, xv = key[-2], key[-1]
            lines[s].append((xv, loss))
        for s in sorted(lines, key=str):
            pts = sorted(lines[s])
            ax.plot([a for a, _ in pts], [b for _, b in pts], marker="o", label=f"{series}={s}")
        if logx:
            ax.set_xscale("log", base=base)
        if logy:
            ax.set_yscale("log")
        ax.set_xlabel(xlabel)
        ax.set_ylabel("best training MSE (best seed)")
        ax.set_title(f"{panel}={p}" if panel else title, fontsize=9)
        ax.grid(True, which="both", alpha=0.3)
        if lines:
            ax.legend(fontsize=7)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_fig1(records: Sequence[Record], path: Path, title: str) -> Path:
    """Figure 1: loss against rank (log2 axis), one line per width c, one panel per depth L."""
    return _line_figure(records, path, title, x="rank", series="width", panel="layers", xlabel="rank r")


def plot_vs_context(records: Sequence[Record], path: Path, title: str) -> Path:
    """Varying N (and Conjecture 6): loss against N (log2 axis), one line per rank, one panel per depth."""
    return _line_figure(records, path, title, x="N", series="rank", panel="layers", xlabel="context length N")


def plot_vs_dimension(records: Sequence[Record], path: Path, title: str) -> Path:
    """Varying d: loss against d (log2 axis), one line per relative rank d / r."""
    enriched = [{**r, "d_over_r": r["d"] // r["rank"]} for r in records]
    return _line_figure(enriched, path, title, x="d", series="d_over_r", panel="layers", xlabel="dimension d")


def plot_positional(records: Sequence[Record], path: Path, title: str) -> Path:
    """Positional encodings: loss against rank, one line per encoding kind, one panel per depth."""
    return _line_figure(records, path, title, x="rank", series="positional", panel="layers", xlabel="rank r")


def plot_icl(records: Sequence[Record], path: Path, title: str) -> Path:
    """In-context regression: loss against rank at fixed H = D / r (D: the model width)."""
    return _line_figure(
        records, path, title, x="rank", series="layers", panel=None, xlabel="rank r (H = D / r, D = model width)"
    )


def plot_random_features(records: Sequence[Record], path: Path, title: str) -> Path:
    """Random rank-1 heads: error against H (log axis), mean and range over draws, one line per d."""
    curves: dict[int, list[tuple[list[int], list[float]]]] = defaultdict(list)
    for r in records:
        if r.get("status") == "finished" and "errors" in r:
            curves[int(r["d"])].append((list(r["head_counts"]), list(r["errors"])))
    fig, ax = plt.subplots(figsize=(5.0, 3.8))
    for d in sorted(curves):
        counts = curves[d][0][0]
        errors = np.asarray([e for c, e in curves[d] if c == counts])  # (T, P)
        ax.plot(counts, errors.mean(axis=0), marker=".", label=f"d={d} ({errors.shape[0]} draws)")
        ax.fill_between(counts, errors.min(axis=0), errors.max(axis=0), alpha=0.2)
    ax.axhline(0.18, color="grey", linestyle=":", label="paper plateau 0.18")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("heads H")
    ax.set_ylabel("error with optimal output weights")
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_bound_vs_trained(records: Sequence[Record], path: Path, title: str) -> Path:
    """Trained one-layer error (Monte Carlo, 4 s.e. bars) against H beside rank_lower_bound(d, r, H) curves.

    Drawn by `experiments.figures.trained.plot_trained_vs_bound` from each run's stored "theorem2" metrics.
    """
    theorem2 = [dict(r["theorem2"]) for r in records if r.get("status") == "finished" and "theorem2" in r]
    return plot_trained_vs_bound(theorem2, path)


FIGURES: dict[str, Callable[[Sequence[Record], Path, str], Path]] = {
    "fig1": plot_fig1,
    "figN": plot_vs_context,
    "figd": plot_vs_dimension,
    "posn": plot_positional,
    "random-features": plot_random_features,
    "icl": plot_icl,
    "bound-vs-trained": plot_bound_vs_trained,
    "conjecture6": plot_vs_context,
}
