"""The paper's optimiser and learning-rate schedule: AdamW, linear warm-up over the first steps, then cosine decay to 0.

docs/paper.md section 6: AdamW (lr 0.01, betas (0.9, 0.95), no weight decay), warm-up over the first 5% of the steps.
The schedule's length is ``TrainConfig.schedule_length`` (``schedule_steps``, or the run's ``steps``) and its warm-up
``TrainConfig.warmup_length`` (``warmup_steps``, or a fraction of the length), so a run of 20k steps can follow the
first fifth of a 100k-step schedule and be extended along it later (`TrainConfig.extends`).

The rate changes every step (``lr_interval`` "step", :func:`lr_factor`) or once per epoch (``lr_interval`` "epoch",
:func:`epoch_lr_factor`): the reference implementation hands its warm-up-and-cosine scheduler to Lightning, which steps
it at the end of every epoch, so each epoch trains at one rate and the first at 0 (docs/paper.md section 6). Either
way the factor of a step depends on the schedule alone, never on where a run stops or resumes.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

import torch

from experiments.config import TrainConfig
from experiments.samplers import get_sampler


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


def epoch_lr_factor(step: int, epoch_steps: int, steps: int, warmup: int) -> float:
    """Learning-rate multiplier of optimiser step ``step`` (0-based) when the rate changes once per epoch of
    ``epoch_steps`` steps: the reference's scheduler, stepped at the end of every epoch as Lightning steps it.

    With E = steps / epoch_steps epochs, W = warmup / epoch_steps warm-up epochs (both whole) and e = step //
    epoch_steps the step's epoch:

    - e < W: e / (W - 1), and 0 in epoch 0 (the reference's warm-up starts at its ``warmup_start_lr`` = 0 and climbs
      in W - 1 equal steps, so its last warm-up epoch already trains at the peak);
    - e >= W: (1 + cos(pi (e - W) / (E - W))) / 2, the cosine from the peak towards 0 (the reference's floor
      ``eta_min = lr // 10`` is 0 for every lr < 10).

    The reference writes the same values as a recursion (each epoch's rate from the last); the two agree to rounding
    (tests/experiments/training/test_schedule_extension.py). With W = 0 this is the cosine alone from epoch 0; the
    reference's own scheduler at W = 0 never leaves its starting rate 0, which is why `attnrank sweep --reference`
    refuses fewer than 20 epochs (W = max_epochs // 20).
    """
    epoch, epochs, warmup_epochs = step // epoch_steps, steps // epoch_steps, warmup // epoch_steps
    if epoch < warmup_epochs:
        return 0.0 if epoch == 0 else epoch / (warmup_epochs - 1)
    return 0.5 * (1.0 + math.cos(math.pi * (epoch - warmup_epochs) / (epochs - warmup_epochs)))


def schedule_factor(config: TrainConfig) -> Callable[[int], float]:
    """The multiplier of the peak learning rate at each optimiser step of ``config``'s run (its ``lr_interval``)."""
    steps, warmup = config.schedule_length, config.warmup_length
    if config.lr_interval == "epoch":
        epoch_steps = config.log_every
        return lambda step: epoch_lr_factor(step, epoch_steps, steps, warmup)
    return lambda step: lr_factor(step, steps, warmup)


OPTIMIZER_KINDS = ("default", "fused", "capturable")
"""AdamW implementations: torch's default (for-each on a list of tensors; every CPU run, and every run of sampler
"cpu" without capture), "fused" (one kernel per step on a GPU) and "capturable" (its step counts and learning rate
live on the GPU as tensors, so a CUDA graph can replay the step; the schedule writes the learning rate tensor in
place, with no read-back)."""


def optimizer_kind(config: TrainConfig, device: torch.device) -> str:
    """The AdamW implementation of a run on ``device`` (`OPTIMIZER_KINDS`): on CUDA, "capturable" for a step captured
    as a CUDA graph, "fused" for the other device-path runs (device sampler, or compile capture); else "default"."""
    if device.type != "cuda":
        return "default"
    if config.capture == "graph":
        return "capturable"
    if config.capture == "compile" or get_sampler(config.sampler).on_device:
        return "fused"
    return "default"


def make_optimizer(
    parameters: Iterable[torch.Tensor], config: TrainConfig, kind: str = "default"
) -> tuple[torch.optim.Optimizer, torch.optim.lr_scheduler.LambdaLR]:
    """AdamW over ``parameters`` with the config's hyper-parameters and the warm-up + cosine schedule (LambdaLR).

    Args:
        parameters: the tensors to train (one model's, or the stacked parameters of a pack).
        config: lr, betas, weight_decay and the schedule (`TrainConfig.schedule_length`, `warmup_length`,
            `lr_interval`: :func:`schedule_factor`).
        kind: the AdamW implementation (`OPTIMIZER_KINDS`, `optimizer_kind`); "capturable" holds the learning rate
            as a float32 tensor on the parameters' device (the scheduler fills it in place each step).

    Returns:
        (optimizer, scheduler); call ``scheduler.step()`` after every ``optimizer.step()``.
    """
    if kind not in OPTIMIZER_KINDS:
        raise ValueError(f"kind must be one of {', '.join(map(repr, OPTIMIZER_KINDS))}, got {kind!r}")
    tensors = list(parameters)
    options: dict[str, Any] = {}
    if kind == "fused":
        options["fused"] = True
    elif kind == "capturable":
        options.update(capturable=True, foreach=True)
    optimizer = torch.optim.AdamW(
        tensors, lr=config.lr, betas=config.betas, weight_decay=config.weight_decay, **options
    )
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, schedule_factor(config))
    if kind == "capturable":  # after the scheduler's first step, so initial_lr and base_lrs stay Python floats
        for group in optimizer.param_groups:
            group["lr"] = torch.tensor(group["lr"], dtype=torch.float32, device=tensors[0].device)
    return optimizer, scheduler


def scheduled_lr(scheduler: torch.optim.lr_scheduler.LRScheduler) -> float:
    """The learning rate the next optimiser step uses, as the scheduler computed it (a Python float, never read back
    from a device tensor)."""
    return float(scheduler.base_lrs[0]) * scheduler.lr_lambdas[0](scheduler.last_epoch)  # type: ignore[attr-defined]


def _number(value: Any) -> Any:
    return float(value) if isinstance(value, torch.Tensor) else value


def portable_optimizer_state(optimizer: torch.optim.Optimizer) -> dict[str, Any]:
    """The optimiser's state dict in the form the default AdamW writes (learning rates as floats, step counts as CPU
    float32 tensors, no fused / capturable flags), so a checkpoint resumes under any `OPTIMIZER_KINDS`."""
    state = optimizer.state_dict()
    groups = []
    for original in state["param_groups"]:
        group = dict(original)  # same keys, same order
        group["lr"] = _number(original["lr"])
        if "initial_lr" in group:
            group["initial_lr"] = _number(group["initial_lr"])
        group["capturable"], group["fused"] = False, None
        if "foreach" in group:
            group["foreach"] = None
        groups.append(group)
    entries = {}
    for index, entry in state["state"].items():
        entries[index] = {
            key: value.detach().to("cpu", torch.float32) if key == "step" and torch.is_tensor(value) else value
            for key, value in entry.items()
        }
    return {"state": entries, "param_groups": groups}


def portable_scheduler_state(scheduler: torch.optim.lr_scheduler.LRScheduler) -> dict[str, Any]:
    """The scheduler's state dict with every learning rate a Python float (`portable_optimizer_state`)."""
    state = scheduler.state_dict()
    for key in ("base_lrs", "_last_lr"):
        if key in state:
            state[key] = [_number(v) for v in state[key]]
    return state


def load_optimizer_state(optimizer: torch.optim.Optimizer, state: dict[str, Any]) -> None:
    """Load a state dict (portable or not) into ``optimizer`` keeping its own implementation: its fused / capturable
    / foreach flags stay, a tensor learning rate is filled in place, and step counts move where it keeps them."""
    own = [{k: g.get(k) for k in ("capturable", "fused", "foreach")} for g in optimizer.param_groups]
    rates = [g["lr"] for g in optimizer.param_groups]
    optimizer.load_state_dict(state)
    for group, flags, rate in zip(optimizer.param_groups, own, rates, strict=True):
        group.update(flags)
        if isinstance(rate, torch.Tensor):
            rate.fill_(_number(group["lr"]))
            group["lr"] = rate
        on_device = bool(flags["capturable"] or flags["fused"])
        for parameter in group["params"]:
            entry = optimizer.state.get(parameter)
            if entry and torch.is_tensor(entry.get("step")):
                where = parameter.device if on_device else torch.device("cpu")
                entry["step"] = entry["step"].to(where, torch.float32)


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
