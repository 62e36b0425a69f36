"""Tests of constructions.full_rank: the weights, the weight file, and the head's behaviour in the reference evaluator.

References: theory.attention.multihead_attention (the evaluator every construction is tested against),
theory.targets.nearest_neighbor, Monte Carlo with 4 standard errors, and theory.bounds.full_rank_error.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from constructions.full_rank import full_rank_head, full_rank_metadata, save_full_rank
from constructions.weights_io import load_weights
from theory.attention import multihead_attention
from theory.bounds import full_rank_error
from theory.monte_carlo import estimate_mean
from theory.sphere import sample_context
from theory.targets import nearest_neighbor


def test_weights_are_identity_heads():
    Q, K, V = full_rank_head(5)
    for name, W in (("Q", Q), ("K", K), ("V", V)):
        assert W.shape == (1, 5, 5), name
        np.testing.assert_array_equal(W[0], np.eye(5))


@pytest.mark.parametrize("temperature", [3.0, 100.0, math.inf])
def test_weight_file_round_trip(tmp_path, temperature):
    path = save_full_rank(tmp_path / "fr.safetensors", 6, temperature)
    loaded = load_weights(path)
    assert loaded.metadata["construction"] == "full-rank"
    assert (loaded.metadata["d"], loaded.metadata["r"], loaded.metadata["H"]) == (6, 6, 1)
    assert loaded.metadata["N"] == 2 and loaded.metadata["task"] == "nearest"
    assert loaded.temperature == temperature
    assert loaded.predicted_error == full_rank_error(6, temperature)
    np.testing.assert_array_equal(loaded.tensors["Q"][0], np.eye(6))


@pytest.mark.parametrize(
    ("N", "d", "keys"), [(2, 3, "orthonormal"), (5, 8, "orthonormal"), (8, 8, "orthonormal"), (17, 4, "iid")]
)
def test_hardmax_head_is_exact_for_every_context_length(N, d, keys):
    rng = np.random.default_rng(N * 100 + d)
    X, y = sample_context(2000, N, d, rng, keys=keys)
    Q, K, V = full_rank_head(d)
    output = multihead_attention(Q, K, V, X, y, temperature=math.inf)  # (n, d)
    assert np.max(np.abs(output - nearest_neighbor(X, y))) <= 4 * np.finfo(np.float64).eps


def test_softmax_head_monte_carlo_matches_the_predicted_error():
    """D_2, d = 8, lambda = 20: Monte Carlo through the reference evaluator within 4 s.e. of the quadrature value."""
    d, lam = 8, 20.0
    rng = np.random.default_rng(11)
    X, y = sample_context(40000, 2, d, rng)
    Q, K, V = full_rank_head(d)
    errors = np.sum((multihead_attention(Q, K, V, X, y, temperature=lam) - nearest_neighbor(X, y)) ** 2, axis=1)
    estimate = estimate_mean(errors)
    predicted = full_rank_metadata(d, lam)["predicted_error"]
    assert estimate.contains(predicted, z=4.0), (estimate, predicted)


@pytest.mark.parametrize(
    ("d", "temperature", "name"), [(1, 1.0, "d"), (4, 0.0, "temperature"), (4, -2.0, "temperature")]
)
def test_bad_arguments(tmp_path, d, temperature, name):
    with pytest.raises(ValueError, match=f"^{name} "):
        save_full_rank(tmp_path / "x.safetensors", d, temperature)
