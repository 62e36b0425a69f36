"""The paper's optimiser and learning-rate schedule: AdamW, linear warm-up over the first steps, then cosine decay to 0.

docs/paper.md section 6: AdamW (lr 0.01, betas (0.9, 0.95), no weight decay), warm-up over the first 5% of the steps.
The schedule's length is ``TrainConfig.schedule_length`` (``schedule_steps``, or the run's ``steps``) and its warm-up
``TrainConfig.warmup_length`` (``warmup_steps``, or a fraction of the length), so a run of 20k steps can follow the
first fifth of a 100k-step schedule and be extended along it later (`TrainConfig.extends`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import torch

from experiments.config import TrainConfig


def lr_factor(step: int, steps: int, warmup: int) -> float:
    """Learning-rate multiplier of optimiser step ``step`` (0-based) of a ``steps``-step schedule: linear warm-up over
    ``warmup`` steps, then cosine decay to 0.

    Warm-up steps s < W = warmup have factors (s + 1) / W; the remaining steps follow
    (1 + cos(pi * (s - W) / (steps - W))) / 2, which starts at 1 and ends just above 0. The factor of a step depends
    on the schedule alone, not on where a run stops along it.
    """
    if step < warmup:
        return (step + 1) / warmup
    remaining = max(steps - warmup, 1)
    return 0.5 * (1.0 + math.cos(math.pi * (step - warmup) / remaining))


def make_optimizer(
    parameters: Iterable[torch.Tensor], config: TrainConfig
) -> tuple[torch.optim.Optimizer, torch.optim.lr_scheduler.LambdaLR]:
    """AdamW over ``parameters`` with the config's hyper-parameters and the warm-up + cosine schedule (LambdaLR).

    Args:
        parameters: the tensors to train (one model's, or the stacked parameters of seed-batched models).
        config: lr, betas, weight_decay and the schedule (`TrainConfig.schedule_length`, `warmup_length`).

    Returns:
        (optimizer, scheduler); call ``scheduler.step()`` after every ``optimizer.step()``.
    """
    optimizer = torch.optim.AdamW(list(parameters), lr=config.lr, betas=config.betas, weight_decay=config.weight_decay)
    steps, warmup = config.schedule_length, config.warmup_length
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: lr_factor(s, steps, warmup))
    return optimizer, scheduler


INIT_STEP_WARNING = 1e-2
"""`init_step_ratio` above which a run started from a weight file is warned that training will move it far."""


def init_step_ratio(parameters: Iterable[torch.Tensor], lr: float) -> float:
    """Relative size of one AdamW step at peak learning rate ``lr``: lr sqrt(P) / ||theta|| (inf when theta = 0).

    Adam normalises each coordinate's update by its gradient's running RMS, so while gradients are consistent (and
    at the first step exactly, eps aside) every one of the P coordinates moves by about lr whatever the gradient's
    size; the parameter vector moves by about lr sqrt(P), whose ratio to ||theta|| is returned. For a construction
    loaded with ``init`` this is the fraction of the weights one step can change; above `INIT_STEP_WARNING` (1%)
    a handful of steps can leave the construction's basin.
    """
    tensors = [p.detach() for p in parameters if p.requires_grad]
    count = sum(p.numel() for p in tensors)
    norm = math.sqrt(sum(float(p.double().pow(2).sum()) for p in tensors))
    return lr * math.sqrt(count) / norm if norm > 0 else math.inf
