"""Sweep figures: the parameters in the title, the paper's cells placed by rank class, and a PNG per figure kind."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import pytest
from matplotlib.figure import Figure

from experiments.figures import sweeps
from experiments.figures.sweeps import (
    _paper_x,
    parameter_line,
    plain_log_labels,
    plot_fig1,
    plot_icl,
)
from experiments.studies import get_preset
from experiments.sweeps.preset_kit import PaperNumber


def _run(rank: int, seed: int, loss: float, **k: object) -> dict:
    base = {"status": "finished", "kind": "train", "d": 16, "N": 8, "layers": 1, "width": 1, "steps": 600}
    return {**base, "batch_size": 128, "lr": 0.01, "ffn_dim": 64, "rank": rank, "seed": seed, "best_loss": loss, **k}


def test_parameter_line_names_every_setting() -> None:
    records = [_run(16, 0, 0.1), _run(8, 1, 0.5, N=16)]
    assert parameter_line(records) == "d=16, N=8/16, L=1, c=1, 600 steps x 128, lr 0.01, FFN 64, 2 seeds"
    assert "score temperature 128" in parameter_line([_run(16, 0, 0.1, temperature=128.0)])
    draws = [{"kind": "random-features", "d": 8, "trial": t, "head_counts": [1, 2, 1024]} for t in (0, 1)]
    assert parameter_line(draws) == "d=8, H <= 1024, 2 draws"


def test_paper_cells_are_placed_by_rank_class() -> None:
    full = PaperNumber("full", (0.015, 0.015), {"layers": 1, "rank_class": "full"})
    half = PaperNumber("half", (0.7, 0.7), {"layers": 1, "rank_class": "half"})
    low = PaperNumber("low", (0.45, 0.9), {"layers": 1, "rank_class": "low"})
    ranks = [1.0, 2.0, 4.0, 8.0, 16.0]
    assert _paper_x(full, "rank", [16], ranks) == [16.0]
    assert _paper_x(half, "rank", [16], ranks) == [8.0]
    assert _paper_x(low, "rank", [16], ranks) == [1.0, 2.0, 4.0]
    assert _paper_x(PaperNumber("n", (0.6, 0.6), {"N": 16}), "N", [16], [2.0, 16.0]) == [16.0]


def test_fig1_with_paper_markers_and_bands(tmp_path: Path) -> None:
    records = [_run(r, s, v * (1 + 0.1 * s)) for r, v in ((16, 0.04), (8, 0.6), (4, 0.7), (1, 0.8)) for s in (0, 1)]
    path = plot_fig1(records, tmp_path / "f.png", "fig1 (quick)", paper=get_preset("fig1").paper)
    assert path.stat().st_size > 1000
    assert sweeps.FIG1.takes_paper and sweeps.FIG1.draw is plot_fig1  # the preset holds the drawing function


def test_a_narrow_log_axis_labels_every_minor_tick() -> None:
    """0.6 to 0.9 holds no 1, 2, 3 or 5 x 10^k tick: its minor ticks 0.6 ... 0.9 are labelled instead."""
    fig, ax = plt.subplots()
    ax.set_yscale("log")
    ax.set_ylim(0.6, 0.95)
    plain_log_labels(ax)
    fig.canvas.draw()
    labels = {t.get_text() for t in ax.get_yticklabels(minor=True)} - {""}
    plt.close(fig)
    assert {"0.6", "0.7", "0.8", "0.9"} <= labels


def test_icl_marks_the_embed_dim_as_full_rank(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """In-context regression runs have d = 8 tokens in a model of width D = 32: rank 32 is full, rank 8 is not."""
    drawn: list[Figure] = []
    monkeypatch.setattr(sweeps.plt, "close", drawn.append)
    records = [_run(r, 0, 0.7, d=8, embed_dim=32, layers=2) for r in (32, 8, 2, 1)]
    plot_icl(records, tmp_path / "icl.png", "icl (cpu)")
    labels = [t.get_text() for t in drawn[0].axes[0].get_xticklabels()]
    assert "32\n(full)" in labels and "8" in labels
