"""Constructions as starting points (the depth preset's arms): each arm's error at step 0, steps to a fixed error and
final error, beside the same model trained from scratch.

An *arm* is a cell of theory-model runs (layers, rank, scratch width p, heads per layer H) with one starting point:
from scratch (``init`` None) or from the construction its ``init`` recipe names (`experiments.config.ConstructionInit`).
Per run, from its sweep record (spec fields merged with metrics) and its run directory:

- **start**: the population error of the model the run starts from by the one recipe (`experiments.training.
  evaluation.evaluate_run` without a checkpoint: the construction, or the seed's random initialisation; 20 000
  samples of the held-out stream), so a report recomputes the same number from the config alone;
- **predicted**: the construction's own error at its temperature where theory gives it: Fact 1's exact D_2 error
  (`theory.bounds.full_rank_error`), Theorem 5's exact error averaged over random directions
  (`theory.majority_vote_error.majority_vote_error`; one draw of directions differs from it by about 5%,
  constructions/majority_vote.py ``PREDICTION_SCOPE``);
- **steps to target**: 0 when the start is at or below the target error (mean + 4 s.e.), else the last step of the
  first epoch whose mean training loss (``metrics.csv``, else the store's ``curves.csv``) is at or below it; None when
  never reached; unknown when neither holds the run's curve;
- **first and highest epoch loss** (``metrics.csv``): whether the first optimiser steps leave the construction;
- **final**: the run's population error after training (its record's ``population_*`` fields,
  `experiments.analysis.records.fresh_error`), and its best epoch loss.

This module loads torch (through the evaluation); `attnrank report` imports it only for a sweep with such arms.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from experiments.analysis.records import Record, fresh_error
from experiments.analysis.sweep_directory import CURVES_NAME, SweepDirectory
from experiments.config import TrainConfig
from experiments.training.evaluation import evaluate_run
from theory.bounds import full_rank_error
from theory.majority_vote_error import majority_vote_error
from theory.monte_carlo import DEFAULT_Z

"""Fresh samples and sampler seed of the step-0 error (the final error uses the same: experiments/sweeps/execute.py)."""


@dataclass(frozen=True)
class ArmRun:
    """One run of an arm.

    Attributes:
        seed: the run's seed.  start, start_stderr: the fresh error of its starting model and its standard error.
        steps_to_target: steps until the target error (0: at the start), None: never, -1: no metrics.csv to read.
        final, final_stderr: the fresh error after training (nan when the run has none).  best_loss: its lowest epoch
        loss (nan when absent).  first_epoch, worst_epoch: the mean training loss of its first epoch and its highest
        epoch mean (nan without metrics.csv): how far the first optimiser steps move it from its start.  note: why
        the curve is unknown, if it is.
    """

    seed: int
    start: float
    start_stderr: float
    steps_to_target: int | None
    final: float
    final_stderr: float
    best_loss: float
    first_epoch: float = math.nan
    worst_epoch: float = math.nan
    note: str = ""


@dataclass(frozen=True)
class Arm:
    """One arm: a cell and a starting point, with its runs (one per seed).

    Attributes:
        layers, rank, p, heads: the cell (heads per layer H).  init: the recipe ("construction:...") or None.
        predicted: the construction's predicted error (nan: scratch, or no closed form for this task).
        steps: training steps of the runs.  runs: the seeds' runs, in seed order.
    """

    layers: int
    rank: int
    p: int
    heads: int
    init: str | None
    predicted: float
    steps: int
    runs: tuple[ArmRun, ...]

    @property
    def label(self) -> str:
        """The starting point in words."""
        if self.init is None:
            return "scratch"
        name, _, scale = self.init.removeprefix("construction:").partition("@")
        words = {"majority-vote": "majority vote (Thm 5)", "full-rank": "full-rank head (Fact 1)"}[name]
        return f"{words}, T = {scale or 'run'}"


def predicted_start_error(config: TrainConfig) -> float:
    """The construction's predicted error on its task, or nan (scratch, or a task/N/keys without a closed form).

    Args:
        config: a run of the depth preset's arms.

    Returns:
        Fact 1: full_rank_error(d, lambda) (exact, D_2, N = 2; 0 at hardmax); Theorem 5:
        majority_vote_error(d, H, lambda) (mean over random directions; D_2 for softmax).
    """
    recipe = config.construction_init
    if recipe is None or config.task != "nearest" or config.N != 2 or config.keys != "orthonormal":
        return math.nan
    temperature = math.inf if config.attention == "hardmax" else (recipe.temperature or config.temperature)
    if recipe.name == "full-rank":
        return 0.0 if math.isinf(temperature) else full_rank_error(config.d, temperature)
    return majority_vote_error(config.d, config.heads, temperature)


def start_error(config: TrainConfig) -> tuple[float, float]:
    """(mean, standard error) of the fresh Monte Carlo error of the model ``config`` starts from (step 0).

    Args:
        config: any training run (its init recipe or file, else its seed's random initialisation).

    Returns:
        The population error by the one recipe (`experiments.training.evaluation`) and its standard error.
    """
    estimate = evaluate_run(config, None)
    return float(estimate["population_error"]), float(estimate["population_stderr"])


def steps_to_target(curve: Sequence[tuple[int, float]], target: float) -> int | None:
    """The last step of the first epoch whose mean training loss is <= ``target`` (None when none is).

    Args:
        curve: (step, epoch-mean loss) rows in step order (`SweepDirectory.run_curve`).
        target: the error to reach.
    """
    for step, loss in curve:
        if math.isfinite(loss) and loss <= target:
            return step
    return None


def arm_cell(record: Mapping[str, Any]) -> tuple[int, int, int, int]:
    """(layers, rank, p, heads per layer) of a theory-model record."""
    layers, rank, p = int(record["layers"]), int(record["rank"]), int(record.get("positional_dim") or 0)
    return layers, rank, p, int(record["width"]) * (int(record["d"]) + p) // rank


def construction_arms(records: Sequence[Record], sweep: SweepDirectory, target: float) -> list[Arm]:
    """Every arm of the records: the cells that have a construction-initialised run, each starting point separately.

    Args:
        records: sweep records (spec fields merged with metrics; ``hash``, ``status``, ``init`` among them).
        sweep: the sweep directory (each run's metrics.csv, else the store's curves.csv, gives the steps to target:
            `SweepDirectory.run_curve`).
        target: the fixed error whose steps are counted (`experiments.studies.depth.DEPTH_ARM_TARGET`).

    Returns:
        Arms ordered by cell, then scratch first and the recipes in order; runs in seed order. Unfinished runs are
        left out.
    """
    finished = [r for r in records if r.get("kind", "train") == "train" and r.get("status") == "finished"]
    theory = [r for r in finished if r.get("model") == "theory"]
    cells = {arm_cell(r) for r in theory if r.get("init") is not None}
    groups: dict[tuple[tuple[int, int, int, int], str], list[Record]] = {}
    for r in theory:
        if arm_cell(r) in cells:
            groups.setdefault((arm_cell(r), str(r.get("init") or "")), []).append(r)
    arms = []
    for (cell, init), members in sorted(groups.items()):
        configs = [_config_of(r) for r in members]
        runs = []
        for r, config in sorted(zip(members, configs, strict=True), key=lambda pair: pair[1].seed):
            start, start_se = start_error(config)
            curve, note, source = sweep.run_curve(str(r["hash"]))
            if source.startswith("re-run"):
                note = f"curves recovered by re-running the runs ({CURVES_NAME}: {source.split(':')[0]})"
            reached: int | None = -1 if curve is None else steps_to_target(curve, target)
            if start + DEFAULT_Z * start_se <= target:
                reached = 0
            final = _final_error(r)
            best = r.get("best_loss")
            runs.append(
                ArmRun(
                    seed=config.seed,
                    start=start,
                    start_stderr=start_se,
                    steps_to_target=reached,
                    final=final[0],
                    final_stderr=final[1],
                    best_loss=float(best) if isinstance(best, (int, float)) else math.nan,
                    first_epoch=math.nan if curve is None else curve[0][1],
                    worst_epoch=math.nan if curve is None else max(loss for _, loss in curve),
                    note=note,
                )
            )
        layers, rank, p, heads = cell
        arms.append(
            Arm(layers, rank, p, heads, init or None, predicted_start_error(configs[0]), configs[0].steps, tuple(runs))
        )
    return arms


def _config_of(record: Mapping[str, Any]) -> TrainConfig:
    """The TrainConfig of a finished sweep record, checked against the record's hash (metrics may shadow fields)."""
    names = set(TrainConfig.__dataclass_fields__)
    config = TrainConfig.from_dict({k: v for k, v in record.items() if k in names})
    if config.config_hash() != record.get("hash"):
        raise ValueError(f"run {record.get('hash')!r}: its record does not rebuild its config (hash differs)")
    return config


def _final_error(record: Mapping[str, Any]) -> tuple[float, float]:
    """(mean, standard error) of a finished run's population error after training (nan, nan when absent)."""
    return fresh_error(record) or (math.nan, math.nan)
