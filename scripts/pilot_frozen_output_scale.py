"""Pilot (docs/scaling.md, "Choosing the d = 64 learning rate"): fig1's d = 64, N = 16, L = 3, r = 32 cell with the
last norm's scale frozen at its initial 1, so the zero predictor (scale -> 0) is out of the model's reach.

Not a product option: it wraps `build_model` for this process only. Prints the TrainResult; the epoch losses are in
OUT/metrics.csv.

Usage: OMP_NUM_THREADS=1 python scripts/pilot_frozen_output_scale.py LR STEPS OUT
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

import experiments.training.run as run
from experiments.config import TrainConfig
from experiments.tasks import Task
from experiments.training.loop import train

original_build_model = run.build_model


def build_with_frozen_output_scale(config: TrainConfig, task: Task):  # type: ignore[no-untyped-def]
    """The run's model with its last layer's output norm scale excluded from training."""
    model = original_build_model(config, task)
    model.network.layers[-1].norm2.scale.requires_grad_(False)
    return model


def main() -> None:
    torch.set_num_threads(1)
    lr, steps, out = float(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3])
    run.build_model = build_with_frozen_output_scale
    config = TrainConfig(
        task="farthest",
        d=64,
        N=16,
        rank=32,
        layers=3,
        width=1,
        temperature=1.0,
        lr=lr,
        ffn_dim=256,
        batch_size=128,
        steps=steps,
        log_every=100,
        checkpoint_every=steps,
        device="cpu",
    )
    print(train(config, out, progress=False))


if __name__ == "__main__":
    main()
