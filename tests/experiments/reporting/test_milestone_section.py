"""The paper's statistic at each fifth of the schedule (issue 47): milestones.csv checked, and the section's numbers
against the store's own rows."""

from __future__ import annotations

import csv
import itertools
import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from experiments.analysis.milestones import (
    FIELDS,
    Milestone,
    read_milestones,
    read_watcher_records,
    write_milestones,
)
from experiments.analysis.sweep_directory import MILESTONES_NAME
from experiments.reporting.milestone_section import milestone_section
from experiments.studies import PRESETS
from experiments.sweeps.store import ResultsStore
from experiments.sweeps.store_records import sweep_records

REPOSITORY = Path(__file__).resolve().parents[3]
REPLAY = REPOSITORY / "results" / "fig1-d64-replay-cpu"


def _milestone(**changes: object) -> Milestone:
    fields: dict[str, object] = {
        "hash": "a" * 64,
        "step": 20000,
        "population_error": 0.5,
        "population_stderr": 0.001,
        "population_samples": 20000,
        "best_loss": 0.2,
        "last_epoch_loss": 0.21,
        "evaluated_by": "b0d12d9f9b09a03f4eda5db3dac3e9a89e45eadd",
    }
    fields.update(changes)
    return Milestone(**fields)  # type: ignore[arg-type]


def test_milestones_round_trip_exactly(tmp_path: Path) -> None:
    rows = [_milestone(), _milestone(step=40000, population_error=0.1 + 0.2)]
    write_milestones(tmp_path / MILESTONES_NAME, rows)
    assert read_milestones(tmp_path / MILESTONES_NAME) == {(m.hash, m.step): m for m in rows}


@pytest.mark.parametrize(
    ("field", "value"),
    [("population_error", "nan"), ("population_stderr", "-1"), ("step", "0"), ("hash", "xyz"), ("best_loss", "inf")],
)
def test_a_damaged_milestone_row_is_refused_naming_line_and_field(tmp_path: Path, field: str, value: str) -> None:
    path = tmp_path / MILESTONES_NAME
    write_milestones(path, [_milestone()])
    lines = path.read_text(encoding="utf-8").splitlines()
    cells = lines[1].split(",")
    cells[FIELDS.index(field)] = value
    path.write_text("\n".join([lines[0], ",".join(cells)]) + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match=rf"line 2.*{field}|line 2: hash"):
        read_milestones(path)


def test_a_watcher_record_must_sit_at_its_own_path(tmp_path: Path) -> None:
    record = {**_milestone().__dict__}
    (tmp_path / ("a" * 64)).mkdir()
    (tmp_path / ("a" * 64) / "step-40000.json").write_text(json.dumps(record), encoding="utf-8")
    with pytest.raises(ValueError, match="disagrees with its path"):
        read_watcher_records(tmp_path)


def _replay_records(store_dir: Path) -> list[dict[str, object]]:
    store = ResultsStore(store_dir / "results.sqlite", readonly=True)
    try:
        return sweep_records(store, "fig1-d64-replay", "cpu")
    finally:
        store.close()


def test_the_statistic_is_the_minimum_of_the_stores_own_best_losses(tmp_path: Path) -> None:
    """At 20k the L = 3 r = 32 cell's statistic is the lower of its two 20k runs' best_loss, as the store records it
    (read here straight from SQLite), and its population errors are those runs' own."""
    store = tmp_path / "store"
    shutil.copytree(REPLAY, store)
    with sqlite3.connect(store / "results.sqlite") as db:
        finished = db.execute("SELECT spec, metrics FROM runs WHERE status = 'finished'").fetchall()
    rows = [(json.loads(spec), json.loads(metrics)) for spec, metrics in finished]
    at_20k = [(s, m) for s, m in rows if s["layers"] == 3 and s["rank"] == 32 and s["steps"] == 20000]
    assert len(at_20k) == 2
    lines, _ = milestone_section(PRESETS["fig1-d64-replay"], _replay_records(store), store, "cpu")
    row = next(line for line in lines if line.startswith("| d=64 L=3 r=32 | 20,000 |"))
    cells = [c.strip() for c in row.split("|")[1:-1]]
    assert cells[2] == f"{min(m['best_loss'] for _, m in at_20k):.3g}"
    assert cells[3].startswith(f"{max(m['best_loss'] for _, m in at_20k):.3g}")
    for spec, metrics in at_20k:
        assert f"{spec['data_seed'] or 0}: {metrics['population_error']:.3g}" in cells[4]


def test_a_milestone_fills_the_population_of_a_step_no_run_ended_at(tmp_path: Path) -> None:
    """Without a run's own result at S the population is "not evaluated" until a milestone of that run stands in."""
    store = tmp_path / "store"
    shutil.copytree(REPLAY, store)
    records = [dict(r) for r in _replay_records(store)]
    seed1 = next(
        r for r in records if r["layers"] == 3 and r["rank"] == 32 and r.get("data_seed") == 1 and r["steps"] == 20000
    )  # the finished 20k run (the store also holds its 100k namesake, still training)
    seed1["population_error"] = seed1["population_stderr"] = None  # as if it had not ended at 20k
    # ... and as if its 100k namesake had not yet passed 20k (whose milestone would stand in)
    kept = [
        m
        for (key, step), m in read_milestones(store / MILESTONES_NAME).items()
        if step != 20000
        or key
        not in {str(r["hash"]) for r in records if r.get("data_seed") == 1 and r["layers"] == 3 and r["rank"] == 32}
    ]
    write_milestones(store / MILESTONES_NAME, kept)
    before, _ = milestone_section(PRESETS["fig1-d64-replay"], records, store, "cpu")
    assert any("1: not evaluated" in line for line in before)
    write_milestones(store / MILESTONES_NAME, [_milestone(hash=str(seed1["hash"]), step=20000, population_error=0.9)])
    after, _ = milestone_section(PRESETS["fig1-d64-replay"], records, store, "cpu")
    row = next(line for line in after if line.startswith("| d=64 L=3 r=32 | 20,000 |"))
    gap = 0.9 - float(seed1["final_loss"])  # the gap: the population minus the run's last epoch loss at 20k
    assert "1: 0.9 +- 0.001" in row and f"1: {gap:.3g}" in row


def test_runs_and_their_extensions_are_one_curve_bitwise() -> None:
    """In the committed replay store, every run and every longer run of the same config along the same schedule
    (an extension, or the same run retrained from step 0 on another machine) agree exactly on every common epoch:
    training loss and population error, as written with repr. What `lineages` relies on when it reads the longest."""
    with sqlite3.connect(REPLAY / "results.sqlite") as db:
        specs = {key: json.loads(spec) for key, spec in db.execute("SELECT hash, spec FROM runs WHERE kind = 'train'")}
    groups: dict[str, list[str]] = {}
    for key, spec in specs.items():
        groups.setdefault(json.dumps({**spec, "steps": None}, sort_keys=True), []).append(key)
    compared = 0
    for name, column in (("curves.csv", "loss"), ("population.csv", "population")):
        with (REPLAY / name).open(newline="", encoding="utf-8") as stream:
            curves: dict[str, dict[str, str]] = {}
            for row in csv.DictReader(stream):
                curves.setdefault(row["hash"], {})[row["step"]] = row[column]
        for members in groups.values():
            for a, b in itertools.combinations([m for m in members if m in curves], 2):
                common = curves[a].keys() & curves[b].keys()
                assert common and all(curves[a][s] == curves[b][s] for s in common), (a[:12], b[:12], name)
                compared += len(common)
    assert compared >= 200  # the 20k run and its 40k extension share 200 epochs of loss (and 40 of population)
