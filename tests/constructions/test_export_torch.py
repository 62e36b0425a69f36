"""constructions.export_torch: stock nn.MultiheadAttention loaded with the export equals the file's own evaluator.

The reference is constructions.evaluate.weight_file_model (the numpy evaluator `attnrank eval` uses), on random
inputs; every construction stock attention cannot represent is refused with its reason.
"""

import math

import numpy as np
import pytest
import torch
from safetensors import safe_open
from safetensors.torch import load_file

from constructions.biased import build_biased_construction, save_biased_construction
from constructions.evaluate import weight_file_model
from constructions.export_torch import STATE_DICT_KEYS, export_weights, torch_mha_export, unrepresentable_reasons
from constructions.full_rank import save_full_rank
from constructions.majority_vote import build_majority_vote, save_majority_vote
from constructions.multilayer_layout import multilayer_tensors
from constructions.random_features import attention_weights_of, construct_random_features, random_features_metadata
from constructions.tournament import build_tournament
from constructions.weights_io import load_weights, save_weights
from theory.biased_target import bias_grid

TOLERANCE = 1e-6
"""The issue's agreement target; float64 reaches about 1e-13 here."""


def _stock_output(path, X, y):
    """Stock nn.MultiheadAttention(embed_dim=d, num_heads=H, batch_first=True) loaded from the export at ``path``."""
    with safe_open(str(path), framework="pt") as handle:
        meta = handle.metadata()
    mha = torch.nn.MultiheadAttention(
        embed_dim=int(meta["embed_dim"]), num_heads=int(meta["num_heads"]), batch_first=True, dtype=torch.float64
    )
    mha.load_state_dict(load_file(str(path)))  # strict: exactly the stock keys
    mha.eval()
    Xt, yt = torch.from_numpy(X), torch.from_numpy(y)
    with torch.no_grad():
        out, _ = mha(yt[:, None, :], Xt, Xt, need_weights=False)  # (n, 1, d)
    return out[:, 0].numpy()


def _single_layer_file(tmp_path, name, Q, K, V, temperature):
    H, r, d = Q.shape
    metadata = {
        "construction": name,
        "d": d,
        "r": r,
        "H": H,
        "temperature": temperature,
        "predicted_error": math.nan,
        "layout": "single-layer",
    }
    return save_weights(tmp_path / f"{name}.safetensors", {"Q": Q, "K": K, "V": V}, metadata)


def _representable_files(tmp_path):
    rng = np.random.default_rng(0)
    files = [save_full_rank(tmp_path / f"fr{T}.safetensors", 5, T) for T in (0.5, 3.0, 40.0)]
    # H = 2 heads in d = 4 (head_dim 2): rank-1 scores (zero padding) and rank-2 value maps (SVD factorisation).
    Q, K = rng.standard_normal((2, 1, 4)), rng.standard_normal((2, 1, 4))
    V = rng.standard_normal((2, 4, 2)) @ rng.standard_normal((2, 2, 4))  # (H, d, d) of rank 2
    files.append(_single_layer_file(tmp_path, "low-rank-values", Q, K, V, 1.7))
    # r = 3 > head_dim = 2, but Q_h^T K_h of rank 2: the score form is factored by its SVD.
    basis = rng.standard_normal((2, 2, 8))
    Q = np.einsum("hkr,hrd->hkd", rng.standard_normal((2, 3, 2)), basis)  # (H, 3, d), rows in a 2-dim span
    K = rng.standard_normal((2, 3, 8))
    V = rng.standard_normal((2, 8, 2)) @ rng.standard_normal((2, 2, 8))
    files.append(_single_layer_file(tmp_path, "rank-deficient-scores", 0.25 * Q, K, V, 2.0))
    # Random-features heads with a finite temperature and H = 1: V = a I has rank d = head_dim.
    built = construct_random_features(6, 1, np.random.default_rng(1))
    tensors = attention_weights_of(built.q, built.k, built.weights.a)
    files.append(_single_layer_file(tmp_path, "random-features-one-soft-head", *tensors.values(), 5.0))
    return files


def test_stock_attention_loaded_with_the_export_matches_the_evaluator(tmp_path):
    for path in _representable_files(tmp_path):
        weights = load_weights(path)
        assert unrepresentable_reasons(weights) == []
        out = tmp_path / f"{path.stem}.mha.safetensors"
        export_weights(weights, "torch-mha", out)
        assert sorted(load_file(str(out))) == sorted(STATE_DICT_KEYS)
        d = int(weights.metadata["d"])
        rng = np.random.default_rng(2)
        for N in (1, 2, 7):
            X, y = rng.standard_normal((64, N, d)), rng.standard_normal((64, d))
            want = weight_file_model(weights)(X, y)
            got = _stock_output(out, X, y)
            worst = np.abs(got - want).max()
            assert worst <= TOLERANCE, f"{path.name}, N = {N}: max |stock - evaluator| = {worst:.3g} > {TOLERANCE}"


def test_the_folded_scale_is_temperature_times_sqrt_head_dim(tmp_path):
    export = torch_mha_export(load_weights(save_full_rank(tmp_path / "fr.safetensors", 4, 3.0)))
    W_q = export.state_dict["in_proj_weight"][:4].numpy()
    np.testing.assert_allclose(W_q, 3.0 * math.sqrt(4) * np.eye(4), rtol=0, atol=1e-15)
    assert float(export.metadata["q_scale"]) == 6.0 and export.metadata["num_heads"] == "1"


def _refusal(weights):
    with pytest.raises(ValueError, match="cannot export as torch-mha") as info:
        torch_mha_export(weights)
    message = str(info.value)
    assert "\n" not in message
    return message


def test_constructions_stock_attention_cannot_represent_are_refused(tmp_path):
    hardmax = load_weights(save_full_rank(tmp_path / "fr.safetensors", 4, math.inf))
    assert "hardmax" in _refusal(hardmax)

    built = construct_random_features(8, 4, np.random.default_rng(0))
    tensors = attention_weights_of(built.q, built.k, built.weights.a)
    path = save_weights(tmp_path / "rf.safetensors", tensors, random_features_metadata(built, 0))
    assert "hardmax" in _refusal(load_weights(path))
    soft = load_weights(_single_layer_file(tmp_path, "rf-soft", *tensors.values(), 2.0))
    assert "value map V (d x d) has rank 8 > head_dim = d/H = 2" in _refusal(soft)
    built = construct_random_features(8, 3, np.random.default_rng(0))
    soft = _single_layer_file(tmp_path, "rf-3", *attention_weights_of(built.q, built.k, built.weights.a).values(), 2.0)
    assert "H = 3 does not divide d = 8" in _refusal(load_weights(soft))

    biased = save_biased_construction(tmp_path / "b.safetensors", build_biased_construction(2, 5.0, bias_grid(2)))
    message = _refusal(load_weights(biased))
    assert "score_bias" in message and "does not divide" in message

    vote = build_majority_vote(4, 3, np.random.default_rng(0), predict=False)
    assert "multi-layer file" in _refusal(load_weights(save_majority_vote(tmp_path / "mv.safetensors", vote, 0)))
    tournament = build_tournament(4, 3, 5, np.random.default_rng(0), temperature=10.0)
    path = save_weights(tmp_path / "t.safetensors", multilayer_tensors(tournament.weights), tournament.metadata())
    assert "multi-layer file" in _refusal(load_weights(path))

    rng = np.random.default_rng(3)
    Q = rng.standard_normal((2, 3, 4))  # r = 3 > head_dim = 2 with a rank-3 score form
    V = rng.standard_normal((2, 4, 2)) @ rng.standard_normal((2, 2, 4))
    path = _single_layer_file(tmp_path, "full-scores", Q, rng.standard_normal((2, 3, 4)), V, 1.0)
    assert "score form Q^T K has rank 3 > head_dim = d/H = 2" in _refusal(load_weights(path))


def test_nothing_is_written_on_refusal_or_bad_format(tmp_path):
    weights = load_weights(save_full_rank(tmp_path / "fr.safetensors", 4, math.inf))
    with pytest.raises(ValueError):
        export_weights(weights, "torch-mha", tmp_path / "out.safetensors")
    with pytest.raises(ValueError, match="format"):
        export_weights(load_weights(save_full_rank(tmp_path / "s.safetensors", 4, 1.0)), "onnx", tmp_path / "o")
    assert not (tmp_path / "out.safetensors").exists() and not (tmp_path / "o").exists()
