"""experiments/analysis/biased_separation.py: Theorem 3's full-rank heads fit exactly; rank r < d stays near the
sawtooth energy (negative control)."""

from __future__ import annotations

import numpy as np
import pytest

from experiments.analysis.biased_separation import (
    full_rank_dictionary,
    oscillation_energy,
    separation_rows,
    threshold_biases,
)
from theory.biased_target import bias_grid


def test_thresholds_are_the_grid_at_h_equal_m() -> None:
    grid = bias_grid(3)
    assert np.array_equal(threshold_biases(grid, grid.count), grid.biases)
    assert threshold_biases(grid, 1).tolist() == [0.0]
    coarse = threshold_biases(grid, 5)
    assert coarse[0] == grid.biases[0] and coarse[-1] == grid.biases[-1] and len(coarse) == 5
    assert full_rank_dictionary(3, 5, grid).heads == 5


def test_full_construction_is_exact_and_low_rank_is_not() -> None:
    """d = 3 (M = 19): the full-rank heads at H = M reach error ~0 on fresh contexts; rank 2 with 2 M heads keeps more
    than half of the sawtooth energy (the oscillating part no rank-2 head follows); 4000 fresh contexts."""
    rows = separation_rows(3, [3, 2], [19], [1], 4000, 4000, np.random.default_rng(0))
    full = next(row for row in rows if row.r == 3)
    low = next(row for row in rows if row.r == 2)
    assert full.H == 19 and full.heldout < 1e-9
    assert low.H == 38 and low.heldout > 0.5 * oscillation_energy(3)


def test_rank_above_d_is_refused() -> None:
    with pytest.raises(ValueError, match="r"):
        separation_rows(3, [4], [19], [1], 100, 100, np.random.default_rng(0))
