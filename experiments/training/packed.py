"""Packed training: K small runs trained in one process and one step, each with its own ordinary run directory.

The runs' models are packed into one (`experiments.models.packed`: stacked parameters, one batched forward for all K)
and moved by the one training loop (`experiments.training.loop.run_loop`) with one AdamW over the stacked tensors;
every run keeps its own initialisation (built exactly as `train` builds it), its own batch stream (its own sampler
generator), and its own epoch statistics, so each run's losses equal those of `train` on its config up to float
rounding (tests/experiments/training/test_packed_training.py).

Every run writes what `train` writes, into its own directory: ``config.json``, ``metrics.csv`` (a row per epoch),
``checkpoint.pt`` (an ordinary checkpoint of that run alone: its model slice, its slice of the AdamW moments, the
schedule, its sampler state, its statistics) and ``result.json``. So a killed pack resumes either as a pack (this
module reads the K checkpoints back and packs them again) or run by run with `train`, and `load_trained_model`,
`attnrank analyze` and ``train --eval-only`` read a packed run like any other. A run that diverges is stopped alone:
its last finite checkpoint is kept, its result says ``diverged``, and the other runs go on.

Every run directory's writer lock is held throughout (`experiments.training.run_lock`), and every run's files are
checked before any run's are written, so a pack refused for one damaged run changes none of them. Runs already
finished are returned from their ``result.json``. Runs at different steps (a pack killed between two of
its runs' checkpoints) are packed by step and trained one group after the other. ``seconds`` of each result is the
pack's wall time divided by the number of runs it trained.
"""

from __future__ import annotations

import contextlib
import copy
import csv
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import torch

from experiments.config import TrainConfig, TrainResult
from experiments.json_files import named_write_error
from experiments.models.packed import PackedNetwork, pack_models
from experiments.tasks import Batch, Task, draw_batch
from experiments.training.arguments import check_pack_arguments
from experiments.training.checkpoints import save_checkpoint
from experiments.training.evaluation import CURVE_SAMPLES, evaluate_model, population_error
from experiments.training.fixed_set import fixed_training_set
from experiments.training.loop import (
    EpochStatistics,
    LoopHooks,
    PreparedRun,
    Training,
    commit_run,
    finished_result,
    population_due,
    prepare_run,
    run_loop,
    write_run_record,
)
from experiments.training.progress import DEFAULT_INTERVAL, Progress
from experiments.training.run_directory import RunDirectory
from experiments.training.run_lock import run_directory_lock
from experiments.training.schedule import (
    load_optimizer_state,
    make_optimizer,
    optimizer_kind,
    portable_optimizer_state,
    portable_scheduler_state,
)
from experiments.training.step_capture import matmul_precision

ADAM_MOMENTS = ("exp_avg", "exp_avg_sq")


def draw_packed(
    task: Task, batch_size: int, samplers: list[torch.Generator], device: torch.device, sampler: str = "cpu"
) -> Batch:
    """Each run's next batch from its own generator, stacked: every field (K, B, ...) float32 on ``device``.

    sampler "cpu": drawn on the CPU in float64, stacked there and moved once; "device": drawn on ``device`` from
    generators that live there (`tasks.draw_batch`), stacked there.
    """
    if sampler == "device":
        batches = [draw_batch(task, batch_size, g, sampler, device) for g in samplers]
    else:
        batches = [task.sample(batch_size, g) for g in samplers]
    return stack_batches(batches, device)


def stack_batches(batches: Sequence[Batch], device: torch.device) -> Batch:
    """K runs' batches as one: every field (K, B, ...) float32 on ``device``."""

    def stacked(name: str) -> torch.Tensor | None:
        values = [getattr(b, name) for b in batches]
        return None if values[0] is None else torch.stack(values)  # (K, B, ...)

    return Batch(
        tokens=stacked("tokens"),  # type: ignore[arg-type]
        target=stacked("target"),  # type: ignore[arg-type]
        context=stacked("context"),  # type: ignore[arg-type]
        query=stacked("query"),
        aux=stacked("aux"),
    ).to(device)


class PackedModels:
    """The `loop.TrainedModels` of a pack: the packed network, drawing every run's batch and scoring all K at once."""

    def __init__(self, network: PackedNetwork) -> None:
        self.network = network
        self.parameters = network.parameters

    draw = staticmethod(draw_packed)

    def losses(self, batches: Batch) -> torch.Tensor:
        """Mean error of run k on its batch: (K,)."""
        return self.network.losses(batches)


# ------------------------------------------------------------------------------------- optimiser state, per run
def unpack_optimizer_state(state: dict[str, Any], k: int) -> dict[str, Any]:
    """Run k's AdamW state dict from the pack's (slice k of every moment; step counts and groups copied)."""
    per_run: dict[str, Any] = {"state": {}, "param_groups": copy.deepcopy(state["param_groups"])}
    for index, entry in state["state"].items():
        per_run["state"][index] = {
            key: value[k].clone() if key in ADAM_MOMENTS else value.clone() if torch.is_tensor(value) else value
            for key, value in entry.items()
        }
    return per_run


def pack_optimizer_state(states: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The pack's AdamW state dict from its K runs' (moments stacked; step counts must agree)."""
    first = states[0]
    packed: dict[str, Any] = {"state": {}, "param_groups": copy.deepcopy(first["param_groups"])}
    for index, entry in first["state"].items():
        merged: dict[str, Any] = {}
        for key, value in entry.items():
            if key in ADAM_MOMENTS:
                merged[key] = torch.stack([s["state"][index][key] for s in states])  # (K, *shape)
            else:
                others = [s["state"][index][key] for s in states]
                if any(not torch.equal(torch.as_tensor(o), torch.as_tensor(value)) for o in others):
                    raise ValueError(f"the runs of a pack disagree on optimizer state {key!r} of parameter {index}")
                merged[key] = value.clone() if torch.is_tensor(value) else value
        packed["state"][index] = merged
    if any(set(s["state"]) != set(first["state"]) for s in states):
        raise ValueError("the runs of a pack have optimizer state for different parameters")
    return packed


# ------------------------------------------------------------------------------------------------ the run files
@dataclass
class PackMember:
    """One run of a pack: its config, files, unpacked objects (used to write its checkpoints) and history."""

    config: TrainConfig
    files: RunDirectory
    training: Training  # the run's own unpacked state (model, optimiser, scheduler, sampler, statistics)
    model: torch.nn.Module


class PackHooks(LoopHooks):
    """A pack's side effects: each run's metrics rows and checkpoints, one progress bar for the pack."""

    def __init__(
        self, members: list[PackMember], network: PackedNetwork, streams: Sequence[TextIO], bar: Progress
    ) -> None:
        self.members, self.network, self.bar = members, network, bar
        self.streams, self.writers = streams, [csv.writer(s) for s in streams]
        self.elapsed_before = [m.training.elapsed_before for m in members]

    def elapsed(self, training: Training, k: int) -> float:
        """Run k's seconds of training: its earlier processes' plus its share of this pack's wall time."""
        return self.elapsed_before[k] + (time.perf_counter() - training.started) / len(self.members)

    def step_done(self, training: Training) -> None:
        self.bar.update(1)

    def epoch_closed(self, training: Training, means: list[float], lr_used: float) -> None:
        due = population_due(training)
        for k, mean in enumerate(means):
            if training.stats.diverged[k]:
                continue
            population = repr(self.population(training, k, CURVE_SAMPLES)) if due else ""
            elapsed = f"{self.elapsed(training, k):.3f}"
            try:
                self.writers[k].writerow([training.step, repr(mean), repr(lr_used), elapsed, population])
                self.streams[k].flush()
            except OSError as exc:  # a full disk: name the file
                raise named_write_error(exc, self.members[k].files.metrics) from exc
        live = [m for m, gone in zip(means, training.stats.diverged, strict=True) if not gone]
        if live:
            self.bar.set_loss(min(live))

    def population(self, training: Training, k: int, samples: int) -> float:
        """Run k's population error now (its slice of the pack copied into its own model, then evaluated)."""
        member = self.members[k]
        member.model.load_state_dict(self.network.state_dict_of(k))
        return population_error(member.model, training.task, samples, training.device).mean

    def checkpoint_due(self, training: Training) -> bool:
        config = training.config
        return training.step % config.checkpoint_every == 0 or training.step == config.steps

    def save(self, training: Training) -> None:
        stats = training.stats
        optimizer_state = portable_optimizer_state(training.optimizer)
        scheduler_state = portable_scheduler_state(training.scheduler)
        for k, member in enumerate(self.members):
            if stats.diverged[k]:
                continue  # its last finite checkpoint stays
            own = member.training
            member.model.load_state_dict(self.network.state_dict_of(k))
            load_optimizer_state(own.optimizer, unpack_optimizer_state(optimizer_state, k))
            own.scheduler.load_state_dict(scheduler_state)
            save_checkpoint(
                member.files.checkpoint,
                config=member.config,
                step=training.step,
                model=member.model,
                optimizer=own.optimizer,
                scheduler=own.scheduler,
                sampler=training.samplers[k],
                stats={
                    "epoch_sum": float(stats.running[k].item()),  # exact float64 round trip
                    "epoch_count": stats.count,
                    "best": stats.best[k],
                    "last_epoch": stats.last[k],
                    "elapsed": self.elapsed(training, k),
                },
            )


def _pack_members(members: list[PackMember], bar: Progress) -> list[TrainResult]:
    """Train members that are all at the same step as one pack; write their result files."""
    first = members[0].training
    configs = [m.config for m in members]
    network = pack_models([m.model for m in members], configs, first.task)
    optimizer, scheduler = make_optimizer(network.parameters, configs[0], optimizer_kind(configs[0], first.device))
    if first.step > 0:
        states = [portable_optimizer_state(m.training.optimizer) for m in members]
        load_optimizer_state(optimizer, pack_optimizer_state(states))
        scheduler.load_state_dict(portable_scheduler_state(first.scheduler))
    stats = EpochStatistics.fresh(len(members), first.device, graded_from=first.task.full_task_from)
    for k, member in enumerate(members):
        own = member.training.stats
        stats.running[k] = own.running[0]
        stats.best[k], stats.last[k] = own.best[0], own.last[0]
    stats.count = first.stats.count
    training = Training(
        configs[0],
        first.task,
        PackedModels(network),
        [m.training.samplers[0] for m in members],
        optimizer,
        scheduler,
        stats,
        first.device,
        step=first.step,
    )
    if configs[0].train_batches:  # each run replays its own set; replay[t] stacks the K runs' batch t
        sets = [fixed_training_set(c, first.task, first.device) for c in configs]
        training.replay = [stack_batches(group, first.device) for group in zip(*sets, strict=True)]
    streams = [m.files.metrics.open("a", newline="", encoding="utf-8") for m in members]
    try:
        hooks = PackHooks(members, network, streams, bar)
        training.started = time.perf_counter()
        run_loop(training, hooks, check_every_step=first.device.type == "cpu")
        seconds = [hooks.elapsed(training, k) for k in range(len(members))]
    finally:
        for stream in streams:
            stream.close()
    results = training.stats.results(training.step, 0.0, {"packed": len(members)})
    for k, (member, result, elapsed) in enumerate(zip(members, results, seconds, strict=True)):
        result.seconds = elapsed
        if not result.diverged:
            member.model.load_state_dict(network.state_dict_of(k))
            result.extra.update(evaluate_model(member.config, first.task, member.model))
        member.files.write_result(result.to_dict())
    return results


def train_packed(
    configs: Sequence[TrainConfig],
    out_dirs: Sequence[Path | str],
    *,
    progress: bool = False,
    progress_interval: float = DEFAULT_INTERVAL,
) -> list[TrainResult]:
    """Train (or resume, or return the finished results of) K runs together, each in its own run directory.

    Args:
        configs: K TrainConfigs that may share a pack (`experiments.packing.unit_key`: equal but for seed, data
            seed, temperature and, for the encoder, rank; softmax attention; no init, compile or bf16).
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
            return _train_packed_in(configs, dirs, progress, progress_interval)


def _train_packed_in(
    configs: list[TrainConfig], dirs: list[Path], progress: bool, progress_interval: float
) -> list[TrainResult]:
    """`train_packed` after its checks, under the pack's matmul precision."""
    results: dict[int, TrainResult] = {}
    prepared: dict[int, tuple[RunDirectory, PreparedRun]] = {}
    for index, (config, directory) in enumerate(zip(configs, dirs, strict=True)):
        files = RunDirectory(directory)
        finished = finished_result(files, config)
        if finished is not None:
            results[index] = finished
            continue
        prepared[index] = (files, prepare_run(config, files))  # every run's checks before any run's writes
    waiting: dict[int, list[tuple[int, PackMember]]] = {}
    for index, (files, run) in prepared.items():
        commit_run(files, run)
        write_run_record(files, configs[index], run.training)
        run.model.train()
        member = PackMember(configs[index], files, run.training, run.model)
        waiting.setdefault(run.training.step, []).append((index, member))
    remaining = sum(configs[0].steps - step for step in waiting)  # pack steps: each advances all of its runs
    desc = f"pack of {len(configs)} {configs[0].task} runs"
    with Progress(max(remaining, 1), desc=desc, enabled=progress and remaining > 0, interval=progress_interval) as bar:
        for step in sorted(waiting):
            group = waiting[step]
            for (index, _), result in zip(group, _pack_members([m for _, m in group], bar), strict=True):
                results[index] = result
    return [results[i] for i in range(len(configs))]
