"""Tests of the reference attention evaluator (theory.attention).

It is compared with a naive per-sample, per-head Python loop, checked for permutation invariance in the keys, for the
hardmax limit with an explicit score-gap bound, for even splitting of exact ties, and on the paper's Fact 1 head.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.strategies import attention_shapes, seeds, temperatures
from theory.attention import attention_weights, multihead_attention, self_attention
from theory.monte_carlo import estimate_error
from theory.sphere import sample_context
from theory.targets import nearest_neighbor


def _random_problem(shape: tuple[int, int, int, int, int, int], seed: int, with_bias: bool) -> dict[str, np.ndarray]:
    """Gaussian weights (scaled so scores are O(1)) and i.i.d. uniform contexts of the given sizes."""
    n, H, r, d, N, d_out = shape
    rng = np.random.default_rng(seed)
    X, y = sample_context(n, N, d, rng, keys="iid")
    problem = {
        "Q": rng.standard_normal((H, r, d)),
        "K": rng.standard_normal((H, r, d)) / math.sqrt(r),
        "V": rng.standard_normal((H, d_out, d)),
        "X": X,
        "y": y,
    }
    if with_bias:
        problem["score_bias"] = rng.standard_normal((H, N))
    return problem


def _naive_attention(problem: dict[str, np.ndarray], temperature: float) -> np.ndarray:
    """Loop over samples and heads with Python floats: scores, a max-shifted softmax (or argmax set), weighted sum."""
    Q, K, V, X, y = (problem[key] for key in ("Q", "K", "V", "X", "y"))
    bias = problem.get("score_bias")
    n, N, _ = X.shape
    H, r, d = Q.shape
    out = np.zeros((n, V.shape[1]))
    for m in range(n):
        for h in range(H):
            qy = [sum(Q[h, a, c] * y[m, c] for c in range(d)) for a in range(r)]
            scores = []
            for i in range(N):
                kx = [sum(K[h, a, c] * X[m, i, c] for c in range(d)) for a in range(r)]
                score = sum(qy[a] * kx[a] for a in range(r))
                scores.append(score + (0.0 if bias is None else float(bias[h, i])))
            top = max(scores)
            if math.isinf(temperature):
                raw = [1.0 if s == top else 0.0 for s in scores]
            else:
                raw = [math.exp(temperature * (s - top)) for s in scores]
            total = sum(raw)
            for i in range(N):
                out[m] += (raw[i] / total) * (V[h] @ X[m, i])
    return out


@given(
    shape=attention_shapes(),
    seed=seeds,
    temperature=st.one_of(temperatures(0.1, 10.0), st.just(math.inf)),
    with_bias=st.booleans(),
)
def test_matches_naive_loop(
    shape: tuple[int, int, int, int, int, int], seed: int, temperature: float, with_bias: bool
) -> None:
    problem = _random_problem(shape, seed, with_bias)
    fast = multihead_attention(**problem, temperature=temperature)
    assert fast.shape == (shape[0], shape[5])
    np.testing.assert_allclose(fast, _naive_attention(problem, temperature), rtol=1e-12, atol=1e-12)


@given(shape=attention_shapes(), seed=seeds, temperature=st.one_of(temperatures(), st.just(math.inf)))
def test_weights_are_probabilities(shape: tuple[int, int, int, int, int, int], seed: int, temperature: float) -> None:
    problem = _random_problem(shape, seed, with_bias=True)
    del problem["V"]
    weights = attention_weights(**problem, temperature=temperature)
    assert weights.shape == (shape[0], shape[1], shape[4])
    assert np.all(weights >= 0.0)
    np.testing.assert_allclose(weights.sum(axis=2), 1.0, rtol=0, atol=1e-14)


@given(
    shape=attention_shapes(),
    seed=seeds,
    temperature=st.one_of(temperatures(0.1, 100.0), st.just(math.inf)),
    with_bias=st.booleans(),
    data=st.data(),
)
def test_permuting_the_keys_leaves_the_output_unchanged(
    shape: tuple[int, int, int, int, int, int], seed: int, temperature: float, with_bias: bool, data: st.DataObject
) -> None:
    problem = _random_problem(shape, seed, with_bias)
    permutation = np.array(data.draw(st.permutations(range(shape[4])), label="permutation"))
    permuted = dict(problem)
    permuted["X"] = problem["X"][:, permutation]
    if with_bias:
        permuted["score_bias"] = problem["score_bias"][:, permutation]
    np.testing.assert_allclose(
        multihead_attention(**permuted, temperature=temperature),
        multihead_attention(**problem, temperature=temperature),
        rtol=1e-12,
        atol=1e-12,
    )
    weights = {key: value for key, value in problem.items() if key != "V"}
    weights_permuted = {key: value for key, value in permuted.items() if key != "V"}
    np.testing.assert_allclose(
        attention_weights(**weights_permuted, temperature=temperature),
        attention_weights(**weights, temperature=temperature)[:, :, permutation],
        rtol=1e-12,
        atol=1e-14,
    )


@given(shape=attention_shapes(), seed=seeds)
def test_softmax_converges_to_hardmax_within_the_score_gap_bound(
    shape: tuple[int, int, int, int, int, int], seed: int
) -> None:
    """||f_T - f_inf|| <= sum_h ||V_h||_2 max_i ||x_i|| 2 (N - 1) exp(-T gap_h).

    Derivation: with gap_h the distance between the top score and the runner-up, the softmax gives the maximiser
    weight 1 / (1 + sum_{i != max} e^{-T (top - s_i)}) >= 1 - (N - 1) e^{-T gap_h}, and
    sum_i |w_i - w*_i| = 2 (1 - w_max).
    """
    problem = _random_problem(shape, seed, with_bias=True)
    n, H, _, _, N, _ = shape
    hard = multihead_attention(**problem, temperature=math.inf)
    scores = np.einsum("hrd,nd,hre,nie->nhi", problem["Q"], problem["y"], problem["K"], problem["X"])  # (n, H, N)
    scores = scores + problem["score_bias"][None]  # (n, H, N)
    ordered = np.sort(scores, axis=2)  # (n, H, N)
    gap = ordered[:, :, -1] - ordered[:, :, -2] if N > 1 else np.full((n, H), np.inf)  # (n, H)
    operator_norms = np.linalg.norm(problem["V"], ord=2, axis=(1, 2))  # (H,)
    previous = np.inf
    for temperature in (1.0, 10.0, 100.0, 1000.0):
        soft = multihead_attention(**problem, temperature=temperature)
        bound = np.sum(operator_norms[None] * 2 * (N - 1) * np.exp(-temperature * gap), axis=1)  # (n,)
        deviation = np.linalg.norm(soft - hard, axis=1)  # (n,)
        assert np.all(deviation <= bound + 1e-12), f"T = {temperature}: {deviation} > {bound}"
        assert np.max(bound) <= previous
        previous = np.max(bound)


def test_hardmax_splits_exact_ties_evenly() -> None:
    rng = np.random.default_rng(3)
    d = 4
    y = rng.standard_normal((1, d))
    y /= np.linalg.norm(y)
    other = np.linalg.qr(np.column_stack([y[0], rng.standard_normal((d, 1))]))[0][:, 1]  # unit, orthogonal to y
    X = np.stack([y[0], other, y[0]])[None]  # (1, 3, d): keys 0 and 2 tie for the maximum
    eye = np.eye(d)[None]  # (1, d, d)
    np.testing.assert_allclose(attention_weights(eye, eye, X, y), [[[0.5, 0.0, 0.5]]], rtol=0, atol=0)
    np.testing.assert_allclose(multihead_attention(eye, eye, eye, X, y), y, rtol=0, atol=1e-15)
    # Zero query/key maps: every score ties at 0, so every temperature gives the uniform average.
    zero = np.zeros((2, 1, d))
    for temperature in (0.5, math.inf):
        np.testing.assert_array_equal(
            attention_weights(zero, zero, X, y, temperature=temperature), np.full((1, 2, 3), 1 / 3)
        )
    # Ties created by the score bias.
    bias = np.array([[1.0, 1.0, 0.0], [0.0, 2.0, 2.0]])
    np.testing.assert_array_equal(
        attention_weights(zero, zero, X, y, score_bias=bias), np.array([[[0.5, 0.5, 0.0], [0.0, 0.5, 0.5]]])
    )


def test_huge_temperatures_do_not_overflow() -> None:
    rng = np.random.default_rng(4)
    X, y = sample_context(50, 4, 6, rng)
    eye = np.eye(6)[None]
    for temperature in (1e6, 1e300):
        weights = attention_weights(eye, eye, X, y, temperature=temperature)
        assert np.all(np.isfinite(weights))
        np.testing.assert_array_equal(weights, attention_weights(eye, eye, X, y))


def test_full_rank_head_error_decreases_with_lambda() -> None:
    """Fact 1 head Q = lambda I, K = V = I on D_2 (d = 8): error strictly decreasing in lambda, 0 at hardmax.

    Every lambda sees the same 20000 samples (same seed), and the per-sample error 2 sigmoid(-sqrt2 lambda |t|)^2 is
    decreasing in lambda, so the comparison is exact, not statistical.
    """
    d = 8
    eye = np.eye(d)[None]  # (1, d, d)

    def sampler(m: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        return sample_context(m, 2, d, rng)

    errors = []
    for lam in (1.0, 3.0, 10.0, 30.0, 100.0):
        model = lambda X, y, lam=lam: multihead_attention(lam * eye, eye, eye, X, y, temperature=1.0)  # noqa: E731
        errors.append(estimate_error(model, nearest_neighbor, sampler, 20_000, np.random.default_rng(9)).mean)
    assert all(a > b for a, b in zip(errors, errors[1:], strict=False)), errors
    assert errors[0] < 0.5  # better than the best query-blind map (x_1 + x_2) / 2
    hard = estimate_error(
        lambda X, y: multihead_attention(eye, eye, eye, X, y),
        nearest_neighbor,
        sampler,
        20_000,
        np.random.default_rng(9),
    )
    assert hard.mean == 0.0


@given(
    shape=attention_shapes(max_n=3, max_tokens=4), seed=seeds, temperature=st.one_of(temperatures(), st.just(math.inf))
)
def test_self_attention_is_multihead_attention_per_token(
    shape: tuple[int, int, int, int, int, int], seed: int, temperature: float
) -> None:
    problem = _random_problem(shape, seed, with_bias=False)
    Q, K, V, X = problem["Q"], problem["K"], problem["V"], problem["X"]
    out = self_attention(Q, K, V, X, temperature=temperature)
    assert out.shape == (shape[0], shape[4], shape[5])
    for j in range(shape[4]):
        np.testing.assert_allclose(
            out[:, j], multihead_attention(Q, K, V, X, X[:, j], temperature=temperature), rtol=1e-12, atol=1e-12
        )


def _valid() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    X, y = sample_context(3, 5, 8, rng)
    return {
        "Q": rng.standard_normal((4, 2, 8)),
        "K": rng.standard_normal((4, 2, 8)),
        "V": rng.standard_normal((4, 8, 8)),
        "X": X,
        "y": y,
    }


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"K": np.zeros((4, 3, 8))}, r"^K must have shape \(H, r, d\) = \(4, 2, 8\)"),
        ({"Q": np.zeros((2, 8))}, r"^Q must have shape \(H, r, d\)"),
        ({"V": np.zeros((3, 8, 8))}, r"^V must have shape \(H, d_out, d\) = \(4, d_out, 8\)"),
        ({"V": np.zeros((4, 8, 7))}, r"^V must have shape"),
        ({"X": np.zeros((3, 5, 7))}, r"^X must have shape \(n, N, d\)"),
        ({"X": np.zeros((3, 0, 8))}, r"^X must have shape \(n, N, d\) with N >= 1"),
        ({"y": np.zeros((2, 8))}, r"^y must have shape \(n, d\) = \(3, 8\)"),
        ({"score_bias": np.zeros((4, 4))}, r"^score_bias must have shape \(H, N\) = \(4, 5\)"),
        ({"temperature": 0.0}, r"^temperature must"),
        ({"temperature": -1.0}, r"^temperature must"),
        ({"temperature": math.nan}, r"^temperature must"),
        ({"temperature": -math.inf}, r"^temperature must"),
        ({"Q": np.full((4, 2, 8), np.nan)}, r"^Q must contain only finite values"),
    ],
)
def test_bad_arguments_raise_value_error_naming_the_parameter(changes: dict[str, object], message: str) -> None:
    arguments = {**_valid(), **changes}
    with pytest.raises(ValueError, match=message):
        multihead_attention(**arguments)  # type: ignore[arg-type]


def test_self_attention_bad_arguments() -> None:
    valid = _valid()
    with pytest.raises(ValueError, match=r"^X must have shape"):
        self_attention(valid["Q"], valid["K"], valid["V"], np.zeros((3, 8)))
    with pytest.raises(ValueError, match=r"^temperature must"):
        self_attention(valid["Q"], valid["K"], valid["V"], valid["X"], temperature=0)
