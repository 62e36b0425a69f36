"""Train many small runs together in one process: stacked parameters, one vmapped forward/backward per step.

The runs of a sweep cell differ only in their seed (same architecture, task and schedule). Instead of K separate
training loops, :func:`train_batched` stacks the K models' parameters (``torch.func.stack_module_state``: each
parameter gains a leading axis K), evaluates all K models on their own batches with ``torch.func.vmap`` over
``torch.func.functional_call``, sums the K mean losses and takes one AdamW step on the stacked tensors. The runs stay
independent: the gradient of the sum with respect to model k's slice is the gradient of model k's own loss, and
AdamW (and the warm-up + cosine schedule) act elementwise, so each slice follows the same trajectory as
`experiments.training.loop.train` on that config, up to float rounding (vmapped matmuls may sum in another order).

Each model k gets exactly train()'s initialisation (``build_run(config_k)``) and train()'s batch stream
(``sampler_generator(seed_k)``), and the same epoch statistics (mean of ``log_every`` consecutive losses; best =
lowest epoch mean). On a GPU one step of K small models costs about as much as one step of one, which is the point;
on a CPU the gain is smaller (see benchmarks/bench_batched_training.py). There are no checkpoints: a batch of small
runs is restarted as a whole.
"""

from __future__ import annotations

import copy
import math
import time
import types
from collections.abc import Sequence
from dataclasses import replace

import torch
import torch.nn.functional as F
from torch.func import functional_call, stack_module_state, vmap

from experiments.models.attention import RankedMultiheadAttention
from experiments.tasks import Batch
from experiments.training.loop import TrainConfig, TrainResult, build_run, lr_factor, resolve_device, sampler_generator

SEED_ONLY = ("seed",)
"""The fields in which the configs of one batch may differ."""


def check_batchable(configs: Sequence[TrainConfig]) -> None:
    """ValueError unless the configs are >= 1 TrainConfigs that differ only in their seed (distinct seeds)."""
    if not configs or not all(isinstance(c, TrainConfig) for c in configs):
        raise ValueError("configs must be a non-empty sequence of TrainConfig")
    reference = replace(configs[0], seed=0)
    for config in configs[1:]:
        if replace(config, seed=0) != reference:
            differing = [k for k, v in config.to_dict().items() if k != "seed" and v != configs[0].to_dict()[k]]
            raise ValueError(f"configs of one batch may differ only in seed; these differ in {', '.join(differing)}")
    seeds = [c.seed for c in configs]
    if len(set(seeds)) != len(seeds):
        raise ValueError(f"configs of one batch need distinct seeds, got {seeds}")
    if configs[0].init is not None or configs[0].compile or configs[0].bf16:
        raise ValueError("batched training supports neither init weight files nor compile nor bf16")


def _unfused_self_attention(layer: RankedMultiheadAttention, x: torch.Tensor) -> torch.Tensor:
    """Standard softmax self-attention with plain torch ops, vmap-friendly: (B, N, d).

    The layer's fused training paths (a custom autograd.Function without vmap support, grouped SDPA calls without a
    CPU vmap batching rule) compute this same map: softmax_i(<q, k_i>) v_i per head, heads concatenated, times the
    averaged output blocks.
    """
    B, N, _ = x.shape
    q, k, values = layer._project(x, None)[:3]  # each (B, H, N, r)
    # Plain softmax attention (scaled_dot_product_attention has no vmap batching rule on the CPU).
    scores = torch.einsum("bhir,bhjr->bhij", q, k) * (layer.temperature * layer.score_scale)  # (B, H, N, N)
    if layer.causal:
        future = torch.ones(N, N, dtype=torch.bool, device=x.device).triu(1)  # (N, N): j > i
        scores = scores.masked_fill(future, -math.inf)
    mixed = torch.einsum("bhij,bhjr->bhir", torch.softmax(scores, dim=-1), values)  # (B, H, N, r)
    mixed = mixed.transpose(1, 2).reshape(B, N, layer.heads * layer.rank)  # (B, N, H r)
    assert layer.out_proj_weight is not None
    out = F.linear(mixed, layer.out_proj_weight) * (1.0 / layer.width)  # (B, N, d)
    if layer.out_proj_bias is not None:
        out = out + layer.out_proj_bias.mean(dim=0)  # (B, N, d)
    return out


def train_batched(configs: Sequence[TrainConfig]) -> list[TrainResult]:
    """Train K seed-only-different configs together (see the module docstring).

    Args:
        configs: K TrainConfigs equal except for distinct seeds.

    Returns:
        K TrainResults (same meaning as train()'s), in the order of ``configs``.
    """
    check_batchable(configs)
    first = configs[0]
    device = resolve_device(first.device)
    runs = [build_run(c, device) for c in configs]
    task = runs[0][0]
    models = [model for _, model in runs]
    for model in models:
        model.train()
    params, buffers = stack_module_state(models)  # each value: (K, *shape)
    base = copy.deepcopy(models[0]).to("meta")
    for layer in base.modules():
        if isinstance(layer, RankedMultiheadAttention):
            # Every fused standard-softmax self-attention path of the layer computes the same map; route them all
            # through plain ops that vmap can batch.
            for name in ("_chunked_self_attention", "_blockwise_self_attention"):
                if hasattr(layer, name):
                    setattr(layer, name, types.MethodType(_unfused_self_attention, layer))
    generators = [sampler_generator(c.seed) for c in configs]
    optimizer = torch.optim.AdamW(
        list(params.values()), lr=first.lr, betas=first.betas, weight_decay=first.weight_decay
    )
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: lr_factor(s, first.steps, first.warmup_fraction))

    def one_loss(p: dict, b: dict, tokens: torch.Tensor, target: torch.Tensor, context: torch.Tensor) -> torch.Tensor:
        batch = Batch(tokens=tokens, target=target, context=context)
        prediction = functional_call(base, (p, b), (batch,))
        return task.error(prediction.float(), target).mean()

    def one_query_loss(
        p: dict, b: dict, tokens: torch.Tensor, target: torch.Tensor, context: torch.Tensor, query: torch.Tensor
    ) -> torch.Tensor:
        batch = Batch(tokens=tokens, target=target, context=context, query=query)
        prediction = functional_call(base, (p, b), (batch,))
        return task.error(prediction.float(), target).mean()

    K = len(configs)
    running = torch.zeros(K, dtype=torch.float64, device=device)  # open epoch's loss sums
    best = [math.inf] * K
    last = [math.nan] * K
    diverged = [False] * K
    epoch_count = 0
    started = time.perf_counter()
    for step in range(1, first.steps + 1):
        batches = [task.sample(first.batch_size, g).to(device) for g in generators]
        tokens = torch.stack([b.tokens for b in batches])  # (K, B, T, d)
        target = torch.stack([b.target for b in batches])  # (K, B, ...)
        context = torch.stack([b.context for b in batches])  # (K, B, N, d)
        if batches[0].query is not None:
            query = torch.stack([b.query for b in batches if b.query is not None])  # (K, B, d)
            losses = vmap(one_query_loss)(params, buffers, tokens, target, context, query)  # (K,)
        else:
            losses = vmap(one_loss)(params, buffers, tokens, target, context)  # (K,)
        optimizer.zero_grad(set_to_none=True)
        losses.sum().backward()
        optimizer.step()
        scheduler.step()
        running += losses.detach().double()
        epoch_count += 1
        if epoch_count == first.log_every or step == first.steps:
            means = (running / epoch_count).tolist()
            for k, mean in enumerate(means):
                if diverged[k]:
                    continue
                if not math.isfinite(mean):
                    diverged[k] = True
                    continue
                last[k], best[k] = mean, min(best[k], mean)
            running.zero_()
            epoch_count = 0
    seconds = time.perf_counter() - started
    return [
        TrainResult(
            final_loss=math.nan if diverged[k] else last[k],
            best_loss=best[k],
            steps=first.steps,
            diverged=diverged[k],
            seconds=seconds / K,
            extra={"batched": K},
        )
        for k in range(K)
    ]
