"""What a run is built from: its device (chosen here and nowhere else), task and freshly initialised model (its batch
generator is its sampler's, `experiments.samplers`). Reading a run directory back is `training.run_directory` (its
files) and `training.run_model` (its trained model)."""

from __future__ import annotations

import torch

from experiments.config import TrainConfig
from experiments.models.factory import build_model
from experiments.tasks import Task, make_task


def resolve_device(name: str) -> torch.device:
    """The one place where the run's device is chosen: "auto" is CUDA when available, else the CPU."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"device {name!r} requested but CUDA is not available on this machine")
    device = torch.device(name)
    if device.type == "cuda" and device.index is not None and device.index >= torch.cuda.device_count():
        raise ValueError(f"device {name!r} requested but this machine has {torch.cuda.device_count()} CUDA device(s)")
    return device


def build_run(config: TrainConfig, device: torch.device) -> tuple[Task, torch.nn.Module]:
    """The run's task and its freshly initialised model on ``device`` (parameters drawn from ``config.seed``).

    Initialisation uses a forked global torch RNG seeded with ``config.seed``, so the caller's RNG is untouched.
    """
    task = make_task(config.task, config.d, config.N, config.keys, curriculum=config.curriculum)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(config.seed)
        model = build_model(config, task)
    return task, model.to(device)
