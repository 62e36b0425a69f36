"""The arguments of `train` and `train_packed`, checked before a run directory is created or a model is built.

Each refusal names the argument (TypeError for a wrong type, ValueError for a value out of range, the OSError the
file system would raise for ``out_dir``); a run that would not fit in the memory available now is refused with the
estimate (`experiments.training.memory`), as ``attnrank train`` refuses it. A run on a GPU (device ``cuda``/``cuda:K``,
or ``auto`` where CUDA is available) holds its tensors in the GPU's memory, which CUDA itself guards: only runs on the
CPU are checked against this machine's memory.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import torch

from experiments.config import TrainConfig
from experiments.packing import check_one_unit
from experiments.training.memory import check_memory, training_bytes
from theory.validation import check_bool, check_instance, check_output_dir, check_real


def runs_on_cpu(config: TrainConfig) -> bool:
    """Whether the run's tensors live in this machine's memory (device "cpu", or "auto" without CUDA)."""
    if config.device == "auto":
        return not torch.cuda.is_available()
    return config.device == "cpu"


def check_train_arguments(
    config: Any, out_dir: Any, progress: Any, progress_interval: Any
) -> tuple[TrainConfig, Path, bool, float]:
    """`train`'s arguments, validated (nothing is created).

    Args:
        config: a TrainConfig.  out_dir: the run directory (created by train if needed; an existing file, or a place
            where nothing can be written, is refused).  progress: True or False.  progress_interval: seconds > 0.
    Returns:
        (config, out_dir as a Path, progress, progress_interval as a float).
    """
    config = check_instance("config", config, TrainConfig, "a TrainConfig")
    directory = check_output_dir("out_dir", out_dir)
    progress = check_bool("progress", progress)
    interval = check_real("progress_interval", progress_interval, minimum=0.0, strict_minimum=True)
    if runs_on_cpu(config):
        check_memory(training_bytes(config), "the model and one step's activations", "config")
    return config, directory, progress, interval


def check_pack_arguments(
    configs: Any, out_dirs: Any, progress: Any, progress_interval: Any
) -> tuple[list[TrainConfig], list[Path], bool, float]:
    """`train_packed`'s arguments, validated (nothing is created): a non-empty list or tuple of TrainConfig whose
    stacked runs fit in memory, as many distinct run directories, progress and its interval as for `train`.

    Whether the configs may share a pack is `experiments.packing.unit_key`'s.

    Returns:
        (configs, out_dirs as Paths, progress, progress_interval).
    """
    check_instance("configs", configs, (list, tuple), "a non-empty list or tuple of TrainConfig")
    if not configs:
        raise ValueError("configs must be a non-empty list or tuple of TrainConfig, got an empty one")
    checked = [check_instance(f"configs[{i}]", c, TrainConfig, "a TrainConfig") for i, c in enumerate(configs)]
    try:
        check_one_unit(checked)
    except ValueError as exc:
        raise ValueError(f"configs cannot share one pack: {exc}") from None
    hashes = [c.config_hash() for c in checked]
    if len(set(hashes)) != len(hashes):
        raise ValueError("configs of one pack must be distinct runs (two have the same config hash)")
    check_instance("out_dirs", out_dirs, (list, tuple), "a list or tuple of run directories, one per config")
    if len(out_dirs) != len(checked):
        raise ValueError(f"out_dirs must hold one directory per config ({len(checked)}), got {len(out_dirs)}")
    directories = [check_output_dir(f"out_dirs[{i}]", d) for i, d in enumerate(out_dirs)]
    if len({d.resolve() for d in directories}) != len(directories):
        raise ValueError("out_dirs must be distinct directories (a run directory belongs to one run)")
    progress = check_bool("progress", progress)
    interval = check_real("progress_interval", progress_interval, minimum=0.0, strict_minimum=True)
    on_cpu = [c for c in checked if runs_on_cpu(c)]
    if on_cpu:
        total = math.fsum(training_bytes(c) for c in on_cpu)  # stacked: every run's tensors at once
        check_memory(total, f"{len(on_cpu)} packed runs' models and activations", "configs")
    return checked, directories, progress, interval
