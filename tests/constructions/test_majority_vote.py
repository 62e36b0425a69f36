"""Theorem 5's majority vote: rank-1 heads, the layers do what the derivation says, the exact error and its limits."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.integrate import quad

from constructions.majority_vote import PREDICTION_SCOPE, build_majority_vote, majority_vote_weights
from constructions.multilayer_layout import multilayer_tensors
from constructions.weights_io import load_weights, save_weights
from tests.strategies import dimensions, head_counts, seeds
from theory.majority_vote_error import (
    head_success_probability,
    majority_vote_asymptote,
    majority_vote_error,
    majority_vote_heads,
)
from theory.monte_carlo import estimate_mean
from theory.multilayer import multilayer_forward, multilayer_streams
from theory.sphere import coordinate_density, sample_context, sample_sphere
from theory.targets import nearest_neighbor


@given(d=dimensions(2, 24), H=head_counts(40), seed=seeds)
def test_every_head_has_rank_one(d, H, seed):
    built = build_majority_vote(d, H, np.random.default_rng(seed), predict=False)
    assert built.weights.layer_heads == [H, 1] and built.weights.rank == 1
    for layer in built.weights.layers:
        for Q, K in zip(layer.Q, layer.K, strict=False):
            assert np.linalg.matrix_rank(Q.T @ K) == 1


@settings(max_examples=20)
@given(d=dimensions(2, 20), H=head_counts(15), seed=seeds)
def test_hardmax_layers_implement_the_vote(d, H, seed):
    """Layer 1 leaves the tally #(x_1 votes) - #(x_2 votes) in the scratch coordinate; layer 2 copies the winner."""
    rng = np.random.default_rng(seed)
    built = build_majority_vote(d, H, rng, predict=False)
    X, y = sample_context(50, 2, d, rng)
    q = built.directions
    votes = np.sign((y @ q.T) * ((X[:, 0] - X[:, 1]) @ q.T))  # (n, H); +1 = head picks x_1
    tally = votes.sum(axis=1)  # (n,)
    query, _ = multilayer_streams(built.weights, X, y)
    np.testing.assert_array_equal(query[:, d], tally)  # the pos coordinate, after both layers (layer 2 leaves it)
    want = np.where(tally[:, None] > 0, X[:, 0], np.where(tally[:, None] < 0, X[:, 1], (X[:, 0] + X[:, 1]) / 2))
    np.testing.assert_allclose(multilayer_forward(built.weights, X, y), want, atol=1e-14)


@settings(max_examples=10)
@given(d=dimensions(2, 12), H=head_counts(9), seed=seeds, T=st.floats(0.5, 50.0))
def test_softmax_tally_is_the_sum_of_soft_votes(d, H, seed, T):
    rng = np.random.default_rng(seed)
    built = build_majority_vote(d, H, rng, T, predict=False)
    X, y = sample_context(20, 2, d, rng)
    q = built.directions
    a = (y @ q.T) * ((X[:, 0] - X[:, 1]) @ q.T)  # (n, H)
    tally = np.tanh(T * a / 2).sum(axis=1)  # (n,) sum of w_h1 - w_h2
    query, _ = multilayer_streams(built.weights, X, y, temperature=T)
    np.testing.assert_allclose(query[:, d], tally, atol=1e-12)
    w1 = 1 / (1 + np.exp(-2 * T * tally))  # layer 2: scores +T tally, -T tally
    np.testing.assert_allclose(
        multilayer_forward(built.weights, X, y, temperature=T),
        w1[:, None] * X[:, 0] + (1 - w1[:, None]) * X[:, 1],
        atol=1e-12,
    )


def test_without_codes_the_output_is_the_average():
    rng = np.random.default_rng(1)
    weights = majority_vote_weights(rng.standard_normal((7, 5)), positional_codes=False)
    X, y = sample_context(30, 2, 5, rng)
    np.testing.assert_allclose(multilayer_forward(weights, X, y), X.mean(axis=1), atol=1e-15)


def test_single_head_error_matches_independent_quadrature():
    # H = 1: error = 2 E[1 - p(t)], by scipy.integrate.quad over t with the coordinate density; d = 3 gives 2 / pi.
    assert majority_vote_error(3, 1) == pytest.approx(2 / math.pi, abs=1e-12)
    for d in (2, 5, 16, 64):
        want = quad(lambda t, d=d: 2 * (1 - head_success_probability(t)) * coordinate_density(t, d), -1, 1, limit=200)
        assert majority_vote_error(d, 1) == pytest.approx(want[0], abs=1e-8)

        # H = 2: a tie (probability 2 p (1 - p)) costs 1/2, two wrong votes cost 2.
        def two(t, d=d):
            p = head_success_probability(t)
            return (2 * (1 - p) ** 2 + 0.5 * 2 * p * (1 - p)) * coordinate_density(t, d)

        assert majority_vote_error(d, 2) == pytest.approx(quad(two, -1, 1, limit=200)[0], abs=1e-8)


@given(d=dimensions(2, 300), j=st.integers(0, 3000))
def test_hardmax_prediction_in_range_and_decreasing_in_odd_heads(d, j):
    H = 2 * j + 1
    now, later = majority_vote_error(d, H), majority_vote_error(d, H + 2)
    assert 0 <= later < now <= 2


def test_asymptote_constant_tends_to_one():
    # refined limit sqrt(2 pi) c_d / sqrt(H) is reached as H grows; sqrt(d / H) is its large-d limit
    for d in (8, 32):
        ratios = [
            majority_vote_error(d, H) / majority_vote_asymptote(d, H, refined=True) for H in (10**3 + 1, 10**6 + 1)
        ]
        assert abs(ratios[1] - 1) < abs(ratios[0] - 1) and abs(ratios[1] - 1) < 2e-3
    gaps = [
        abs(majority_vote_asymptote(d, 1.0, refined=True) / majority_vote_asymptote(d, 1.0) - 1) for d in (4, 64, 4096)
    ]
    assert gaps[0] > gaps[1] > gaps[2] and gaps[2] < 1e-3


@settings(max_examples=5)
@given(d=dimensions(3, 10), j=st.integers(0, 3))
def test_softmax_converges_to_hardmax(d, j):
    H = 2 * j + 1
    hard = majority_vote_error(d, H)
    gaps = [abs(majority_vote_error(d, H, T) - hard) for T in (3.0, 100.0, 3000.0)]
    assert all(b <= a + 1e-9 for a, b in zip(gaps, gaps[1:], strict=False)) and gaps[-1] < 0.01


def test_softmax_lattice_is_converged():
    assert majority_vote_error(8, 7, 20.0, lattice=64) == pytest.approx(
        majority_vote_error(8, 7, 20.0, lattice=512), abs=2e-4
    )


def test_softmax_single_head_matches_monte_carlo_through_the_evaluator():
    # One head: every direction is equivalent by rotation, so a single construction's error IS the average.
    d, T, n = 6, 8.0, 40_000
    rng = np.random.default_rng(11)
    built = build_majority_vote(d, 1, rng, T)
    X, y = sample_context(n, 2, d, rng)
    errors = np.sum((multilayer_forward(built.weights, X, y, temperature=T) - nearest_neighbor(X, y)) ** 2, axis=1)
    estimate = estimate_mean(errors)
    assert estimate.contains(built.predicted_error), (estimate, built.predicted_error)


def test_heads_for_a_target_error_are_minimal():
    for d, eps in ((8, 0.3), (32, 0.2)):
        H = majority_vote_heads(d, eps)
        assert H % 2 == 1 and majority_vote_error(d, H) <= eps < majority_vote_error(d, H - 2)


def test_weight_file_round_trip_and_metadata(tmp_path):
    built = build_majority_vote(6, 9, np.random.default_rng(2))
    path = save_weights(tmp_path / "mv.safetensors", multilayer_tensors(built.weights), built.metadata())
    loaded = load_weights(path)
    assert loaded.layer_heads == [9, 1] and loaded.metadata["p"] == 7 and loaded.metadata["update"] == "query"
    assert loaded.predicted_error == built.predicted_error
    for name, tensor in multilayer_tensors(built.weights).items():
        np.testing.assert_array_equal(loaded.tensors[name], tensor)


def test_invalid_arguments():
    with pytest.raises(ValueError, match="H must be"):
        majority_vote_error(4, 0)
    with pytest.raises(ValueError, match="d must be"):
        build_majority_vote(1, 3, np.random.default_rng(0))
    with pytest.raises(ValueError, match="directions"):
        majority_vote_weights(np.zeros((3,)))
    with pytest.raises(ValueError, match="t must"):
        head_success_probability(1.5)


def _fixed_draw_errors(d, heads, draws, n, rng):
    """Hardmax error of `draws` fixed draws of directions on the same n D_2 samples (mean, s.e. per draw).

    Votes are counted directly (head h picks x_1 iff <q_h, y><q_h, x_1 - x_2> > 0); the first draw is checked
    against the theory transformer on a sub-sample, so the shortcut is the construction's own error.
    """
    X, y = sample_context(n, 2, d, rng)  # (n, 2, d), (n, d): common samples for every draw
    u = X[:, 0] - X[:, 1]  # (n, d)
    gap = np.sum(u**2, axis=1)  # (n,) the error of picking the wrong key
    truth = np.sign(np.einsum("nd,nd->n", y, u))  # (n,)
    means, stderrs = [], []
    for draw in range(draws):
        q = sample_sphere(heads, d, np.random.default_rng(draw))  # (H, d), as build_majority_vote draws them
        tally = np.sign((y @ q.T) * (u @ q.T)).sum(axis=1)  # (n,) votes for x_1 minus votes for x_2
        per_sample = np.where(np.sign(tally) == truth, 0.0, gap)  # H odd: no ties
        if draw == 0:
            built = build_majority_vote(d, heads, np.random.default_rng(draw), predict=False)
            out = multilayer_forward(built.weights, X[:1000], y[:1000], temperature=math.inf, update="query")
            assert np.allclose(np.sum((out - nearest_neighbor(X[:1000], y[:1000])) ** 2, axis=1), per_sample[:1000])
        means.append(per_sample.mean())
        stderrs.append(per_sample.std() / math.sqrt(n))
    return np.array(means), np.array(stderrs)


@pytest.mark.slow
def test_prediction_scope_states_the_measured_draw_to_draw_spread():
    """The file's predicted_error averages over draws; one draw's error spreads by about 5% at d = 10, H = 301.

    20 draws on 2e5 common samples (MC s.e. per draw about 0.8% of the error, well below the spread measured).
    With 20 draws the sample sd lies within [0.6, 1.45] x the true sd with probability 0.998 (chi-square, 19 d.o.f.),
    so a true 0.053 lands in [0.032, 0.077]; the window below is that plus the MC noise.
    """
    d, heads = 10, 301
    means, stderrs = _fixed_draw_errors(d, heads, draws=20, n=200_000, rng=np.random.default_rng(7))
    predicted = majority_vote_error(d, heads)
    spread = means.std(ddof=1) / predicted
    assert 0.03 < spread < 0.08, (spread, means)
    assert stderrs.mean() < 0.3 * means.std(ddof=1)  # the spread is the draws', not the sampler's
    assert "sd 0.053 x error at d = 10, H = 301" in PREDICTION_SCOPE
