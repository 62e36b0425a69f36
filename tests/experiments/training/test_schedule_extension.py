"""The paper's schedule as a prefix: warmup_steps, schedule_steps, and extending a run by re-running with more steps.

The paper trains 100k steps with a 5000-step warm-up; a CPU run trains the first 20k of that schedule and is extended
later. These tests pin down that an extension is the same run: parameters, metrics and result bitwise equal to one
uninterrupted run of the longer length (every source of randomness is restored from the shorter run's checkpoint).
"""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import pytest
import torch

from experiments.config import TrainConfig
from experiments.tasks import Batch
from experiments.training.loop import train, train_packed
from experiments.training.packed import TrainedRuns
from experiments.training.schedule import lr_factor, make_optimizer

# 60 steps of a 100-step schedule with a 10-step warm-up; extended to 100 below.
PREFIX = TrainConfig(
    task="farthest",
    d=4,
    N=3,
    rank=4,
    ffn_dim=16,
    steps=60,
    schedule_steps=100,
    warmup_steps=10,
    warmup_fraction=0.0,
    batch_size=16,
    log_every=5,
    checkpoint_every=25,
    device="cpu",
)
WHOLE = dataclasses.replace(PREFIX, steps=100)


def metrics_rows(run: Path) -> list[list[str]]:
    """The metrics rows without the wall-clock column: step, loss, lr."""
    return [line.split(",")[:3] for line in (run / "metrics.csv").read_text().splitlines()]


def model_state(run: Path) -> dict[str, torch.Tensor]:
    return torch.load(run / "checkpoint.pt", weights_only=True)["model"]


def assert_same_runs(a: Path, b: Path) -> None:
    state_a, state_b = model_state(a), model_state(b)
    assert state_a.keys() == state_b.keys()
    for key in state_a:
        assert torch.equal(state_a[key], state_b[key]), key
    assert metrics_rows(a) == metrics_rows(b)
    result_a, result_b = (json.loads((run / "result.json").read_text()) for run in (a, b))
    for key in ("final_loss", "best_loss", "steps", "diverged"):
        assert result_a[key] == result_b[key], key


def test_the_schedule_of_a_prefix_is_the_whole_schedules_beginning() -> None:
    """Learning rates seen by the optimiser: the 60-step prefix's are the first 60 of the 100-step run's."""

    def seen(config: TrainConfig) -> list[float]:
        optimizer, scheduler = make_optimizer(torch.nn.Linear(2, 2).parameters(), config)
        rates = []
        for _ in range(config.steps):
            rates.append(optimizer.param_groups[0]["lr"])
            optimizer.step()
            scheduler.step()
        return rates

    prefix, whole = seen(PREFIX), seen(WHOLE)
    assert prefix == whole[:60]
    assert whole[:10] == pytest.approx([PREFIX.lr * (s + 1) / 10 for s in range(10)], rel=1e-12)  # 10-step warm-up
    assert whole[10] == PREFIX.lr and whole[99] == pytest.approx(PREFIX.lr * lr_factor(99, 100, 10), rel=1e-12)
    # Without schedule_steps the 60-step run is its own schedule: it has decayed by step 59, the prefix has not.
    own = seen(dataclasses.replace(PREFIX, schedule_steps=0))
    assert own[59] < prefix[59] / 10


def test_an_extended_run_equals_an_uninterrupted_one_bitwise(tmp_path: Path) -> None:
    whole = train(WHOLE, tmp_path / "whole", progress=False)
    short = train(PREFIX, tmp_path / "extended", progress=False)
    assert short.steps == 60 and json.loads((tmp_path / "extended" / "result.json").read_text())["steps"] == 60
    extended = train(WHOLE, tmp_path / "extended", progress=False)
    assert (extended.final_loss, extended.best_loss, extended.steps) == (whole.final_loss, whole.best_loss, 100)
    assert_same_runs(tmp_path / "whole", tmp_path / "extended")
    recorded = json.loads((tmp_path / "extended" / "config.json").read_text())["config"]
    assert recorded["steps"] == 100 and recorded["schedule_steps"] == 100


def test_an_extension_in_two_legs_and_a_killed_extension_resume_exactly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """60 -> 80 -> 100 steps, the second leg killed midway and re-run: still the uninterrupted run."""
    train(WHOLE, tmp_path / "whole", progress=False)
    run = tmp_path / "legs"
    train(PREFIX, run, progress=False)
    train(dataclasses.replace(PREFIX, steps=80), run, progress=False)
    calls = {"n": 0}
    original = TrainedRuns.losses

    def interrupted(self: TrainedRuns, batches: Batch) -> torch.Tensor:
        calls["n"] += 1
        if calls["n"] == 12:  # step 92: after the checkpoint at 80 (the shorter run's last), before 100
            raise KeyboardInterrupt
        return original(self, batches)

    monkeypatch.setattr(TrainedRuns, "losses", interrupted)
    with pytest.raises(KeyboardInterrupt):
        train(WHOLE, run, progress=False)
    assert not (run / "result.json").exists()  # the 80-step result was retired: the directory holds an unfinished run
    monkeypatch.setattr(TrainedRuns, "losses", original)
    train(WHOLE, run, progress=False)
    assert_same_runs(tmp_path / "whole", run)


def test_extensions_that_cannot_be_exact_are_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A run without a named schedule ended its own cosine: more steps would be another run.
    own = dataclasses.replace(PREFIX, schedule_steps=0)
    train(own, tmp_path / "own", progress=False)
    with pytest.raises(ValueError, match="only when both name the same schedule_steps"):
        train(dataclasses.replace(own, steps=100), tmp_path / "own", progress=False)
    # A last epoch cut short (62 steps, epochs of 5) cannot be reopened.
    ragged = dataclasses.replace(PREFIX, steps=62)
    train(ragged, tmp_path / "ragged", progress=False)
    with pytest.raises(ValueError, match="not a multiple of log_every = 5"):
        train(WHOLE, tmp_path / "ragged", progress=False)
    # A shorter run may not be asked of a longer one's directory.
    train(WHOLE, tmp_path / "longer", progress=False)
    with pytest.raises(ValueError, match="belongs to a different config .*steps: 100 there vs 60 now"):
        train(PREFIX, tmp_path / "longer", progress=False)
    # A diverged run is not extended.
    original = TrainedRuns.losses
    calls = {"n": 0}

    def losses(self: TrainedRuns, batches: Batch) -> torch.Tensor:
        calls["n"] += 1
        value = original(self, batches)
        return value * math.nan if calls["n"] == 30 else value

    monkeypatch.setattr(TrainedRuns, "losses", losses)
    diverged = train(PREFIX, tmp_path / "diverged", progress=False)
    assert diverged.diverged
    monkeypatch.setattr(TrainedRuns, "losses", original)
    with pytest.raises(ValueError, match="diverged at step 30; a diverged run cannot be extended"):
        train(WHOLE, tmp_path / "diverged", progress=False)
    assert json.loads((tmp_path / "diverged" / "result.json").read_text())["diverged"] is True  # left as it was


def test_a_packed_pair_extends_as_its_runs_would(tmp_path: Path) -> None:
    """Sweeps train small runs in packs; extending a pack gives each run its uninterrupted pack result."""
    seeds = (0, 1)
    whole_dirs = [tmp_path / f"whole{s}" for s in seeds]
    legs_dirs = [tmp_path / f"legs{s}" for s in seeds]
    train_packed([dataclasses.replace(WHOLE, seed=s) for s in seeds], whole_dirs, progress=False)
    train_packed([dataclasses.replace(PREFIX, seed=s) for s in seeds], legs_dirs, progress=False)
    train_packed([dataclasses.replace(WHOLE, seed=s) for s in seeds], legs_dirs, progress=False)
    for whole, legs in zip(whole_dirs, legs_dirs, strict=True):
        assert_same_runs(whole, legs)
