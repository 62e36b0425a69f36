"""Tests of theory.targets against naive per-sample loops and the defining geometric properties."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.strategies import dimensions, seeds
from theory.sphere import sample_context, sample_iid_keys
from theory.targets import biased_nearest_neighbor, farthest_point, nearest_index, nearest_neighbor


@given(n=st.integers(1, 6), N=st.integers(1, 7), d=dimensions(2, 10), seed=seeds)
def test_nearest_neighbor_matches_a_loop(n: int, N: int, d: int, seed: int) -> None:
    X, y = sample_context(n, N, d, np.random.default_rng(seed), keys="iid")
    index = nearest_index(X, y)
    chosen = nearest_neighbor(X, y)
    for m in range(n):
        scores = [float(X[m, i] @ y[m]) for i in range(N)]
        best = max(range(N), key=lambda i: scores[i])
        assert index[m] == best
        np.testing.assert_array_equal(chosen[m], X[m, best])
        assert all(scores[best] >= s for s in scores)


@given(n=st.integers(1, 5), N=st.integers(1, 7), d=dimensions(2, 10), seed=seeds)
def test_farthest_point_matches_a_loop(n: int, N: int, d: int, seed: int) -> None:
    X = sample_iid_keys(n, N, d, np.random.default_rng(seed))
    target = farthest_point(X)
    assert target.shape == (n, N, d)
    for m in range(n):
        for i in range(N):
            scores = [float(X[m, i] @ X[m, j]) for j in range(N)]
            worst = min(range(N), key=lambda j: scores[j])
            np.testing.assert_array_equal(target[m, i], X[m, worst])
            if N > 1:
                assert worst != i, "a token is never its own farthest point when N > 1"


@given(n=st.integers(1, 5), N=st.integers(1, 6), d=dimensions(2, 8), seed=seeds)
def test_farthest_point_is_the_nearest_neighbor_of_the_antipode(n: int, N: int, d: int, seed: int) -> None:
    X = sample_iid_keys(n, N, d, np.random.default_rng(seed))
    target = farthest_point(X)
    for i in range(N):
        np.testing.assert_array_equal(target[:, i], nearest_neighbor(X, -X[:, i]))


def test_farthest_point_of_a_single_token_is_itself() -> None:
    X = sample_iid_keys(4, 1, 3, np.random.default_rng(0))
    np.testing.assert_array_equal(farthest_point(X), X)


def test_farthest_point_on_a_handmade_example() -> None:
    e = np.eye(3)
    X = np.stack([e[0], e[1], -e[0]])[None]  # (1, 3, 3): e0's farthest is -e0 and vice versa; e1 ties -> lowest index
    np.testing.assert_array_equal(farthest_point(X)[0], np.stack([-e[0], e[0], e[0]]))


@given(n=st.integers(1, 8), d=dimensions(2, 10), seed=seeds)
def test_biased_nearest_neighbor(n: int, d: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    X, y = sample_context(n, 2, d, rng)
    np.testing.assert_array_equal(biased_nearest_neighbor(X, y, 0.0), nearest_neighbor(X, y))
    np.testing.assert_array_equal(biased_nearest_neighbor(X, y, 3.0), X[:, 1])  # |<x1 - x2, y>| <= 2 < 3
    np.testing.assert_array_equal(biased_nearest_neighbor(X, y, -3.0), X[:, 0])
    bias = rng.uniform(-1.5, 1.5, size=n)
    chosen = biased_nearest_neighbor(X, y, bias)
    for m in range(n):
        margin = float((X[m, 0] - X[m, 1]) @ y[m])
        np.testing.assert_array_equal(chosen[m], X[m, 0] if margin > bias[m] else X[m, 1])


@pytest.mark.parametrize(
    ("call", "parameter"),
    [
        (lambda: nearest_index(np.zeros((2, 3)), np.zeros((2, 3))), "X"),
        (lambda: nearest_index(np.zeros((2, 3, 4)), np.zeros((2, 3))), "y"),
        (lambda: nearest_neighbor(np.zeros((2, 3, 4)), np.zeros((3, 4))), "y"),
        (lambda: nearest_index(np.zeros((2, 0, 4)), np.zeros((2, 4))), "X"),
        (lambda: nearest_neighbor(np.full((1, 2, 2), np.nan), np.zeros((1, 2))), "X"),
        (lambda: farthest_point(np.zeros((2, 4))), "X"),
        (lambda: biased_nearest_neighbor(np.zeros((2, 3, 4)), np.zeros((2, 4)), 0.0), "X"),
        (lambda: biased_nearest_neighbor(np.zeros((2, 2, 4)), np.zeros((2, 4)), np.zeros(3)), "bias"),
        (lambda: biased_nearest_neighbor(np.zeros((2, 2, 4)), np.zeros((2, 4)), np.nan), "bias"),
    ],
)
def test_bad_arguments_raise_value_error_naming_the_parameter(call, parameter: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValueError, match=rf"^{parameter} must"):
        call()
