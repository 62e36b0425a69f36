"""Tests of theory.sphere: uniform samples, D_N frames, the coordinate density and its sampler.

Statistical tests use fixed seeds and 4 standard errors (per-comparison false-alarm rate about 6e-5 under a normal
approximation); goodness-of-fit tests use level 1e-4.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import integrate, special, stats

from tests.strategies import dimensions, seeds
from theory.monte_carlo import DEFAULT_Z
from theory.sphere import (
    coordinate_density,
    coordinate_density_constant,
    sample_context,
    sample_coordinate,
    sample_iid_keys,
    sample_orthonormal_keys,
    sample_sphere,
)

Z = DEFAULT_Z  # acceptance half-width in standard errors (one value for every statistical check)
LEVEL = 1e-4


def _coordinate_cdf(t: np.ndarray, d: int) -> np.ndarray:
    """P(<u, e> <= t) from the regularised incomplete beta function: t^2 ~ Beta(1/2, (d-1)/2), symmetric sign."""
    return 0.5 + 0.5 * np.sign(t) * special.betainc(0.5, 0.5 * (d - 1), t * t)


@given(n=st.integers(0, 20), d=dimensions(2, 40), seed=seeds)
def test_sphere_samples_have_unit_norm(n: int, d: int, seed: int) -> None:
    points = sample_sphere(n, d, np.random.default_rng(seed))
    assert points.shape == (n, d)
    np.testing.assert_allclose(np.linalg.norm(points, axis=1), 1.0, rtol=0, atol=1e-14)


@given(data=st.data(), d=dimensions(2, 24), n=st.integers(1, 5), seed=seeds)
def test_orthonormal_keys_are_orthonormal_frames(data: st.DataObject, d: int, n: int, seed: int) -> None:
    N = data.draw(st.integers(1, d), label="N")
    X = sample_orthonormal_keys(n, N, d, np.random.default_rng(seed))
    assert X.shape == (n, N, d)
    gram = np.einsum("nid,njd->nij", X, X)  # (n, N, N)
    np.testing.assert_allclose(gram, np.broadcast_to(np.eye(N), gram.shape), rtol=0, atol=1e-13)


@given(n=st.integers(0, 10), N=st.integers(1, 6), d=dimensions(2, 20), seed=seeds)
def test_iid_keys_have_unit_rows(n: int, N: int, d: int, seed: int) -> None:
    X = sample_iid_keys(n, N, d, np.random.default_rng(seed))
    assert X.shape == (n, N, d)
    np.testing.assert_allclose(np.linalg.norm(X, axis=2), 1.0, rtol=0, atol=1e-14)


def test_samplers_are_reproducible_from_the_generator() -> None:
    a = sample_context(7, 3, 5, np.random.default_rng(11))
    b = sample_context(7, 3, 5, np.random.default_rng(11))
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[1], b[1])


@pytest.mark.parametrize("d", [2, 3, 4, 5, 10, 64, 1000])
def test_coordinate_density_integrates_to_one(d: int) -> None:
    total, error = integrate.quad(lambda t: coordinate_density(t, d), -1.0, 1.0, limit=200)
    assert abs(total - 1.0) < max(1e-8, 10 * error), f"d = {d}: integral {total} (quad error {error})"


@pytest.mark.parametrize("d", [2, 3, 7, 50])
def test_coordinate_density_constant_matches_closed_forms(d: int) -> None:
    # Independent: the surface-area ratio |S^{d-2}| / |S^{d-1}| with |S^{m-1}| = 2 pi^{m/2} / Gamma(m/2).
    area = lambda m: 2 * math.pi ** (m / 2) / math.gamma(m / 2)  # noqa: E731
    assert coordinate_density_constant(d) == pytest.approx(area(d - 1) / area(d), rel=1e-13)


def test_coordinate_density_special_cases() -> None:
    t = np.array([-0.9, -0.3, 0.0, 0.4, 0.99])
    np.testing.assert_allclose(coordinate_density(t, 2), 1 / (math.pi * np.sqrt(1 - t * t)), rtol=1e-14)
    np.testing.assert_allclose(coordinate_density(t, 3), 0.5, rtol=1e-14)
    assert coordinate_density(1.5, 5) == 0.0
    assert coordinate_density(-1.0, 2) == math.inf
    assert coordinate_density(1.0, 3) == 0.5
    assert coordinate_density(1.0, 4) == 0.0
    assert isinstance(coordinate_density(0.2, 4), float)
    assert coordinate_density(np.zeros((2, 3)), 6).shape == (2, 3)


@pytest.mark.parametrize("d", [2, 3, 6, 20])
def test_sampled_coordinates_follow_the_density(d: int) -> None:
    """Chi-square on 20 bins (expected counts by quad of the density) and KS against the incomplete-beta CDF.

    Both samplers are tested: the first coordinate of sample_sphere and sample_coordinate; n = 40000 each, level 1e-4.
    """
    n = 40_000
    rng = np.random.default_rng(1000 + d)
    edges = np.linspace(-1.0, 1.0, 21)
    probabilities = np.array(
        [
            integrate.quad(lambda t: coordinate_density(t, d), lo, hi)[0]
            for lo, hi in zip(edges[:-1], edges[1:], strict=True)
        ]
    )
    assert probabilities.sum() == pytest.approx(1.0, abs=1e-8)
    for name, values in (
        ("sample_sphere", sample_sphere(n, d, rng)[:, 0]),
        ("sample_coordinate", sample_coordinate(n, d, rng)),
    ):
        counts, _ = np.histogram(values, bins=edges)
        chi2 = stats.chisquare(counts, n * probabilities / probabilities.sum())
        assert chi2.pvalue > LEVEL, f"{name}, d = {d}: chi-square p = {chi2.pvalue:.2e}"
        ks = stats.kstest(values, lambda t: _coordinate_cdf(np.asarray(t), d))
        assert ks.pvalue > LEVEL, f"{name}, d = {d}: KS p = {ks.pvalue:.2e}"


def test_coordinate_goodness_of_fit_rejects_the_wrong_dimension() -> None:
    """Negative control: coordinates from d = 6 are rejected by the d = 5 law at level 1e-4 (n = 40000)."""
    values = sample_coordinate(40_000, 6, np.random.default_rng(5))
    assert stats.kstest(values, lambda t: _coordinate_cdf(np.asarray(t), 5)).pvalue < LEVEL


def _assert_moment(samples: np.ndarray, expected: float, label: str) -> None:
    """Mean of samples within 4 standard errors of the expected value."""
    mean = samples.mean()
    stderr = samples.std(ddof=1) / math.sqrt(samples.size)
    assert abs(mean - expected) <= Z * stderr, f"{label}: {mean:.5f} +- {stderr:.5f}, expected {expected:.5f}"


@pytest.mark.parametrize("keys", ["iid", "orthonormal"])
def test_context_first_and_second_moments(keys: str) -> None:
    """E x = 0, E x x^T = I/d, E y = 0, E <y, x_i>^2 = 1/d; cross-key moments: iid E <x_1, x_2>^2 = 1/d, Haar 0.

    n = 40000 contexts with d = 5, N = 3; each moment within 4 standard errors.
    """
    n, N, d = 40_000, 3, 5
    X, y = sample_context(n, N, d, np.random.default_rng(7), keys=keys)
    assert X.shape == (n, N, d) and y.shape == (n, d)
    for i in range(N):
        for a in range(d):
            _assert_moment(X[:, i, a], 0.0, f"E x[{i}, {a}]")
            for b in range(a, d):
                _assert_moment(X[:, i, a] * X[:, i, b], (a == b) / d, f"E x[{i}, {a}] x[{i}, {b}]")
        _assert_moment(np.einsum("nd,nd->n", X[:, i], y) ** 2, 1.0 / d, f"E <y, x_{i}>^2")
    for a in range(d):
        _assert_moment(y[:, a], 0.0, f"E y[{a}]")
        # Cross moments between different keys vanish for both laws (E O_ai O_bj = delta_ab delta_ij / d for Haar).
        _assert_moment(X[:, 0, a] * X[:, 1, a], 0.0, f"E x[0, {a}] x[1, {a}]")
    overlap = np.einsum("nd,nd->n", X[:, 0], X[:, 1]) ** 2  # (n,)
    if keys == "iid":
        _assert_moment(overlap, 1.0 / d, "E <x_0, x_1>^2")
    else:
        assert np.max(overlap) < 1e-26


@pytest.mark.parametrize(
    ("call", "parameter"),
    [
        (lambda rng: sample_sphere(-1, 3, rng), "n"),
        (lambda rng: sample_sphere(3, 1, rng), "d"),
        (lambda rng: sample_sphere(2.5, 3, rng), "n"),
        (lambda rng: sample_sphere(3, 3, 0), "rng"),
        (lambda rng: sample_orthonormal_keys(3, 5, 4, rng), "N"),
        (lambda rng: sample_orthonormal_keys(3, 0, 4, rng), "N"),
        (lambda rng: sample_iid_keys(3, 0, 4, rng), "N"),
        (lambda rng: sample_context(3, 5, 4, rng), "N"),
        (lambda rng: sample_context(3, 2, 4, rng, keys="gaussian"), "keys"),
        (lambda rng: sample_coordinate(3, 1, rng), "d"),
        (lambda rng: sample_coordinate(3, 4, np.random.RandomState(0)), "rng"),
        (lambda rng: coordinate_density(0.1, 1), "d"),
        (lambda rng: coordinate_density(np.nan, 3), "t"),
        (lambda rng: coordinate_density_constant(0), "d"),
    ],
)
def test_bad_arguments_raise_value_error_naming_the_parameter(call, parameter: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValueError, match=rf"^{parameter} must"):
        call(np.random.default_rng(0))
