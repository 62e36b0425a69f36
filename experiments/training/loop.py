"""The one training pipeline: runs trained alone (:func:`train`) or in packs (:func:`train_packed`), each with its own
run directory, by one loop, one set of hooks and one end of run (:func:`train_runs`; a single run is a pack of one).

Every run fills its own directory (`experiments.training.run_directory`):

- ``config.json``: the resolved config, its hash, git revision, library versions, the device used;
- ``metrics.csv``: one row per epoch: ``step, loss, lr, time, population`` (loss = mean training loss of the epoch
  ending at ``step``, lr = learning rate of that epoch's last step, time = seconds of training so far, population
  evaluations included; population = the model's error on held-out samples, `experiments.training.evaluation`, at
  the epochs that end on a checkpoint step and at the last step, empty elsewhere);
- ``checkpoint.pt``: see `experiments.training.checkpoints` (an ordinary checkpoint of that run alone, packed or not);
- ``result.json``: the :class:`TrainResult`, written when the run ends, with the model's evaluation by the one recipe
  (`experiments.training.evaluation.evaluate_model`: the population error, and Theorem 2's bound where it applies).

How a run starts (fresh, resumed from its checkpoint, or extending a shorter run) is `training.run_start`; the loop
proper is `training.run_loop`; what is trained, K runs as one network, is `training.packed`.

Training data (docs/training.md, "Training data"): fresh batches from the run's sampler generator at every step
(``train_batches`` = 0), or a fixed set of K batches drawn once and replayed, step t on batch t mod K
(the sampler's, `experiments.samplers.Sampler.fixed_set`); either is seeded by the run's data seed (``data_seed``,
default ``seed``).

Packs: every run directory's writer lock is held throughout (`experiments.training.run_lock`), and every run's files
are checked before any run's are written, so a pack refused for one damaged run changes none of them. Runs already
finished are returned from their ``result.json``. Runs at different steps (a pack killed between two of its runs'
checkpoints) are packed by step and trained one group after the other. A run that diverges is stopped alone: its
last finite checkpoint is kept, its result says ``diverged``, and the other runs go on. ``seconds`` of each result is
its earlier processes' time plus the pack's wall time divided by the number of runs trained together.
"""

from __future__ import annotations

import contextlib
import csv
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from experiments.config import TrainConfig, TrainResult
from experiments.json_files import named_write_error
from experiments.training.arguments import check_pack_arguments, check_train_arguments
from experiments.training.checkpoints import save_checkpoint
from experiments.training.evaluation import evaluate_model, population_error
from experiments.training.packed import TrainedRuns
from experiments.training.progress import DEFAULT_INTERVAL, Progress
from experiments.training.provenance import provenance
from experiments.training.run_directory import RunDirectory
from experiments.training.run_lock import run_directory_lock
from experiments.training.run_loop import LoopHooks, Training, run_loop
from experiments.training.run_start import RunState, commit_run, finished_result, prepare_run
from experiments.training.schedule import optimizer_kind
from experiments.training.step_capture import describe_step_path, matmul_precision


def population_due(training: Training) -> bool:
    """Whether the epoch that just closed gets a point of the population curve: it ends on a checkpoint step or at
    the run's last step."""
    return training.step % training.config.checkpoint_every == 0 or training.step == training.config.steps


class RunFilesHooks(LoopHooks):
    """What the runs' directories get from the loop: each run's metrics rows and checkpoints, one progress bar."""

    def __init__(self, runs: TrainedRuns, streams: Sequence[TextIO], bar: Progress) -> None:
        self.runs, self.bar = runs, bar
        self.streams, self.writers = streams, [csv.writer(s) for s in streams]

    def elapsed(self, training: Training, k: int) -> float:
        """Run k's seconds of training: its earlier processes' plus its share of this process's wall time."""
        return self.runs.runs[k].elapsed_before + (time.perf_counter() - training.started) / len(self.runs)

    def step_done(self, training: Training) -> None:
        self.bar.update(1)

    def epoch_closed(self, training: Training, means: list[float], lr_used: float) -> None:
        due = population_due(training)
        for k, mean in enumerate(means):
            if training.stats.diverged[k]:
                continue
            population = ""
            if due:
                model, samples = self.runs.run_model(k), self.runs.runs[k].config.curve_samples()
                population = repr(population_error(model, training.task, samples, training.device).mean)
            elapsed = f"{self.elapsed(training, k):.3f}"
            try:
                self.writers[k].writerow([training.step, repr(mean), repr(lr_used), elapsed, population])
                self.streams[k].flush()
            except OSError as exc:  # a full disk: name the file
                raise named_write_error(exc, self.runs.runs[k].directory.metrics) from exc
        live = [m for m, gone in zip(means, training.stats.diverged, strict=True) if not gone]
        if live:
            self.bar.set_loss(min(live))

    def checkpoint_due(self, training: Training) -> bool:
        config = training.config
        return training.step % config.checkpoint_every == 0 or training.step == config.steps

    def save(self, training: Training) -> None:
        stats = training.stats
        live = [k for k in range(len(self.runs)) if not stats.diverged[k]]  # a diverged run keeps its last checkpoint
        for k, (model, optimizer, scheduler) in self.runs.run_checkpoint(live).items():
            run = self.runs.runs[k]
            save_checkpoint(
                run.directory.checkpoint,
                config=run.config,
                step=training.step,
                model=model,
                optimizer=optimizer,
                scheduler=scheduler,
                sampler=training.generators[k],
                stats={
                    "epoch_sum": float(stats.running[k].item()),  # exact float64 round trip
                    "epoch_count": stats.count,
                    "best": stats.best[k],
                    "last_epoch": stats.last[k],
                    "elapsed": self.elapsed(training, k),
                },
            )


def write_run_record(run: RunState) -> None:
    """Write the run's config.json (`run_directory.config_record`): with the device and the step path it really
    uses."""
    step_path = describe_step_path(run.config, run.device, optimizer_kind(run.config, run.device))
    run.directory.write_config(run.config, provenance(), str(run.device), step_path)


def _train_together(runs: list[RunState], bar: Progress, extra: dict[str, int]) -> list[TrainResult]:
    """Train runs that are all at the same step as one (a pack of one or more); write their result files."""
    trained = TrainedRuns(runs)
    training = Training.of(trained)
    first = runs[0]
    streams = [run.directory.metrics.open("a", newline="", encoding="utf-8") for run in runs]
    try:
        hooks = RunFilesHooks(trained, streams, bar)
        training.started = time.perf_counter()
        run_loop(training, hooks, check_every_step=first.device.type == "cpu")
        seconds = [hooks.elapsed(training, k) for k in range(len(runs))]
    finally:
        for stream in streams:
            stream.close()
    results = training.stats.results(training.step, 0.0, extra)
    for k, (run, result) in enumerate(zip(runs, results, strict=True)):
        result.seconds = seconds[k]
        if not result.diverged:
            result.extra.update(evaluate_model(run.config, first.task, trained.run_model(k)))  # the one recipe
        run.directory.write_result(result.to_dict())
    return results


def train_runs(
    configs: Sequence[TrainConfig],
    dirs: Sequence[Path],
    *,
    progress: bool,
    progress_interval: float,
    desc: str,
    packed: bool,
) -> list[TrainResult]:
    """Train (or resume, or return the finished results of) runs, each in its own directory: every run's files
    checked before any is written, then the unfinished runs trained together by step (module docstring).

    Args:
        configs, dirs: the runs and their distinct directories (checked by the caller, whose locks are held).
        progress, progress_interval: the progress bar (`experiments.training.progress.Progress`), labelled ``desc``.
        packed: record ``packed`` (the number of runs trained together) in each result trained here.
    """
    results: dict[int, TrainResult] = {}
    prepared: dict[int, RunState] = {}
    for index, (config, directory) in enumerate(zip(configs, dirs, strict=True)):
        files = RunDirectory(directory)
        finished = finished_result(files, config)
        if finished is not None:
            results[index] = finished
            continue
        prepared[index] = prepare_run(config, files)  # every run's checks before any run's writes
    groups: dict[int, list[tuple[int, RunState]]] = {}
    for index, run in prepared.items():
        commit_run(run)
        write_run_record(run)
        run.model.train()
        groups.setdefault(run.step, []).append((index, run))
    if not groups:
        return [results[i] for i in range(len(configs))]
    remaining = sum(configs[0].steps - step for step in groups)  # loop steps: each advances all runs of its group
    initial = min(groups) if len(groups) == 1 else 0
    bar = Progress(
        initial + remaining,
        initial=initial,
        desc=desc,
        enabled=progress and remaining > 0,
        interval=progress_interval,
    )
    with bar:
        for step in sorted(groups):
            group = groups[step]
            extra = {"packed": len(group)} if packed else {}
            for (index, _), result in zip(group, _train_together([run for _, run in group], bar, extra), strict=True):
                results[index] = result
    return [results[i] for i in range(len(configs))]


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
    with run_directory_lock(out_dir), matmul_precision(config.matmul_precision):  # one writer, before any write
        desc = f"train {config.task} r={config.rank}"
        (result,) = train_runs(
            [config], [out_dir], progress=progress, progress_interval=progress_interval, desc=desc, packed=False
        )
        return result


def train_packed(
    configs: Sequence[TrainConfig],
    out_dirs: Sequence[Path | str],
    *,
    progress: bool = False,
    progress_interval: float = DEFAULT_INTERVAL,
) -> list[TrainResult]:
    """Train (or resume, or return the finished results of) K runs together, each in its own run directory.

    Args:
        configs: K TrainConfigs that may share a pack (`experiments.packing.unit_key`: equal but for the fields
            their model kind lets differ (seed, data seed, temperature, the encoder's rank); softmax attention; no
            init, compile or bf16).
        out_dirs: K distinct run directories (created if needed), as for `train`.
        progress: report the pack's progress on stderr (`experiments.training.progress.Progress`).
        progress_interval: seconds between progress lines when stderr is not a terminal.

    Returns:
        K TrainResults in input order (each also written to its directory's result.json; ``extra`` has ``packed``,
        the number of runs trained together, except for runs that were already finished).
    """
    configs, dirs, progress, progress_interval = check_pack_arguments(configs, out_dirs, progress, progress_interval)
    with contextlib.ExitStack() as locks:  # one writer per run directory: every run's, before anything is written
        for directory in dirs:
            locks.enter_context(run_directory_lock(directory))
        with matmul_precision(configs[0].matmul_precision):
            desc = f"pack of {len(configs)} {configs[0].task} runs"
            return train_runs(
                configs, dirs, progress=progress, progress_interval=progress_interval, desc=desc, packed=True
            )
