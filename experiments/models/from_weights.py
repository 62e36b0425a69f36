"""Load construction weight files (constructions/weights_io.py layouts) into the torch models.

- `theory_model_from_file`: a `TheoryModel` that computes exactly what the file's reference evaluator computes
  (single-layer: theory.attention.multihead_attention with the file's temperature and optional score_bias;
  multi-layer: theory.multilayer.multilayer_forward with the file's temperature and update mode).
- `load_theory_model`: the same weights into an existing `TheoryModel` of matching shape.
- `load_attention_heads`: evaluator-form heads (Q, K, V, temperature) into any `RankedMultiheadAttention` (for
  example one layer of the paper's encoder), with zero-padding of extra heads and ranks and, for rank-r
  ("standard") value maps, an exact factorisation V_h = (1/c) O^h W_v^h by SVD (refused when rank V_h > r).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import torch

from constructions.weights_io import WeightFile, load_weights
from experiments.models.attention import RankedMultiheadAttention
from experiments.models.spec import AttentionSpec
from experiments.models.theory_model import TheoryModel
from theory.validation import check_array, check_choice, check_temperature

RANK_TOLERANCE = 1e-10
"""A value map counts as rank <= r when its (r+1)-th singular value is at most this times its largest."""


def _as_weight_file(weights: WeightFile | str | Path) -> WeightFile:
    return weights if isinstance(weights, WeightFile) else load_weights(weights)


@torch.no_grad()
def load_attention_heads(
    module: RankedMultiheadAttention,
    Q: np.ndarray | torch.Tensor,
    K: np.ndarray | torch.Tensor,
    V: np.ndarray | torch.Tensor,
    temperature: float,
    score_bias: np.ndarray | torch.Tensor | None = None,
) -> torch.Tensor | None:
    """Make ``module`` compute sum_h sum_i w[h, i] V_h x_i with w = softmax_i(temperature (<Q_h y, K_h x_i> + b[h, i])).

    Heads beyond the file's (module.heads > H) get Q = K = V = 0 (no contribution); a file rank below the module's is
    padded with zero rows. Q is rescaled by temperature / (module.temperature * module.score_scale) so the module's
    own temperature and score scale reproduce the file's scores; biases of the module are zeroed.

    Args:
        module: the target attention (embed_dim = d, rank >= r, heads >= H).
        Q: (H, r, d) query maps.
        K: (H, r, d) key maps.
        V: (H, d, d) value/output maps.
        temperature: the file's inverse temperature (math.inf = hardmax, which needs a hardmax module).
        score_bias: optional (H, N) score biases of the file.

    Returns:
        The (module.heads, N) score bias to pass to ``module.forward`` (None when ``score_bias`` is None).
    """
    Qa = check_array("Q", Q, ndim=3)
    H, r, d = Qa.shape
    Ka = check_array("K", K, shape=(H, r, d))
    Va = check_array("V", V, shape=(H, d, d))
    temperature = check_temperature(temperature)
    if d != module.embed_dim or r > module.rank or H > module.heads:
        raise ValueError(
            f"heads of shape (H, r, d) = ({H}, {r}, {d}) do not fit a module with embed_dim = {module.embed_dim}, "
            f"rank = {module.rank}, heads = {module.heads} (need equal d, r <= rank, H <= heads)"
        )
    hardmax = module.attention == "hardmax"
    if math.isinf(temperature) != hardmax:
        raise ValueError(
            f"a file with temperature = {temperature} needs a {'hardmax' if math.isinf(temperature) else 'softmax'} "
            f"module, got attention = {module.attention!r}"
        )
    # Module scores (without its temperature T_m): s a <Q y, K x> + b'. Softmax: T_m (s a qk + b') = T (qk + b) gives
    # a = T / (T_m s), b' = (T / T_m) b. Hardmax only needs a positive multiple of qk + b: a = 1, b' = s b.
    if hardmax:
        q_factor, bias_factor = 1.0, module.score_scale
    else:
        q_factor = temperature / (module.temperature * module.score_scale)
        bias_factor = temperature / module.temperature
    dtype, device = module.in_proj_weight.dtype, module.in_proj_weight.device
    Hm, rm = module.heads, module.rank
    Qp = np.zeros((Hm, rm, d))  # (H_module, r_module, d): zero-padded heads and rank rows
    Kp = np.zeros((Hm, rm, d))
    Vp = np.zeros((Hm, d, d))
    Qp[:H, :r], Kp[:H, :r], Vp[:H] = q_factor * Qa, Ka, Va
    as_tensor = lambda a: torch.as_tensor(a, dtype=dtype, device=device)  # noqa: E731
    if module.value == "full":
        module.load_heads(as_tensor(Qp), as_tensor(Kp), as_tensor(Vp))
    else:
        _load_standard(module, as_tensor(Qp), as_tensor(Kp), as_tensor(Vp))
    if score_bias is None:
        return None
    bias = check_array("score_bias", score_bias, ndim=2)
    if bias.shape[0] != H:
        raise ValueError(f"score_bias must have shape (H, N) with H = {H}, got {bias.shape}")
    padded = np.zeros((Hm, bias.shape[1]))  # (H_module, N)
    padded[:H] = bias_factor * bias
    return as_tensor(padded)


def _load_standard(module: RankedMultiheadAttention, Q: torch.Tensor, K: torch.Tensor, V: torch.Tensor) -> None:
    """Rank-r value/output maps: c V_h = O^h W_v^h from the SVD (exact when rank V_h <= r)."""
    H, r, d = Q.shape
    U, S, Vh = torch.linalg.svd(module.width * V)  # (H, d, d), (H, d), (H, d, d)
    if r < d:
        top = S[:, :1].clamp_min(torch.finfo(S.dtype).tiny)  # (H, 1)
        ratio = S[:, r:] / top  # (H, d - r)
        worst = int(ratio.max(dim=1).values.argmax())
        if float(ratio[worst].max()) > RANK_TOLERANCE:
            raise ValueError(
                f"value map V_{worst} has rank > {r} (singular values {S[worst, : r + 1].tolist()}...): a module with "
                "value='standard' holds rank-r value maps only; use value='full'"
            )
    root = S[:, :r].sqrt()  # (H, r)
    out = U[:, :, :r] * root[:, None, :]  # (H, d, r): O^h
    val = root[:, :, None] * Vh[:, :r, :]  # (H, r, d): W_v^h
    assert module.out_proj_weight is not None
    module.in_proj_weight.copy_(torch.cat([Q.reshape(H * r, d), K.reshape(H * r, d), val.reshape(H * r, d)]))
    module.out_proj_weight.copy_(out.permute(1, 0, 2).reshape(d, H * r))  # (d, H r): [O^0 | ... | O^{H-1}]
    for b in (module.in_proj_bias, module.out_proj_bias):
        if b is not None:
            b.zero_()


def theory_model_from_file(
    weights: WeightFile | str | Path,
    *,
    value: str = "full",
    hardmax_gradient: str = "none",
    surrogate_temperature: float = 1.0,
    dtype: torch.dtype = torch.float64,
    device: torch.device | str | None = None,
) -> TheoryModel:
    """A `TheoryModel` holding a weight file (either layout), computing what the file's reference evaluator computes.

    Args:
        weights: a path or a loaded `WeightFile`.
        value: "full" (exact for every file) or "standard" (rank-r value maps; refused when a V_h has rank > r).
        hardmax_gradient, surrogate_temperature: see `TheoryModel` (hardmax files only).
        dtype, device: of the parameters (float64 by default, the files' precision).

    Returns:
        The model; its ``metadata`` attribute holds the file's metadata.
    """
    wf = _as_weight_file(weights)
    value = check_choice("value", value, ("full", "standard"))
    meta = wf.metadata
    attention = AttentionSpec.theory(
        int(meta["r"]),
        wf.temperature,
        value=value,
        hardmax_gradient=hardmax_gradient,
        surrogate_temperature=surrogate_temperature,
    )
    if wf.layout == "single-layer":
        has_bias = "score_bias" in wf.tensors
        model = TheoryModel.single_layer(
            int(meta["d"]),
            attention,
            int(meta["H"]),
            context_length=int(meta["N"]) if has_bias else None,
            score_bias=has_bias,
            device=device,
            dtype=dtype,
        )
    else:
        model = TheoryModel(
            int(meta["d"]),
            attention,
            wf.layer_heads,
            layers=int(meta["L"]),
            positional_dim=int(meta["p"]),
            context_length=int(meta["N"]),
            update=str(meta["update"]),
            device=device,
            dtype=dtype,
        )
    load_theory_model(model, wf)
    model.metadata = dict(meta)  # type: ignore[assignment]
    return model


@torch.no_grad()
def load_theory_model(model: TheoryModel, weights: WeightFile | str | Path) -> None:
    """Copy a weight file into an existing `TheoryModel` of the same shape (temperatures must agree).

    Args:
        model: the target (same d, p, N, layer head counts and update mode as the file; rank >= the file's).
        weights: a path or a loaded `WeightFile`.
    """
    wf = _as_weight_file(weights)
    t = wf.tensors
    if not (wf.temperature == model.temperature or (math.isinf(wf.temperature) and math.isinf(model.temperature))):
        raise ValueError(f"the file's temperature {wf.temperature} differs from the model's {model.temperature}")
    layers = [layer for layer in model.attention_layers if isinstance(layer, RankedMultiheadAttention)]
    if wf.layout == "single-layer":
        if model.num_layers != 1 or model.residual or model.p != 0:
            raise ValueError("a single-layer file needs TheoryModel.single_layer (one layer, no residual, p = 0)")
        if ("score_bias" in t) != (model.score_bias is not None):
            raise ValueError("the file and the model must both have a score_bias or both not have one")
        bias = load_attention_heads(layers[0], t["Q"], t["K"], t["V"], wf.temperature, t.get("score_bias"))
        if model.score_bias is not None:
            assert bias is not None
            if bias.shape != model.score_bias.shape:
                raise ValueError(
                    f"score_bias shape {tuple(bias.shape)} differs from the model's {model.score_bias.shape}"
                )
            model.score_bias.copy_(bias)
        model.readout.copy_(torch.eye(model.d))
        return
    meta = wf.metadata
    expected = (int(meta["d"]), int(meta["p"]), int(meta["N"]), wf.layer_heads, str(meta["update"]))
    actual = (model.d, model.p, model.context_length, model.layer_heads, model.update)
    if expected != actual or not model.residual:
        raise ValueError(f"the file's (d, p, N, heads, update) = {expected} does not match the model's {actual}")
    for index, layer in enumerate(layers):
        prefix = f"layers.{index}."
        load_attention_heads(layer, t[prefix + "Q"], t[prefix + "K"], t[prefix + "V"], wf.temperature)
    dtype = model.readout.dtype
    model.context_codes.copy_(torch.as_tensor(t["context_codes"], dtype=dtype))
    model.query_code.copy_(torch.as_tensor(t["query_code"], dtype=dtype))
    model.readout.copy_(torch.as_tensor(t["readout"], dtype=dtype))
