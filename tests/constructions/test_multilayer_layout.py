"""The multi-layer weight-file layout: tensor names and metadata of MultiLayerWeights round-trip through files."""

import math

import numpy as np
import pytest

from constructions.multilayer_layout import multilayer_from_tensors, multilayer_metadata, multilayer_tensors
from constructions.weights_io import load_weights, save_weights
from tests.strategies import random_multilayer_network
from theory.multilayer import multilayer_forward


def test_tensor_names_and_weight_files_round_trip_exactly(tmp_path):
    rng = np.random.default_rng(7)
    weights = random_multilayer_network(rng, 3, 2, 2, [3, 1], 1)
    tensors = multilayer_tensors(weights)
    assert sorted(tensors) == sorted(
        ["context_codes", "query_code", "readout"] + [f"layers.{i}.{m}" for i in (0, 1) for m in "QKV"]
    )
    metadata = multilayer_metadata(weights, "test", math.inf, 0.25)
    assert metadata == {
        "construction": "test",
        "d": 3,
        "p": 2,
        "N": 2,
        "L": 2,
        "H": [3, 1],
        "r": 1,
        "temperature": math.inf,
        "predicted_error": 0.25,
        "layout": "multi-layer",
        "update": "query",
    }
    loaded = load_weights(save_weights(tmp_path / "w.safetensors", tensors, metadata))
    again = multilayer_from_tensors(loaded.tensors)
    for name, tensor in tensors.items():
        np.testing.assert_array_equal(multilayer_tensors(again)[name], tensor)
    X, y = rng.standard_normal((5, 2, 3)), rng.standard_normal((5, 3))
    np.testing.assert_array_equal(multilayer_forward(again, X, y), multilayer_forward(weights, X, y))


def test_bad_tensor_names_are_named():
    weights = random_multilayer_network(np.random.default_rng(0), 3, 1, 2, [2], 1)
    tensors = multilayer_tensors(weights)
    with pytest.raises(ValueError, match="unexpected"):
        multilayer_from_tensors({**tensors, "layers.5.Q": np.zeros((1, 1, 4))})
    with pytest.raises(ValueError, match="missing readout"):
        multilayer_from_tensors({k: v for k, v in tensors.items() if k != "readout"})
    with pytest.raises(ValueError, match="missing layers.0.V"):
        multilayer_from_tensors({k: v for k, v in tensors.items() if k != "layers.0.V"})
