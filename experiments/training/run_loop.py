"""The training loop proper (:func:`run_loop`): the state it moves forward (:class:`Training`: K runs trained as one,
K = 1 for an ordinary run), each run's epoch statistics (:class:`EpochStatistics`) and the hooks it calls
(:class:`LoopHooks`). What a run's files receive from it is `experiments.training.loop` (the pipeline around it).

docs/paper.md section 6: batches of 256 samples, AdamW with warm-up + cosine schedule (`training.schedule`). The
paper reports the lowest epoch-mean training loss; here an epoch is ``log_every`` consecutive steps (the training
stream has no natural epochs). A non-finite loss stops its run (checked after every step on the CPU, at each epoch
end and before each checkpoint on a GPU, where a per-step check would synchronise) and marks it diverged; the other
runs of a pack go on.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

import torch

from experiments.config import TrainConfig, TrainResult
from experiments.tasks import Task
from experiments.training.packed import TrainedRuns
from experiments.training.schedule import scheduled_lr
from experiments.training.step_capture import Stepper, make_stepper


# ---------------------------------------------------------------------------------------------- epoch bookkeeping
@dataclass
class EpochStatistics:
    """Per-run epoch statistics of K runs: the open epoch's loss sums, the closed epochs' last and lowest means."""

    running: torch.Tensor  # (K,) float64 loss sums of the open epoch, on the training device (synced per epoch)
    count: int = 0  # steps in the open epoch
    last: list[float] = field(default_factory=list)
    best: list[float] = field(default_factory=list)
    diverged: list[bool] = field(default_factory=list)
    stopped_at: list[int | None] = field(default_factory=list)  # the step at which a diverged run was stopped
    graded_from: int = 0  # epochs starting before this step (a curriculum's easier stages) do not count for best

    @classmethod
    def fresh(cls, runs: int, device: torch.device, graded_from: int = 0) -> EpochStatistics:
        """Statistics of ``runs`` runs before their first step (best_loss counts epochs from ``graded_from`` on)."""
        running = torch.zeros(runs, dtype=torch.float64, device=device)  # (K,)
        return cls(running, 0, [math.nan] * runs, [math.inf] * runs, [False] * runs, [None] * runs, graded_from)

    def stop(self, k: int, step: int) -> None:
        """Mark run k diverged at ``step`` (the first time only)."""
        if not self.diverged[k]:
            self.diverged[k], self.stopped_at[k] = True, step

    def add(self, losses: torch.Tensor) -> None:
        """Count one step's (K,) losses into the open epoch."""
        self.running += losses.double()
        self.count += 1

    def close_epoch(self, step: int) -> list[float]:
        """End the open epoch after ``step`` steps: each run's mean loss; a non-finite mean marks that run diverged."""
        means = (self.running / self.count).tolist()
        graded = step - self.count >= self.graded_from  # the epoch started on the full task
        for k, mean in enumerate(means):
            if self.diverged[k]:
                continue
            if not math.isfinite(mean):
                self.stop(k, step)
                continue
            self.last[k] = mean
            if graded:
                self.best[k] = min(self.best[k], mean)
        self.running.zero_()
        self.count = 0
        return means

    def results(self, steps: int, seconds: float, extra: dict[str, Any] | None = None) -> list[TrainResult]:
        """One TrainResult per run (``seconds`` each; a diverged run reports the step it was stopped at)."""
        return [
            TrainResult(
                final_loss=math.nan if self.diverged[k] else self.last[k],
                best_loss=self.best[k],
                steps=steps if self.stopped_at[k] is None else int(self.stopped_at[k]),  # type: ignore[arg-type]
                diverged=self.diverged[k],
                seconds=seconds,
                extra=dict(extra or {}),
            )
            for k in range(len(self.diverged))
        ]


# ------------------------------------------------------------------------------------------------------ the loop
@dataclass
class Training:
    """Everything the loop moves forward: the models, their samplers, optimiser, schedule, statistics and step."""

    config: TrainConfig  # the first run's config (the others differ only where their unit allows)
    task: Task
    runs: TrainedRuns  # the K runs as one network (`training.packed`)
    generators: list[torch.Generator]  # each run's batch generator
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LRScheduler
    stats: EpochStatistics
    device: torch.device
    step: int = 0
    started: float = field(default_factory=time.perf_counter)
    stepper: Stepper | None = None  # forward, backward and AdamW step (`step_capture.make_stepper`); None = eager
    replay: list[Any] | None = None  # a fixed training set: step t trains on replay[t % K] (runs.draw's form)

    def __post_init__(self) -> None:
        if self.stepper is None:
            self.stepper = make_stepper(self.config, self.device, self.runs, self.optimizer)

    @classmethod
    def of(cls, runs: TrainedRuns) -> Training:
        """The loop's state of ``runs`` at their (common) step: each run's generator and epoch statistics as its own
        state holds them, and the runs' fixed sets as one replay when they train on fixed sets."""
        first = runs.runs[0]
        stats = EpochStatistics.fresh(len(runs), first.device, graded_from=first.task.full_task_from)
        for k, run in enumerate(runs.runs):
            stats.running[k] = run.epoch_sum
            stats.best[k], stats.last[k] = run.best, run.last
        stats.count = first.epoch_count
        generators = [run.generator for run in runs.runs]
        training = cls(
            first.config, first.task, runs, generators, runs.optimizer, runs.scheduler, stats, first.device, first.step
        )
        if first.config.train_batches:  # each run replays its own set; replay[t] holds every run's batch t
            training.replay = runs.fixed_set()
        return training

    def optimizer_step(self) -> tuple[torch.Tensor, float]:
        """Draw each run's batch, take one AdamW step on the summed losses; the (K,) losses and the lr used."""
        # A curriculum (icl) trains step s on an easier stage of the task; the model and its loss are the task's own.
        if self.replay is not None:
            batches = self.replay[self.step % len(self.replay)]
        else:
            batches = self.runs.draw(self.task.at_step(self.step), self.generators)
        lr = self.optimizer.param_groups[0]["lr"]
        lr_used = scheduled_lr(self.scheduler) if isinstance(lr, torch.Tensor) else lr  # never read back from a GPU
        assert self.stepper is not None
        losses = self.stepper(batches)  # (K,) detached, after backward and the AdamW step
        self.scheduler.step()
        self.step += 1
        return losses, lr_used


class LoopHooks:
    """What a run's files get from the loop (metrics, checkpoints, a progress bar: `loop.RunFilesHooks`); the base
    class adds nothing."""

    def step_done(self, training: Training) -> None:
        """Called after every step that left some run finite."""

    def epoch_closed(self, training: Training, means: list[float], lr_used: float) -> None:
        """Called after every closed epoch with each run's mean loss."""

    def checkpoint_due(self, training: Training) -> bool:
        """Whether to save a checkpoint after the current step."""
        return False

    def save(self, training: Training) -> None:
        """Save a checkpoint of the current step."""


def run_loop(training: Training, hooks: LoopHooks, *, check_every_step: bool) -> None:
    """Train until ``config.steps`` steps are done or every run has diverged (the one training loop).

    Args:
        training: the state to move forward (from a fresh start or a checkpoint).
        hooks: the runs' side effects (`loop.RunFilesHooks`; the base class for none).
        check_every_step: test the losses for non-finite values after every step (free on the CPU; on a GPU the
            check waits for the epoch end, so that steps never synchronise).
    """
    config, stats = training.config, training.stats
    while training.step < config.steps and not all(stats.diverged):
        losses, lr_used = training.optimizer_step()  # (K,)
        stats.add(losses)
        if check_every_step:
            for k, finite in enumerate(torch.isfinite(losses).tolist()):
                if not finite:
                    stats.stop(k, training.step)
            if all(stats.diverged):
                break
        hooks.step_done(training)
        if stats.count == config.log_every or training.step == config.steps:
            means = stats.close_epoch(training.step)
            if all(stats.diverged):
                break
            hooks.epoch_closed(training, means, lr_used)
        if hooks.checkpoint_due(training):
            for k, finite in enumerate(torch.isfinite(stats.running).tolist()):
                if not finite:  # never checkpoint a diverged model
                    stats.stop(k, training.step)
            if all(stats.diverged):
                break
            hooks.save(training)  # saves the runs that have not diverged
