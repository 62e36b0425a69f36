"""Tests of constructions/import_torch.py: a stock nn.MultiheadAttention state dict as a single-layer weight file.

Independent references: the stock module's own forward (torch's implementation, not ours) on the same inputs, and
the weight file that `attnrank export` was given (export -> import must give it back). float64 throughout, so the
tolerances are a few hundred ulps of O(1) outputs; a wrong head count is the negative control that must fail them.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import save_file

from constructions.eval_tasks import get_task, task_options
from constructions.evaluate import evaluate_weight_file, weight_file_model
from constructions.export_torch import export_weights
from constructions.full_rank import save_full_rank
from constructions.import_torch import IMPORTED_CONSTRUCTION, import_torch_mha, torch_mha_import
from constructions.weights_io import WeightFile, load_weights, save_weights
from theory.monte_carlo import estimate_error

EPS = float(np.finfo(np.float64).eps)
TOLERANCE = 256 * EPS
"""Outputs of norm O(1) computed by two float64 implementations that sum in different orders."""


def random_module(d: int, heads: int, seed: int, *, key_bias: bool = False) -> torch.nn.MultiheadAttention:
    """A stock module with random weights (biases zero except, optionally, the key bias)."""
    module = torch.nn.MultiheadAttention(d, heads, batch_first=True, dtype=torch.float64)
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        module.in_proj_weight.copy_(
            torch.randn(3 * d, d, generator=generator, dtype=torch.float64) * 1.5 / math.sqrt(d)
        )
        module.out_proj.weight.copy_(torch.randn(d, d, generator=generator, dtype=torch.float64) / math.sqrt(d))
        if key_bias:
            module.in_proj_bias[d : 2 * d] = torch.randn(d, generator=generator, dtype=torch.float64)
    return module.eval()


def samples(n: int, N: int, d: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, N, d))
    X /= np.linalg.norm(X, axis=-1, keepdims=True)  # (n, N, d)
    y = rng.standard_normal((n, d))
    y /= np.linalg.norm(y, axis=-1, keepdims=True)  # (n, d)
    return X, y


def stock_output(module: torch.nn.MultiheadAttention, X: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The module called as mha(y[:, None], X, X): (n, d)."""
    with torch.no_grad():
        query = torch.from_numpy(y)[:, None]  # (n, 1, d)
        return module(query, torch.from_numpy(X), torch.from_numpy(X))[0][:, 0].numpy()


def imported_model(module: torch.nn.MultiheadAttention, heads: int):  # noqa: ANN201 - the evaluator's model
    imported = torch_mha_import(module.state_dict(), heads)
    return weight_file_model(WeightFile(imported.tensors, imported.metadata)), imported


@pytest.mark.parametrize("d, heads", [(4, 1), (6, 3), (8, 2), (6, 6)])
def test_a_random_stock_module_and_its_import_compute_the_same_outputs(d: int, heads: int) -> None:
    module = random_module(d, heads, seed=d * 10 + heads, key_bias=True)
    model, imported = imported_model(module, heads)
    X, y = samples(200, 5, d, seed=1)
    gap = float(np.abs(model(X, y) - stock_output(module, X, y)).max())
    print(f"d = {d}, H = {heads}: max |import - stock| = {gap:.3g} (tolerance {TOLERANCE:.3g})")
    assert gap < TOLERANCE
    assert imported.metadata["r"] == d // heads and imported.metadata["temperature"] == 1.0
    assert any("key part" in note for note in imported.notes)  # the key bias was dropped: softmax cancels it


def test_a_wrong_head_count_changes_the_outputs() -> None:
    """Negative control: num_heads is not in the weights; reading 3 heads as 1 must fail the comparison above."""
    module = random_module(6, 3, seed=4)
    model, _ = imported_model(module, 1)
    X, y = samples(100, 4, 6, seed=2)
    assert float(np.abs(model(X, y) - stock_output(module, X, y)).max()) > 1e6 * TOLERANCE


def test_eval_of_the_import_equals_the_stock_modules_monte_carlo_error(tmp_path: Path) -> None:
    """Same samples (same seed) through the stock module and through `evaluate` of the imported file."""
    d, heads, N, n, seed = 6, 2, 3, 3000, 5
    module = random_module(d, heads, seed=9)
    torch.save(module.state_dict(), tmp_path / "mha.pt")
    import_torch_mha(tmp_path / "mha.pt", heads, tmp_path / "imported.safetensors")
    ours = evaluate_weight_file(
        tmp_path / "imported.safetensors", task="nearest", N=N, samples=n, seed=seed, keys="iid"
    )
    spec = get_task("nearest")
    options = task_options("nearest", d, N, "iid", {})
    stock = estimate_error(
        lambda X, y: stock_output(module, X, y),
        lambda X, y: spec.target(X, y, options),
        lambda m, rng: spec.sampler(m, rng, options),
        n,
        np.random.default_rng(seed),
        batch_size=10_000,
    )
    print(f"mse: imported {ours['mse']!r}, stock {stock.mean!r} (n = {n})")
    assert abs(ours["mse"] - stock.mean) <= 1e3 * EPS * stock.mean
    assert ours["construction"] == IMPORTED_CONSTRUCTION and math.isnan(ours["predicted_error"])


def test_export_then_import_gives_the_full_rank_file_back(tmp_path: Path) -> None:
    original = load_weights(save_full_rank(tmp_path / "full.safetensors", 5, 7.0))
    export_weights(original, "torch-mha", tmp_path / "mha.safetensors")
    imported, _ = import_torch_mha(tmp_path / "mha.safetensors", 1, tmp_path / "back.safetensors")
    back = load_weights(tmp_path / "back.safetensors")
    for name in ("Q", "K", "V"):
        np.testing.assert_allclose(back.tensors[name], original.tensors[name], rtol=4 * EPS, atol=4 * EPS)
    assert back.temperature == original.temperature == 7.0
    assert back.metadata["source_construction"] == "full-rank" and back.metadata["source"] == "mha.safetensors"


def test_export_then_import_of_several_low_rank_heads(tmp_path: Path) -> None:
    """H = 2 heads of rank 2 < d/H = 3 (the export zero-pads, the import trims) and value maps of rank 3."""
    rng = np.random.default_rng(0)
    d, heads, r = 6, 2, 2
    Q, K = rng.standard_normal((heads, r, d)), rng.standard_normal((heads, r, d))
    V = np.einsum("hdk,hke->hde", rng.standard_normal((heads, d, 3)), rng.standard_normal((heads, 3, d)))  # rank 3
    meta = {"construction": "test", "layout": "single-layer", "d": d, "r": r, "H": heads, "temperature": 2.5}
    meta["predicted_error"] = math.nan
    original = load_weights(save_weights(tmp_path / "file.safetensors", {"Q": Q, "K": K, "V": V}, meta))
    export_weights(original, "torch-mha", tmp_path / "mha.safetensors")
    imported, _ = import_torch_mha(tmp_path / "mha.safetensors", heads, tmp_path / "back.safetensors")
    back = load_weights(tmp_path / "back.safetensors")
    assert back.metadata["r"] == r and back.temperature == 2.5
    np.testing.assert_allclose(back.tensors["Q"], Q, rtol=16 * EPS, atol=16 * EPS)
    np.testing.assert_allclose(back.tensors["K"], K, rtol=0, atol=0)
    np.testing.assert_allclose(back.tensors["V"], V, atol=64 * EPS * np.abs(V).max())
    assert any("trimmed" in note for note in imported.notes)


def _biased(d: int, heads: int, part: str) -> dict[str, torch.Tensor]:
    module = random_module(d, heads, seed=11)
    generator = torch.Generator().manual_seed(12)
    with torch.no_grad():
        if part == "query":
            module.in_proj_bias[:d] = torch.randn(d, generator=generator, dtype=torch.float64)
        elif part == "value":
            module.in_proj_bias[2 * d :] = torch.randn(d, generator=generator, dtype=torch.float64)
        elif part == "output":
            module.out_proj.bias.copy_(torch.randn(d, generator=generator, dtype=torch.float64))
        elif part == "cancelling":  # b_o = -W_o b_v: the value and output biases cancel exactly
            b_v = torch.randn(d, generator=generator, dtype=torch.float64)
            module.in_proj_bias[2 * d :] = b_v
            module.out_proj.bias.copy_(-(module.out_proj.weight @ b_v))
    return module.state_dict()


@pytest.mark.parametrize(
    "part, reason", [("query", "key-dependent score"), ("value", "constant output"), ("output", "constant output")]
)
def test_biases_a_weight_file_cannot_hold_are_refused_with_the_reason(part: str, reason: str) -> None:
    with pytest.raises(ValueError, match=reason):
        torch_mha_import(_biased(6, 2, part), 2, source="mha.pt")


def test_value_and_output_biases_that_cancel_are_accepted() -> None:
    state = _biased(6, 2, "cancelling")
    module = torch.nn.MultiheadAttention(6, 2, batch_first=True, dtype=torch.float64)
    module.load_state_dict(state)
    imported = torch_mha_import(state, 2)
    X, y = samples(50, 3, 6, seed=3)
    model = weight_file_model(WeightFile(imported.tensors, imported.metadata))
    assert float(np.abs(model(X, y) - stock_output(module.eval(), X, y)).max()) < TOLERANCE


def test_a_prefixed_state_dict_and_a_module_without_biases() -> None:
    module = torch.nn.MultiheadAttention(4, 2, bias=False, batch_first=True, dtype=torch.float64)
    state = {f"encoder.attn.{k}": v for k, v in module.state_dict().items()}
    imported = torch_mha_import(state, 2)
    assert imported.tensors["V"].shape == (2, 4, 4)


@pytest.mark.parametrize(
    "edit, named",
    [
        ("no-out", "missing key 'out_proj.weight'"),
        ("one-bias", "missing key 'out_proj.bias'"),
        ("separate", "separate q/k/v projections"),
        ("bias-kv", "add_bias_kv"),
        ("unexpected", "unexpected key 'extra'"),
        ("shape", "'out_proj.weight' has shape (4, 5)"),
        ("two-modules", "several attention modules"),
        ("none", "no in_proj_weight"),
    ],
)
def test_structure_refusals_name_the_key(edit: str, named: str) -> None:
    state = dict(torch.nn.MultiheadAttention(4, 2, dtype=torch.float64).state_dict())
    if edit == "no-out":
        del state["out_proj.weight"]
    elif edit == "one-bias":
        del state["out_proj.bias"]
    elif edit == "separate":
        state["q_proj_weight"] = torch.zeros(4, 4)
    elif edit == "bias-kv":
        state["bias_k"] = torch.zeros(1, 1, 4)
    elif edit == "unexpected":
        state["extra"] = torch.zeros(1)
    elif edit == "shape":
        state["out_proj.weight"] = torch.zeros(4, 5)
    elif edit == "two-modules":
        state = {**{f"a.{k}": v for k, v in state.items()}, **{f"b.{k}": v for k, v in state.items()}}
    elif edit == "none":
        state = {"Q": torch.zeros(1, 2, 4)}
    with pytest.raises(ValueError) as caught:
        torch_mha_import(state, 2, source="mha.pt")
    assert named in str(caught.value) and str(caught.value).startswith("mha.pt: ")


def test_argument_refusals(tmp_path: Path) -> None:
    state = torch.nn.MultiheadAttention(6, 2, dtype=torch.float64).state_dict()
    with pytest.raises(ValueError, match="num_heads must divide embed_dim d = 6"):
        torch_mha_import(state, 4)
    with pytest.raises(ValueError, match="num_heads must be an integer"):
        torch_mha_import(state, 0)
    with pytest.raises(TypeError, match="state_dict"):
        torch_mha_import([1, 2], 1)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="out must be"):
        import_torch_mha(tmp_path / "x.pt", 1, 3)  # type: ignore[arg-type]


def test_export_metadata_is_checked_not_trusted(tmp_path: Path) -> None:
    original = load_weights(save_full_rank(tmp_path / "full.safetensors", 4, 3.0))
    export = export_weights(original, "torch-mha", tmp_path / "mha.safetensors")
    with pytest.raises(ValueError, match="num_heads must be 1"):
        import_torch_mha(tmp_path / "mha.safetensors", 2, tmp_path / "x.safetensors")
    damaged = {**export.metadata, "q_scale": "5.0"}
    save_file({k: v.contiguous() for k, v in export.state_dict.items()}, str(tmp_path / "bad.safetensors"), damaged)
    with pytest.raises(ValueError, match="q_scale"):
        import_torch_mha(tmp_path / "bad.safetensors", 1, tmp_path / "x.safetensors")
    assert not (tmp_path / "x.safetensors").exists()
