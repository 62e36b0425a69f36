"""The icl curriculum in the training loop: step s trains on ``task.at_step(s)``, and only full-task epochs are graded.

The curriculum itself (schedule, stage batches) is tested in tests/experiments/test_config.py and test_tasks.py. This
file checks what the loop must do with it. Until `experiments.training.loop` draws each step's batches from
``task.at_step(step)`` and leaves the epochs that end before ``task.full_task_from`` out of ``best_loss``, the test is
an expected failure; it is strict, so it fails (XPASS) the moment the loop does both, and the marker must go.
"""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from experiments.config import TrainConfig
from experiments.tasks import LinearRegressionTask
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


@pytest.mark.xfail(
    strict=True,
    reason="the training loop does not yet draw from task.at_step(step) nor grade only full-task epochs",
)
def test_loop_trains_the_curriculum_and_grades_full_task_epochs(tmp_path: Path, monkeypatch) -> None:
    drawn: list[tuple[int, int]] = []
    sample = LinearRegressionTask.sample

    def recording_sample(self: LinearRegressionTask, batch_size: int, generator):  # type: ignore[no-untyped-def]
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
