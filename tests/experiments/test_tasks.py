"""Tests of experiments/tasks.py: samplers, torch targets against theory.targets (numpy), errors and ICL baselines."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from experiments.tasks import (
    AveragingBaseline,
    Batch,
    LeastSquaresBaseline,
    LinearRegressionTask,
    ZeroBaseline,
    estimate_task_error,
    make_task,
)
from tests.strategies import dimensions
from theory import targets
from theory.biased_target import biased_target
from theory.monte_carlo import DEFAULT_Z

Z = DEFAULT_Z  # acceptance half-width in standard errors (one value for every statistical check)


def gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


@given(
    d=dimensions(2, 12),
    N=st.integers(1, 12),
    seed=st.integers(0, 2**31 - 1),
    keys=st.sampled_from(["iid", "orthonormal"]),
)
def test_nearest_target_matches_theory(d: int, N: int, seed: int, keys: str) -> None:
    if keys == "orthonormal" and N > d:
        N = d
    task = make_task("nearest", d, N, keys)
    batch = task.sample(64, gen(seed))
    X, y = batch.context.numpy(), batch.query.numpy()  # type: ignore[union-attr]
    np.testing.assert_array_equal(batch.target.numpy(), targets.nearest_neighbor(X, y))
    assert batch.tokens.shape == (64, N + 1, d)
    np.testing.assert_array_equal(batch.tokens[:, -1].numpy(), y)
    np.testing.assert_allclose(np.linalg.norm(X, axis=-1), 1.0, atol=1e-12)
    np.testing.assert_allclose(np.linalg.norm(y, axis=-1), 1.0, atol=1e-12)


@given(d=dimensions(2, 12), N=st.integers(1, 12), seed=st.integers(0, 2**31 - 1))
def test_farthest_target_matches_theory(d: int, N: int, seed: int) -> None:
    batch = make_task("farthest", d, N).sample(64, gen(seed))
    np.testing.assert_array_equal(batch.target.numpy(), targets.farthest_point(batch.context.numpy()))
    assert batch.tokens.shape == (64, N, d)


def test_orthonormal_keys_are_orthonormal_and_isotropic() -> None:
    d, N, n = 8, 5, 20000
    X = make_task("nearest", d, N, "orthonormal").sample(n, gen(3)).context.numpy()  # (n, N, d)
    gram = np.einsum("nid,njd->nij", X, X)  # (n, N, N)
    np.testing.assert_allclose(gram, np.broadcast_to(np.eye(N), gram.shape), atol=1e-12)
    # Haar: each coordinate squared has mean 1/d; Var(x_11^2) = 2 (d - 1) / (d^2 (d + 2)) for a uniform unit vector.
    values = X[:, 0, 0] ** 2
    stderr = math.sqrt(2 * (d - 1) / (d**2 * (d + 2)) / n)
    assert abs(values.mean() - 1 / d) <= Z * stderr, (values.mean(), 1 / d, stderr)


def test_same_generator_state_gives_same_batch_and_state_advances() -> None:
    task = make_task("farthest", 6, 4)
    g1, g2 = gen(11), gen(11)
    a, b = task.sample(8, g1), task.sample(8, g2)
    assert torch.equal(a.tokens, b.tokens)
    c = task.sample(8, g1)
    assert not torch.equal(a.tokens, c.tokens)


def test_icl_layout_and_labels() -> None:
    d, N = 5, 7
    task = make_task("icl", d, N)
    batch = task.sample(16, gen(0))
    assert task.causal and task.sequence_length == 2 * N
    assert batch.tokens.shape == (16, 2 * N, d)
    X, w = batch.context.numpy(), batch.aux.numpy()  # type: ignore[union-attr]
    np.testing.assert_allclose(batch.target.numpy(), np.einsum("bnd,bd->bn", X, w), rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(batch.tokens[:, 0::2].numpy(), X)
    np.testing.assert_array_equal(batch.tokens[:, 1::2, 0].numpy(), batch.target.numpy())
    assert np.all(batch.tokens[:, 1::2, 1:].numpy() == 0.0)
    # Read-out takes the first coordinate at the x positions.
    outputs = torch.arange(16 * 2 * N * d, dtype=torch.float64).reshape(16, 2 * N, d)
    assert torch.equal(task.readout(outputs), outputs[:, 0::2, 0])


def _position_errors(predictor, task: LinearRegressionTask, n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    batch = task.sample(n, gen(seed))
    errors = task.error_by_position(predictor(batch), batch.target).numpy()  # (n, N)
    return errors.mean(axis=0), errors.std(axis=0, ddof=1) / math.sqrt(n)


def test_icl_baselines_match_closed_forms() -> None:
    """Independent closed forms (x, w ~ N(0, I_d)), error = squared error / d at i examples:

    zero predictor: E<w, x>^2 / d = 1; averaging: w_hat = (1/i) sum_j y_j x_j has E|w_hat - w|^2 = d (d + 1) / i,
    so error (d + 1) / i; minimum-norm least squares: w projected on the span of i < d Gaussian vectors, error
    (d - i) / d, and 0 once i >= d.
    """
    d, N, n = 4, 9, 20000
    task = make_task("icl", d, N)
    assert isinstance(task, LinearRegressionTask)
    mean, se = _position_errors(ZeroBaseline(), task, n, 1)
    assert np.all(np.abs(mean - 1.0) <= Z * se), (mean, se)
    i = np.arange(N)
    mean, se = _position_errors(AveragingBaseline(), task, n, 2)
    expected = (d + 1) / i[1:]
    assert abs(mean[0] - 1.0) <= Z * se[0]
    assert np.all(np.abs(mean[1:] - expected) <= Z * se[1:]), (mean, expected, se)
    mean, se = _position_errors(LeastSquaresBaseline(), task, n, 3)
    expected = np.where(i < d, (d - i) / d, 0.0)
    assert np.all(np.abs(mean[:d] - expected[:d]) <= Z * se[:d]), (mean, expected, se)
    assert np.all(mean[d:] < 1e-12)


def test_error_conventions() -> None:
    task = make_task("farthest", 3, 2)
    batch = task.sample(4, gen(0))
    zero = ZeroBaseline()(batch)
    np.testing.assert_allclose(task.error(zero, batch.target).numpy(), 1.0, atol=1e-12)  # unit targets
    near = make_task("nearest", 3, 2, "iid")
    b = near.sample(4, gen(0))
    assert near.readout(b.tokens).shape == (4, 3)
    np.testing.assert_allclose(near.error(b.target, b.target).numpy(), 0.0)


def test_estimate_task_error_of_zero_predictor() -> None:
    task = make_task("icl", 3, 4)
    estimate = estimate_task_error(ZeroBaseline(), task, 4000, gen(5), batch_size=1000)
    assert estimate.n_samples == 4000
    assert estimate.contains(1.0), estimate


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"name": "bogus", "d": 4, "N": 2}, "task must be one of"),
        ({"name": "nearest", "d": 4, "N": 5, "keys": "orthonormal"}, "N must be <= d"),
        ({"name": "nearest", "d": 1, "N": 2}, "d must be"),
        ({"name": "farthest", "d": 4, "N": 0}, "N must be"),
        ({"name": "nearest", "d": 4, "N": 2, "keys": "gaussian"}, "keys must be one of"),
    ],
)
def test_bad_task_arguments(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        make_task(**kwargs)


def test_bad_generator_and_batch_size() -> None:
    task = make_task("farthest", 4, 2)
    with pytest.raises(ValueError, match="generator must be a torch.Generator"):
        task.sample(2, np.random.default_rng(0))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="batch_size"):
        task.sample(0, gen(0))


def test_batch_to_casts() -> None:
    batch = make_task("nearest", 4, 2, "iid").sample(3, gen(0)).to("cpu")
    assert isinstance(batch, Batch) and batch.tokens.dtype == torch.float32 and batch.query is not None


def test_biased_task_wraps_theory_target() -> None:
    task = make_task("biased", 6, 2)
    batch = task.sample(32, gen(0))
    expected = biased_target(batch.context.numpy(), batch.query.numpy())  # type: ignore[union-attr]
    np.testing.assert_allclose(batch.target.numpy(), expected, rtol=0, atol=0)
