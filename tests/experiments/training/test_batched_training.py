"""Batched training (stacked parameters + vmap) against separate train() runs of the same configs.

Reference: experiments.training.loop.train on each config separately (independent code path: the layer's default
"blockwise" attention instead of "plain", one optimiser per run, no vmap). Tolerance: relative 1e-5 on epoch-mean
losses, i.e. about 100 float32 epsilons (1.2e-7) of rounding accumulated over 20 Adam steps; the measured gap is ~5e-8.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import pytest
import torch

from experiments.config import TrainConfig
from experiments.training.loop import StackedModels, check_batchable, train, train_batched

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


@pytest.mark.parametrize(
    "fields",
    [
        {"task": "farthest"},
        {"task": "nearest", "keys": "iid", "layers": 2},
        {"task": "farthest", "attention": "hardmax", "temperature": 4.0},
        {"task": "nearest", "keys": "orthonormal", "N": 2, "model": "theory", "value": "full"},
        {"task": "icl", "model": "gpt2", "embed_dim": 8, "positional": "additive"},
    ],
)
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


def test_a_diverged_batch_is_reported_per_run_and_stops(monkeypatch: pytest.MonkeyPatch) -> None:
    """Losses made nan from the 3rd step on (TrainConfig caps lr at 10, so no learning rate overflows): every run of
    the batch is marked diverged (final loss nan), and the loop stops early once all of them have (the same rule as a
    single run, whose loss is checked every epoch here)."""
    calls = {"n": 0}
    original = StackedModels.losses

    def losses(self: StackedModels, batches: list) -> torch.Tensor:
        calls["n"] += 1
        value = original(self, batches)
        return value * math.nan if calls["n"] >= 3 else value

    monkeypatch.setattr(StackedModels, "losses", losses)
    configs = [dataclasses.replace(c, warmup_fraction=0.0, steps=40) for c in _configs(task="farthest")]
    results = train_batched(configs)
    assert all(r.diverged and math.isnan(r.final_loss) for r in results)
    assert all(r.steps < 40 and r.extra == {"batched": 3} for r in results)
