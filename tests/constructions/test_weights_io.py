"""Weight files round-trip exactly and refuse wrong names, shapes, dtypes and metadata with a clear message."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from safetensors.numpy import save_file

from constructions.weights_io import WeightFileError, load_weights, save_weights
from tests.strategies import dimension_and_rank, seeds


def _single_layer(h, r, d, rng):
    tensors = {
        "Q": rng.standard_normal((h, r, d)),
        "K": rng.standard_normal((h, r, d)),
        "V": rng.standard_normal((h, d, d)),
    }
    metadata = {
        "construction": "test",
        "d": d,
        "r": r,
        "H": h,
        "temperature": math.inf,
        "predicted_error": 0.25,
        "layout": "single-layer",
    }
    return tensors, metadata


@settings(max_examples=15)
@given(dr=dimension_and_rank(max_d=8), h=st.integers(1, 5), seed=seeds)
def test_single_layer_round_trip_is_exact(tmp_path_factory, dr, h, seed):
    d, r = dr
    tensors, metadata = _single_layer(h, r, d, np.random.default_rng(seed))
    path = save_weights(tmp_path_factory.mktemp("w") / "w.safetensors", tensors, metadata)
    loaded = load_weights(path)
    for name, tensor in tensors.items():
        np.testing.assert_array_equal(loaded.tensors[name], tensor)
    assert loaded.metadata["d"] == d and loaded.metadata["H"] == h and loaded.metadata["r"] == r
    assert loaded.temperature == math.inf and loaded.predicted_error == 0.25
    assert loaded.layout == "single-layer" and loaded.metadata["version"] == "1"


def test_multi_layer_round_trip_with_per_layer_heads(tmp_path):
    rng = np.random.default_rng(0)
    d, p, n = 3, 2, 2
    embed_dim = d + p
    tensors = {
        "context_codes": rng.standard_normal((n, p)),
        "query_code": np.zeros(p),
        "readout": rng.standard_normal((d, embed_dim)),
    }
    for layer, h in enumerate([3, 1]):
        tensors[f"layers.{layer}.Q"] = rng.standard_normal((h, 1, embed_dim))
        tensors[f"layers.{layer}.K"] = rng.standard_normal((h, 1, embed_dim))
        tensors[f"layers.{layer}.V"] = rng.standard_normal((h, embed_dim, embed_dim))
    metadata = {
        "construction": "t",
        "d": d,
        "p": p,
        "N": n,
        "L": 2,
        "H": [3, 1],
        "r": 1,
        "temperature": 10.0,
        "predicted_error": float("nan"),
        "layout": "multi-layer",
        "update": "query",
    }
    loaded = load_weights(save_weights(tmp_path / "m.safetensors", tensors, metadata))
    assert loaded.layer_heads == [3, 1]
    assert math.isnan(loaded.predicted_error)
    for name, tensor in tensors.items():
        np.testing.assert_array_equal(loaded.tensors[name], tensor)


def test_score_bias_needs_context_length(tmp_path):
    tensors, metadata = _single_layer(2, 1, 3, np.random.default_rng(1))
    tensors["score_bias"] = np.zeros((2, 2))
    with pytest.raises(WeightFileError, match="score_bias needs the metadata key N"):
        save_weights(tmp_path / "b.safetensors", tensors, metadata)
    save_weights(tmp_path / "b.safetensors", tensors, {**metadata, "N": 2})
    assert load_weights(tmp_path / "b.safetensors").tensors["score_bias"].shape == (2, 2)


def _write_raw(path, tensors, metadata):
    save_file(
        {k: np.ascontiguousarray(v) for k, v in tensors.items()},
        str(path),
        metadata={k: str(v) for k, v in metadata.items()},
    )


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda t, m: t.update(Q=t["Q"][:, :, :-1]), r"tensor Q must have shape \(2, 1, 3\)"),
        (lambda t, m: t.update(V=t["V"].astype(np.float32)), "tensor V must be float64, got float32"),
        (lambda t, m: t.pop("K"), "missing K"),
        (lambda t, m: t.update(extra=np.zeros(1)), "unexpected extra"),
        (lambda t, m: m.pop("predicted_error"), "metadata is missing predicted_error"),
        (lambda t, m: m.update(temperature="-1"), "temperature must be > 0"),
        (lambda t, m: m.update(version="0"), "format version '0' is not supported"),
        (lambda t, m: m.update(layout="conv"), "layout must be one of"),
        (lambda t, m: m.update(d="three"), "metadata d='three' is not a valid number"),
        (lambda t, m: m.update(d="3.0"), "metadata d='3.0' is not a valid number"),
        (lambda t, m: m.update(d=" 3"), "metadata d=' 3' is not a valid number"),
        (lambda t, m: m.update(H="1,1"), r"H must be one integer in a single-layer file, got \[1, 1\]"),
        (lambda t, m: m.update(r="4"), "metadata r must be <= d = 3, got 4"),
        (lambda t, m: m.update(L="1000000000"), "L belong to the multi-layer layout"),
        (lambda t, m: m.update(predicted_error="-1"), "predicted_error must be nan or a finite number >= 0"),
        (lambda t, m: m.update(predicted_error="inf"), "predicted_error must be nan or a finite number >= 0"),
        (lambda t, m: m.update(temperature="1e39"), "temperature must be > 0 and at most 3.403e\\+38"),
        (lambda t, m: m.update(temperature="nan"), "temperature must be > 0"),
        (lambda t, m: m.update(task="farthest"), "metadata task must be one of"),
        (lambda t, m: m.update(keys="weird"), "metadata keys must be one of"),
        (lambda t, m: t["V"].__setitem__((0, 0, 0), 1e39), "tensor V holds values beyond float32's range"),
        (lambda t, m: t["K"].__setitem__((0, 0, 0), np.inf), "tensor K contains non-finite values"),
    ],
)
def test_loading_refuses_mismatches(tmp_path, mutate, message):
    tensors, metadata = _single_layer(2, 1, 3, np.random.default_rng(2))
    metadata = {**metadata, "version": "1", "temperature": "inf"}
    mutate(tensors, metadata)
    path = tmp_path / "bad.safetensors"
    _write_raw(path, tensors, metadata)
    with pytest.raises(WeightFileError, match=message):
        load_weights(path)


def test_loading_refuses_non_safetensors_and_missing_files(tmp_path):
    garbage = tmp_path / "garbage.safetensors"
    garbage.write_bytes(b"not a safetensors file at all")
    with pytest.raises(WeightFileError, match="not a readable safetensors file"):
        load_weights(garbage)
    with pytest.raises(FileNotFoundError):
        load_weights(tmp_path / "absent.safetensors")


def test_a_huge_layer_count_allocates_nothing(tmp_path):
    """Multi-layer metadata L = 1e9 with three tensors is refused from the header's tensor count."""
    tensors = {"context_codes": np.zeros((2, 1)), "query_code": np.zeros(1), "readout": np.zeros((2, 3))}
    metadata = {"construction": "t", "d": "2", "p": "1", "N": "2", "L": "1000000000", "r": "1", "H": "1",
                "temperature": "inf", "predicted_error": "nan", "version": "1", "layout": "multi-layer",
                "update": "query"}  # fmt: skip
    _write_raw(tmp_path / "huge.safetensors", tensors, metadata)
    with pytest.raises(WeightFileError, match="metadata H lists 1 head counts but L = 1000000000"):
        load_weights(tmp_path / "huge.safetensors")
    metadata["H"] = ",".join(["1"] * 5)
    metadata["L"] = "5"
    _write_raw(tmp_path / "five.safetensors", tensors, metadata)
    with pytest.raises(WeightFileError, match="L = 5 layers need 18 tensors, the file holds 3"):
        load_weights(tmp_path / "five.safetensors")
