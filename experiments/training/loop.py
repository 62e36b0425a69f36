"""The training loop of the experiments: one run with resumable checkpoints (:func:`train`); the same loop moves a pack
of K runs (`experiments.training.packed`).

docs/paper.md section 6: batches of 256 samples, AdamW with warm-up + cosine schedule (`training.schedule`). The
paper reports the lowest epoch-mean training loss; here an epoch is ``log_every`` consecutive steps (the training
stream has no natural epochs).

One run (:func:`train`) fills a run directory:

- ``config.json``: the resolved config, its hash, git revision, library versions, the device used;
- ``metrics.csv``: one row per epoch: ``step, loss, lr, time, population`` (loss = mean training loss of the epoch
  ending at ``step``, lr = learning rate of that epoch's last step, time = seconds of training so far, population
  evaluations included; population = the model's error on held-out samples, `experiments.training.evaluation`, at
  the epochs that end on a checkpoint step and at the last step, empty elsewhere);
- ``checkpoint.pt``: see `experiments.training.checkpoints`;
- ``result.json``: the :class:`TrainResult`, written when the run ends, with the model's evaluation by the one recipe
  (`experiments.training.evaluation.evaluate_model`: the population error, and Theorem 2's bound where it applies).

Training data (docs/training.md, "Training data"): fresh batches from the run's sampler generator at every step
(``train_batches`` = 0), or a fixed set of K batches drawn once and replayed, step t on batch t mod K
(`experiments.training.fixed_set`); either is seeded by the run's data seed (``data_seed``, default ``seed``).

Re-running the same config on the same directory resumes from ``checkpoint.pt``; on the CPU the resumed run is
bitwise identical to an uninterrupted one (every source of randomness is restored). A non-finite loss stops the run
(checked after every step on the CPU, at each epoch end and before each checkpoint on a GPU, where a per-step check
would synchronise) and marks it diverged; the last finite checkpoint is kept.
"""

from __future__ import annotations

import csv
import math
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TextIO

import torch

from experiments.config import TrainConfig, TrainResult
from experiments.json_files import named_write_error
from experiments.tasks import Batch, Task, draw_batch
from experiments.training.arguments import check_train_arguments
from experiments.training.checkpoints import (
    check_resumable,
    remove_stale_temporaries,
    restore_checkpoint,
    save_checkpoint,
)
from experiments.training.evaluation import CURVE_SAMPLES, evaluate_model, population_error
from experiments.training.fixed_set import fixed_training_set
from experiments.training.progress import DEFAULT_INTERVAL, Progress
from experiments.training.provenance import provenance
from experiments.training.run import build_run, resolve_device, sampler_generator
from experiments.training.run_directory import RunDirectory
from experiments.training.run_lock import run_directory_lock
from experiments.training.schedule import make_optimizer, optimizer_kind, schedule_factor, scheduled_lr
from experiments.training.step_capture import Stepper, describe_step_path, make_stepper, matmul_precision


# ------------------------------------------------------------------------------------------------- what is trained
class TrainedModels(Protocol):
    """K models trained together (K = 1 for an ordinary run): their parameters, how their K batches are drawn, and
    their K mean losses on those batches."""

    parameters: list[torch.Tensor]

    def draw(
        self, task: Task, batch_size: int, samplers: list[torch.Generator], device: torch.device, sampler: str = "cpu"
    ) -> Any:
        """Each run's next batch, from its own generator by the ``sampler`` path, in the form `losses` takes."""
        ...

    def losses(self, batches: Any) -> torch.Tensor:
        """Mean task error of model k on its batch, for every k: (K,)."""
        ...


def draw_each(
    task: Task, batch_size: int, samplers: list[torch.Generator], device: torch.device, sampler: str = "cpu"
) -> list[Batch]:
    """One batch per run, drawn from that run's generator, on ``device`` (float32; `tasks.draw_batch`)."""
    return [draw_batch(task, batch_size, g, sampler, device) for g in samplers]


class SingleModel:
    """One model, optionally compiled and under bf16 autocast (the ordinary run)."""

    def __init__(self, model: torch.nn.Module, task: Task, config: TrainConfig, device: torch.device) -> None:
        self.model, self.task = model, task
        self.parameters: list[torch.Tensor] = list(model.parameters())
        self.forward_model = torch.compile(model) if config.compile else model
        self.autocast = torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=config.bf16)

    draw = staticmethod(draw_each)

    def losses(self, batches: list[Batch]) -> torch.Tensor:
        """Mean error of the model on its one batch: (1,)."""
        (batch,) = batches
        with self.autocast:
            prediction = self.forward_model(batch)
        return self.task.error(prediction.float(), batch.target).mean().unsqueeze(0)  # (1,)


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

    config: TrainConfig  # the first run's config (the others differ only in seed)
    task: Task
    models: TrainedModels
    samplers: list[torch.Generator]  # one per run
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LRScheduler
    stats: EpochStatistics
    device: torch.device
    step: int = 0
    elapsed_before: float = 0.0  # seconds of training before this process (resumed runs)
    started: float = field(default_factory=time.perf_counter)
    stepper: Stepper | None = None  # forward, backward and AdamW step (`step_capture.make_stepper`); None = eager
    replay: list[Any] | None = None  # a fixed training set: step t trains on replay[t % K] (models.draw's form)

    def __post_init__(self) -> None:
        if self.stepper is None:
            self.stepper = make_stepper(self.config, self.device, self.models, self.optimizer)

    def elapsed(self) -> float:
        """Seconds of training so far, earlier processes included."""
        return self.elapsed_before + (time.perf_counter() - self.started)

    def optimizer_step(self) -> tuple[torch.Tensor, float]:
        """Draw each run's batch, take one AdamW step on the summed losses; the (K,) losses and the lr used."""
        # A curriculum (icl) trains step s on an easier stage of the task; the model and its loss are the task's own.
        if self.replay is not None:
            batches = self.replay[self.step % len(self.replay)]
        else:
            task = self.task.at_step(self.step)
            batches = self.models.draw(task, self.config.batch_size, self.samplers, self.device, self.config.sampler)
        lr = self.optimizer.param_groups[0]["lr"]
        lr_used = scheduled_lr(self.scheduler) if isinstance(lr, torch.Tensor) else lr  # never read back from a GPU
        assert self.stepper is not None
        losses = self.stepper(batches)  # (K,) detached, after backward and the AdamW step
        self.scheduler.step()
        self.step += 1
        return losses, lr_used


class LoopHooks:
    """What an ordinary run adds to the loop (metrics, checkpoints, a progress bar); the base class adds nothing."""

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
        hooks: the ordinary run's side effects (none for a seed batch).
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


# ------------------------------------------------------------------------------------------------ one ordinary run
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
    path: Path, rows: list[list[str]], step: int, model: torch.nn.Module, task: Task, device: torch.device
) -> None:
    """ValueError naming ``path`` unless the population value of the row at the checkpoint's ``step``, where there is
    one, is the restored model's population error (`training.evaluation.population_error`, the curve's CURVE_SAMPLES
    held-out samples) within one standard error of that estimate.

    On the CPU the recomputation is the same arithmetic and agrees exactly; the tolerance covers a GPU's or another
    thread count's rounding, and a change smaller than the estimate's own standard error says nothing the curve
    could resolve anyway.
    """
    row = next((r for r in rows if int(r[0]) == step), None)
    if row is None or not row[4]:
        return
    recorded = float(row[4])
    estimate = population_error(model, task, CURVE_SAMPLES, device)
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
class PreparedRun:
    """A run ready to train, every check of its directory passed and nothing written yet (`prepare_run`)."""

    training: Training
    model: torch.nn.Module
    rows: list[list[str]]  # the metrics rows the checkpoint has closed (empty for a fresh start)
    extending: bool  # the directory holds a finished shorter run that this one extends


def prepare_run(config: TrainConfig, files: RunDirectory) -> PreparedRun:
    """A fresh run of ``config``, or the state of its checkpoint (or of the shorter run it extends), with every file
    of the directory checked (the checkpoint, metrics.csv column by column, result.json of an extended run) and
    nothing written: a refusal leaves the directory exactly as it was. `commit_run` then writes."""
    extending = _extends_finished_run(files, config)
    device = resolve_device(config.device)
    task, model = build_run(config, device)
    optimizer, scheduler = make_optimizer(model.parameters(), config, optimizer_kind(config, device))
    sampler = sampler_generator(config.data_seed_value, config.sampler, device)
    models = SingleModel(model, task, config, device)
    stats = EpochStatistics.fresh(1, device, graded_from=task.full_task_from)
    training = Training(config, task, models, [sampler], optimizer, scheduler, stats, device)
    if config.train_batches:
        training.replay = [[batch] for batch in fixed_training_set(config, task, device)]
    rows: list[list[str]] = []
    if os.path.lexists(files.checkpoint):  # a dangling link is a damaged checkpoint, not an absent one
        step, saved = restore_checkpoint(
            files.checkpoint, config, model=model, optimizer=optimizer, scheduler=scheduler, sampler=sampler
        )
        training.step, training.elapsed_before = step, float(saved["elapsed"])
        stats = training.stats
        stats.running.fill_(float(saved["epoch_sum"]))
        stats.count = int(saved["epoch_count"])
        stats.best, stats.last = [float(saved["best"])], [float(saved["last_epoch"])]
        rows = files.metrics_rows(step)
        check_epoch_rows(files.metrics, rows, config, step, saved)
        check_population_row(files.metrics, rows, step, model, task, device)
    return PreparedRun(training, model, rows, extending)


def commit_run(files: RunDirectory, prepared: PreparedRun) -> None:
    """Write what a prepared run starts from: the stale temporaries of a killed write removed, the extended run's
    result.json retired (the extension writes its own when it ends; until then the directory holds an unfinished
    run), metrics.csv cut back to the checkpoint."""
    remove_stale_temporaries(files.root)
    if prepared.extending:
        files.result.unlink(missing_ok=True)
    files.write_metrics(prepared.rows)


def start_or_resume(config: TrainConfig, files: RunDirectory) -> tuple[Training, torch.nn.Module]:
    """A fresh run of ``config``, or the state of its checkpoint (or of the shorter run it extends): `prepare_run`'s
    checks, then `commit_run`'s writes."""
    prepared = prepare_run(config, files)
    commit_run(files, prepared)
    return prepared.training, prepared.model


def population_due(training: Training) -> bool:
    """Whether the epoch that just closed gets a point of the population curve: it ends on a checkpoint step or at
    the run's last step."""
    return training.step % training.config.checkpoint_every == 0 or training.step == training.config.steps


class RunDirectoryHooks(LoopHooks):
    """An ordinary run's side effects: a metrics row per epoch, checkpoints, progress on stderr."""

    def __init__(self, files: RunDirectory, model: torch.nn.Module, metrics_stream: TextIO, bar: Progress) -> None:
        self.files, self.model, self.bar = files, model, bar
        self.metrics_stream, self.metrics = metrics_stream, csv.writer(metrics_stream)

    def step_done(self, training: Training) -> None:
        self.bar.update(1)

    def epoch_closed(self, training: Training, means: list[float], lr_used: float) -> None:
        (mean,) = means
        population = ""
        if population_due(training):
            population = repr(population_error(self.model, training.task, CURVE_SAMPLES, training.device).mean)
        try:
            self.metrics.writerow([training.step, repr(mean), repr(lr_used), f"{training.elapsed():.3f}", population])
            self.metrics_stream.flush()
        except OSError as exc:  # a full disk: name the file
            raise named_write_error(exc, self.files.metrics) from exc
        self.bar.set_loss(mean)

    def checkpoint_due(self, training: Training) -> bool:
        return training.step % training.config.checkpoint_every == 0 or training.step == training.config.steps

    def save(self, training: Training) -> None:
        stats = training.stats
        save_checkpoint(
            self.files.checkpoint,
            config=training.config,
            step=training.step,
            model=self.model,
            optimizer=training.optimizer,
            scheduler=training.scheduler,
            sampler=training.samplers[0],
            stats={
                "epoch_sum": float(stats.running[0].item()),  # exact float64 round trip
                "epoch_count": stats.count,
                "best": stats.best[0],
                "last_epoch": stats.last[0],
                "elapsed": training.elapsed(),
            },
        )


def train(
    config: TrainConfig, out_dir: Path, *, progress: bool = True, progress_interval: float = DEFAULT_INTERVAL
) -> TrainResult:
    """Train (or resume, or return the finished result of) the run ``config`` in ``out_dir``.

    Args:
        config: the run.
        out_dir: run directory (created if needed). Its writer lock is held throughout (`training.run_lock`): a
            directory another process writes is refused (RunDirectoryBusy, a ValueError) before anything is written.
        progress: report progress on stderr: a tqdm bar on a terminal, else a line (step, loss, steps/s, ETA) every
            ``progress_interval`` seconds (`experiments.training.progress.Progress`).
        progress_interval: seconds between progress lines when stderr is not a terminal.

    Returns:
        the TrainResult (also written to out_dir/result.json).
    """
    config, out_dir, progress, progress_interval = check_train_arguments(config, out_dir, progress, progress_interval)
    files = RunDirectory(out_dir)
    with run_directory_lock(files.root):  # one writer per run directory, before anything is written
        finished = finished_result(files, config)
        if finished is not None:
            return finished
        with matmul_precision(config.matmul_precision):
            return _train_in(config, files, progress, progress_interval)


def write_run_record(files: RunDirectory, config: TrainConfig, training: Training) -> None:
    """Write the run's config.json (`run_directory.config_record`): with the device and the step path it really
    uses."""
    step_path = describe_step_path(config, training.device, optimizer_kind(config, training.device))
    files.write_config(config, provenance(), str(training.device), step_path)


def _train_in(config: TrainConfig, files: RunDirectory, progress: bool, progress_interval: float) -> TrainResult:
    """`train` after its checks, under the run's matmul precision."""
    training, model = start_or_resume(config, files)
    write_run_record(files, config, training)
    bar = Progress(
        config.steps,
        initial=training.step,
        desc=f"train {config.task} r={config.rank}",
        enabled=progress,
        interval=progress_interval,
    )
    training.started = time.perf_counter()
    with bar, files.metrics.open("a", newline="", encoding="utf-8") as metrics_stream:
        hooks = RunDirectoryHooks(files, model, metrics_stream, bar)
        model.train()
        run_loop(training, hooks, check_every_step=training.device.type == "cpu")
    (result,) = training.stats.results(training.step, training.elapsed())
    if not result.diverged:
        result.extra.update(evaluate_model(config, training.task, model))  # the one recipe (training.evaluation)
    files.write_result(result.to_dict())
    return result
