"""Start a theory model from a construction named by its config (``init = "construction:NAME[@LAMBDA]"``).

The recipe (`experiments.config.ConstructionInit`) is built from the run's own fields, so a sweep's run needs no weight
file: the same config always starts from the same weights. The model keeps the config's shape (heads per layer, rank,
scratch width); whatever the construction does not use is zero, and a zero head adds nothing:

- a head with Q = K = V = 0 scores every key 0 (uniform weights) and writes V s = 0;
- a zero rank row adds 0 to every score; a zero scratch coordinate is never read (its Q, K, V columns and its
  readout column are 0) and never written (its V rows are 0).

So the loaded model computes exactly the construction's function at step 0 (tests/experiments/models/
test_construction_init.py compares it, sample by sample, with the numpy evaluators of theory/).

Recipes:

- ``majority-vote`` (Theorem 5, `constructions.majority_vote`): layer 1's H heads (every head of the config's first
  layer) vote with directions q_h ~ uniform on the sphere, drawn by ``numpy.random.default_rng(config.seed)`` exactly
  as `attnrank construct majority-vote --d d --heads H --seed seed` draws them; layer 2 is the one comparison head.
  The construction's stream [content d | tally 1 | out d] takes the first 2d + 1 coordinates, so positional_dim must
  be at least d + 1.
- ``full-rank`` (Fact 1, `constructions.full_rank`): one head Q = lambda I, K = V = I, in a one-layer model of rank d.

LAMBDA, the construction's inverse temperature, is folded into the query maps (Q <- (lambda / T) Q for a run of score
temperature T, the way `experiments.models.from_weights.load_attention_heads` loads any softmax file), so the run's
own temperature is unchanged; without LAMBDA the construction runs at the run's temperature (hardmax for hardmax runs).
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt
import torch

from constructions.full_rank import full_rank_head
from constructions.majority_vote import build_majority_vote
from experiments.config import ConstructionInit, TrainConfig
from experiments.models.attention import RankedMultiheadAttention
from experiments.models.from_weights import load_attention_heads
from experiments.models.theory_model import TheoryModel
from theory.multilayer import MultiLayerWeights

FloatArray = npt.NDArray[np.float64]


def construction_temperature(config: TrainConfig) -> float:
    """The inverse temperature lambda the construction of ``config.init`` runs at (math.inf: hardmax).

    Args:
        config: a run whose ``init`` names a construction recipe.

    Returns:
        The recipe's LAMBDA, else the run's temperature (softmax) or math.inf (hardmax).
    """
    recipe = _recipe(config)
    if config.attention == "hardmax":
        return math.inf
    return config.temperature if recipe.temperature is None else recipe.temperature


def majority_vote_of(config: TrainConfig) -> MultiLayerWeights:
    """Theorem 5's weights for ``config`` (p = d + 1, heads [H, 1]; before padding to the model's shape).

    Args:
        config: a run with ``init = "construction:majority-vote[@LAMBDA]"``.

    Returns:
        The majority vote with H = config.heads voting heads, directions from numpy's default_rng(config.seed).
    """
    if _recipe(config).name != "majority-vote":
        raise ValueError(f"init {config.init!r} does not name the majority vote")
    built = build_majority_vote(config.d, config.heads, np.random.default_rng(config.seed), predict=False)
    return built.weights


@torch.no_grad()
def load_construction(model: TheoryModel, config: TrainConfig) -> None:
    """Overwrite every parameter of ``model`` (built for ``config``) with the construction ``config.init`` names.

    Args:
        model: the config's theory model (`experiments.models.factory.theory_network`), any parameter values.
        config: the run; its ``init`` names a construction recipe and fits it (TrainConfig checks the shape).
    """
    recipe = _recipe(config)
    temperature = construction_temperature(config)
    layers = [layer for layer in model.attention_layers if isinstance(layer, RankedMultiheadAttention)]
    if recipe.name == "full-rank":
        Q, K, V = full_rank_head(config.d)  # (1, d, d) each
        load_attention_heads(layers[0], Q, K, V, temperature)  # other heads zero; lambda folded into Q
        model.readout.copy_(torch.eye(config.d))  # (d, d): the single-layer output is the attention itself
        return
    weights = majority_vote_of(config)
    D = model.embed_dim  # D = d + p >= 2d + 1
    for layer, source in zip(layers, weights.layers, strict=True):
        Q = _pad_last(source.Q, D)  # (H_l, 1, D)
        K = _pad_last(source.K, D)  # (H_l, 1, D)
        V = _pad_last(_pad_rows(source.V, D), D)  # (H_l, D, D)
        load_attention_heads(layer, Q, K, V, temperature)
    codes = _pad_last(weights.context_codes, model.p)  # (N, p): +1 / -1 in the tally coordinate, zeros after
    query = _pad_last(weights.query_code[None, :], model.p)[0]  # (p,): zeros
    readout = _pad_last(weights.readout, D)  # (d, D): reads the out block
    model.context_codes.copy_(torch.as_tensor(codes))
    model.query_code.copy_(torch.as_tensor(query))
    model.readout.copy_(torch.as_tensor(readout))


def _recipe(config: TrainConfig) -> ConstructionInit:
    recipe = config.construction_init
    if recipe is None:
        raise ValueError(f"init {config.init!r} names no construction recipe ('construction:NAME[@LAMBDA]')")
    return recipe


def _pad_last(array: FloatArray, size: int) -> FloatArray:
    """Zero-pad the last axis of ``array`` to ``size`` (the model's extra scratch coordinates)."""
    pad = size - array.shape[-1]
    if pad < 0:
        raise ValueError(f"the construction needs {array.shape[-1]} coordinates, the model has {size}")
    return np.concatenate([array, np.zeros((*array.shape[:-1], pad))], axis=-1)


def _pad_rows(array: FloatArray, size: int) -> FloatArray:
    """Zero-pad the second-to-last axis of ``array`` (H, D', D') to ``size`` rows."""
    return np.swapaxes(_pad_last(np.swapaxes(array, -1, -2), size), -1, -2)
