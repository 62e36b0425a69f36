"""Tests of experiments/tasks.py: samplers, torch targets against theory.targets (numpy), errors and ICL baselines."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from experiments.config import Curriculum
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


# ------------------------------------------------------------------------------------------------ the icl curriculum
def _curriculum(d: int = 6, N: int = 9, dims: int = 2, points: int = 3, interval: int = 10) -> Curriculum:
    return Curriculum(d=d, N=N, dims=dims, points=points, dims_increment=1, points_increment=2, interval=interval)


def test_curriculum_stages_follow_the_schedule() -> None:
    """dims 2 -> 6 (+1) and points 3 -> 9 (+2) every 10 steps: stages (2, 3), (3, 5), (4, 7), (5, 9), (6, 9)."""
    curriculum = _curriculum()
    task = make_task("icl", 6, 9, curriculum=curriculum)
    assert isinstance(task, LinearRegressionTask) and task.full_task_from == curriculum.end_step == 40
    expected = {0: (2, 3), 9: (2, 3), 10: (3, 5), 25: (4, 7), 39: (5, 9)}
    for step, (dims, points) in expected.items():
        stage = task.at_step(step)
        assert isinstance(stage, LinearRegressionTask) and stage is not task
        assert (stage.active_dims, stage.N, stage.d, stage.sequence_length) == (dims, points, 6, 2 * points)
        assert stage.at_step(0) is stage and stage.full_task_from == 0  # a stage has no curriculum of its own
    assert task.at_step(40) is task and task.at_step(10**9) is task
    assert task.at_step(3) is task.at_step(7)  # one object per stage
    plain = make_task("icl", 6, 9)
    assert plain.at_step(0) is plain and plain.full_task_from == 0
    farthest = make_task("farthest", 4, 3)
    assert farthest.at_step(5) is farthest and farthest.full_task_from == 0


def test_curriculum_stage_batches_truncate_dimensions_and_pairs() -> None:
    stage = make_task("icl", 6, 9, curriculum=_curriculum()).at_step(25)  # 4 active dimensions, 7 pairs
    batch = stage.sample(32, gen(0))
    assert batch.tokens.shape == (32, 14, 6) and batch.context.shape == (32, 7, 6) and batch.target.shape == (32, 7)
    X, w = batch.context.numpy(), batch.aux.numpy()  # type: ignore[union-attr]
    assert np.all(X[:, :, 4:] == 0.0) and np.all(w[:, 4:] == 0.0)
    assert np.all(X[:, :, :4] != 0.0) and np.all(w[:, :4] != 0.0)
    np.testing.assert_allclose(batch.target.numpy(), np.einsum("bnd,bd->bn", X, w), rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(batch.tokens[:, 0::2].numpy(), X)
    np.testing.assert_array_equal(batch.tokens[:, 1::2, 0].numpy(), batch.target.numpy())


def test_curriculum_leaves_the_full_task_and_evaluation_unchanged() -> None:
    """sample() of a task with a curriculum, and the full stage, draw exactly the batches of a task without one."""
    with_curriculum = make_task("icl", 6, 9, curriculum=_curriculum())
    plain = make_task("icl", 6, 9)
    for batch in (with_curriculum.sample(16, gen(4)), with_curriculum.at_step(40).sample(16, gen(4))):
        reference = plain.sample(16, gen(4))
        assert torch.equal(batch.tokens, reference.tokens) and torch.equal(batch.aux, reference.aux)  # type: ignore


def test_curriculum_stage_errors_match_closed_forms() -> None:
    """At a stage with a active dimensions (x, w ~ N(0, I_a) padded with zeros), error = squared error / d:

    zero predictor E<w, x>^2 / d = a / d; minimum-norm least squares (error (a - i) / a of E<w, x>^2 at i < a
    examples, 0 from a on): (a - i) / d. n = 20 000 sequences; acceptance within Z = 4 standard errors per position.
    """
    d, n = 6, 20_000
    stage = make_task("icl", d, 9, curriculum=_curriculum()).at_step(25)  # a = 4 active dimensions, 7 pairs
    assert isinstance(stage, LinearRegressionTask)
    a = stage.active_dims
    zero_mean, zero_se = _position_errors(ZeroBaseline(), stage, n, 7)
    assert np.all(np.abs(zero_mean - a / d) <= Z * zero_se), (zero_mean, a / d, zero_se)
    # Negative control: the same test rejects the full task's zero-predictor error, 1.
    assert np.all(np.abs(zero_mean - 1.0) > Z * zero_se)
    mean, se = _position_errors(LeastSquaresBaseline(), stage, n, 8)
    i = np.arange(stage.N)
    assert np.all(np.abs(mean[:a] - (a - i[:a]) / d) <= Z * se[:a]), (mean, se)
    assert np.all(mean[a:] < 1e-12)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"name": "farthest", "d": 6, "N": 9, "curriculum": _curriculum()}, "curriculum must be None unless task"),
        (
            {"name": "icl", "d": 6, "N": 8, "curriculum": _curriculum()},
            "curriculum must end at this task's d = 6 and N",
        ),
        ({"name": "icl", "d": 6, "N": 9, "curriculum": (2, 3)}, "curriculum must be a Curriculum or None"),
    ],
)
def test_bad_curriculum_arguments(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        make_task(**kwargs)


def test_bad_active_dims_and_step() -> None:
    with pytest.raises(ValueError, match="active_dims must be an integer in \\[1, 6\\]"):
        LinearRegressionTask(6, 4, active_dims=7)
    with pytest.raises(ValueError, match="active_dims must be an integer >= 1"):
        LinearRegressionTask(6, 4, active_dims=0)
    with pytest.raises(ValueError, match="step must be an integer >= 0"):
        make_task("icl", 6, 9, curriculum=_curriculum()).at_step(-1)
