"""A sweep run that extends a finished run of the same sweep goes on from its checkpoint
(experiments.sweeps.extensions): the same curve, bitwise, as the longer run trained from scratch, and the shorter run
left as it was."""

from __future__ import annotations

import csv
import dataclasses
from pathlib import Path

from experiments.studies import run_sweep
from experiments.sweeps.extensions import extension_source, finished_runs
from experiments.training.run_directory import RunDirectory

ONE_CELL = {"layers": 1}  # fig1-d64-replay quick: d = 16, r = 8, 60 steps of a 200-step schedule, K = 20


def _curve(run_dir: Path) -> list[tuple[int, float]]:
    with open(RunDirectory(run_dir).metrics, newline="") as handle:
        return [(int(row["step"]), float(row["loss"])) for row in csv.DictReader(handle)]


def _only_run(out: Path, steps: int) -> Path:
    (run,) = [c for c, files in finished_runs(out / "runs") if c.steps == steps]
    return next(files.root for c, files in finished_runs(out / "runs") if c == run)


def test_a_longer_run_goes_on_from_the_shorter_runs_checkpoint(tmp_path: Path) -> None:
    sweep = tmp_path / "sweep"
    first = run_sweep("fig1-d64-replay", "quick", sweep, workers=1, only=ONE_CELL, progress=False)
    assert first["finished"] == 1 and first["extended"] == 0
    short = _only_run(sweep, 60)
    short_curve = _curve(short)
    short_checkpoint = RunDirectory(short).checkpoint.read_bytes()

    longer = run_sweep(
        "fig1-d64-replay", "quick", sweep, workers=1, only=ONE_CELL, overrides={"steps": 100}, progress=False
    )
    assert longer["finished"] == 1 and longer["extended"] == 1
    extended = _only_run(sweep, 100)
    assert extended != short
    assert _curve(short) == short_curve and RunDirectory(short).checkpoint.read_bytes() == short_checkpoint

    scratch = tmp_path / "scratch"
    alone = run_sweep(
        "fig1-d64-replay", "quick", scratch, workers=1, only=ONE_CELL, overrides={"steps": 100}, progress=False
    )
    assert alone["extended"] == 0
    from_scratch = _curve(_only_run(scratch, 100))
    assert _curve(extended) == from_scratch  # bitwise: the extension is the uninterrupted run
    assert _curve(extended)[: len(short_curve)] == short_curve


def test_no_source_without_the_same_schedule(tmp_path: Path) -> None:
    """Negative control: a run of another schedule length (or a shorter one) is never a source."""
    sweep = tmp_path / "sweep"
    run_sweep("fig1-d64-replay", "quick", sweep, workers=1, only=ONE_CELL, progress=False)
    ((config, _),) = finished_runs(sweep / "runs")
    assert (
        extension_source(dataclasses.replace(config, steps=100, schedule_steps=400), finished_runs(sweep / "runs"))
        is None
    )
    assert extension_source(dataclasses.replace(config, steps=40), finished_runs(sweep / "runs")) is None
    assert extension_source(dataclasses.replace(config, steps=100), finished_runs(sweep / "runs")) is not None
