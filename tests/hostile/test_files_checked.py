"""Every file we read is checked by one reader per format: JSON depth and size, fields by type and range.

The probe's cases: deeply nested JSON in config.json, result.json or analysis.json gave a RecursionError traceback
(train resume, analyze, report, figure trained, sweep --rebuild-store, which left a half-built store);
--rebuild-store copied junk from result.json (a string loss, -inf, negative steps) into the store; a run directory's
analysis.json with NaN or impossible fields was printed by report; a re-run sweep copied NaN losses of a damaged run
over a good committed curve.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from experiments.analysis.run_curves import load_curves_file, write_curves_file
from experiments.analysis.sweep_directory import SweepDirectory
from experiments.json_files import read_json_object
from experiments.studies import get_preset
from experiments.sweeps.store import ResultsStore
from experiments.training.loop import train
from tests.experiments.cli.cli_fuzz import invoke, refusal_problems
from tests.hostile.common import copy_run, snapshot, train_short_run

DEEP = 100_000
"""Nesting depth of the hostile JSON (Python's parser recursed once per level: 1,000 levels were enough to fail)."""


def deep_json(kind: str) -> str:
    return "[" * DEEP + "]" * DEEP if kind == "[" else '{"a":' * DEEP + "1" + "}" * DEEP


@pytest.fixture(scope="module")
def analysed_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished run with its analysis.json (`attnrank analyze`, 200 held-out samples: the file's shape is the
    point, not its precision)."""
    from experiments.cli.main import main

    run = train_short_run(tmp_path_factory.mktemp("analysed") / "run")
    assert main(["analyze", str(run), "--samples", "200", "--json"]) == 0
    return run


def _refused(argv: list[str], root: Path, capsys: pytest.CaptureFixture[str], names: str) -> str:
    before = snapshot(root)
    outcome = invoke(argv, capsys)
    assert refusal_problems(outcome, before, snapshot(root)) == [], outcome.err
    assert names in outcome.err, outcome.err
    return outcome.err


COMMANDS: dict[str, Callable[[Path], list[str]]] = {
    "analyze": lambda run: ["analyze", str(run), "--samples", "200"],
    "report": lambda run: ["report", str(run)],
    "figure trained": lambda run: ["figure", "trained", str(run), "--out", str(run.parent / "f.png")],
}
READERS = {  # which commands read which file (train's resume and extension: tests/hostile/test_refusals_...)
    "config.json": ["analyze", "report"],
    "result.json": ["report"],
    "analysis.json": ["report", "figure trained"],
}


@pytest.mark.parametrize(
    ("name", "command", "kind"),
    [
        (name, command, kind)
        for name, commands in READERS.items()
        for command in commands
        for kind in ("array", "object")
    ],
)
def test_deeply_nested_json_is_refused_naming_the_file(
    name: str, command: str, kind: str, analysed_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = copy_run(analysed_run, tmp_path / "run")
    (run / name).write_text(deep_json(kind))
    err = _refused(COMMANDS[command](run), tmp_path, capsys, str(run / name))
    assert "nested" in err


@pytest.mark.parametrize("name", ["deep.json", "deep.yaml", "deep-block.yaml"])
def test_a_deeply_nested_configuration_file_is_refused(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`train --config` (the reader of `experiments.config_files`, which `sweep --reference` shares)."""
    text = deep_json("{") if name == "deep.json" else deep_json("[")
    if name == "deep-block.yaml":  # YAML's indented nesting, which no bracket counts
        text = "a:\n" + "".join("  " * level + "b:\n" for level in range(1, 3000))
    (tmp_path / name).write_text(text)
    _refused(["train", "--config", str(tmp_path / name), "--out", str(tmp_path / "run")], tmp_path, capsys, name)


def test_a_json_file_larger_than_the_limit_is_refused_before_parsing(tmp_path: Path) -> None:
    path = tmp_path / "big.json"
    path.write_text(json.dumps({"pad": "x" * 500}))
    assert read_json_object(path)["pad"] == "x" * 500  # the control: within the default limit
    with pytest.raises(ValueError, match="big.json.*more than the 100 bytes"):
        read_json_object(path, max_bytes=100)


ANALYSIS_DAMAGE: dict[str, Callable[[dict[str, Any]], None]] = {
    "an angle of 200 degrees": lambda a: a["layers"][0]["per_head"][0].update(angle_to_I_deg=200.0),
    "angles not summing to 180": lambda a: a["layers"][0]["sum"].update(angle_to_minus_I_deg=10.0),
    "a negative norm": lambda a: a["layers"][0]["sum"].update(frobenius_norm=-1.0),
    "a nan angle of a nonzero form": lambda a: a["layers"][0]["per_head"][0].update(angle_to_I_deg="nan"),
    "an effective rank above D": lambda a: a["layers"][0]["sum"].update(effective_rank=1e9),
    "a numerical rank as text": lambda a: a["layers"][0]["sum"].update(numerical_rank="3"),
    "a nan population error": lambda a: a.update(population_error="nan"),
    "a negative standard error": lambda a: a.update(population_stderr=-0.1),
    "a fractional sample count": lambda a: a.update(population_samples=200.5),
    "an infinite population error": lambda a: a.update(population_error=float("inf")),
}


@pytest.mark.parametrize("damage", ANALYSIS_DAMAGE)
def test_report_refuses_an_analysis_with_impossible_fields(
    damage: str, analysed_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = copy_run(analysed_run, tmp_path / "run")
    analysis = json.loads((run / "analysis.json").read_text())
    ANALYSIS_DAMAGE[damage](analysis)
    (run / "analysis.json").write_text(json.dumps(analysis))  # Python writes inf as Infinity: a JSON extension
    _refused(["report", str(run)], tmp_path, capsys, str(run / "analysis.json"))


def test_report_of_the_intact_run_is_written(
    analysed_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The control: the undamaged analysis is reported."""
    run = copy_run(analysed_run, tmp_path / "run")
    assert invoke(["report", str(run)], capsys).status == 0
    assert "Population error on the task" in (run / "report.md").read_text()


def test_report_refuses_a_result_with_a_string_loss(
    analysed_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = copy_run(analysed_run, tmp_path / "run")
    result = json.loads((run / "result.json").read_text())
    (run / "result.json").write_text(json.dumps({**result, "best_loss": "abc"}))
    _refused(["report", str(run)], tmp_path, capsys, "result.json")


# --- sweep --rebuild-store -------------------------------------------------------------------------------------------

SMOKE = get_preset("smoke").runs("quick")[0]
"""The sweep's run these tests damage (the first of the smoke preset: 30 steps of a tiny encoder)."""
SELECT = ["--only", f"rank={SMOKE.rank}", "--only", f"seed={SMOKE.seed}"]

RESULT_DAMAGE: dict[str, Callable[[dict[str, Any]], Any]] = {
    "a string loss": lambda r: {**r, "final_loss": "abc"},
    "a -inf best loss": lambda r: {**r, "best_loss": "-inf"},
    "negative steps": lambda r: {**r, "steps": -5},
    "steps as text": lambda r: {**r, "steps": "30"},
    "diverged as text": lambda r: {**r, "diverged": "false"},
    "a nan population error": lambda r: {**r, "population_error": "nan"},
    "nested 100000 deep": lambda r: None,
}


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A sweep directory holding the finished first smoke run (no store)."""
    out = tmp_path_factory.mktemp("sweep")
    train(SMOKE, SweepDirectory(out).run(SMOKE.config_hash()).root, progress=False)
    return out


@pytest.mark.parametrize("damage", RESULT_DAMAGE)
def test_rebuild_store_names_and_skips_a_damaged_result(
    damage: str, smoke_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The damaged run is named, never stored; the sweep then refuses to take it as finished (it fails, naming the
    file), so nothing of it is published."""
    out = tmp_path / "sweep"
    shutil.copytree(smoke_run, out)
    path = SweepDirectory(out).run(SMOKE.config_hash()).result
    changed = RESULT_DAMAGE[damage](json.loads(path.read_text()))
    path.write_text(deep_json("[") if changed is None else json.dumps(changed))
    argv = ["sweep", "smoke", "--scale", "quick", "--out", str(out), *SELECT, "--rebuild-store", "--workers", "1"]
    outcome = invoke([*argv, "--no-progress", "--no-pack"], capsys)
    assert outcome.status == 1, outcome.err  # the run failed: its result.json is damaged
    warnings = [line for line in outcome.err.splitlines() if "not restored" in line]
    assert len(warnings) == 1 and str(path) in warnings[0], outcome.err
    assert "Traceback" not in outcome.err
    with ResultsStore(SweepDirectory(out).store, readonly=True) as store:
        (row,) = [r for r in store.rows() if r.hash == SMOKE.config_hash()]
    assert row.status == "failed" and row.metrics is None and str(path) in (row.error or "")


def test_rebuild_store_restores_the_intact_result(
    smoke_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The control: the same command on the intact run restores it and trains nothing."""
    out = tmp_path / "sweep"
    shutil.copytree(smoke_run, out)
    argv = ["sweep", "smoke", "--scale", "quick", "--out", str(out), *SELECT, "--rebuild-store", "--workers", "1"]
    outcome = invoke([*argv, "--no-progress", "--no-pack", "--json"], capsys)
    assert outcome.status == 0, outcome.err
    summary = json.loads(outcome.out)
    assert summary["restored"] == 1 and summary["damaged"] == [] and summary["skipped"] == 1


def test_a_deeply_nested_store_field_is_refused_by_report(
    smoke_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "sweep"
    shutil.copytree(smoke_run, out)
    argv = ["sweep", "smoke", "--scale", "quick", "--out", str(out), *SELECT, "--rebuild-store", "--workers", "1"]
    assert invoke([*argv, "--no-progress"], capsys).status == 0
    with sqlite3.connect(SweepDirectory(out).store) as connection:
        connection.execute("UPDATE runs SET metrics = ?", (deep_json("["),))
    connection.close()
    before = snapshot(tmp_path)
    outcome = invoke(["report", str(out)], capsys)
    after = {k: v for k, v in snapshot(tmp_path).items() if not k.endswith(("-wal", "-shm"))}  # SQLite's own files
    assert refusal_problems(outcome, before, after) == [], outcome.err
    assert "field metrics" in outcome.err and "nested" in outcome.err


def test_set_refuses_a_deeply_nested_value(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["sweep", "smoke", "--scale", "quick", "--out", str(tmp_path / "s"), "--set", f"steps={deep_json('[')}"]
    err = _refused(argv, tmp_path, capsys, "--set steps")
    assert len(err) < 400  # the value is not echoed back


# --- committed curves ------------------------------------------------------------------------------------------------


def test_a_damaged_run_never_replaces_a_committed_curve(smoke_run: Path, tmp_path: Path) -> None:
    """curves.csv holds a good curve of the run; its run directory's metrics.csv now has a nan loss: the sweep's
    collection keeps the committed curve (the probe saw the nan curve copied over it)."""
    out = tmp_path / "sweep"
    shutil.copytree(smoke_run, out)
    key = SMOKE.config_hash()
    metrics = SweepDirectory(out).run(key).metrics
    lines = metrics.read_text().splitlines()
    good = [(int(line.split(",")[0]), float(line.split(",")[1])) for line in lines[1:]]
    write_curves_file(SweepDirectory(out).curves, {key: good}, {key: "run"})
    cells = lines[1].split(",")
    cells[1] = "nan"
    metrics.write_text("\n".join([lines[0], ",".join(cells), *lines[2:]]) + "\n")
    SweepDirectory(out).collect_curves([key])
    curves, _ = load_curves_file(SweepDirectory(out).curves)
    assert curves[key] == good
