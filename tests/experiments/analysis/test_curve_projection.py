"""experiments/analysis/curve_projection.py: a prefix curve's fitted law, projected with a reproducible interval."""

from __future__ import annotations

import numpy as np
import pytest

from experiments.analysis.curve_projection import project_curve

BATCH = 256


def _law_curve(floor: float, a: float, b: float, last: int, every: int = 100, noise: float = 0.0) -> list:
    rng = np.random.default_rng(1)
    steps = np.arange(every, last + 1, every)
    losses = (floor + a * (steps * BATCH) ** (-b)) * np.exp(noise * rng.standard_normal(len(steps)))
    return [(int(s), float(v)) for s, v in zip(steps, losses, strict=True)]


def test_an_exact_law_is_recovered_and_projected() -> None:
    curve = _law_curve(0.2, 50.0, 0.5, 20_000)
    projection = project_curve(curve, BATCH, 5_000, 100_000)
    assert projection.fit is not None and projection.at_end is not None
    assert projection.epochs == 150 and projection.last_step == 20_000
    assert projection.fit.floor == pytest.approx(0.2, rel=1e-4)
    assert projection.fit.exponent == pytest.approx(0.5, rel=1e-4)
    truth = 0.2 + 50.0 * (100_000 * BATCH) ** -0.5
    assert projection.at_end[0] == pytest.approx(truth, rel=1e-4)


def test_with_noise_the_interval_holds_the_truth_and_is_reproducible() -> None:
    curve = _law_curve(0.3, 20.0, 0.4, 20_000, noise=0.01)
    first = project_curve(curve, BATCH, 5_000, 100_000)
    second = project_curve(curve, BATCH, 5_000, 100_000)
    assert first.at_end is not None and first.at_end == second.at_end  # seeded bootstrap: the same digits every time
    truth = 0.3 + 20.0 * (100_000 * BATCH) ** -0.4
    assert first.at_end[1] <= truth <= first.at_end[2]
    assert first.at_end[1] < first.at_end[0] < first.at_end[2]


def test_epochs_of_the_warm_up_are_left_out_and_too_few_are_not_fitted() -> None:
    curve = _law_curve(0.2, 50.0, 0.5, 5_300)
    projection = project_curve(curve, BATCH, 5_000, 100_000)
    assert projection.epochs == 3 and projection.fit is None and projection.at_end is None
    assert project_curve([], BATCH, 0, 10).fit is None
