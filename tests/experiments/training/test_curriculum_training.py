"""The icl curriculum in the training loop: step s trains on ``task.at_step(s)``, and only full-task epochs are graded.

The curriculum itself (schedule, stage batches) is tested in tests/experiments/test_config.py and test_tasks.py. This
file checks which epochs checkpoints accept as graded, and that the loop draws each step's batches from
``task.at_step(step)`` and leaves the epochs that start before ``task.full_task_from`` out of ``best_loss``.
"""

from __future__ import annotations

import csv
import dataclasses
import math
from pathlib import Path

import pytest

from experiments.config import TrainConfig
from experiments.tasks import LinearRegressionTask
from experiments.training.checkpoints import check_stats, graded_epoch_closed
from experiments.training.loop import train

# d = 4, N = 6, dims 2 -> 4 (+1), pairs 2 -> 6 (+2), 3 steps per stage: stages (2, 2), (3, 4), full from step 6.
TINY_CURRICULUM = TrainConfig(
    task="icl",
    model="gpt2",
    embed_dim=8,
    positional="additive",
    d=4,
    N=6,
    rank=8,
    ffn_dim=16,
    steps=12,
    batch_size=8,
    log_every=2,
    checkpoint_every=4,
    device="cpu",
    curriculum_dims=2,
    curriculum_points=2,
    curriculum_interval=3,
)


def test_loop_trains_the_curriculum_and_grades_full_task_epochs(tmp_path: Path, monkeypatch) -> None:
    drawn: list[tuple[int, int]] = []
    sample = LinearRegressionTask.sample

    def recording_sample(self: LinearRegressionTask, batch_size: int, generator):  # type: ignore[no-untyped-def]
        if batch_size == TINY_CURRICULUM.batch_size:  # a training draw (population evaluations draw larger batches)
            drawn.append((self.active_dims, self.N))
        return sample(self, batch_size, generator)

    monkeypatch.setattr(LinearRegressionTask, "sample", recording_sample)
    result = train(TINY_CURRICULUM, tmp_path, progress=False)
    assert drawn == [(2, 2)] * 3 + [(3, 4)] * 3 + [(4, 6)] * 6
    with (tmp_path / "metrics.csv").open(newline="", encoding="utf-8") as stream:
        rows = [(int(row["step"]), float(row["loss"])) for row in csv.DictReader(stream)]
    assert [step for step, _ in rows] == [2, 4, 6, 8, 10, 12]
    full_task = [loss for step, loss in rows if step - TINY_CURRICULUM.log_every >= 6]  # epochs from step 6 on
    assert result.best_loss == min(full_task)


def _graded_closed_by_simulation(step: int, config: TrainConfig) -> bool:
    """Close epochs the way the loop does (every log_every steps and at the last step) and look at the last one."""
    start, last_start = 0, None
    for s in range(1, step + 1):
        if (s - start) == config.log_every or s == config.steps:
            last_start, start = start, s
    full_from = 0 if config.curriculum is None else config.curriculum.end_step
    return last_start is not None and last_start >= full_from


@pytest.mark.parametrize("steps", [12, 13])  # the last epoch full-length, or short
def test_graded_epoch_closed_matches_the_loops_epochs(steps: int) -> None:
    for config in (
        dataclasses.replace(TINY_CURRICULUM, steps=steps),
        dataclasses.replace(TINY_CURRICULUM, steps=steps, log_every=5),
        dataclasses.replace(
            TINY_CURRICULUM, steps=steps, curriculum_dims=0, curriculum_points=0, curriculum_interval=2000
        ),
    ):
        found = [graded_epoch_closed(s, config) for s in range(config.steps + 1)]
        assert found == [_graded_closed_by_simulation(s, config) for s in range(config.steps + 1)], config.log_every
    # With the curriculum (full task from step 6, epochs of 2): the epoch [6, 8) is the first graded one.
    assert [graded_epoch_closed(s, TINY_CURRICULUM) for s in (6, 7, 8)] == [False, False, True]


def test_checkpoint_stats_refuse_a_best_loss_from_the_curriculum_stages(tmp_path: Path) -> None:
    """Until the first full-task epoch closes, best_loss is undefined (+inf); a finite one is refused, and after it
    closes an infinite one is."""
    stats = {"epoch_sum": 0.0, "epoch_count": 0, "best": 0.5, "last_epoch": 0.5, "elapsed": 1.0}
    with pytest.raises(ValueError, match="stats.best must be inf before the first epoch on the full task closes"):
        check_stats(tmp_path / "c.pt", stats, 6, TINY_CURRICULUM)
    check_stats(tmp_path / "c.pt", {**stats, "best": math.inf}, 6, TINY_CURRICULUM)
    check_stats(tmp_path / "c.pt", stats, 8, TINY_CURRICULUM)
    with pytest.raises(ValueError, match="stats.best must be finite once an epoch has closed"):
        check_stats(tmp_path / "c.pt", {**stats, "best": math.inf}, 8, TINY_CURRICULUM)
