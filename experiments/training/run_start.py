"""How a run starts: a fresh run of its config, or the state of its checkpoint (or of the shorter run it extends), with
every file of its directory checked before anything is written (:func:`prepare_run`), then the writes it starts from
(:func:`commit_run`). The loop (`experiments.training.loop`) trains what this prepares, alone or in a pack.

Re-running the same config on the same directory resumes from ``checkpoint.pt``; on the CPU the resumed run is
bitwise identical to an uninterrupted one (every source of randomness is restored).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from experiments.config import TrainConfig, TrainResult
from experiments.samplers import get_sampler
from experiments.tasks import Task
from experiments.training.checkpoints import check_resumable, remove_stale_temporaries, restore_checkpoint
from experiments.training.evaluation import population_error
from experiments.training.run import build_run, resolve_device
from experiments.training.run_directory import RunDirectory
from experiments.training.schedule import make_optimizer, optimizer_kind, schedule_factor

TIME_DIGITS_SLACK = 1e-3
"""metrics.csv writes the time column with 3 decimals (rounded), the checkpoint its elapsed seconds unrounded: a row's
time may exceed the checkpoint's elapsed by at most half a millisecond of rounding."""


def check_epoch_rows(path: Path, rows: list[list[str]], config: TrainConfig, step: int, stats: dict[str, Any]) -> None:
    """ValueError naming ``path``, the row and the column unless ``rows`` (metrics up to ``step``, as
    `RunDirectory.metrics_rows` returns them) are the epochs a checkpoint at ``step`` has closed, column by column:

    - step: the rows at log_every, 2 log_every, ... <= step (and at ``step`` when it is the last step);
    - loss: finite and >= 0 (a closed epoch's mean error; a non-finite one stops the run before its row is written);
      the lowest graded loss and the last one are the checkpoint's stats.best and stats.last_epoch (both written
      with repr, so compared exactly);
    - lr: the schedule's rate at the epoch's last step, ``lr * factor(step - 1)`` (`training.schedule.schedule_factor`:
      per step or per epoch, as the run's lr_interval says), exactly;
    - time: finite, >= 0, never decreasing, and at most the checkpoint's elapsed seconds (`TIME_DIGITS_SLACK`);
    - population: empty or a finite number >= 0 (its value at the checkpoint's step is recomputed from the
      checkpoint's model by `check_population_row`).

    Empty lr and time values are those of a file written before the column existed (`RunDirectory.metrics_rows`
    pads them; an empty value in a file that has the column is refused there).
    """
    expected = list(range(config.log_every, step + 1, config.log_every))
    if step == config.steps and step % config.log_every:
        expected.append(step)
    found = [int(row[0]) for row in rows]
    if found != expected:
        raise ValueError(
            f"{path}: epoch rows at steps {found[:5]}{'...' if len(found) > 5 else ''} do not match the checkpoint "
            f"at step {step} (expected {len(expected)} rows at multiples of log_every {config.log_every})"
        )
    factor = schedule_factor(config)  # the run's own schedule (per step, or per epoch: lr_interval)
    previous_time = 0.0
    for row in rows:
        at = f"{path}: the row at step {row[0]}"
        loss, lr_text, time_text, population_text = float(row[1]), row[2], row[3], row[4]
        if not (math.isfinite(loss) and loss >= 0):
            raise ValueError(f"{at}: column loss must be a finite number >= 0, got {row[1]!r}")
        scheduled = config.lr * factor(int(row[0]) - 1)  # the rate of the epoch's last step, as the loop computes it
        if lr_text and float(lr_text) != scheduled:
            raise ValueError(f"{at}: column lr is {lr_text}, but the run's schedule gives {scheduled!r} there")
        if time_text:
            seconds = float(time_text)
            if not (math.isfinite(seconds) and previous_time <= seconds <= stats["elapsed"] + TIME_DIGITS_SLACK):
                raise ValueError(
                    f"{at}: column time is {time_text}, outside [{previous_time:.3f}, {stats['elapsed']:.3f}] (the "
                    "previous row's time, the checkpoint's elapsed seconds)"
                )
            previous_time = seconds
        if population_text and not (math.isfinite(float(population_text)) and float(population_text) >= 0):
            raise ValueError(f"{at}: column population must be empty or a finite number >= 0, got {population_text!r}")
    if rows:
        losses = [float(row[1]) for row in rows]
        starts = [0] + found[:-1]  # each epoch starts where the previous one closed
        full_from = 0 if config.curriculum is None else config.curriculum.end_step
        graded = [loss for loss, start in zip(losses, starts, strict=True) if start >= full_from]
        lowest = min(graded) if graded else math.inf
        if lowest != stats["best"] or losses[-1] != stats["last_epoch"]:
            raise ValueError(
                f"{path}: epoch losses (lowest graded {lowest!r}, last {losses[-1]!r}) do not match the "
                f"checkpoint's stats.best {stats['best']!r} and stats.last_epoch {stats['last_epoch']!r}"
            )


def check_population_row(
    path: Path,
    rows: list[list[str]],
    step: int,
    model: torch.nn.Module,
    task: Task,
    device: torch.device,
    samples: int,
) -> None:
    """ValueError naming ``path`` unless the population value of the row at the checkpoint's ``step``, where there is
    one, is the restored model's population error (`training.evaluation.population_error`, on the curve's ``samples``
    held-out samples: `TrainConfig.curve_samples`) within one standard error of that estimate.

    On the CPU the recomputation is the same arithmetic and agrees exactly; the tolerance covers a GPU's or another
    thread count's rounding, and a change smaller than the estimate's own standard error says nothing the curve
    could resolve anyway.
    """
    row = next((r for r in rows if int(r[0]) == step), None)
    if row is None or not row[4]:
        return
    recorded = float(row[4])
    estimate = population_error(model, task, samples, device)
    if abs(recorded - estimate.mean) > estimate.stderr:
        raise ValueError(
            f"{path}: the row at step {step}: column population is {row[4]}, but the checkpoint's model measures "
            f"{estimate.mean!r} +- {estimate.stderr:.2g} on the same held-out samples"
        )


def finished_result(files: RunDirectory, config: TrainConfig) -> TrainResult | None:
    """The recorded result when the directory holds this config's finished run; None when it holds none, or a
    shorter run that ``config`` extends; refuses another config's directory."""
    if files.config.exists():
        recorded = files.read_config()
        check_resumable(recorded, config, files.config)
        if config.extends(recorded):
            return None  # start_or_resume goes on from the shorter run's last checkpoint
    if not files.result.exists():
        return None
    return files.read_result()


def _extends_finished_run(files: RunDirectory, config: TrainConfig) -> bool:
    """Whether ``files`` hold a shorter run that ``config`` extends, checked without changing anything: a diverged
    run is refused, and so is a finished one whose checkpoint is gone (the extension goes on from it; training from
    step 0 instead would replace the finished run). The caller retires its result.json once every check passed."""
    if not files.config.exists() or not config.extends(files.read_config()):
        return False
    if files.result.exists():
        earlier = files.read_result()
        if earlier.diverged:
            raise ValueError(
                f"{files.result}: the run there diverged at step {earlier.steps}; a diverged run cannot be extended"
            )
        if not os.path.lexists(files.checkpoint):
            raise ValueError(
                f"{files.checkpoint} is missing: the finished run there ({earlier.steps} steps) can only be extended "
                "from its last checkpoint; use another output directory"
            )
    return True


@dataclass
class RunState:
    """One run ready to train, every check of its directory passed and nothing written yet (:func:`prepare_run`): its
    own model, optimiser, schedule and batch generator, at its checkpoint's step (0 for a fresh start), with the
    statistics of its open epoch and the metrics rows its checkpoint has closed."""

    config: TrainConfig
    files: RunDirectory | None  # None: a run trained without a directory (benchmarks, tests of the step)
    task: Task
    model: torch.nn.Module
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LRScheduler
    generator: torch.Generator
    device: torch.device
    step: int = 0
    elapsed_before: float = 0.0  # seconds of training before this process
    epoch_sum: float = 0.0  # the open epoch's loss sum (float64 round trip)
    epoch_count: int = 0  # steps in the open epoch
    best: float = math.inf  # the lowest graded epoch mean so far
    last: float = math.nan  # the last epoch mean
    rows: list[list[str]] | None = None  # the metrics rows the checkpoint has closed (None: a fresh start)
    extending: bool = False  # the directory holds a finished shorter run that this one extends

    @property
    def directory(self) -> RunDirectory:
        """The run's directory (ValueError for a run trained without one)."""
        if self.files is None:
            raise ValueError("this run has no run directory")
        return self.files

    def fixed_set(self) -> list[Any]:
        """The run's fixed training set (train_batches >= 1), as its sampler draws it (`experiments.samplers`)."""
        return get_sampler(self.config.sampler).fixed_set(self.config, self.task, self.device)


def fresh_run(config: TrainConfig, files: RunDirectory | None = None) -> RunState:
    """The run ``config`` at step 0: its task, its model initialised from its seed, its optimiser and schedule, its
    batch generator seeded from its data seed; nothing read or written."""
    device = resolve_device(config.device)
    task, model = build_run(config, device)
    optimizer, scheduler = make_optimizer(model.parameters(), config, optimizer_kind(config, device))
    generator = get_sampler(config.sampler).generator(config.data_seed_value, device)
    return RunState(config, files, task, model, optimizer, scheduler, generator, device)


def prepare_run(config: TrainConfig, files: RunDirectory) -> RunState:
    """A fresh run of ``config``, or the state of its checkpoint (or of the shorter run it extends), with every file
    of the directory checked (the checkpoint, metrics.csv column by column, result.json of an extended run) and
    nothing written: a refusal leaves the directory exactly as it was. `commit_run` then writes."""
    extending = _extends_finished_run(files, config)
    run = fresh_run(config, files)
    run.extending = extending
    if os.path.lexists(files.checkpoint):  # a dangling link is a damaged checkpoint, not an absent one
        step, saved = restore_checkpoint(
            files.checkpoint,
            config,
            model=run.model,
            optimizer=run.optimizer,
            scheduler=run.scheduler,
            sampler=run.generator,
        )
        run.step, run.elapsed_before = step, float(saved["elapsed"])
        run.epoch_sum, run.epoch_count = float(saved["epoch_sum"]), int(saved["epoch_count"])
        run.best, run.last = float(saved["best"]), float(saved["last_epoch"])
        run.rows = files.metrics_rows(step)
        check_epoch_rows(files.metrics, run.rows, config, step, saved)
        check_population_row(files.metrics, run.rows, step, run.model, run.task, run.device, config.curve_samples())
    return run


def commit_run(run: RunState) -> None:
    """Write what a prepared run starts from: the stale temporaries of a killed write removed, the extended run's
    result.json retired (the extension writes its own when it ends; until then the directory holds an unfinished
    run), metrics.csv cut back to the checkpoint."""
    files = run.directory
    remove_stale_temporaries(files.root)
    if run.extending:
        files.result.unlink(missing_ok=True)
    files.write_metrics(run.rows or [])
