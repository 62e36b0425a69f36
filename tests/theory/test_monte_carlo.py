"""Tests of theory.monte_carlo: the estimate container, the batched error estimator and its statistics."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.strategies import seeds
from theory.monte_carlo import MeanAccumulator, MonteCarloEstimate, estimate_error, estimate_mean
from theory.sphere import sample_context
from theory.targets import nearest_neighbor


def test_estimate_container() -> None:
    estimate = MonteCarloEstimate(mean=1.0, stderr=0.25, n_samples=100)
    assert estimate.interval() == (0.0, 2.0)
    assert estimate.interval(z=2.0) == (0.5, 1.5)
    assert estimate.contains(1.99) and not estimate.contains(2.01)
    assert estimate.contains(0.6, z=2.0) and not estimate.contains(0.4, z=2.0)
    with pytest.raises(AttributeError):
        estimate.mean = 2.0  # type: ignore[misc]


@given(values=st.lists(st.floats(-1e3, 1e3), min_size=2, max_size=50))
def test_estimate_mean_matches_numpy(values: list[float]) -> None:
    estimate = estimate_mean(np.array(values))
    assert estimate.n_samples == len(values)
    assert estimate.mean == pytest.approx(np.mean(values), abs=1e-9)
    assert estimate.stderr == pytest.approx(np.std(values, ddof=1) / math.sqrt(len(values)), abs=1e-9)


@given(n=st.integers(2, 200), batch=st.integers(1, 60), seed=seeds)
def test_batched_error_equals_one_pass_statistics(n: int, batch: int, seed: int) -> None:
    """Merging batch statistics gives the one-pass mean and standard error of the same per-sample errors."""
    values = np.random.default_rng(seed).exponential(size=n) * 10.0 + 5.0  # (n,) squared errors, offset mean
    position = [0]

    def sampler(m: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        start = position[0]
        position[0] += m
        chunk = np.sqrt(values[start : start + m])[:, None]  # (m, 1)
        return chunk[:, None, :], chunk  # X (m, 1, 1), y (m, 1)

    estimate = estimate_error(
        lambda X, y: y, lambda X, y: np.zeros_like(y), sampler, n, np.random.default_rng(0), batch_size=batch
    )
    reference = estimate_mean(values)
    assert position[0] == n
    assert estimate.n_samples == n
    assert estimate.mean == pytest.approx(reference.mean, rel=1e-12)
    assert estimate.stderr == pytest.approx(reference.stderr, rel=1e-9, abs=1e-15)


def _d2(d: int):  # type: ignore[no-untyped-def]
    return lambda m, rng: sample_context(m, 2, d, rng)


def test_exact_errors_of_simple_maps() -> None:
    """Under D_2: the zero map has error exactly 1 and (x_1 + x_2)/2 exactly 1/2 (docs/paper.md section 1)."""
    rng = np.random.default_rng(1)
    zero = estimate_error(lambda X, y: np.zeros_like(y), nearest_neighbor, _d2(6), 5000, rng, batch_size=1200)
    assert zero.mean == pytest.approx(1.0, abs=1e-12) and zero.stderr < 1e-12
    blind = estimate_error(lambda X, y: X.mean(axis=1), nearest_neighbor, _d2(6), 5000, rng, batch_size=1200)
    assert blind.mean == pytest.approx(0.5, abs=1e-12) and blind.stderr < 1e-12


def test_statistical_estimate_covers_the_truth_and_rejects_a_wrong_value() -> None:
    """E y_1^2 = 1/d for uniform y (d = 4): n = 100000, within 4 s.e.; the wrong value 1/(d+1) is rejected."""
    d = 4
    estimate = estimate_error(
        lambda X, y: y[:, :1], lambda X, y: np.zeros((y.shape[0], 1)), _d2(d), 100_000, np.random.default_rng(2), 7000
    )
    assert estimate.contains(1 / d)
    assert not estimate.contains(1 / (d + 1))
    # Var(t^2) = E t^4 - (E t^2)^2 = 3/(d(d+2)) - 1/d^2 for a coordinate t of a uniform point.
    expected_stderr = math.sqrt((3 / (d * (d + 2)) - 1 / d**2) / 100_000)
    assert estimate.stderr == pytest.approx(expected_stderr, rel=0.05)


@pytest.mark.parametrize(
    ("call", "parameter"),
    [
        (lambda: estimate_mean(np.array([1.0])), "values"),
        (lambda: estimate_mean(np.ones((3, 2))), "values"),
        (lambda: estimate_mean(np.array([1.0, np.inf])), "values"),
        (lambda: estimate_error(np.zeros_like, np.zeros_like, _d2(3), 1, np.random.default_rng(0)), "n_samples"),
        (lambda: estimate_error(np.zeros_like, np.zeros_like, _d2(3), 10, np.random.default_rng(0), 0), "batch_size"),
        (lambda: estimate_error(np.zeros_like, np.zeros_like, _d2(3), 10, 0), "rng"),
        (lambda: estimate_error(None, np.zeros_like, _d2(3), 10, np.random.default_rng(0)), "model"),
        (lambda: estimate_error(np.zeros_like, np.zeros_like, 3, 10, np.random.default_rng(0)), "sampler"),
        (
            lambda: estimate_error(lambda X, y: y, lambda X, y: y[:, :2], _d2(3), 10, np.random.default_rng(0)),
            "model and target",
        ),
        (lambda: MonteCarloEstimate(0.0, 1.0, 10).interval(-1.0), "z"),
        (lambda: MonteCarloEstimate(0.0, 1.0, 10).contains(math.nan), "x"),
    ],
)
def test_bad_arguments_raise_value_error_naming_the_parameter(call, parameter: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValueError, match=rf"^{parameter} must"):
        call()


@given(n=st.integers(2, 300), batch=st.integers(1, 70), seed=seeds)
def test_accumulator_matches_numpy(n: int, batch: int, seed: int) -> None:
    """Streaming in batches gives numpy's mean and ddof = 1 standard error of all the samples at once."""
    values = np.random.default_rng(seed).normal(3.0, 2.0, size=n)  # (n,)
    accumulator = MeanAccumulator()
    for start in range(0, n, batch):
        accumulator.add(values[start : start + batch])
    estimate = accumulator.estimate()
    assert estimate.n_samples == n
    assert estimate.mean == pytest.approx(np.mean(values), rel=1e-12, abs=1e-12)
    assert estimate.stderr == pytest.approx(np.std(values, ddof=1) / math.sqrt(n), rel=1e-10)


@given(n=st.integers(2, 100), batch=st.integers(1, 30), seed=seeds)
def test_vector_accumulator_matches_numpy_per_component(n: int, batch: int, seed: int) -> None:
    values = np.random.default_rng(seed).exponential(size=(n, 3)) * [1.0, 10.0, 1e3]  # (n, 3)
    accumulator = MeanAccumulator((3,))
    for start in range(0, n, batch):
        accumulator.add(values[start : start + batch])
    estimates = accumulator.estimates()
    np.testing.assert_allclose([e.mean for e in estimates], values.mean(axis=0), rtol=1e-12)
    np.testing.assert_allclose([e.stderr for e in estimates], values.std(axis=0, ddof=1) / math.sqrt(n), rtol=1e-10)


def test_accumulator_keeps_precision_where_sum_of_squares_fails() -> None:
    """Negative control: mean 1e8, spread 1. The sum-of-squares variance E[x^2] - E[x]^2 cancels to noise (its
    float64 rounding, ~eps * 1e16 ~ 2, exceeds the variance 1), the accumulator matches the exact two-pass value."""
    rng = np.random.default_rng(7)
    values = 1e8 + rng.normal(size=100_000)  # (n,)
    exact = float(np.var(values - 1e8, ddof=1))  # shifted two-pass: no cancellation
    accumulator = MeanAccumulator()
    sums = squares = 0.0
    n = 0
    for start in range(0, values.size, 1000):
        chunk = values[start : start + 1000]
        accumulator.add(chunk)
        sums += float(chunk.sum())
        squares += float((chunk**2).sum())
        n += chunk.size
    naive = (squares / n - (sums / n) ** 2) * n / (n - 1)
    streamed = accumulator.estimate().stderr ** 2 * n
    assert abs(streamed - exact) < 1e-6 * exact, (streamed, exact)
    assert abs(naive - exact) > 0.1 * exact, (naive, exact)  # the naive formula is off by more than 10%


def test_accumulator_rejects_bad_input() -> None:
    accumulator = MeanAccumulator()
    with pytest.raises(ValueError, match="at least 2"):
        accumulator.estimate()
    with pytest.raises(ValueError, match="finite"):
        accumulator.add([1.0, math.nan])
    with pytest.raises(ValueError, match="shape"):
        MeanAccumulator((2,)).add(np.zeros((4, 3)))
    with pytest.raises(ValueError, match="estimates"):
        MeanAccumulator((2,)).estimate()
