"""Turn a loaded weight file into a numpy model (X, y) -> (n, d) through the reference evaluators.

Single-layer files (full-rank, random-features, biased, ...) run through `theory.attention.multihead_attention`
(with their ``score_bias`` if present); multi-layer files through `theory.multilayer.multilayer_forward` with the
file's ``update`` mode. The model checks that X has the context length the file was built for when the file fixes one
(multi-layer files and files with a score bias).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from constructions.weights_io import WeightFile
from theory.attention import multihead_attention
from theory.multilayer import MultiLayerWeights, multilayer_forward
from theory.validation import check_array, check_int, check_temperature

FloatArray = npt.NDArray[np.float64]
Model = Callable[[FloatArray, FloatArray], FloatArray]

_BATCH_ELEMENTS = 4_000_000


def fixed_context_length(weights: WeightFile) -> int | None:
    """The context length a file's tensors are built for (multi-layer codes, score biases), or None if any N works."""
    if weights.layout == "multi-layer" or "score_bias" in weights.tensors:
        return int(weights.metadata["N"])
    return None


def weight_file_model(weights: WeightFile, temperature: float | None = None) -> Model:
    """A model evaluating the weight file with the reference evaluator of its layout.

    Args:
        weights: a validated weight file (constructions.weights_io.load_weights).
        temperature: inverse temperature to run at; None uses the file's metadata temperature.

    Returns:
        model(X (n, N, d), y (n, d)) -> (n, d).
    """
    temperature = weights.temperature if temperature is None else check_temperature(temperature)
    fixed_N = fixed_context_length(weights)
    d = int(weights.metadata["d"])

    def check_inputs(X: FloatArray, y: FloatArray) -> tuple[FloatArray, FloatArray]:
        X = check_array("X", X, ndim=3)
        if X.shape[2] != d:
            raise ValueError(f"X must have token dimension d = {d} (the weight file's), got shape {X.shape}")
        if fixed_N is not None and X.shape[1] != fixed_N:
            raise ValueError(f"the weight file is built for N = {fixed_N} context tokens, got N = {X.shape[1]}")
        return X, check_array("y", y, shape=(X.shape[0], d))

    if weights.layout == "multi-layer":
        network = MultiLayerWeights.from_tensors(weights.tensors)
        update = str(weights.metadata["update"])

        def multi_layer_model(X: FloatArray, y: FloatArray) -> FloatArray:
            X, y = check_inputs(X, y)
            return multilayer_forward(network, X, y, temperature=temperature, update=update)

        return multi_layer_model

    Q, K, V = weights.tensors["Q"], weights.tensors["K"], weights.tensors["V"]
    bias = weights.tensors.get("score_bias")
    heads, rank = Q.shape[0], Q.shape[1]

    def single_layer_model(X: FloatArray, y: FloatArray) -> FloatArray:
        X, y = check_inputs(X, y)
        n, N = X.shape[0], X.shape[1]
        batch = check_int("batch", max(1, _BATCH_ELEMENTS // max(1, heads * N * rank)), minimum=1)
        parts = [
            multihead_attention(Q, K, V, X[s : s + batch], y[s : s + batch], temperature=temperature, score_bias=bias)
            for s in range(0, n, batch)
        ]
        return np.concatenate(parts, axis=0) if parts else np.zeros((0, V.shape[1]))

    return single_layer_model


def describe_temperature(temperature: float) -> str:
    """'inf (hardmax)' or the number."""
    return "inf (hardmax)" if math.isinf(temperature) else f"{temperature:g}"
