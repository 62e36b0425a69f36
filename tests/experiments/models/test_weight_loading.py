"""Every weight-file layout loads into the torch models and reproduces the numpy reference evaluators.

Files are written with constructions.weights_io.save_weights (small random ones built here, and the real
constructions' files). Outputs are compared in float64 with absolute tolerance 1e-12 (a few hundred float64 epsilons
on O(1) outputs); squared errors against the targets are compared the same way, and Monte Carlo errors against a
construction's predicted error within 4 standard errors.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch

from constructions.biased import build_biased_construction, save_biased_construction
from constructions.full_rank import save_full_rank
from constructions.majority_vote import build_majority_vote
from constructions.multilayer_layout import multilayer_tensors
from constructions.random_features import attention_weights_of, construct_random_features, random_features_metadata
from constructions.tournament import build_tournament
from constructions.weights_io import load_weights, save_weights
from experiments.models.attention import RankedMultiheadAttention
from experiments.models.from_weights import load_attention_heads, load_theory_model, theory_model_from_file
from experiments.models.spec import AttentionSpec
from experiments.models.theory_model import TheoryModel
from theory.attention import multihead_attention
from theory.biased_target import biased_target, sample_biased_context
from theory.multilayer import AttentionLayer, MultiLayerWeights, multilayer_forward
from theory.sphere import sample_context
from theory.targets import nearest_neighbor

TOL = 1e-12
f64 = torch.float64


def unit_rows(rng: np.random.Generator, *shape: int) -> np.ndarray:
    x = rng.standard_normal(shape)
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def run(model: TheoryModel, X: np.ndarray, y: np.ndarray) -> np.ndarray:
    with torch.no_grad():
        return model(torch.from_numpy(X), torch.from_numpy(y)).numpy()


def single_layer_file(
    path: Path, rng: np.random.Generator, d: int, r: int, H: int, temperature: float, N: int | None = None
) -> Path:
    """A random single-layer file (with score_bias of length N when N is given)."""
    tensors = {"Q": rng.standard_normal((H, r, d)), "K": rng.standard_normal((H, r, d))}
    tensors["V"] = rng.standard_normal((H, d, d))
    metadata: dict[str, object] = {"construction": "test", "layout": "single-layer", "d": d, "r": r, "H": H}
    metadata.update(temperature=temperature, predicted_error=math.nan)
    if N is not None:
        tensors["score_bias"] = rng.standard_normal((H, N))
        metadata["N"] = N
    return save_weights(path, tensors, metadata)


@pytest.mark.parametrize("temperature", [0.7, 6.0, math.inf])
@pytest.mark.parametrize("with_bias", [False, True])
def test_single_layer_file(tmp_path: Path, temperature: float, with_bias: bool) -> None:
    """Single-layer files, with and without score_bias: the model equals multihead_attention on the file's tensors."""
    rng = np.random.default_rng(0)
    d, r, H, N = 6, 2, 5, 4
    wf = load_weights(
        single_layer_file(tmp_path / "w.safetensors", rng, d, r, H, temperature, N if with_bias else None)
    )
    model = theory_model_from_file(tmp_path / "w.safetensors")
    X, y = unit_rows(rng, 7, N, d), unit_rows(rng, 7, d)
    t = wf.tensors
    reference = multihead_attention(
        t["Q"], t["K"], t["V"], X, y, temperature=temperature, score_bias=t.get("score_bias")
    )
    np.testing.assert_allclose(run(model, X, y), reference, rtol=0, atol=TOL * 10)


@pytest.mark.parametrize("update", ["query", "all"])
@pytest.mark.parametrize("temperature", [1.5, math.inf])
def test_multilayer_file(tmp_path: Path, update: str, temperature: float) -> None:
    """Multi-layer files (per-layer head counts, codes, readout): the model equals multilayer_forward."""
    rng = np.random.default_rng(1)
    d, p, N, r, heads = 4, 3, 3, 2, [3, 1, 2]
    D = d + p
    weights = MultiLayerWeights(
        layers=tuple(
            AttentionLayer(
                Q=rng.standard_normal((h, r, D)),
                K=rng.standard_normal((h, r, D)),
                V=rng.standard_normal((h, D, D)) / math.sqrt(h * D),
            )
            for h in heads
        ),
        context_codes=rng.standard_normal((N, p)),
        query_code=rng.standard_normal(p),
        readout=rng.standard_normal((d, D)),
    )
    metadata = {"construction": "test", "layout": "multi-layer", "d": d, "p": p, "N": N, "L": 3, "H": heads, "r": r}
    metadata.update(temperature=temperature, predicted_error=math.nan, update=update)
    path = save_weights(tmp_path / "m.safetensors", multilayer_tensors(weights), metadata)
    model = theory_model_from_file(path)
    assert model.layer_heads == heads and model.update == update
    X, y = unit_rows(rng, 9, N, d), unit_rows(rng, 9, d)
    reference = multilayer_forward(weights, X, y, temperature=temperature, update=update)
    np.testing.assert_allclose(run(model, X, y), reference, rtol=0, atol=TOL * 10)


def test_low_rank_values_load_into_standard_heads(tmp_path: Path) -> None:
    """value='standard': value maps of rank <= r factor exactly as (1/c) O^h W_v^h; a full-rank V_h is refused."""
    rng = np.random.default_rng(2)
    d, r, H = 6, 2, 6
    Q, K = rng.standard_normal((2, H, r, d))
    V = np.einsum("hik,hkj->hij", rng.standard_normal((H, d, r)), rng.standard_normal((H, r, d)))  # rank r
    meta = {"construction": "test", "layout": "single-layer", "d": d, "r": r, "H": H}
    meta.update(temperature=2.0, predicted_error=math.nan)
    path = save_weights(tmp_path / "low.safetensors", {"Q": Q, "K": K, "V": V}, meta)
    model = theory_model_from_file(path, value="standard")
    X, y = unit_rows(rng, 5, 3, d), unit_rows(rng, 5, d)
    reference = multihead_attention(Q, K, V, X, y, temperature=2.0)
    np.testing.assert_allclose(run(model, X, y), reference, rtol=0, atol=1e-11)
    full = save_weights(tmp_path / "full.safetensors", {"Q": Q, "K": K, "V": rng.standard_normal((H, d, d))}, meta)
    with pytest.raises(ValueError, match="rank"):
        theory_model_from_file(full, value="standard")


@pytest.mark.parametrize("value", ["full", "standard"])
@pytest.mark.parametrize("temperature", [3.0, math.inf])
def test_heads_load_into_a_larger_encoder_attention(value: str, temperature: float) -> None:
    """Evaluator heads (H = 3, r = 2, score bias) into a module with more heads, a larger rank, its own temperature and
    the default 1/sqrt(rank) score scale: padded heads add nothing and the scores are rescaled exactly."""
    rng = np.random.default_rng(3)
    d, r, H, N = 6, 2, 3, 4
    Q, K = rng.standard_normal((2, H, r, d))
    V = np.einsum("hik,hkj->hij", rng.standard_normal((H, d, 3)), rng.standard_normal((H, 3, d)))  # rank 3
    bias = rng.standard_normal((H, N))
    attention = "hardmax" if math.isinf(temperature) else "softmax"
    module = RankedMultiheadAttention(d, 3, width=2, value=value, attention=attention, temperature=0.9, dtype=f64)
    module.reset_parameters(generator=torch.Generator().manual_seed(0))
    assert module.heads == 4
    module_bias = load_attention_heads(module, Q, K, V, temperature, score_bias=bias)
    X, y = unit_rows(rng, 6, N, d), unit_rows(rng, 6, d)
    with torch.no_grad():
        ours = module(torch.from_numpy(y)[:, None], torch.from_numpy(X), score_bias=module_bias)[:, 0].numpy()
    reference = multihead_attention(Q, K, V, X, y, temperature=temperature, score_bias=bias)
    np.testing.assert_allclose(ours, reference, rtol=0, atol=1e-11)


def test_mismatches_are_refused(tmp_path: Path) -> None:
    rng = np.random.default_rng(4)
    path = single_layer_file(tmp_path / "w.safetensors", rng, 6, 2, 5, 2.0)
    with pytest.raises(ValueError, match="temperature"):
        load_theory_model(TheoryModel.single_layer(6, AttentionSpec.theory(2, 3.0), 5, dtype=f64), path)
    with pytest.raises(ValueError, match="do not fit"):
        load_theory_model(TheoryModel.single_layer(6, AttentionSpec.theory(2, 2.0), 4, dtype=f64), path)
    with pytest.raises(ValueError, match="single_layer"):
        load_theory_model(TheoryModel(6, AttentionSpec.theory(2, 2.0), 5, dtype=f64), path)
    hard = RankedMultiheadAttention(6, 2, width=2, attention="hardmax", dtype=f64)
    wf = load_weights(path)
    with pytest.raises(ValueError, match="softmax module"):
        load_attention_heads(hard, wf.tensors["Q"], wf.tensors["K"], wf.tensors["V"], 2.0)


def nearest_errors(model: TheoryModel, X: np.ndarray, y: np.ndarray, reference: np.ndarray) -> tuple[np.ndarray, ...]:
    """Per-sample squared errors against the nearest-neighbour target: (ours, the evaluator's)."""
    target = nearest_neighbor(X, y)
    return np.sum((run(model, X, y) - target) ** 2, axis=1), np.sum((reference - target) ** 2, axis=1)


@pytest.mark.parametrize("temperature", [25.0, math.inf])
def test_full_rank_construction_file(tmp_path: Path, temperature: float) -> None:
    """constructions.full_rank: outputs and errors equal the evaluator's; the Monte Carlo error (n = 20000, D_2)
    matches the file's predicted error (Fact 1's exact D_2 error) within 4 standard errors; hardmax is exact."""
    d, n = 8, 20000
    path = save_full_rank(tmp_path / "fr.safetensors", d, temperature)
    wf = load_weights(path)
    model = theory_model_from_file(path)
    X, y = sample_context(n, 2, d, np.random.default_rng(5), keys="orthonormal")
    t = wf.tensors
    reference = multihead_attention(t["Q"], t["K"], t["V"], X, y, temperature=temperature)
    np.testing.assert_allclose(run(model, X, y), reference, rtol=0, atol=TOL)
    ours, theirs = nearest_errors(model, X, y, reference)
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=TOL)
    if math.isinf(temperature):
        assert ours.max() < 1e-24
    else:
        stderr = ours.std(ddof=1) / math.sqrt(n)
        assert abs(ours.mean() - wf.predicted_error) <= 4 * stderr, (ours.mean(), wf.predicted_error, stderr)


@pytest.mark.parametrize("temperature", [40.0, math.inf])
def test_biased_construction_file(tmp_path: Path, temperature: float) -> None:
    """constructions.biased (single-layer with score_bias): outputs equal the evaluator's; the error against
    theory.biased_target (n = 4000 Gaussian-query samples) matches the predicted error within 4 standard errors."""
    d, n = 6, 4000
    construction = build_biased_construction(d, temperature)
    path = save_biased_construction(tmp_path / "b.safetensors", construction)
    wf = load_weights(path)
    model = theory_model_from_file(path)
    X, y = sample_biased_context(n, d, np.random.default_rng(6))
    t = wf.tensors
    reference = multihead_attention(t["Q"], t["K"], t["V"], X, y, temperature=temperature, score_bias=t["score_bias"])
    ours = run(model, X, y)
    scale = max(1.0, float(np.abs(reference).max()))
    np.testing.assert_allclose(ours, reference, rtol=0, atol=TOL * 100 * scale)
    errors = np.sum((ours - biased_target(X, y, construction.grid)) ** 2, axis=1)
    stderr = errors.std(ddof=1) / math.sqrt(n)
    assert abs(errors.mean() - wf.predicted_error) <= 4 * stderr + 1e-9, (errors.mean(), wf.predicted_error, stderr)


@pytest.mark.parametrize("temperature", [30.0, math.inf])
def test_majority_vote_construction_file(tmp_path: Path, temperature: float) -> None:
    """constructions.majority_vote (multi-layer, rank 1): outputs and errors equal multilayer_forward's."""
    d, n = 8, 3000
    vote = build_majority_vote(d, 41, np.random.default_rng(7), temperature, predict=False)
    path = save_weights(tmp_path / "mv.safetensors", multilayer_tensors(vote.weights), vote.metadata())
    model = theory_model_from_file(path)
    assert model.rank == 1 and model.layer_heads == [41, 1]
    X, y = sample_context(n, 2, d, np.random.default_rng(8), keys="orthonormal")
    reference = multilayer_forward(vote.weights, X, y, temperature=temperature, update=model.update)
    np.testing.assert_allclose(run(model, X, y), reference, rtol=0, atol=TOL * 100)
    ours, theirs = nearest_errors(model, X, y, reference)
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=TOL * 100)
    assert ours.mean() < 0.5  # better than the query-blind average (x_1 + x_2) / 2 (error 1/2)


def test_tournament_construction_file(tmp_path: Path) -> None:
    """constructions.tournament (three layers, N = 3): outputs equal multilayer_forward's (hardmax)."""
    d, N, n = 6, 3, 2000
    tournament = build_tournament(d, N, 25, np.random.default_rng(9))
    path = save_weights(tmp_path / "t.safetensors", multilayer_tensors(tournament.weights), tournament.metadata())
    model = theory_model_from_file(path)
    X, y = sample_context(n, N, d, np.random.default_rng(10), keys="iid")
    reference = multilayer_forward(tournament.weights, X, y, temperature=math.inf, update=model.update)
    np.testing.assert_allclose(run(model, X, y), reference, rtol=0, atol=TOL * 100)
    ours, theirs = nearest_errors(model, X, y, reference)
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=TOL * 100)


def test_random_features_construction_file(tmp_path: Path) -> None:
    """constructions.random_features (H rank-1 hardmax heads, V_h = a_h I): outputs equal the evaluator's, and the
    Monte Carlo error (n = 10000, D_2) matches the exact predicted error 1 - b^T C^{-1} b within 4 standard errors;
    it also loads into rank-1 standard heads (each V_h = a_h I has rank d > 1, so that must be refused)."""
    d, H, n = 8, 64, 10000
    construction = construct_random_features(d, H, np.random.default_rng(11))
    tensors = attention_weights_of(construction.q, construction.k, construction.weights.a)
    path = save_weights(tmp_path / "rf.safetensors", tensors, random_features_metadata(construction, seed=11))
    wf = load_weights(path)
    model = theory_model_from_file(path)
    X, y = sample_context(n, 2, d, np.random.default_rng(12), keys="orthonormal")
    reference = multihead_attention(tensors["Q"], tensors["K"], tensors["V"], X, y, temperature=math.inf)
    np.testing.assert_allclose(run(model, X, y), reference, rtol=0, atol=TOL * 10)
    ours, theirs = nearest_errors(model, X, y, reference)
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=TOL * 10)
    stderr = ours.std(ddof=1) / math.sqrt(n)
    assert abs(ours.mean() - wf.predicted_error) <= 4 * stderr, (ours.mean(), wf.predicted_error, stderr)
    with pytest.raises(ValueError, match="rank"):
        theory_model_from_file(path, value="standard")
