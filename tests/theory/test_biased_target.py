"""Unit and property tests of theory/biased_target.py (Theorem 3's target and its decomposition)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.strategies import dimensions, seeds
from theory.biased_target import (
    bias_count,
    bias_grid,
    biased_target,
    bulk_simple_part,
    in_bulk,
    margin,
    oscillating_part,
    population_moments,
    psi,
    sample_biased_context,
    sawtooth,
    sawtooth_sine_coefficient,
    simple_part,
)
from theory.monte_carlo import estimate_mean
from theory.targets import biased_nearest_neighbor


def test_default_grid_has_2d2_plus_1_biases_covering_four_sd():
    grid = bias_grid(5)
    assert grid.count == 2 * 25 + 1
    assert grid.biases[-1] == pytest.approx(4 * math.sqrt(2))
    assert np.allclose(np.diff(grid.biases), grid.delta)


@given(d=dimensions(2, 7), m=st.integers(1, 30), seed=seeds)
def test_target_is_the_sum_of_biased_nearest_neighbours(d, m, seed):
    grid = bias_grid(d, m=m)
    X, y = sample_biased_context(200, d, np.random.default_rng(seed))
    expected = sum(biased_nearest_neighbor(X, y, b) for b in grid.biases)
    assert np.allclose(biased_target(X, y, grid), expected, atol=1e-12 * grid.count)


@given(d=dimensions(2, 7), m=st.integers(1, 30), seed=seeds, keys=st.sampled_from(["orthonormal", "iid"]))
def test_decomposition_identity_in_the_bulk(d, m, seed, keys):
    grid = bias_grid(d, m=m)
    X, y = sample_biased_context(300, d, np.random.default_rng(seed), keys)
    F = biased_target(X, y, grid)
    assert np.allclose(F, simple_part(X, y, grid) + oscillating_part(X, y, grid), atol=1e-12 * grid.count)
    bulk = in_bulk(margin(X, y), grid)
    closed = bulk_simple_part(X, y, grid) + oscillating_part(X, y, grid)
    assert np.allclose(F[bulk], closed[bulk], atol=1e-10 * grid.count)


def test_decomposition_fails_outside_the_bulk():
    """Negative control: beyond the last bias the closed form keeps growing linearly while F saturates."""
    grid = bias_grid(3, m=2, delta=0.1)
    X, y = sample_biased_context(2000, 3, np.random.default_rng(0))
    outside = ~in_bulk(margin(X, y), grid)
    assert outside.any()
    closed = bulk_simple_part(X, y, grid) + oscillating_part(X, y, grid)
    assert np.max(np.abs(biased_target(X, y, grid) - closed)[outside]) > 0.5


@given(u=st.floats(-50, 50, allow_nan=False), k=st.integers(-5, 5))
def test_sawtooth_is_periodic_bounded_and_mean_zero(u, k):
    gap = abs(sawtooth(u + k) - sawtooth(u))
    assert min(gap, 1.0 - gap) < 1e-9  # circular distance: u + k may round onto the jump
    assert -0.5 <= sawtooth(u) < 0.5 + 1e-12


def test_sawtooth_fourier_series_and_count_formula():
    u = np.linspace(0.013, 0.987, 101)
    k = np.arange(1, 20001)
    series = np.sin(2 * np.pi * np.outer(u, k)) @ sawtooth_sine_coefficient(k)
    assert np.max(np.abs(series - sawtooth(u))) < 2e-3  # Gibbs-free interior, 1/K convergence
    grid = bias_grid(4)
    s = np.array([-100.0, grid.biases[0], 0.0, grid.biases[-1] + 1e-9, 100.0])
    assert list(bias_count(s, grid)) == [0, 0, grid.m + 0, grid.count, grid.count]
    assert psi(0.0, grid) == pytest.approx(-0.5)


@pytest.mark.parametrize("keys", ["orthonormal", "iid"])
def test_population_moments_match_monte_carlo(keys):
    d = 5
    grid = bias_grid(d)
    moments = population_moments(grid, d, keys)
    X, y = sample_biased_context(100000, d, np.random.default_rng(7), keys)
    O = oscillating_part(X, y, grid)
    A = simple_part(X, y, grid)
    for value, samples in (
        (moments.oscillation_energy, np.sum(O * O, axis=1)),
        (moments.overlap, np.sum(A * O, axis=1)),
        (moments.simple_energy, np.sum(A * A, axis=1)),
    ):
        assert estimate_mean(samples).contains(value), (value, estimate_mean(samples))
    assert moments.oscillation_energy == pytest.approx(1 / 6, rel=0.02 if keys == "iid" else 1e-6)


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda: bias_grid(1), "d"),
        (lambda: bias_grid(4, m=0), "m"),
        (lambda: bias_grid(4, delta=-1.0), "delta"),
        (lambda: sample_biased_context(3, 4, np.random.default_rng(0), keys="gauss"), "keys"),
        (lambda: sample_biased_context(3, 4, 0), "rng"),
        (lambda: biased_target(np.zeros((2, 3, 4)), np.zeros((2, 4))), "X"),
        (lambda: biased_target(np.zeros((2, 2, 4)), np.zeros((3, 4))), "y"),
        (lambda: psi(0.0, None), "grid"),
        (lambda: sawtooth_sine_coefficient(0), "k"),
    ],
)
def test_bad_input_names_the_parameter(call, name):
    with pytest.raises(ValueError, match=name):
        call()
