"""Batched training (stacked parameters + vmap) against separate train() runs of the same configs.

Reference: experiments.training.loop.train on each config separately (independent code path: the layer's fused autograd
attention, one optimiser per run). Tolerance: relative 1e-5 on epoch-mean losses, i.e. about 100 float32 epsilons
(1.2e-7) of rounding accumulated over 20 Adam steps; the measured gap is ~5e-8.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import torch

from experiments.training.loop import TrainConfig, train
from experiments.training.seed_batched import check_batchable, train_batched

RTOL = 1e-5


def _configs(**fields: object) -> list[TrainConfig]:
    base = {
        "d": 8,
        "N": 4,
        "rank": 2,
        "ffn_dim": 16,
        "steps": 20,
        "batch_size": 32,
        "log_every": 5,
        "checkpoint_every": 1000,
        "device": "cpu",
        **fields,
    }
    return [TrainConfig(**base, seed=s) for s in (0, 1, 2)]  # type: ignore[arg-type]


@pytest.mark.parametrize("fields", [{"task": "farthest"}, {"task": "nearest", "keys": "iid", "layers": 2}])
def test_batched_matches_separate_runs(tmp_path: Path, fields: dict) -> None:
    torch.set_num_threads(1)
    configs = _configs(**fields)
    batched = train_batched(configs)
    separate = [train(c, tmp_path / str(c.seed), progress=False) for c in configs]
    for b, s in zip(batched, separate, strict=False):
        assert not b.diverged and b.steps == s.steps
        assert b.best_loss == pytest.approx(s.best_loss, rel=RTOL)
        assert b.final_loss == pytest.approx(s.final_loss, rel=RTOL)
    # negative control: the seeds give different losses, so agreement above is not trivial
    assert len({round(s.final_loss, 6) for s in separate}) == 3


def test_refuses_configs_that_differ_beyond_seed() -> None:
    configs = _configs(task="farthest")
    with pytest.raises(ValueError, match="rank"):
        check_batchable([configs[0], dataclasses.replace(configs[1], rank=4)])
    with pytest.raises(ValueError, match="distinct seeds"):
        check_batchable([configs[0], configs[0]])
    with pytest.raises(ValueError, match="non-empty"):
        check_batchable([])
