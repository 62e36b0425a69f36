"""K small models of one architecture evaluated as one: stacked parameters and one batched forward pass for all K.

Every parameter of run k becomes slice k of a stacked (K, *shape) tensor, every matrix product becomes one batched
product over K (``torch.baddbmm``/``torch.bmm``), and every elementwise operation acts on all K runs at once, so the
per-operation costs of a step (dispatch, autograd bookkeeping, the optimiser's loop over tensors) are paid once for
K runs. The runs stay independent: no operation mixes slices, so the gradient of the sum of the K losses with respect
to slice k is the gradient of run k's own loss, and AdamW and the schedule act elementwise, so each slice follows its
own run's trajectory up to float rounding (the batched products may sum in another order than the unbatched ones).
What packing cannot remove is each run's own arithmetic and memory traffic (docs/training.md, "Packed runs", gives
the measured gains per preset).

Which runs may share a pack is `experiments.packing` (torch-free): they may differ in seed, score temperature and,
for the encoder, rank. Runs of an encoder pack are grouped into segments of equal rank, and each segment's attention
is computed on its heads' (K_s B, H, N, r) layout by the same core as the unpacked layer
(`attention_cores.grouped_attention`).

Supported models (`experiments.packing.unit_key` decides; `packing_refusal` says why anything else is not): the
paper's encoder (`models.encoder`, softmax attention with standard values, any width c, positional encodings none /
additive / concatenated, not causal) and the theory model (`models.theory_model`, softmax attention with full value
maps, the query-only update, any depth, concatenated scratch coordinates) on the query tasks. Parameter names are
those of the unpacked `TaskModel`, so run k's state dict is ``{name: stacked[name][k]}``.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F

from experiments.config import TrainConfig
from experiments.models.attention_cores import grouped_attention
from experiments.models.feed_forward import relu_feed_forward
from experiments.packing import check_one_unit
from experiments.tasks import Batch, Task

FFN_CHUNK_BYTES = 2 * 2**20
"""Largest hidden activation of the feed-forward block computed in one piece (see `PackedEncoder._feed_forward`)."""


def _stack(tensors: Sequence[torch.Tensor]) -> torch.Tensor:
    """A fresh leaf (K, *shape) tensor holding the K tensors, requiring grad."""
    return torch.stack([t.detach() for t in tensors]).requires_grad_(True)  # (K, *shape)


def _linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """Run k's ``F.linear(x[k], weight[k], bias[k])`` for every k.

    Args:
        x: (K, M, n_in); weight: (K, n_out, n_in); bias: (K, n_out) or None.

    Returns:
        (K, M, n_out).
    """
    if bias is None:
        return torch.bmm(x, weight.transpose(1, 2))  # (K, M, n_out)
    return torch.baddbmm(bias.unsqueeze(1), x, weight.transpose(1, 2))  # (K, M, n_out)


def _l2norm(x: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """Run k's ``L2Norm``: scale[k] x / ||x|| over the last axis. x: (K, ..., D); scale: (K,). Returns x's shape."""
    shape = (scale.shape[0],) + (1,) * (x.dim() - 1)
    return scale.view(shape) * F.normalize(x, dim=-1, eps=1e-12)


class PackedNetwork:
    """K models of one architecture as stacked parameters (names and order of the unpacked model's parameters).

    Args:
        models: the K freshly built (or restored) unpacked `TaskModel`s; their parameters are copied, not shared.
        configs: their K configs (one unit: `experiments.packing.unit_key` equal).
        task: the common task.
    """

    def __init__(self, models: Sequence[torch.nn.Module], configs: Sequence[TrainConfig], task: Task) -> None:
        if not models or len(models) != len(configs):
            raise ValueError(
                f"models and configs must be non-empty and of equal length, got {len(models)}, {len(configs)}"
            )
        check_one_unit(configs)
        self.configs, self.task, self.K = list(configs), task, len(configs)
        named = [dict(m.named_parameters()) for m in models]
        self.names = list(named[0])
        for k, parameters in enumerate(named):
            shapes = {n: tuple(p.shape) for n, p in parameters.items()}
            reference = {n: tuple(p.shape) for n, p in named[0].items()}
            if shapes != reference:
                raise ValueError(f"model {k} of the pack has other parameter shapes than model 0")
        if any(True for m in models for _ in m.buffers()):
            raise ValueError("models with buffers cannot be packed")
        self.stacked: dict[str, torch.Tensor] = {n: _stack([p[n] for p in named]) for n in self.names}  # (K, ...)
        self.parameters = [self.stacked[n] for n in self.names]
        self.device = self.parameters[0].device
        """Where the stacked parameters live; every fixed tensor of a pack (score scales) is made there too."""

    def state_dict_of(self, k: int) -> dict[str, torch.Tensor]:
        """Run k's unpacked state dict (copies)."""
        return {name: self.stacked[name][k].detach().clone() for name in self.names}

    @torch.no_grad()
    def load_state_dict_of(self, k: int, state: dict[str, torch.Tensor]) -> None:
        """Set run k's slice from an unpacked state dict."""
        for name in self.names:
            self.stacked[name][k].copy_(state[name])

    def predictions(self, batch: Batch) -> torch.Tensor:
        """Predictions of every run on its own batch (batch fields stacked: tokens (K, B, T, d), ...)."""
        raise NotImplementedError

    def losses(self, batch: Batch) -> torch.Tensor:
        """Run k's mean task error on its batch, for every k: (K,)."""
        prediction = self.predictions(batch).float()  # (K, B, ...)
        K, B = prediction.shape[:2]
        flat_prediction = prediction.reshape(K * B, *prediction.shape[2:])  # (K B, ...)
        flat_target = batch.target.reshape(K * B, *batch.target.shape[2:])  # (K B, ...)
        return self.task.error(flat_prediction, flat_target).view(K, B).mean(dim=1)  # (K,)


class PackedEncoder(PackedNetwork):
    """K paper encoders (`models.encoder.PaperEncoder` inside a `TaskModel`), ranks and temperatures per run."""

    def __init__(self, models: Sequence[torch.nn.Module], configs: Sequence[TrainConfig], task: Task) -> None:
        super().__init__(models, configs, task)
        first = configs[0]
        self.layers, self.width, self.positional = first.layers, first.width, first.positional
        self.D = first.model_width
        # Segments of consecutive runs of equal rank: (start, stop, rank).
        self.segments: list[tuple[int, int, int]] = []
        for k, config in enumerate(configs):
            if self.segments and self.segments[-1][2] == config.rank:
                start, _, rank = self.segments[-1]
                self.segments[-1] = (start, k + 1, rank)
            else:
                self.segments.append((k, k + 1, config.rank))
        # Scores are temperature * <q, k> / sqrt(r): folded into the query rows of the in-projection, as the unpacked
        # layer does, so the core receives pre-scaled queries.
        scales = torch.tensor(
            [c.temperature / c.rank**0.5 for c in configs], dtype=torch.float32, device=self.device
        )  # (K,)
        row_scale = torch.ones(self.K, 3, dtype=torch.float32, device=self.device)  # (K, 3): q, k, v rows
        row_scale[:, 0] = scales
        self.row_scale = row_scale

    def _attention(self, prefix: str, x: torch.Tensor) -> torch.Tensor:
        """Every run's `RankedMultiheadAttention` (softmax, standard values) on x (K, B, N, D): (K, B N, D)."""
        K, B, N, D = x.shape
        E = self.width * D  # projected coordinates per q / k / v: H r = c D
        p = self.stacked
        row_scale = self.row_scale.to(x.dtype)[:, :, None, None]  # (K, 3, 1, 1)
        weight = (p[prefix + "in_proj_weight"].view(K, 3, E, D) * row_scale).view(K, 3 * E, D)  # (K, 3E, D)
        bias = p.get(prefix + "in_proj_bias")
        if bias is not None:
            bias = (bias.view(K, 3, E) * row_scale[:, :, :, 0]).view(K, 3 * E)  # (K, 3E)
        qkv = _linear(x.reshape(K, B * N, D), weight, bias)  # (K, B N, 3E)
        mixed = []
        for start, stop, r in self.segments:
            Ks, H = stop - start, E // r
            # (Ks, B, N, 3, H, r) -> 3 x (Ks B, H, N, r): run-major, then sample, as the unpacked (B, H, N, r) layout.
            part = qkv[start:stop].reshape(Ks * B, N, 3, H, r)
            q, k, v = (t.transpose(1, 2) for t in part.unbind(2))  # 3 x (Ks B, H, N, r)
            out = grouped_attention(q, k, v, 1.0, False)  # (Ks B, H, N, r); queries already scaled
            mixed.append(out.transpose(1, 2).reshape(Ks, B * N, E))  # (Ks, B N, E)
        joined = mixed[0] if len(mixed) == 1 else torch.cat(mixed, dim=0)  # (K, B N, E)
        out_weight = p[prefix + "out_proj_weight"]  # (K, D, E)
        if self.width != 1:
            out_weight = out_weight * (1.0 / self.width)  # the average over the c blocks
        out_bias = p.get(prefix + "out_proj_bias")
        if out_bias is not None:
            out_bias = out_bias.mean(dim=1)  # (K, D): the blocks' mean output bias
        return _linear(joined, out_weight, out_bias)  # (K, B N, D)

    def _feed_forward(self, prefix: str, h: torch.Tensor) -> torch.Tensor:
        """Every run's ReLU feed-forward block on h (K, M, D): (K, M, D), a few runs at a time.

        The hidden activations are the one large tensor of a small run ((B N, F) floats: 1 MiB at B N = 1024,
        F = 256). Computed for all K runs at once they leave the processor's caches, and the products and the ReLU
        (forward and backward) then run at memory speed: measured on a 2-core AMD EPYC (512 KiB L2 per core, one
        thread), the block's forward + backward for K = 10 took 43 ms in one piece against 19 ms in pieces of two
        runs and 17 ms run by run. So the runs pass through the block in chunks whose hidden activations fit in
        `FFN_CHUNK_BYTES`. On a GPU the block is one batched product for all K runs (chunks would only add kernel
        launches, and the GPU's memory bandwidth is what the products are tuned for). Each chunk goes through
        `feed_forward.relu_feed_forward` in its batched form, the function the unpacked layer uses (ReLU in place,
        its mask applied in place in backward), so both compute the block by the same operations.
        """
        p = self.stacked
        K, M, _ = h.shape
        hidden_bytes = M * p[prefix + "linear1.weight"].shape[1] * h.element_size()
        chunk = max(1, FFN_CHUNK_BYTES // max(hidden_bytes, 1)) if h.device.type == "cpu" else K
        w1, b1 = p[prefix + "linear1.weight"], p.get(prefix + "linear1.bias")
        w2, b2 = p[prefix + "linear2.weight"], p.get(prefix + "linear2.bias")
        parts = []
        for start in range(0, K, chunk):
            part = slice(start, start + chunk)
            w1_part, b1_part = w1[part], None if b1 is None else b1[part]  # (k, F, D), (k, F)
            w2_part, b2_part = w2[part], None if b2 is None else b2[part]  # (k, D, F), (k, D)
            parts.append(relu_feed_forward(h[part], w1_part, b1_part, w2_part, b2_part))  # (k, M, D)
        return parts[0] if len(parts) == 1 else torch.cat(parts, dim=0)  # (K, M, D)

    def network(self, tokens: torch.Tensor) -> torch.Tensor:
        """The K encoders on tokens (K, B, N, d): outputs (K, B, N, d)."""
        p = self.stacked
        K, B, N, d = tokens.shape
        x = tokens
        if self.positional == "additive":
            x = x + p["network.position_table"][:, None, :N, :]  # (K, B, N, d)
        elif self.positional == "concat":
            table = p["network.position_table"]  # (K, max_length, p)
            codes = table[:, None, :N, :].expand(K, B, N, table.shape[-1])  # (K, B, N, p)
            x = torch.cat([x, codes], dim=-1)  # (K, B, N, D)
        D = x.shape[-1]
        for layer in range(self.layers):
            prefix = f"network.layers.{layer}."
            attended = self._attention(prefix + "self_attn.", x)  # (K, B N, D)
            h = _l2norm(x.reshape(K, B * N, D) + attended, p[prefix + "norm1.scale"])  # (K, B N, D)
            x = _l2norm(h + self._feed_forward(prefix, h), p[prefix + "norm2.scale"]).view(K, B, N, D)  # (K, B, N, D)
        if self.positional != "concat":
            return x
        if "network.readout.weight" in p:
            return _linear(x.reshape(K, B * N, D), p["network.readout.weight"], None).view(K, B, N, d)  # (K, B, N, d)
        return x[..., :d]  # (K, B, N, d)

    def predictions(self, batch: Batch) -> torch.Tensor:
        outputs = self.network(batch.tokens)  # (K, B, T, d)
        if self.task.query_task:
            return outputs[:, :, -1, :]  # (K, B, d): the answer sits at the query token
        return outputs  # (K, B, N, d)


class PackedTheoryModel(PackedNetwork):
    """K theory models (`models.theory_model.TheoryModel`, full value maps, query-only update), temperatures per run."""

    def __init__(self, models: Sequence[torch.nn.Module], configs: Sequence[TrainConfig], task: Task) -> None:
        super().__init__(models, configs, task)
        first = configs[0]
        self.layers, self.rank, self.heads = first.layers, first.rank, first.heads
        self.p, self.residual = first.positional_dim, first.layers > 1
        # The theory model's scores: temperature * <Q s_q, K s_i> (score scale 1).
        self.scales = torch.tensor([c.temperature for c in configs], dtype=torch.float32, device=self.device)  # (K,)

    def network(self, X: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """The K theory models on contexts X (K, B, N, d) and queries y (K, B, d): outputs (K, B, d)."""
        p = self.stacked
        K, B, N, d = X.shape
        H, r = self.heads, self.rank
        context, query = X, y  # (K, B, N, D), (K, B, D) once the codes are appended
        if self.p > 0:
            codes = p["network.context_codes"][:, None, :N, :].expand(K, B, N, self.p)  # (K, B, N, p)
            context = torch.cat([X, codes], dim=-1)  # (K, B, N, D)
            query = torch.cat([y, p["network.query_code"][:, None, :].expand(K, B, self.p)], dim=-1)  # (K, B, D)
        D = context.shape[-1]
        flat_context = context.reshape(K * B, N, D)  # (K B, N, D)
        scale = self.scales.to(X.dtype).view(K, 1, 1, 1)  # (K, 1, 1, 1)
        for layer in range(self.layers):
            prefix = f"network.attention_layers.{layer}."
            weight = p[prefix + "in_proj_weight"]  # (K, 2 H r, D): [Q rows | K rows]
            q = torch.bmm(query, weight[:, : H * r].transpose(1, 2)).view(K, B, 1, H, r)  # (K, B, 1, H, r)
            keys = torch.bmm(context.reshape(K, B * N, D), weight[:, H * r :].transpose(1, 2))  # (K, B N, H r)
            scores = (q * keys.view(K, B, N, H, r)).sum(dim=-1) * scale  # (K, B, N, H)
            w = torch.softmax(scores, dim=2)  # (K, B, N, H): over the N context tokens
            mixed = torch.bmm(w.reshape(K * B, N, H).transpose(1, 2), flat_context)  # (K B, H, D): sum_i w_hi s_i
            # sum_h V_h mixed_h: V (K, H, D_out, D_in) -> (K, D_out, H D_in), one product per run.
            V = p[prefix + "value_weight"].permute(0, 2, 1, 3).reshape(K, D, H * D)  # (K, D, H D)
            update = torch.bmm(mixed.view(K, B, H * D), V.transpose(1, 2))  # (K, B, D)
            query = query + update if self.residual else update
        return torch.bmm(query, p["network.readout"].transpose(1, 2))  # (K, B, d)

    def predictions(self, batch: Batch) -> torch.Tensor:
        assert batch.query is not None
        return self.network(batch.context, batch.query)  # (K, B, d)


def pack_models(models: Sequence[torch.nn.Module], configs: Sequence[TrainConfig], task: Task) -> PackedNetwork:
    """The packed network of K unpacked models (`PackedEncoder` or `PackedTheoryModel`, by ``configs[0].model``)."""
    if not configs:
        raise ValueError("a pack needs at least one run")
    if configs[0].model == "theory":
        return PackedTheoryModel(models, configs, task)
    return PackedEncoder(models, configs, task)
