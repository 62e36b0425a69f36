"""fig1-d64's deciding cell (d = 64, L = 3, r = 32, seed 0) with independent layers for its first 2000 steps.

    python scripts/layer_init_pilot.py OUT_DIR

The same config as the preset's run but ``layer_init = "independent"`` and 2000 steps of the same 100k schedule;
compare its metrics.csv with the preset run's curve (results/fig1-d64-cpu/curves.csv) at equal steps
(results/fig1-d64-cpu/layer-init-pilot/README.md).
"""

import dataclasses
import sys
from pathlib import Path

import torch

from experiments.studies import get_preset
from experiments.training.loop import train

torch.set_num_threads(1)
cell = next(c for c in get_preset("fig1-d64").runs("cpu") if (c.d, c.layers, c.rank, c.seed) == (64, 3, 32, 0))
pilot = dataclasses.replace(cell, layer_init="independent", steps=2000)
print(
    cell.config_hash(),
    pilot.config_hash(),
    {k: (v, getattr(pilot, k)) for k, v in cell.to_dict().items() if getattr(pilot, k) != v},
    flush=True,
)
result = train(pilot, Path(sys.argv[1]), progress=False)
print(result.best_loss, result.final_loss, flush=True)
