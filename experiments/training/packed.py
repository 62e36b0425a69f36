"""What the training loop trains: K runs as one network (a pack), K = 1 for an ordinary run (:class:`TrainedRuns`).

A pack of K > 1 runs is their K models stacked into one module (`experiments.models.run_axis.stack_models`: every
parameter with a leading run axis, one batched forward for all K) under one AdamW over the stacked tensors. Every run
keeps its own initialisation (built exactly as an ordinary run's), its own batch generator, its own fixed set, and
its own model, optimiser and schedule, which the pack writes back (:meth:`TrainedRuns.run_model`,
:meth:`TrainedRuns.run_checkpoint`) so that each run's checkpoint is an ordinary one of that run alone: a killed pack
resumes as a pack or run by run. Which runs may share a pack is `experiments.packing`.

A pack of one is its run itself: the network is the run's own model, trained by the run's own optimiser, so an
ordinary run computes exactly what it computed before packs existed (and its checkpoints resume bitwise).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

import torch

from experiments.models.run_axis import run_count, run_state_dict, stack_models
from experiments.packing import check_one_unit
from experiments.samplers import get_sampler
from experiments.tasks import Batch, Task
from experiments.training.run_start import RunState
from experiments.training.schedule import (
    load_optimizer_state,
    make_optimizer,
    optimizer_kind,
    portable_optimizer_state,
    portable_scheduler_state,
)

ADAM_MOMENTS = ("exp_avg", "exp_avg_sq")


def stack_batches(batches: Sequence[Batch]) -> Batch:
    """K runs' batches as one: every field (K, B, ...)."""

    def stacked(name: str) -> torch.Tensor | None:
        values = [getattr(b, name) for b in batches]
        return None if values[0] is None else torch.stack(values)  # (K, B, ...)

    return Batch(
        tokens=stacked("tokens"),  # type: ignore[arg-type]
        target=stacked("target"),  # type: ignore[arg-type]
        context=stacked("context"),  # type: ignore[arg-type]
        query=stacked("query"),
        aux=stacked("aux"),
    )


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


# ------------------------------------------------------------------------------------------------- the K runs
class TrainedRuns:
    """K runs of one unit trained as one network (module docstring): their parameters, optimiser and schedule, how
    their K batches are drawn and their K mean losses on them.

    Args:
        runs: the K prepared runs (`training.run_start.prepare_run`), all at the same step; more than one must share
            a unit (`experiments.packing.unit_key`).
    """

    def __init__(self, runs: Sequence[RunState]) -> None:
        if not runs or any(run.step != runs[0].step for run in runs):
            raise ValueError("a pack needs one or more runs, all at the same step")
        self.runs = list(runs)
        first = self.runs[0]
        self.config, self.task, self.device = first.config, first.task, first.device
        if len(self.runs) == 1:  # a pack of one is its run itself
            self.network: torch.nn.Module = first.model
            self.optimizer, self.scheduler = first.optimizer, first.scheduler
        else:
            check_one_unit([run.config for run in self.runs])
            self.network = stack_models([run.model for run in self.runs])
            kind = optimizer_kind(self.config, self.device)
            self.optimizer, self.scheduler = make_optimizer(self.network.parameters(), self.config, kind)
            if first.step > 0:
                states = [portable_optimizer_state(run.optimizer) for run in self.runs]
                load_optimizer_state(self.optimizer, pack_optimizer_state(states))
                self.scheduler.load_state_dict(portable_scheduler_state(first.scheduler))
        self.parameters: list[torch.Tensor] = list(self.network.parameters())
        self.forward = torch.compile(self.network) if self.config.compile else self.network  # a single run's flag
        self.autocast = torch.autocast(device_type=self.device.type, dtype=torch.bfloat16, enabled=self.config.bf16)

    def __len__(self) -> int:
        return len(self.runs)

    def combine(self, batches: Sequence[Batch]) -> Batch:
        """The K runs' batches in the form :meth:`losses` takes: a pack of one's batch itself, else stacked."""
        return batches[0] if len(batches) == 1 else stack_batches(batches)

    def draw(self, task: Task, generators: Sequence[torch.Generator]) -> Batch:
        """Each run's next batch of ``task`` from its own generator, by the runs' sampler, on their device in float32
        (a pack's samples stacked where they were drawn, then moved and cast at once)."""
        sampler, batch_size = get_sampler(self.config.sampler), self.config.batch_size
        if len(generators) == 1:
            return sampler.draw(task, batch_size, generators[0], self.device)
        for generator in generators:
            sampler.check_generator(generator, self.device)
        return stack_batches([sampler.sample(task, batch_size, g) for g in generators]).to(self.device)  # (K, B, ...)

    def fixed_set(self) -> list[Batch]:
        """The runs' fixed training sets as one: batch t holds every run's own batch t (train_batches >= 1)."""
        sets = [run.fixed_set() for run in self.runs]
        return [self.combine(group) for group in zip(*sets, strict=True)]

    def losses(self, batch: Batch) -> torch.Tensor:
        """Mean task error of run k on its batch, for every k: (K,)."""
        with self.autocast:
            prediction = self.forward(batch)
        prediction = prediction.float()  # (B, ...); a pack's (K, B, ...)
        if run_count(self.network) is None:  # a single run's own model
            return self.task.error(prediction, batch.target).mean().unsqueeze(0)  # (1,)
        K, B = prediction.shape[:2]
        flat_prediction = prediction.reshape(K * B, *prediction.shape[2:])  # (K B, ...)
        flat_target = batch.target.reshape(K * B, *batch.target.shape[2:])  # (K B, ...)
        return self.task.error(flat_prediction, flat_target).view(K, B).mean(dim=1)  # (K,)

    def run_model(self, k: int) -> torch.nn.Module:
        """Run k's own model as it stands now (a pack's slice k copied into it)."""
        run = self.runs[k]
        if run.model is not self.network:
            run.model.load_state_dict(run_state_dict(self.network, k))
        return run.model

    def run_checkpoint(
        self, live: Sequence[int]
    ) -> dict[int, tuple[torch.nn.Module, torch.optim.Optimizer, torch.optim.lr_scheduler.LRScheduler]]:
        """The model, optimiser and schedule of each run in ``live`` as they stand now, each run's own (a pack's
        slices of the moments copied into it), ready for an ordinary checkpoint of that run alone."""
        if len(self.runs) == 1:
            return {k: (self.network, self.optimizer, self.scheduler) for k in live}
        optimizer_state = portable_optimizer_state(self.optimizer)
        scheduler_state = portable_scheduler_state(self.scheduler)
        objects = {}
        for k in live:
            run = self.runs[k]
            load_optimizer_state(run.optimizer, unpack_optimizer_state(optimizer_state, k))
            run.scheduler.load_state_dict(scheduler_state)
            objects[k] = (self.run_model(k), run.optimizer, run.scheduler)
        return objects
