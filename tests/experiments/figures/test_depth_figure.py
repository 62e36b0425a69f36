"""The depth preset's figure draws from sweep records and refuses records it cannot draw."""

from __future__ import annotations

from pathlib import Path

import pytest

from experiments.figures.depth_trained import DEPTH, depth_series, plot_depth_trained
from experiments.studies import get_preset


def _run(layers: int, width: int, error: float, seed: int) -> dict:
    base = {"model": "theory", "task": "nearest", "N": 2, "rank": 1, "d": 8, "seed": seed, "status": "finished"}
    return {**base, "layers": layers, "width": width, "positional_dim": 8 if layers == 2 else 0,
            "population_error": error, "population_stderr": 0.001, "population_samples": 20_000}  # fmt: skip


def test_depth_figure_is_drawn(tmp_path: Path) -> None:
    records = [_run(2, c, 0.03 / c, s) for c in (1, 2) for s in (0, 1)] + [_run(1, 2 * c, 0.17, 0) for c in (1, 2)]
    series = depth_series(records)
    assert set(series) == {(8, 2, 8, None), (8, 1, 0, None)} and sorted(series[(8, 2, 8, None)]) == [16, 32]
    started = {**_run(2, 1, 0.05, 0), "positional_dim": 9, "init": "construction:majority-vote"}
    assert depth_series([*records, started])[(8, 2, 9, "construction:majority-vote")] == {17: [(0.05, 0.001)]}
    path = plot_depth_trained(records, tmp_path / "depth.png", "depth (test)")
    assert path.stat().st_size > 1000
    assert DEPTH.draw is plot_depth_trained and get_preset("depth").figure is DEPTH


def test_nothing_to_draw_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no finished"):
        plot_depth_trained([], tmp_path / "x.png", "empty")
