"""The run axis: K models of one architecture computed as one module, every parameter stacked along a leading axis.

A pack (`experiments.training.packed`) trains K small runs in one step so that the per-operation costs of a step
(dispatch, autograd bookkeeping, the optimiser's loop over tensors) are paid once for K runs. The models are not
written twice for it: every model module (`encoder`, `attention`, `theory_model`, the `factory.TaskModel` around
them) computes either form. A single run's parameters have their own shapes and its inputs are (B, ...); a pack's
parameters are (K, *shape), run k's being slice k, and its inputs (K, B, ...). :func:`stack_models` turns K freshly
built (or restored) models into that one module; ``module.runs`` (None for a single run) says which form a module
is in. The few operations where the form matters go through the helpers here: a single run's arithmetic is exactly
the unpacked model's (``F.linear``), so its numbers are those of every run trained before packing existed; a pack's
products are one batched product per layer (``torch.bmm`` / ``torch.baddbmm``).

The runs of a pack stay independent: no operation mixes slices, so the gradient of the sum of the K losses with
respect to slice k is the gradient of run k's own loss; AdamW and the schedule act elementwise, so each slice follows
its own run's trajectory up to float rounding (a batched product may sum in another order than an unbatched one).
Which runs may share a pack is `experiments.packing` (torch-free): their model kind decides which fields may differ
(`experiments.model_kinds`); modules whose arithmetic holds such a field keep each run's own value when stacked
(`stack_runs`: the attention's score scale and, for standard value maps, its rank).

Why stacked parameters in the readable modules rather than ``torch.func`` (``vmap`` of ``functional_call`` over the
same modules): measured on the fig1 quick pack (8 runs, d = 16, N = 8, FFN 64, batch 128, one layer, ranks 16, 8,
4, 1), a training step through ``torch.func`` took 1.32x the thread CPU time of the run-axis step (median of 15
interleaved steps each, one thread, on a loaded 2-core machine: a ratio, not a timing), with bitwise the same
losses. ``vmap`` needs one call per rank (the head split differs), and the rank-1 attention core
(``scaled_dot_product_attention``) has no batching rule, so it falls back to a loop over runs.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn


def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """``F.linear`` for a single run; for a pack, run k's ``F.linear(x[k], weight[k], bias[k])`` as one product.

    Args:
        x: (..., n_in) for a single run; (K, ..., n_in) for a pack.
        weight: (n_out, n_in), or (K, n_out, n_in) for a pack.
        bias: (n_out,), (K, n_out) or None.

    Returns:
        (..., n_out), or (K, ..., n_out).
    """
    if weight.dim() == 2:
        return F.linear(x, weight, bias)
    K, n_out, n_in = weight.shape
    flat = x.reshape(K, -1, n_in)  # (K, M, n_in): every run's tokens in a row
    if bias is None:
        out = torch.bmm(flat, weight.transpose(1, 2))  # (K, M, n_out)
    else:
        out = torch.baddbmm(bias.unsqueeze(1), flat, weight.transpose(1, 2))  # (K, M, n_out)
    return out.view(*x.shape[:-1], n_out)  # (K, ..., n_out)


def per_run(value: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """A pack's per-run values (K, *s) viewed to broadcast against ``like`` (K, ..., *s): (K, 1, ..., 1, *s)."""
    ones = (1,) * (like.dim() - value.dim())
    return value.view(value.shape[0], *ones, *value.shape[1:])


def run_count(module: nn.Module) -> int | None:
    """K for a module stacked by :func:`stack_models`, None for a single run's."""
    return getattr(module, "runs", None)


def stack_models(models: Sequence[nn.Module]) -> nn.Module:
    """One module computing the K models ``models`` (one architecture): a copy of the first whose every parameter is
    the K models' parameters stacked along a new leading axis (a fresh leaf: the models' own are copied, not shared).

    Every submodule gets ``runs = K``; a submodule with a ``stack_runs(modules)`` method is handed its K counterparts
    to keep what differs between runs (the attention's score scale and rank). Parameter names and order are the first
    model's, so run k's state dict is ``{name: parameter[k]}`` (:func:`run_state_dict`).

    Raises:
        ValueError: no models, models of other classes or parameter shapes than the first, or models with buffers.
    """
    if not models:
        raise ValueError("a pack needs at least one model")
    first = models[0]
    shapes = {name: tuple(p.shape) for name, p in first.named_parameters()}
    for k, model in enumerate(models):
        if type(model) is not type(first) or {n: tuple(p.shape) for n, p in model.named_parameters()} != shapes:
            raise ValueError(f"model {k} of the pack has another class or other parameter shapes than model 0")
        if any(True for _ in model.buffers()):
            raise ValueError("models with buffers cannot be packed")
    pack = copy.deepcopy(first)
    for name, module in pack.named_modules():
        module.runs = len(models)
        stack_runs = getattr(module, "stack_runs", None)
        if stack_runs is not None:
            stack_runs([model.get_submodule(name) for model in models])
    for name in shapes:
        owner_name, _, attribute = name.rpartition(".")
        stacked = torch.stack([model.get_parameter(name).detach() for model in models])  # (K, *shape)
        setattr(pack.get_submodule(owner_name), attribute, nn.Parameter(stacked))
    return pack


def run_state_dict(pack: nn.Module, k: int) -> dict[str, torch.Tensor]:
    """Run k's state dict (copies) from a module stacked by :func:`stack_models`: its model's own names and shapes."""
    return {name: parameter[k].detach().clone() for name, parameter in pack.named_parameters()}
