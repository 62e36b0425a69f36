"""Construction recipes as starting points (`experiments.models.construction_init`, ``init = construction:...``).

The loaded model must compute the construction's function exactly (compared, sample by sample, with the numpy
evaluators of theory/, in float64), and its fresh step-0 error must agree with the construction's predicted error
within Monte Carlo error (Fact 1: exact prediction, one run; Theorem 5: the prediction averages over random
directions, so batch means over fresh constructions, one per seed). A model from scratch must fail the same check.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import numpy as np
import pytest
import torch

from constructions.full_rank import full_rank_head
from constructions.majority_vote import build_majority_vote
from experiments.config import ConstructionInit, TrainConfig
from experiments.models.construction_init import construction_temperature, majority_vote_of
from experiments.models.factory import theory_network_from_file
from experiments.packing import packing_refusal
from experiments.training.evaluation import evaluate_run
from theory.attention import multihead_attention
from theory.bounds import full_rank_error
from theory.majority_vote_error import majority_vote_error
from theory.monte_carlo import DEFAULT_Z
from theory.multilayer import multilayer_forward

D = 8
EXACT = 1e-10
"""float64 model against the float64 evaluator: the same arithmetic in another order (|outputs| <= 2)."""


def _majority(width: int = 1, p: int = D + 1, seed: int = 0, init: str = "construction:majority-vote") -> TrainConfig:
    return TrainConfig(
        task="nearest", d=D, N=2, keys="orthonormal", model="theory", rank=1, value="full", layers=2,
        positional="concat", positional_dim=p, width=width, seed=seed, device="cpu", init=init,
    )  # fmt: skip


def _full_rank(width: int = 1, init: str | None = "construction:full-rank", seed: int = 0) -> TrainConfig:
    return TrainConfig(
        task="nearest", d=D, N=2, keys="orthonormal", model="theory", rank=D, value="full", layers=1, width=width,
        seed=seed, device="cpu", init=init,
    )  # fmt: skip


@pytest.fixture
def float64() -> Iterator[None]:
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        yield
    finally:
        torch.set_default_dtype(previous)


def _d2_samples(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(X (n, 2, d), y (n, d)): unit keys and queries (the check needs only unit vectors, not D_2 itself)."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, 2, D))
    y = rng.standard_normal((n, D))
    return X / np.linalg.norm(X, axis=-1, keepdims=True), y / np.linalg.norm(y, axis=-1, keepdims=True)


def _model_output(config: TrainConfig, X: np.ndarray, y: np.ndarray) -> np.ndarray:
    model = theory_network_from_file(config)
    with torch.no_grad():
        return model(torch.as_tensor(X), torch.as_tensor(y)).numpy()  # (n, d)


@pytest.mark.parametrize("init", ["construction:majority-vote", "construction:majority-vote@100"])
@pytest.mark.parametrize(("width", "p"), [(1, D + 1), (2, D + 3)])
def test_majority_vote_model_is_the_construction(float64: None, init: str, width: int, p: int) -> None:
    """Padded heads (layer 2 has 1 real head of H), padded scratch (p > d + 1) and lambda folded into Q change nothing:
    the model equals theory.multilayer_forward on Theorem 5's weights at the recipe's temperature."""
    config = _majority(width, p, seed=3, init=init)
    X, y = _d2_samples(400, seed=1)
    weights = majority_vote_of(config)
    assert weights.layer_heads == [config.heads, 1]
    expected = multilayer_forward(weights, X, y, construction_temperature(config), update="query")  # (n, d)
    worst = float(np.abs(_model_output(config, X, y) - expected).max())
    assert worst <= EXACT, f"majority vote {init} width {width} p {p}: max |model - evaluator| = {worst:.3g}"


def test_majority_vote_directions_are_the_construct_commands(float64: None) -> None:
    """The recipe draws the directions `attnrank construct majority-vote --seed S` draws (default_rng(S))."""
    config = _majority(width=1, seed=7)
    built = build_majority_vote(D, config.heads, np.random.default_rng(7), predict=False)
    layer1 = majority_vote_of(config).layers[0]
    np.testing.assert_array_equal(layer1.Q[:, 0, :D], built.directions)


@pytest.mark.parametrize("init", ["construction:full-rank", "construction:full-rank@100"])
@pytest.mark.parametrize("width", [1, 3])
def test_full_rank_model_is_facts_head(float64: None, init: str, width: int) -> None:
    """Fact 1's head Q = lambda I, K = V = I (other heads zero) equals theory.attention.multihead_attention."""
    config = _full_rank(width, init)
    X, y = _d2_samples(400, seed=2)
    Q, K, V = full_rank_head(D)
    expected = multihead_attention(Q, K, V, X, y, construction_temperature(config))  # (n, d)
    worst = float(np.abs(_model_output(config, X, y) - expected).max())
    assert worst <= EXACT, f"full rank {init} width {width}: max |model - evaluator| = {worst:.3g}"


@pytest.mark.parametrize("scale", [1.0, 100.0])
def test_fact1_start_error_matches_the_exact_error(scale: float) -> None:
    """Step 0 of a run from Fact 1 (float32, as trained): the population error (the one recipe, n = 20 000) is within
    4 s.e. of full_rank_error(d, lambda); the same check on the model from scratch fails (negative control)."""
    config = _full_rank(init=f"construction:full-rank@{scale:g}")
    predicted = full_rank_error(D, scale)
    start = evaluate_run(config, None, samples=20_000)
    z = (start["population_error"] - predicted) / start["population_stderr"]
    assert start["source"] == "init" and abs(z) <= DEFAULT_Z, f"lambda {scale}: {start} vs {predicted:.4g} (z {z:.2f})"
    scratch = evaluate_run(_full_rank(init=None), None, samples=20_000)
    z_scratch = (scratch["population_error"] - predicted) / scratch["population_stderr"]
    assert abs(z_scratch) > DEFAULT_Z, f"negative control passed: {scratch} vs {predicted:.4g}"


def test_majority_vote_start_error_matches_theorem5_over_fresh_constructions() -> None:
    """Step 0 of runs from the majority vote (d = 8, H = 17, run temperature 1): the mean over 12 seeds (a fresh draw
    of directions each, scored on the recipe's first 2000 held-out samples) of the error is within 4 s.e. (of the 12
    means) of majority_vote_error(8, 17, 1), which averages over directions and data. The 12 draws of directions are
    independent; the samples are shared, so the 12 means are independent given the data and their spread still
    estimates the error of the mean over directions (the data's share of the variance, 2000 samples, is small)."""
    means = [
        evaluate_run(_majority(seed=seed), None, samples=2000)["population_error"] for seed in range(12)
    ]  # fmt: skip
    mean, stderr = float(np.mean(means)), float(np.std(means, ddof=1) / math.sqrt(len(means)))
    predicted = majority_vote_error(D, 17, 1.0)
    assert abs(mean - predicted) <= DEFAULT_Z * stderr, f"{mean:.4f} +- {stderr:.4f} vs {predicted:.4f}"


def test_recipes_are_validated_and_hashed() -> None:
    assert ConstructionInit.parse(None) is None and ConstructionInit.parse("w.safetensors") is None
    assert ConstructionInit.parse("construction:full-rank") == ConstructionInit("full-rank")
    assert ConstructionInit.parse("construction:majority-vote@2.5") == ConstructionInit("majority-vote", 2.5)
    for bad in ("construction:", "construction:tournament", "construction:full-rank@0", "construction:full-rank@x",
                "construction:full-rank@inf", "construction:full-rank@nan"):  # fmt: skip
        with pytest.raises(ValueError, match="init"):
            _full_rank(init=bad)
    with pytest.raises(ValueError, match="positional_dim >= d \\+ 1 = 9"):
        _majority(p=D)
    with pytest.raises(ValueError, match="needs layers = 2"):
        TrainConfig(task="nearest", d=D, N=2, model="theory", rank=1, value="full", init="construction:majority-vote")
    with pytest.raises(ValueError, match="needs rank = 8"):
        _full_rank().__class__(**{**_full_rank().to_dict(), "rank": 4, "betas": (0.9, 0.95)})
    with pytest.raises(ValueError, match="needs model = 'theory'"):
        TrainConfig(task="nearest", d=D, N=2, rank=D, init="construction:full-rank")
    with pytest.raises(ValueError, match="drop '@LAMBDA'"):
        TrainConfig(**{**_full_rank().to_dict(), "attention": "hardmax", "init": "construction:full-rank@3",
                       "betas": (0.9, 0.95)})  # fmt: skip
    hashes = {_full_rank(init=i).config_hash() for i in (None, "construction:full-rank", "construction:full-rank@100")}
    assert len(hashes) == 3


def test_recipe_runs_are_never_packed() -> None:
    """Negative control for the packed trainer, which would start every run of a pack from random weights."""
    assert packing_refusal(_majority()) is not None and packing_refusal(_full_rank()) is not None
    assert packing_refusal(_full_rank(init=None)) is None
