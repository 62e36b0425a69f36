"""Unit and property tests of constructions/random_features.py (random rank-1 heads with optimal output weights).

Independent references: theory.kernels.head_kernel_matrix (plain numpy C), numpy.linalg.solve per prefix, the exact
quadratic E(a) for perturbed weights, Monte Carlo through theory.attention.multihead_attention (4 standard errors),
and the closed-form dual g(mu) of the norm-constrained problem.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from constructions.random_features import (
    DISTRIBUTIONS,
    budget_curve,
    constrained_output_weights,
    construct_random_features,
    dual_bound,
    kernel_matrix,
    monte_carlo_error,
    nested_optimal_errors,
    optimal_output_weights,
    prefix_errors,
    random_feature_curve,
    sample_heads,
    save_random_features,
    target_kernel,
    weight_error,
)
from constructions.weights_io import load_weights
from tests.strategies import dimensions, head_counts, seeds
from theory.kernels import head_kernel_matrix
from theory.monte_carlo import DEFAULT_Z

Z = DEFAULT_Z  # acceptance half-width in standard errors (one value for every statistical check)
ROUNDING = 1e-10  # slack for float64 rounding of quadratic forms with H <= 100 and O(1) entries
# Property tests draw d >= 5: for d = 2, 3 the sign series behind b needs 1e4 - 4e5 terms (seconds per call).
small_dims = dimensions(5, 24)


def _system(H: int, d: int, seed: int, distribution: str = "uniform-cosine") -> tuple[np.ndarray, np.ndarray]:
    q, k = sample_heads(H, d, np.random.default_rng(seed), distribution)
    return kernel_matrix(q, k), target_kernel(q, k)


@pytest.mark.parametrize("distribution", DISTRIBUTIONS)
def test_sample_heads_shapes_and_cosines(distribution: str) -> None:
    n = 20000
    q, k = sample_heads(n, 6, np.random.default_rng(1), distribution)
    assert q.shape == k.shape == (n, 6)
    np.testing.assert_allclose(np.linalg.norm(q, axis=1), 1.0, atol=1e-14)
    np.testing.assert_allclose(np.linalg.norm(k, axis=1), 1.0, atol=1e-14)
    cosines = np.sum(q * k, axis=1)
    if distribution == "aligned":
        np.testing.assert_allclose(cosines, 1.0, atol=1e-14)
        return
    # uniform on [-1, 1]: mean 0, E[c^2] = 1/3; independent unit vectors in d = 6: mean 0, E[c^2] = 1/6.
    second = 1 / 3 if distribution == "uniform-cosine" else 1 / 6
    assert abs(cosines.mean()) <= Z * cosines.std(ddof=1) / math.sqrt(n)
    squares = cosines**2
    assert abs(squares.mean() - second) <= Z * squares.std(ddof=1) / math.sqrt(n)
    if distribution == "uniform-cosine":  # fraction in [-1, -0.5] is 1/4
        fraction = np.mean(cosines < -0.5)
        assert abs(fraction - 0.25) <= Z * math.sqrt(0.25 * 0.75 / n)


def test_kernel_matrix_matches_reference_kernel() -> None:
    q, k = sample_heads(1500, 7, np.random.default_rng(2))  # more than one row block of 1024
    np.testing.assert_allclose(kernel_matrix(q, k), head_kernel_matrix(q, k), rtol=0, atol=4e-16)


def test_nested_errors_match_direct_solves() -> None:
    """One Cholesky + CG extensions reproduce numpy.linalg.solve on every prefix (CG branch forced)."""
    C, b = _system(400, 8, 3)
    counts = np.array([1, 2, 5, 50, 100, 101, 250, 400])
    result = nested_optimal_errors(C, b, counts, direct_size=100)
    assert result.direct_size == 100
    assert np.all(result.cg_iterations[counts > 100] > 0)
    direct = [1.0 - b[:m] @ np.linalg.solve(C[:m, :m], b[:m]) for m in counts]
    np.testing.assert_allclose(result.errors, direct, rtol=1e-10, atol=0)
    same = prefix_errors(*sample_heads(400, 8, np.random.default_rng(3)), counts)
    np.testing.assert_allclose(same.errors, direct, rtol=1e-10, atol=0)


def test_singular_kernel_uses_pseudo_inverse() -> None:
    """Duplicated heads make C singular; the error equals that of the de-duplicated dictionary."""
    q, k = sample_heads(20, 5, np.random.default_rng(4))
    q2, k2 = np.vstack([q, q[:10]]), np.vstack([k, k[:10]])
    weights = optimal_output_weights(kernel_matrix(q2, k2), target_kernel(q2, k2))
    reference = optimal_output_weights(kernel_matrix(q, k), target_kernel(q, k))
    assert abs(weights.error - reference.error) <= 1e-9
    assert weights.error == pytest.approx(weight_error(kernel_matrix(q2, k2), target_kernel(q2, k2), weights.a))


@pytest.mark.parametrize("distribution", DISTRIBUTIONS)
def test_prediction_agrees_with_monte_carlo(distribution: str) -> None:
    """E(a) = a^T C a - 2 a^T b + 1 vs the reference evaluator on n = 20000 D_2 samples, within 4 s.e."""
    construction = construct_random_features(8, 24, np.random.default_rng(5), distribution)
    estimate = monte_carlo_error(
        construction.q, construction.k, construction.weights.a, 20000, np.random.default_rng(6)
    )
    assert estimate.contains(construction.predicted_error, Z), (estimate, construction.predicted_error)


def test_wrong_kernel_disagrees_with_monte_carlo() -> None:
    """Negative control: the linear kernel 1/2 + (1/2) q.q' k.k' (Grothendieck without arcsin) mispredicts E(a)."""
    q, k = sample_heads(64, 4, np.random.default_rng(7))
    b = target_kernel(q, k)
    wrong = 0.5 + 0.5 * (q @ q.T) * (k @ k.T)  # rank <= d^2 + 1 = 17 < H: least squares
    wrong_a = np.linalg.lstsq(wrong, b, rcond=None)[0]
    wrong_prediction = weight_error(wrong, b, wrong_a)
    estimate = monte_carlo_error(q, k, wrong_a, 20000, np.random.default_rng(8))
    assert not estimate.contains(wrong_prediction, Z), (estimate, wrong_prediction)
    assert estimate.contains(weight_error(kernel_matrix(q, k), b, wrong_a), Z)  # the right kernel predicts it


@settings(max_examples=20)
@given(seed=seeds, H=head_counts(48), d=small_dims, distribution=st.sampled_from(DISTRIBUTIONS))
def test_optimal_error_is_a_minimum_in_unit_interval(seed: int, H: int, d: int, distribution: str) -> None:
    C, b = _system(H, d, seed, distribution)
    weights = optimal_output_weights(C, b)
    assert -ROUNDING <= weights.error <= 1.0 + ROUNDING
    assert weight_error(C, b, np.zeros(H)) == pytest.approx(1.0)
    rng = np.random.default_rng(seed + 1)
    for scale in (1e-3, 1e-1, 1.0):
        perturbed = weights.a + scale * rng.standard_normal(H) * (np.linalg.norm(weights.a) + 1e-3)
        assert weights.error <= weight_error(C, b, perturbed) + ROUNDING


@settings(max_examples=10)
@given(seed=seeds, d=small_dims)
def test_adding_heads_never_increases_the_error(seed: int, d: int) -> None:
    C, b = _system(96, d, seed)
    counts = np.arange(1, 97)
    errors = nested_optimal_errors(C, b, counts, direct_size=40).errors
    assert np.all(np.diff(errors) <= ROUNDING), errors
    assert np.all((errors >= -ROUNDING) & (errors <= 1.0 + ROUNDING))


@settings(max_examples=4)
@given(seed=seeds, d=small_dims, H=st.integers(2, 40))
def test_constrained_error_decreases_in_budget_with_valid_dual(seed: int, d: int, H: int) -> None:
    C, b = _system(H, d, seed)
    free = optimal_output_weights(C, b)
    norm = float(np.linalg.norm(free.a))
    budgets = np.array([0.0, 0.1, 0.3, 0.9, 1.5]) * norm
    curve = budget_curve(C, b, budgets)
    tolerance = 1e-6  # interior-point (CLARABEL) accuracy on the primal
    assert np.all(np.diff(curve.primal) <= tolerance), curve.primal
    assert np.all(curve.dual <= curve.primal + ROUNDING), (curve.dual, curve.primal)
    assert curve.primal[0] == pytest.approx(1.0, abs=ROUNDING)
    assert abs(curve.primal[-1] - free.error) <= tolerance  # budget above ||C^{-1} b||: the constraint is slack
    assert curve.gap[-1] <= tolerance
    # any mu >= 0 gives a lower bound: check a few against the best primal value
    for mu in (0.0, 0.01, 1.0, 100.0):
        assert dual_bound(C, b, budgets[2], mu) <= curve.primal[2] + ROUNDING


def test_budget_solution_is_feasible_and_certified() -> None:
    C, b = _system(300, 16, 9)
    free = optimal_output_weights(C, b)
    solution = constrained_output_weights(C, b, 0.3 * float(np.linalg.norm(free.a)))
    assert np.linalg.norm(solution.a) <= solution.budget * (1 + 1e-12)
    assert solution.active
    assert solution.dual <= solution.primal + ROUNDING
    assert solution.gap <= 1e-6
    assert solution.primal > free.error + 1e-4  # the limit binds: strictly worse than unconstrained


def test_random_feature_curve_shape_and_monotonicity() -> None:
    curve = random_feature_curve([4, 8], [1, 4, 16, 64], 3, np.random.default_rng(10))
    assert curve.errors.shape == (2, 3, 4)
    assert np.all(np.diff(curve.errors, axis=2) <= ROUNDING)
    low, high = curve.spread()
    assert np.all(low <= curve.mean()) and np.all(curve.mean() <= high)


def test_weight_file_round_trip_and_evaluation(tmp_path) -> None:
    construction = construct_random_features(6, 12, np.random.default_rng(11))
    path = save_random_features(tmp_path / "rf.safetensors", construction, seed=11)
    loaded = load_weights(path)
    assert loaded.metadata["seed"] == "11"  # metadata is text on disk (README, "Weight files")
    assert loaded.metadata["construction"] == "random-features"
    assert loaded.metadata["r"] == 1 and loaded.metadata["H"] == 12 and loaded.metadata["N"] == 2
    assert loaded.metadata["task"] == "nearest" and loaded.metadata["distribution"] == "uniform-cosine"
    assert math.isinf(loaded.temperature)
    assert loaded.predicted_error == pytest.approx(construction.predicted_error, rel=1e-15)
    np.testing.assert_array_equal(loaded.tensors["V"][3], construction.weights.a[3] * np.eye(6))
    q, k = loaded.tensors["Q"][:, 0, :], loaded.tensors["K"][:, 0, :]
    a = loaded.tensors["V"][:, 0, 0]
    estimate = monte_carlo_error(q, k, a, 20000, np.random.default_rng(12))
    assert estimate.contains(loaded.predicted_error, Z)


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda: sample_heads(0, 4, np.random.default_rng(0)), "H"),
        (lambda: sample_heads(3, 1, np.random.default_rng(0)), "d"),
        (lambda: sample_heads(3, 4, np.random.default_rng(0), "gaussian"), "distribution"),
        (lambda: sample_heads(3, 4, 0), "rng"),
        (lambda: kernel_matrix(np.zeros((3, 4)), np.ones((3, 4))), "q"),
        (lambda: kernel_matrix(np.ones((3, 4)), np.ones((2, 4))), "k"),
        (lambda: optimal_output_weights(np.eye(3)[:2], np.ones(3)), "C"),
        (lambda: optimal_output_weights(np.eye(3), np.ones(2)), "b"),
        (lambda: weight_error(np.eye(3), np.ones(3), np.ones(4)), "a"),
        (lambda: nested_optimal_errors(np.eye(3), np.ones(3), [2, 1]), "counts"),
        (lambda: nested_optimal_errors(np.eye(3), np.ones(3), [1, 4]), "counts"),
        (lambda: nested_optimal_errors(np.eye(3), np.ones(3), [1], direct_size=0), "direct_size"),
        (lambda: constrained_output_weights(np.eye(3), np.ones(3), -1.0), "budget"),
        (lambda: constrained_output_weights(np.eye(3), np.ones(3), 1.0, solver="MOSEK"), "solver"),
        (lambda: budget_curve(np.eye(3), np.ones(3), [1.0, -2.0]), "budgets"),
        (lambda: dual_bound(np.eye(3), np.ones(3), 1.0, -0.5), "mu"),
        (lambda: random_feature_curve([1], [1, 2], 1, np.random.default_rng(0)), "dims"),
        (lambda: random_feature_curve([4], [2, 1], 1, np.random.default_rng(0)), "counts"),
        (lambda: random_feature_curve([4], [1, 2], 0, np.random.default_rng(0)), "trials"),
        (
            lambda: monte_carlo_error(np.ones((2, 3)), np.ones((2, 3)), np.ones(2), 1, np.random.default_rng(0)),
            "n_samples",
        ),
    ],
)
def test_bad_input_names_the_parameter(call, name: str) -> None:
    with pytest.raises(ValueError, match=name):
        call()
