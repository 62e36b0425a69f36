"""What a run is built from: its device (chosen here and nowhere else), task, freshly initialised model and sampler
generator; and reading a finished run directory back (its config, its trained model)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import torch

from experiments.config import TrainConfig
from experiments.models.factory import build_model
from experiments.tasks import Task, make_task
from experiments.training.checkpoints import check_same_config, load_checkpoint
from theory.validation import check_existing_dir

SAMPLER_SEED_OFFSET = 1_000_003
"""The task sampler of seed s starts from s + this offset (model initialisation uses s itself)."""


def resolve_device(name: str) -> torch.device:
    """The one place where the run's device is chosen: "auto" is CUDA when available, else the CPU."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"device {name!r} requested but CUDA is not available on this machine")
    return torch.device(name)


def sampler_generator(seed: int, sampler: str = "cpu", device: torch.device | None = None) -> torch.Generator:
    """The task sampler's generator for a run seed (model initialisation uses the seed itself).

    sampler "cpu" (`experiments.config.SAMPLERS`): a CPU generator, whatever the run's device; "device": a generator
    on ``device`` (the run's), seeded alike. Its state is saved in every checkpoint and restored on resume.
    """
    if sampler == "device":
        where = torch.device("cpu") if device is None else device
        return torch.Generator(device=where).manual_seed(seed + SAMPLER_SEED_OFFSET)
    return torch.Generator().manual_seed(seed + SAMPLER_SEED_OFFSET)


def build_run(config: TrainConfig, device: torch.device) -> tuple[Task, torch.nn.Module]:
    """The run's task and its freshly initialised model on ``device`` (parameters drawn from ``config.seed``).

    Initialisation uses a forked global torch RNG seeded with ``config.seed``, so the caller's RNG is untouched.
    """
    task = make_task(config.task, config.d, config.N, config.keys, curriculum=config.curriculum)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(config.seed)
        model = build_model(config, task)
    return task, model.to(device)


def read_config_file(path: Path) -> TrainConfig:
    """Read the config recorded in a run directory's config.json."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not valid JSON ({exc})") from exc
    if not isinstance(data, dict) or "config" not in data:
        raise ValueError(f"{path}: no 'config' entry; not a training run directory")
    return TrainConfig.from_dict(data["config"])


def load_trained_model(out_dir: Path, device: str = "cpu") -> tuple[TrainConfig, Task, torch.nn.Module]:
    """Rebuild a run's task and model from its directory (config.json + checkpoint.pt), in eval mode.

    The checkpoint is verified (digest, fields; `experiments.training.checkpoints.load_checkpoint`) before use.

    Args:
        out_dir: an existing run directory (FileNotFoundError / NotADirectoryError naming ``out_dir`` otherwise).
        device: "cpu", "cuda", "cuda:K" or "auto".
    Returns:
        (config, task, model).
    """
    out_dir = check_existing_dir("out_dir", out_dir)
    config_path, checkpoint_path = out_dir / "config.json", out_dir / "checkpoint.pt"
    if not config_path.exists():
        raise ValueError(f"out_dir {str(out_dir)!r} has no config.json; not a training run directory")
    if not checkpoint_path.exists():
        raise ValueError(f"out_dir {str(out_dir)!r} has no checkpoint.pt; the run has not saved a model yet")
    config = read_config_file(config_path)
    state = load_checkpoint(checkpoint_path)  # digest and fields verified
    check_same_config(state["config"], config, checkpoint_path)
    task, model = build_run(dataclasses.replace(config, init=None, device=device), resolve_device(device))
    try:
        model.load_state_dict(state["model"])
    except (RuntimeError, TypeError, AttributeError) as exc:
        detail = " ".join(f"{type(exc).__name__}: {exc}".split())  # one line
        raise ValueError(f"{checkpoint_path}: checkpoint does not match the model of its config ({detail})") from exc
    model.eval()
    return config, task, model
