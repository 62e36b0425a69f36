"""The N-token plurality vote + round robin: rank-1 heads, exact agreement with the vote it encodes, its simulator."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from constructions.tournament import build_tournament, tournament_weights
from tests.strategies import head_counts, seeds
from theory.majority_vote_error import majority_vote_error
from theory.multilayer import multilayer_forward
from theory.plurality_vote import plurality_vote_errors
from theory.sphere import sample_context
from theory.targets import nearest_neighbor


@settings(max_examples=15)
@given(N=st.integers(2, 6), H=head_counts(30), seed=seeds, keys=st.sampled_from(["orthonormal", "iid"]))
def test_hardmax_output_is_the_plurality_winner(N, H, seed, keys):
    d = 8
    rng = np.random.default_rng(seed)
    built = build_tournament(d, N, H, rng)
    X, y = sample_context(40, N, d, rng, keys=keys)
    q = built.directions
    picks = np.argmax((y @ q.T)[:, :, None] * np.einsum("hd,njd->nhj", q, X), axis=2)  # (n, H)
    counts = np.stack([np.count_nonzero(picks == j, axis=1) for j in range(N)], axis=1)  # (n, N)
    winner = np.argmax(counts, axis=1)  # lowest index on ties
    np.testing.assert_allclose(multilayer_forward(built.weights, X, y), X[np.arange(40), winner], atol=1e-12)


@given(N=st.integers(2, 7), H=head_counts(10), seed=seeds)
def test_every_head_has_rank_one(N, H, seed):
    built = build_tournament(5, N, H, np.random.default_rng(seed))
    assert built.weights.layer_heads == [H, N * (N - 1) // 2, N + 1]
    assert built.weights.p == 1 + 2 * N + 5
    for layer in built.weights.layers:
        for Q, K in zip(layer.Q, layer.K, strict=False):
            assert np.linalg.matrix_rank(Q.T @ K) == 1


def test_large_temperature_softmax_agrees_with_hardmax():
    rng = np.random.default_rng(4)
    built = build_tournament(6, 4, 15, rng)
    X, y = sample_context(200, 4, 6, rng)
    hard = multilayer_forward(built.weights, X, y)
    soft = multilayer_forward(built.weights, X, y, temperature=200.0)
    # Layer 1's soft votes round to the hard counts except for heads with tiny score gaps; compare on most samples.
    close = np.max(np.abs(hard - soft), axis=1) < 1e-3
    assert close.mean() > 0.9


def test_simulator_matches_the_exact_majority_vote_for_two_tokens():
    estimates = plurality_vote_errors(8, 2, [1, 9, 41], 20_000, np.random.default_rng(0))
    for H, estimate in estimates.items():
        assert estimate.contains(majority_vote_error(8, H)), (H, estimate, majority_vote_error(8, H))


def test_simulator_matches_the_evaluator_over_fresh_constructions():
    # Mean over 40 constructions x 500 samples through the evaluator vs the simulator (independent randomness).
    d, N, H = 8, 4, 21
    rng = np.random.default_rng(9)
    batch_means = []
    for _ in range(40):
        built = build_tournament(d, N, H, rng)
        X, y = sample_context(500, N, d, rng)
        err = np.sum((multilayer_forward(built.weights, X, y) - nearest_neighbor(X, y)) ** 2, axis=1)
        batch_means.append(err.mean())
    mean = float(np.mean(batch_means))
    stderr_evaluator = float(np.std(batch_means, ddof=1) / math.sqrt(40))
    sim = plurality_vote_errors(d, N, [H], 20_000, np.random.default_rng(10))[H]
    assert abs(mean - sim.mean) <= 4 * math.hypot(stderr_evaluator, sim.stderr), (mean, sim)


def test_invalid_arguments():
    with pytest.raises(ValueError, match="N must be"):
        tournament_weights(np.ones((2, 3)), 1)
    with pytest.raises(ValueError, match="heads must"):
        plurality_vote_errors(4, 2, [], 10, np.random.default_rng(0))
    with pytest.raises(ValueError, match="N must be"):
        plurality_vote_errors(4, 5, [3], 10, np.random.default_rng(0))
