"""One PNG per sweep figure, drawn from the results store only (the paper's axes and log scales).

Each figure is a drawing function ``(records, path, title) -> path`` held by its preset as a `Figure` object (the
objects at the end of this module; drawing only: the numbers come from the store). A record is one run's spec fields
merged with its metrics (`experiments.sweeps.store_records.sweep_records`). What a reader of the paper needs is on
every figure:

- the parameters in the title (:func:`parameter_line`: d, N, L, c, steps x batch, lr, seeds);
- training losses as the paper plots them (the best seed's lowest epoch-mean training loss, a line with markers)
  with the spread over seeds as a band (best to worst seed, `experiments.sweeps.grading.seed_spread`);
- the paper's published numbers as black markers where they apply (a `Figure` with ``takes_paper`` takes a
  ``paper`` keyword: `experiments.sweeps.preset_kit.PaperNumber` cells, matched by rank class so a smaller d is
  comparable; ranges as vertical bars);
- the certified bound where it applies (bound-vs-trained, `experiments.figures.trained`);
- log axes where the paper uses them, ticks at the values actually run (rank labels, full rank marked).
"""

from __future__ import annotations

import functools
import math
import textwrap
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.axes import Axes
from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

from experiments.analysis.records import Record, evaluation
from experiments.figures.trained import plot_trained_vs_bound
from experiments.sweeps.grading import seed_spread
from experiments.sweeps.preset_kit import Figure, PaperNumber

PAPER_D = 64
"""The paper's dimension for Figure 1 and its appendices (docs/paper.md section 6)."""

_PARAMETERS = (("d", "d"), ("N", "N"), ("layers", "L"), ("width", "c"), ("embed_dim", "D"), ("positional_dim", "p"))


def _values(records: Sequence[Record], key: str) -> list[Any]:
    return sorted({r[key] for r in records if key in r and r[key] is not None}, key=lambda v: (str(type(v)), v))


def _joined(values: Sequence[Any]) -> str:
    return "/".join(f"{v:g}" if isinstance(v, float) else str(v) for v in values)


def parameter_line(records: Sequence[Record]) -> str:
    """The runs' parameters in one line: ``d=16, N=8, L=1, c=1, 600 steps x 128, lr 0.01, FFN 64, 2 seeds``.

    A field with several values lists them (``N=2/4/8/16``); random-feature solves give d, the largest H and draws.
    """
    if not records:
        return "no runs"
    if all(r.get("kind") == "random-features" or "head_counts" in r and "steps" not in r for r in records):
        top = max(int(max(r["head_counts"])) for r in records if r.get("head_counts"))
        draws = len(_values(records, "trial"))
        return f"d={_joined(_values(records, 'd'))}, H <= {top}, {draws} draw{'s' if draws != 1 else ''}"
    parts = []
    for key, short in _PARAMETERS:
        values = _values(records, key)
        if values and not (key in ("embed_dim", "positional_dim") and values == [0]):
            parts.append(f"{short}={_joined(values)}")
    steps, batch = _values(records, "steps"), _values(records, "batch_size")
    if steps:
        parts.append(f"{_joined(steps)} steps" + (f" x {_joined(batch)}" if batch else ""))
    schedule, warmup = _values(records, "schedule_steps"), _values(records, "warmup_steps")
    if schedule and schedule != [0]:  # shown only when set, so reports of earlier stores read as before
        parts.append(f"of a {_joined(schedule)}-step schedule")
    if warmup and warmup != [0]:
        parts.append(f"warm-up {_joined(warmup)} steps")
    if "epoch" in _values(records, "lr_interval"):  # absent from earlier stores' records, which read as before
        parts.append("lr stepped once per epoch")
    lr = _values(records, "lr")
    if lr:
        parts.append(f"lr {_joined(lr)}")
    ffn = _values(records, "ffn_dim")
    if ffn:
        parts.append(f"FFN {_joined(ffn)}")
    temperature = _values(records, "temperature")
    if temperature and temperature != [1.0]:
        parts.append(f"score temperature {_joined(temperature)}")
    if "copies" in _values(records, "layer_init"):
        parts.append(f"layers start as {_joined(_values(records, 'layer_init'))}")
    seeds = len(_values(records, "seed"))
    if seeds:
        parts.append(f"{seeds} seed{'s' if seeds != 1 else ''}")
    if _values(records, "data_seed"):  # some run's data is seeded apart from its initialisation
        data_seeds = {r["seed"] if r.get("data_seed") is None else r["data_seed"] for r in records if "seed" in r}
        parts.append(f"data seeds {_joined(sorted(data_seeds))}")
    return ", ".join(parts)


def regime_line(records: Sequence[Record]) -> str:
    """The training-data regime of the runs in one sentence (issue 38): fresh batches, or fixed sets replayed.

    Runs recorded before ``train_batches`` existed trained on fresh batches (their spec has no such field).
    """
    trained = [r for r in records if r.get("kind") == "train"]
    if not trained:
        return "no training runs"
    parts = []
    for sampler in sorted({str(r.get("sampler") or "cpu") for r in trained}):
        sizes = sorted({int(r.get("train_batches") or 0) for r in trained if str(r.get("sampler") or "cpu") == sampler})
        if 0 in sizes:
            parts.append(
                f"fresh batches every step ({sampler} sampler): the best loss is a training loss on ever-new samples, "
                "an estimate of the population error"
            )
        fixed = [K for K in sizes if K > 0]
        if fixed:
            count = f"{fixed[0]} batches" if len(fixed) == 1 else f"K = {_joined(fixed)} batches"
            parts.append(
                f"one fixed set of {count} ({sampler} sampler) drawn once and replayed every epoch (one pass over "
                "the set), as the paper's runs: the best loss is the training loss on that set, the population "
                "error is measured on held-out samples"
            )
    return "; ".join(parts)


def _ticks(ax: Axes, values: Sequence[float], labels: Mapping[float, str] | None = None) -> None:
    """Ticks exactly at the values run (no log-axis minor ticks), labelled with the integers (or ``labels``)."""
    ticks = sorted(set(values))
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xticklabels([(labels or {}).get(t, f"{t:g}") for t in ticks], fontsize=7)


def plain_log_labels(ax: Axes) -> None:
    """Label a log y axis with plain numbers (0.01, 0.1) instead of 10^-2; minor ticks 2, 3 and 5 x 10^k too when the
    axis spans less than two decades, and every minor tick when it spans less than a factor 4 (so that a narrow axis,
    such as 0.6 to 0.9, still has readable labels)."""

    def minor(value: float, _: object) -> str:
        low, high = ax.get_ylim()
        if value <= 0 or low <= 0 or high / low > 100:
            return ""
        mantissa = value / 10 ** math.floor(math.log10(value))
        if abs(mantissa - round(mantissa)) >= 1e-6:
            return ""
        labelled = range(2, 10) if high / low < 4 else (2, 3, 5)
        return f"{value:g}" if round(mantissa) in labelled else ""

    ax.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
    ax.yaxis.set_minor_formatter(FuncFormatter(minor))
    ax.tick_params(axis="y", which="both", labelsize=7)


def _paper_x(number: PaperNumber, x: str, ds: Sequence[int], xs: Sequence[float]) -> list[float]:
    """Where a paper cell sits on our x axis: its own x value, or the ranks of its rank class at our d."""
    where = number.where
    if x in where and where[x] != "max":
        return [float(where[x])]
    if x == "rank" and "rank_class" in where and ds:
        d = max(ds)
        cls = where["rank_class"]
        if cls == "full":
            return [float(d)]
        if cls == "half":
            return [float(d // 2)]
        if cls == "low":
            return [float(v) for v in xs if 4 * v <= d]
    return []


def _draw_paper(
    ax: Axes,
    paper: Sequence[PaperNumber],
    x: str,
    where: Mapping[str, Any],
    colours: Mapping[tuple[str, Any], str],
    ds: Sequence[int],
    xs: Sequence[float],
) -> bool:
    """Draw the paper's cells that fall on this panel (``where``: the panel's key and value), on a series we ran
    (``colours``: (series key, value) -> colour; a cell naming another value is skipped) and inside our x range."""
    drawn = False
    lo, hi = (min(xs), max(xs)) if xs else (math.inf, -math.inf)
    for number in paper:
        if any(k in number.where and number.where[k] != v for k, v in where.items()):
            continue
        colour = "black"
        named = [(k, v) for k, v in number.where.items() if any(k == key for key, _ in colours)]
        if any(pair not in colours for pair in named):
            continue  # a series (e.g. width c = 64) that we did not run
        if named:
            colour = colours[named[0]]
        positions = [v for v in _paper_x(number, x, ds, xs) if lo <= v <= hi]
        low, high = number.value
        for v in positions:
            label = None if drawn else "paper (d=64; by rank class)"
            if low == high:
                ax.plot([v], [low], marker="x", color=colour, markersize=8, linestyle="none", label=label)
            elif low <= 0:  # "at most high": a downward triangle at the upper end
                ax.plot([v], [high], marker="v", color=colour, markersize=6, linestyle="none", label=label)
            else:
                ax.errorbar(
                    [v],
                    [math.sqrt(low * high)],
                    yerr=[[math.sqrt(low * high) - low], [high - math.sqrt(low * high)]],
                    fmt="none",
                    ecolor=colour,
                    capsize=4,
                    label=label,
                )
            drawn = True
    return drawn


def _line_figure(
    records: Sequence[Record],
    path: Path,
    title: str,
    *,
    x: str,
    series: str,
    panel: str | None,
    xlabel: str,
    series_label: Callable[[Any], str] | None = None,
    paper: Sequence[PaperNumber] = (),
    logx: bool = True,
    full_rank: str = "d",
) -> Path:
    """Loss against ``x``, one line per ``series`` value, one panel per ``panel`` value. On a rank axis the rank
    equal to the records' ``full_rank`` field (the token dimension d, or the model width for icl) is marked full."""
    keys = [k for k in (panel, series, x) if k is not None]
    spread = seed_spread(records, keys)
    panels = sorted({k[0] for k in spread}) if panel else [None]
    ds = [int(v) for v in _values(records, "d")]
    full_ranks = [int(v) for v in _values(records, full_rank)]
    fig, axes = plt.subplots(1, max(len(panels), 1), figsize=(4.4 * max(len(panels), 1), 3.8), squeeze=False)
    for ax, p in zip(axes[0], panels, strict=False):
        lines: dict[Any, list[tuple[float, float, float]]] = defaultdict(list)
        for key, (best, worst) in spread.items():
            if panel and key[0] != p:
                continue
            lines[key[-2]].append((float(key[-1]), best, worst))
        xs = sorted({pt[0] for pts in lines.values() for pt in pts})
        colours: dict[tuple[str, Any], str] = {}
        for index, s in enumerate(sorted(lines, key=str)):
            pts = sorted(lines[s])
            colour = f"C{index % 10}"
            colours[(series, s)] = colour
            label = series_label(s) if series_label else f"{series}={s}"
            ax.plot([a for a, _, _ in pts], [b for _, b, _ in pts], marker="o", color=colour, label=label)
            if any(w > b for _, b, w in pts):
                ax.fill_between(
                    [a for a, _, _ in pts],
                    [b for _, b, _ in pts],
                    [w for _, _, w in pts],
                    color=colour,
                    alpha=0.2,
                    linewidth=0,
                )
        _draw_paper(ax, paper, x, {panel: p} if panel else {}, colours, ds, xs)
        if logx:
            ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        plain_log_labels(ax)
        if xs:
            labels = {float(f): f"{f}\n(full)" for f in full_ranks} if x == "rank" and len(full_ranks) == 1 else None
            _ticks(ax, xs, labels)
        ax.set_xlabel(xlabel, fontsize=8)
        ax.set_ylabel("training MSE: best seed (line), seed range (band)", fontsize=7)
        ax.set_title(f"{panel_name(panel)}={p}" if panel else "", fontsize=9)
        ax.grid(True, which="both", alpha=0.3)
        if lines:
            ax.legend(fontsize=7)
    width_chars = int(14 * fig.get_figwidth())  # about 14 characters of 9-point text per inch
    fig.suptitle(f"{title}\n{textwrap.fill(parameter_line(records), width_chars)}", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def panel_name(key: str | None) -> str:
    """The paper's symbol for a panel key (layers -> L)."""
    return {"layers": "L", "width": "c"}.get(key or "", key or "")


def plot_fig1(records: Sequence[Record], path: Path, title: str, *, paper: Sequence[PaperNumber] = ()) -> Path:
    """Figure 1: loss against rank (log2 axis), one line per width c, one panel per depth L; paper values as x."""
    return _line_figure(
        records,
        path,
        title,
        x="rank",
        series="width",
        panel="layers",
        xlabel="rank r (H = d / r heads)",
        series_label=lambda c: f"c={c}",
        paper=paper,
    )


def plot_vs_context(records: Sequence[Record], path: Path, title: str, *, paper: Sequence[PaperNumber] = ()) -> Path:
    """Varying N (and Conjecture 6): loss against N (log2 axis), one line per rank, one panel per depth."""
    d = max((int(v) for v in _values(records, "d")), default=0)
    rank_of = {"full": d, "half": d // 2}
    paper_cells = [
        PaperNumber(n.label, n.value, {k: v for k, v in n.where.items() if k != "rank_class"} | {"rank": rank_of[c]})
        if (c := n.where.get("rank_class")) in rank_of
        else n
        for n in paper
        if n.where.get("rank_class") in (None, "full", "half")
    ]
    return _line_figure(
        records,
        path,
        title,
        x="N",
        series="rank",
        panel="layers",
        xlabel="context length N",
        series_label=lambda r: f"r={r}{' (full)' if r == d else ''}",
        paper=paper_cells,
    )


def plot_vs_dimension(records: Sequence[Record], path: Path, title: str) -> Path:
    """Varying d: loss against d (log2 axis), one line per relative rank d / r."""
    enriched = [{**r, "d_over_r": r["d"] // r["rank"]} for r in records if "rank" in r]
    return _line_figure(
        enriched,
        path,
        title,
        x="d",
        series="d_over_r",
        panel="layers",
        xlabel="dimension d",
        series_label=lambda k: "full rank (r = d)" if k == 1 else f"r = d/{k}",
    )


def plot_positional(records: Sequence[Record], path: Path, title: str, *, paper: Sequence[PaperNumber] = ()) -> Path:
    """Positional encodings: loss against rank, one line per encoding kind, one panel per depth; the paper's cells
    (d = 64) at the same relative rank r / d of our d."""
    d = max((int(v) for v in _values(records, "d")), default=PAPER_D)
    cells = [
        PaperNumber(n.label, n.value, {**n.where, "rank": int(n.where["rank"]) * d // PAPER_D})
        for n in paper
        if "rank" in n.where and int(n.where["rank"]) * d % PAPER_D == 0
    ]
    return _line_figure(
        records,
        path,
        title,
        x="rank",
        series="positional",
        panel="layers",
        xlabel="rank r",
        series_label=lambda p: f"positions: {p}",
        paper=cells,
    )


def plot_icl(records: Sequence[Record], path: Path, title: str) -> Path:
    """In-context regression: loss against rank at fixed H = D / r (D: the model width)."""
    return _line_figure(
        records,
        path,
        title,
        x="rank",
        series="layers",
        panel=None,
        xlabel="rank r (H = D / r heads, D = width)",
        series_label=lambda L: f"L={L}",
        full_rank="embed_dim",
    )


def plot_random_features(
    records: Sequence[Record],
    path: Path,
    title: str,
    *,
    paper: Sequence[PaperNumber] = (),
    plateau: Callable[[int], float] | None = None,
) -> Path:
    """Random rank-1 heads: error against H (log2 axis), mean and range over draws, one line per d; the paper's
    plateau per d (``plateau(d)``: 0.18; 0.13 at d = 8) and its cells as dotted lines."""
    curves: dict[int, list[tuple[list[int], list[float]]]] = defaultdict(list)
    for r in records:
        if r.get("status") == "finished" and "errors" in r:
            curves[int(r["d"])].append((list(r["head_counts"]), list(r["errors"])))
    fig, ax = plt.subplots(figsize=(5.4, 4.0))
    for index, d in enumerate(sorted(curves)):
        counts = curves[d][0][0]
        errors = np.asarray([e for c, e in curves[d] if c == counts])  # (T, P)
        colour = f"C{index % 10}"
        ax.plot(counts, errors.mean(axis=0), marker=".", color=colour, label=f"d={d} (mean of {errors.shape[0]} draws)")
        ax.fill_between(counts, errors.min(axis=0), errors.max(axis=0), color=colour, alpha=0.2, linewidth=0)
    plateaus = sorted({plateau(d) for d in curves if plateau is not None} | {n.value[0] for n in paper})
    for value in plateaus:
        ax.axhline(value, color="black", linestyle=":", linewidth=1)
        ax.annotate(f"paper plateau {value:g}", (1, value), fontsize=7, va="bottom")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    plain_log_labels(ax)
    if curves:
        counts = next(iter(curves.values()))[0][0]
        _ticks(ax, counts[:: max(1, len(counts) // 8)])
    ax.set_xlabel("heads H")
    ax.set_ylabel("error with optimal output weights")
    ax.set_title(f"{title}\n{parameter_line(records)}", fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_bound_vs_trained(records: Sequence[Record], path: Path, title: str) -> Path:
    """Trained one-layer error (Monte Carlo, 4 s.e. bars) against H beside the certified rank_lower_bound(d, r, H)
    curves, drawn by `experiments.figures.trained.plot_trained_vs_bound` from each finished run's evaluation (its
    population error beside its bound record)."""
    pairs = [(r, found) for r in records if (found := evaluation(r)) is not None and found.theorem2 is not None]
    runs, evaluations = [r for r, _ in pairs], [found for _, found in pairs]
    return plot_trained_vs_bound(evaluations, path, title=f"{title}\n{parameter_line(runs)}")


FIG1 = Figure("fig1", plot_fig1, takes_paper=True)
FIG_N = Figure("figN", plot_vs_context, takes_paper=True)
FIG_D = Figure("figd", plot_vs_dimension)
POSN = Figure("posn", plot_positional, takes_paper=True)
ICL = Figure("icl", plot_icl)
BOUND_VS_TRAINED = Figure("bound-vs-trained", plot_bound_vs_trained)
CONJECTURE6 = Figure("conjecture6", plot_vs_context)
"""The sweep figures drawn here, as the presets hold them (`experiments.sweeps.preset_kit.Figure`; random features
builds its own, `random_features_figure`, with its paper plateaus). A figure drawn in a module of its own declares its
`Figure` there (`experiments.figures.depth_trained.DEPTH`, `experiments.figures.finite_set.FINITE_SET`)."""


def random_features_figure(plateau: Callable[[int], float]) -> Figure:
    """The random-feature figure drawing ``plateau(d)`` (the paper's plateau per d) beside the curves."""
    return Figure("random-features", functools.partial(plot_random_features, plateau=plateau), takes_paper=True)
