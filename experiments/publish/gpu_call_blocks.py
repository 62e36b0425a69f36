"""The step costs of a GPU call's archived runs (``gpu-step-costs:FOLDER``; `experiments.publish.doc_blocks` rewrites
it): one row per run of every ``results/FOLDER/*.tgz`` archive.

An archive holds what a call on a lent GPU machine left (a sweep directory per preset: ``<preset>-<scale>/``, with its
results store and runs folder); each run directory's ``metrics.csv`` gives its milliseconds per step (the time column
between its second and last rows, over the steps between them), its loss at the last row and its lowest. The run
directories are read by the readers every run directory has (`experiments.training.run_directory`: config.json's
record, metrics.csv checked row by row) once their two files are unpacked into a temporary directory. The folder is
named by the block's marker, in the folder's own README.
"""

from __future__ import annotations

import tarfile
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from experiments.analysis.sweep_directory import RUNS_NAME, SweepDirectory
from experiments.reporting.doc_sources import RESULTS_NAME, DocBlockKind, DocSources
from experiments.training.run_directory import (
    CONFIG_NAME,
    METRICS_HEADER,
    METRICS_NAME,
    RunDirectory,
    read_metrics_file,
)

_STEP, _LOSS, _TIME = (METRICS_HEADER.index(column) for column in ("step", "loss", "time"))


@dataclass(frozen=True)
class GpuRun:
    """One run directory of a GPU call's archive: its config and what its ``metrics.csv`` recorded."""

    call: str
    preset: str
    config: Mapping[str, Any]
    steps_reached: int
    last_loss: float
    best_loss: float
    ms_per_step: float


def _unpack_run_files(archive: Path, into: Path) -> None:
    """Unpack every run directory's config.json and metrics.csv of ``archive`` into ``into`` (tarfile's ``data``
    filter: no absolute path, no link out of ``into``)."""
    with tarfile.open(archive, "r:gz") as tar:
        wanted = [
            member
            for member in tar.getmembers()
            if member.isfile()
            and PurePosixPath(member.name).name in (CONFIG_NAME, METRICS_NAME)
            and RUNS_NAME in PurePosixPath(member.name).parts[:-2]
        ]
        tar.extractall(into, members=wanted, filter="data")


def _archived_run(call: str, sweep: SweepDirectory, files: RunDirectory) -> GpuRun | None:
    """The run of ``files`` (in ``sweep``, unpacked from the archive of ``call``); None with fewer than two epochs."""
    rows = [[float(value or "nan") for value in row] for row in read_metrics_file(files.metrics)]
    if len(rows) < 2:
        return None
    if not files.config.is_file():
        raise ValueError(f"{files.root.name}: has {METRICS_NAME} but no {CONFIG_NAME}")
    second, last = rows[1], rows[-1]
    return GpuRun(
        call=call,
        preset=sweep.root.name.rsplit("-", 1)[0],  # a sweep directory <preset>-<scale>
        config=files.read_record()["config"],
        steps_reached=int(last[_STEP]),
        last_loss=last[_LOSS],
        best_loss=min(row[_LOSS] for row in rows),
        ms_per_step=1000.0 * (last[_TIME] - second[_TIME]) / (last[_STEP] - second[_STEP]),
    )


def gpu_runs(folder: Path) -> list[GpuRun]:
    """Every run with at least two logged epochs in the archives ``folder/*.tgz`` (module docstring); a call is
    named by its archive's name up to the first hyphen (``call1-d993a65.tgz``: ``call1``)."""
    archives = sorted(Path(folder).glob("*.tgz"))
    if not archives:
        raise ValueError(f"{folder}: no *.tgz archive of a GPU call")
    runs = []
    for archive in archives:
        with tempfile.TemporaryDirectory() as scratch:
            try:
                _unpack_run_files(archive, Path(scratch))
                roots = sorted(path.parent for path in Path(scratch).rglob(RUNS_NAME) if path.is_dir())
                for sweep in map(SweepDirectory, roots):
                    for files in sweep.run_directories():
                        run = _archived_run(archive.name.split("-")[0], sweep, files)
                        if run is not None:
                            runs.append(run)
            except (OSError, tarfile.TarError, ValueError) as exc:
                raise ValueError(f"{archive.name}: {' '.join(str(exc).replace(scratch, '').split())}") from None
    return runs


def gpu_step_costs(sources: DocSources, folder: str) -> list[str]:
    """``gpu-step-costs:FOLDER``: one row per run of the GPU call's archives in ``results/FOLDER`` (module docstring),
    by call, then the model's depth, preset, rank and seed."""
    lines = [
        f"Generated from the run directories in `{RESULTS_NAME}/{folder}/*.tgz` by `attnrank report --docs`: ms per "
        "step = the time column of the run's `metrics.csv` between its second and last rows, over the steps between "
        "them.",
        "",
        "| call | preset | L | r | N | seed | steps reached (of) | loss at stop | best loss | ms per step |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    runs = sorted(
        gpu_runs(sources.root / RESULTS_NAME / folder),
        key=lambda g: (g.call, int(g.config["layers"]), g.preset, int(g.config["rank"]), int(g.config["seed"])),
    )
    for g in runs:
        c = g.config
        lines.append(
            f"| {g.call.removeprefix('call')} | {g.preset} | {c['layers']} | {c['rank']} | {c['N']} | {c['seed']} | "
            f"{g.steps_reached} ({c['steps']}) | {g.last_loss:.5f} | {g.best_loss:.4f} | {g.ms_per_step:.1f} |"
        )
    return lines


DOC_BLOCKS = (DocBlockKind("gpu-step-costs", gpu_step_costs, 1, 1),)
"""The block kind of this module (module docstring)."""
