"""A sweep run that extends a finished run of the same sweep starts from that run's last checkpoint.

A run extends another when only its ``steps`` grew along the same named schedule (`TrainConfig.extends`: the same
``schedule_steps``, every other field but the execution fields equal), for example fig1-d64's 20k-step cpu runs and
the same cells with ``--set steps=40000`` or at the paper scale. Its config hash differs, so it has a run directory of
its own; before the sweep dispatches it, :func:`seed_extensions` copies the longest finished run it extends (its
config, metrics and checkpoint; not its result or evaluation) into that directory, and training goes on from there
exactly as `attnrank train` extends a run in place (`experiments.training.loop`: the epochs, checkpoints and
statistics of one uninterrupted run). The earlier run's directory is read, never written, so the store keeps both.

Only finished, undiverged runs are sources (a run still training belongs to its own process), and only a directory
that holds nothing yet is seeded (a started extension resumes from its own checkpoints), under its writer lock
(`experiments.training.run_lock`): a directory another process writes is left alone.
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path

from experiments.config import TrainConfig
from experiments.sweeps.work import RunTask
from experiments.training.run_directory import RunDirectory
from experiments.training.run_lock import RunDirectoryBusy, run_directory_lock

Candidate = tuple[TrainConfig, RunDirectory]
"""A finished run that a longer one may extend: its config and its directory."""

SEED_FILES = ("config", "metrics", "checkpoint")
"""The `RunDirectory` files an extension starts from (result.json and evaluation.json belong to the shorter run)."""


def finished_runs(runs_root: Path) -> list[Candidate]:
    """Every run directory under ``runs_root`` holding a finished, undiverged training run, with its config."""
    found = []
    for directory in sorted(p for p in runs_root.glob("*") if p.is_dir()) if runs_root.is_dir() else []:
        files = RunDirectory(directory)
        if not (files.config.is_file() and files.result.is_file() and files.checkpoint.is_file()):
            continue
        try:
            config, result = files.read_config(), files.read_result()
        except ValueError:
            continue  # a damaged directory is the store rebuild's business, never a source
        if not result.diverged:
            found.append((config, files))
    return found


def extension_source(config: TrainConfig, candidates: Sequence[Candidate]) -> RunDirectory | None:
    """The candidate run with the most steps that ``config`` extends exactly (its steps a multiple of log_every)."""
    usable = [
        (earlier.steps, files)
        for earlier, files in candidates
        if config.extends(earlier) and earlier.steps % earlier.log_every == 0
    ]
    return max(usable, key=lambda item: item[0])[1] if usable else None


def seed_extensions(tasks: Sequence[RunTask], runs_root: Path) -> dict[str, str]:
    """Seed the empty run directory of every training task that extends a finished run under ``runs_root``.

    Returns:
        task key -> the source run directory's name, for each task seeded.
    """
    candidates: list[Candidate] | None = None
    seeded: dict[str, str] = {}
    for task in tasks:
        if task.kind != "train" or not task.spec.get("schedule_steps"):
            continue
        config = TrainConfig.from_dict(task.spec)
        target = RunDirectory(Path(task.run_dir))
        if target.config.exists() or target.checkpoint.exists():
            continue
        if candidates is None:
            candidates = finished_runs(runs_root)  # read once, and only when some task could extend a run
        source = extension_source(config, candidates)
        if source is None:
            continue
        try:
            with run_directory_lock(target.root):  # one writer per run directory: the driver too, while it seeds
                if target.config.exists() or target.checkpoint.exists():
                    continue  # started meanwhile by the writer that held it
                for name in reversed(SEED_FILES):  # config.json last: a directory with a config is a started run
                    source_path, target_path = getattr(source, name), getattr(target, name)
                    partial = target_path.with_name(f".{target_path.name}.seed.tmp")
                    shutil.copyfile(source_path, partial)
                    partial.replace(target_path)
        except RunDirectoryBusy:
            continue  # another process writes it: its worker will be refused and the run reported failed
        seeded[task.key] = source.root.name
    return seeded
