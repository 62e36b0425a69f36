"""The paper's random-feature procedure as we read it: weights fitted on n samples, in-sample vs population error
(constructions/random_features_in_sample.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from constructions.random_features import prefix_errors, sample_heads
from constructions.random_features_in_sample import empirical_system, in_sample_errors, sample_signs
from theory.attention import multihead_attention
from theory.sphere import sample_sphere
from theory.targets import nearest_neighbor


def test_in_sample_error_is_the_mean_error_of_the_fitted_weights_on_their_own_contexts() -> None:
    """Rebuild the fitting sample as real D_2 contexts (x_1, x_2 = (m +- u)/sqrt 2 with m a unit vector orthogonal to
    u), refit by numpy least squares, and score the weights through the reference attention evaluator."""
    d, H, n = 6, 10, 3000
    q, k = sample_heads(H, d, np.random.default_rng(0))
    curve = in_sample_errors(q, k, [4, H], n, np.random.default_rng(1))
    rng = np.random.default_rng(1)  # the same draws as inside in_sample_errors (one block)
    y = sample_sphere(n, d, rng)  # (n, d)
    u = sample_sphere(n, d, rng)  # (n, d)
    m = sample_sphere(n, d, np.random.default_rng(2))
    m -= np.einsum("nd,nd->n", m, u)[:, None] * u
    m /= np.linalg.norm(m, axis=1, keepdims=True)  # (n, d), orthogonal to u
    X = np.stack([(m + u) / math.sqrt(2.0), (m - u) / math.sqrt(2.0)], axis=1)  # (n, 2, d)
    target = nearest_neighbor(X, y)  # (n, d)
    for count, in_sample in zip(curve.counts, curve.in_sample, strict=True):
        heads = [
            multihead_attention(q[h : h + 1, None], k[h : h + 1, None], np.eye(d)[None], X, y) for h in range(count)
        ]
        F = np.stack(heads, axis=2)  # (n, d, count): head outputs with V = I
        a = np.linalg.lstsq(F.reshape(n * d, count), target.reshape(n * d), rcond=None)[0]  # (count,)
        direct = np.mean(np.sum((F @ a - target) ** 2, axis=1))
        assert in_sample == pytest.approx(direct, abs=1e-9)


def test_population_error_of_fitted_weights_is_never_below_the_optimum() -> None:
    """E(a_n) >= min_a E(a) exactly; with n = 60 samples for 32 heads the fit overfits: in-sample < optimum <
    population."""
    q, k = sample_heads(32, 8, np.random.default_rng(3))
    counts = [8, 16, 32]
    optimum = prefix_errors(q, k, counts).errors
    for n in (60, 20_000):
        curve = in_sample_errors(q, k, counts, n, np.random.default_rng(4))
        assert np.all(curve.population >= optimum - 1e-12)
    small = in_sample_errors(q, k, counts, 60, np.random.default_rng(5))
    assert small.in_sample[-1] < optimum[-1] < small.population[-1]


def test_signs_are_exact_and_blocks_add_up() -> None:
    q, k = sample_heads(5, 4, np.random.default_rng(6))
    signs, target = sample_signs(q, k, 100, np.random.default_rng(7))
    assert set(np.unique(signs)) <= {-1.0, 1.0} and set(np.unique(target)) <= {-1.0, 1.0}
    G, g = empirical_system(q, k, 40_000, np.random.default_rng(8))  # three blocks
    assert np.allclose(np.diag(G), 2.0) and np.all(np.abs(g - 1.0) <= 1.0)


@pytest.mark.parametrize(("counts", "match"), [([], "counts"), ([3, 2], "counts"), ([0], "counts"), ([9], "counts")])
def test_bad_counts_are_refused(counts: list[int], match: str) -> None:
    q, k = sample_heads(8, 4, np.random.default_rng(0))
    with pytest.raises(ValueError, match=match):
        in_sample_errors(q, k, counts, 10, np.random.default_rng(0))
    with pytest.raises(ValueError, match="n_samples"):
        in_sample_errors(q, k, [2], 0, np.random.default_rng(0))
