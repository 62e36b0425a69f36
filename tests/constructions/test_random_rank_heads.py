"""Random rank-r heads with least-squares output weights (constructions/random_rank_heads.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from constructions.random_rank_heads import (
    bilinear_scores,
    fit_least_squares_heads,
    fresh_error,
    head_features,
    least_squares_weights,
    model_output,
    reduced_errors,
    sample_query_directions,
    sample_rank_heads,
)
from theory.attention import multihead_attention
from theory.kernels import head_kernel_matrix, head_target_kernel
from theory.monte_carlo import DEFAULT_Z
from theory.sphere import sample_context
from theory.targets import nearest_neighbor


@pytest.mark.parametrize("temperature", [0.5, 3.0, math.inf])
@pytest.mark.parametrize(("d", "r", "H"), [(5, 1, 7), (8, 3, 4)])
def test_model_output_is_the_reference_attention(d: int, r: int, H: int, temperature: float) -> None:
    rng = np.random.default_rng(0)
    Q, K = sample_rank_heads(d, r, H, rng)
    a = rng.standard_normal(H)
    X, y = sample_context(200, 2, d, rng)
    V = a[:, None, None] * np.eye(d)  # (H, d, d): V_h = a_h I
    reference = multihead_attention(Q, K, V, X, y, temperature=temperature)
    assert np.max(np.abs(model_output(Q, K, a, temperature, X, y) - reference)) < 1e-12


@pytest.mark.parametrize("temperature", [0.25, math.inf])
def test_reduced_error_is_the_exact_per_sample_error(temperature: float) -> None:
    """((A - 1)^2 + (<t, a> - s)^2) / 2 with u = (x_1 - x_2)/sqrt 2 equals ||f - x_{i*}||^2 sample by sample."""
    d, r, H = 7, 2, 9
    rng = np.random.default_rng(1)
    Q, K = sample_rank_heads(d, r, H, rng)
    a = rng.standard_normal(H)
    X, y = sample_context(500, 2, d, rng)
    u = (X[:, 0] - X[:, 1]) / math.sqrt(2.0)  # (n, d)
    t = head_features(bilinear_scores(Q, K, y, u), temperature)  # (n, H)
    s = np.sign(np.einsum("nd,nd->n", y, u))
    direct = np.sum((model_output(Q, K, a, temperature, X, y) - nearest_neighbor(X, y)) ** 2, axis=1)
    assert np.max(np.abs(reduced_errors(a, t, s) - direct)) < 1e-12


def test_least_squares_weights_minimise_the_empirical_error() -> None:
    rng = np.random.default_rng(2)
    Q, K = sample_rank_heads(6, 2, 12, rng)
    y, u, s = sample_query_directions(3000, 6, rng)
    t = head_features(bilinear_scores(Q, K, y, u), 1.0)
    a = least_squares_weights(t, s)
    best = np.mean(reduced_errors(a, t, s))
    for _ in range(20):
        perturbed = a + 1e-3 * rng.standard_normal(a.shape)
        assert np.mean(reduced_errors(perturbed, t, s)) > best


def _exact_rank1_error(Q: np.ndarray, K: np.ndarray, a: np.ndarray) -> float:
    """E(a) = a^T C a - 2 a^T b + 1 for rank-1 hardmax heads (theory.kernels, exact)."""
    q, k = Q[:, 0], K[:, 0]  # (H, d)
    C = head_kernel_matrix(q, k)
    cos = np.einsum("hd,hd->h", q, k) / (np.linalg.norm(q, axis=1) * np.linalg.norm(k, axis=1))
    b = head_target_kernel(cos, Q.shape[2])
    return float(a @ C @ a - 2.0 * a @ b + 1.0)


def test_fresh_score_agrees_with_the_exact_error_of_rank1_hardmax_heads() -> None:
    """Monte Carlo (n = 40 000, 4 s.e.) against the exact kernel error of the same weights; the exact error of the
    same weights given to the heads in reverse order must be rejected (negative control)."""
    d, H = 8, 24
    rng = np.random.default_rng(3)
    Q, K = sample_rank_heads(d, 1, H, rng)
    fitted = fit_least_squares_heads(
        Q, K, rng, temperatures=(math.inf,), fit_samples=4000, validation_samples=1000, score_samples=40_000
    )
    assert fitted.fresh is not None
    exact = _exact_rank1_error(Q, K, fitted.weights)
    assert abs(fitted.fresh.mean - exact) <= DEFAULT_Z * fitted.fresh.stderr, (fitted.fresh, exact)
    wrong = _exact_rank1_error(Q, K, fitted.weights[::-1].copy())
    assert abs(fitted.fresh.mean - wrong) > DEFAULT_Z * fitted.fresh.stderr, (fitted.fresh, wrong)


def test_in_sample_error_is_optimistic_and_validation_picks_the_best() -> None:
    """Fitting 64 weights on 200 samples overfits: the in-sample error lies below the fresh one by far more than its
    standard error; the chosen temperature is the argmin of the validation errors."""
    rng = np.random.default_rng(4)
    Q, K = sample_rank_heads(8, 1, 64, rng)
    fitted = fit_least_squares_heads(
        Q, K, rng, temperatures=(0.25, 4.0), fit_samples=200, validation_samples=4000, score_samples=20_000
    )
    assert fitted.fresh is not None
    assert fitted.in_sample < fitted.fresh.mean - 10 * fitted.fresh.stderr
    assert fitted.temperature == min(fitted.validation, key=lambda lam: fitted.validation[lam])


def test_fresh_error_of_the_zero_map_is_one() -> None:
    """a = 0 outputs 0, and ||x_{i*}||^2 = 1 on every sample."""
    rng = np.random.default_rng(5)
    Q, K = sample_rank_heads(4, 1, 3, rng)
    estimate = fresh_error(Q, K, np.zeros(3), 1.0, 100, rng)
    assert estimate.mean == pytest.approx(1.0, abs=1e-12)


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"fit_samples": 1}, "fit_samples"),
        ({"validation_samples": 0}, "validation_samples"),
        ({"score_samples": 1}, "score_samples"),
        ({"temperatures": (0.0,)}, "temperatures"),
        ({"temperatures": ()}, "temperatures"),
    ],
)
def test_bad_input_names_the_parameter(kwargs: dict[str, object], name: str) -> None:
    rng = np.random.default_rng(6)
    Q, K = sample_rank_heads(4, 1, 3, rng)
    arguments = {"fit_samples": 100, "validation_samples": 100, "score_samples": 100, **kwargs}
    with pytest.raises(ValueError, match=name):
        fit_least_squares_heads(Q, K, rng, **arguments)  # type: ignore[arg-type]


def test_sample_rank_heads_rejects_a_rank_above_d() -> None:
    with pytest.raises(ValueError, match="r"):
        sample_rank_heads(4, 5, 3, np.random.default_rng(0))
