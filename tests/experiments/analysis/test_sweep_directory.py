"""experiments/analysis/sweep_directory.py: the one owner of a sweep directory's layout, which must not change (sweep
directories written by earlier revisions are read and extended by this code), and its curve readers."""

from __future__ import annotations

from pathlib import Path

from experiments.analysis.run_curves import load_curves_file, read_metrics_curve
from experiments.analysis.sweep_directory import SweepDirectory

A, B = "a" * 64, "b" * 64


def _metrics(run_dir: Path, losses: list[float], every: int = 50) -> None:
    run_dir.mkdir(parents=True, exist_ok=True)
    rows = ["step,loss,lr,time"] + [f"{every * (i + 1)},{loss!r},0.01,{i}" for i, loss in enumerate(losses)]
    (run_dir / "metrics.csv").write_text("\n".join(rows) + "\n", encoding="utf-8")


def test_the_layout_on_disk_is_the_one_every_revision_wrote(tmp_path: Path) -> None:
    """The names are spelled here on purpose: a renamed file would orphan every sweep directory already written (the
    long runs at a frozen revision, the committed stores)."""
    sweep = SweepDirectory(tmp_path)
    assert sweep.store == tmp_path / "results.sqlite"
    assert sweep.runs == tmp_path / "runs" and sweep.run(A).root == tmp_path / "runs" / A
    assert (sweep.curves, sweep.population) == (tmp_path / "curves.csv", tmp_path / "population.csv")
    assert (sweep.curve_file("loss"), sweep.curve_file("population")) == (sweep.curves, sweep.population)
    assert (sweep.milestones, sweep.report, sweep.runs_csv) == (
        tmp_path / "milestones.csv",
        tmp_path / "report.md",
        tmp_path / "runs.csv",
    )


def test_run_directories_lists_the_runs_folder_by_name(tmp_path: Path) -> None:
    sweep = SweepDirectory(tmp_path)
    assert sweep.run_directories() == []  # no runs folder yet
    for name in (B, A):
        (sweep.runs / name).mkdir(parents=True)
    (sweep.runs / "stray.txt").write_text("not a run", encoding="utf-8")
    assert [files.root.name for files in sweep.run_directories()] == [A, B]


def test_run_directory_first_then_the_curves_file(tmp_path: Path) -> None:
    sweep = SweepDirectory(tmp_path / "sweep")
    _metrics(sweep.run(A).root, [0.9, 0.5])
    _metrics(sweep.run(B).root, [0.8, 0.4, 0.2])
    assert sweep.collect_curves([A, B]) == sweep.curves
    for name in (A, B):  # the runs' directories are gone (as in a fresh clone): the committed file answers
        sweep.run(name).metrics.unlink()
    assert sweep.run_curve(A) == ([(50, 0.9), (100, 0.5)], "", "run")
    assert sweep.run_curve(B)[0] == [(50, 0.8), (100, 0.4), (150, 0.2)]
    curve, why, source = sweep.run_curve("c" * 64)
    assert curve is None and "no curve in curves.csv" in why and source == ""
    _metrics(sweep.run(A).root, [0.7])  # a run directory present again wins over the file
    assert sweep.run_curve(A)[0] == [(50, 0.7)]
    sweep.collect_curves([A, B])  # and a new collection keeps B, whose directory is gone
    assert load_curves_file(sweep.curves)[0] == {A: [(50, 0.7)], B: [(50, 0.8), (100, 0.4), (150, 0.2)]}


def test_curves_are_collected_from_another_directorys_runs(tmp_path: Path) -> None:
    """A snapshot (scripts/snapshot_store.py) copies a live sweep's curves into a store that has no runs folder."""
    live, kept = SweepDirectory(tmp_path / "live"), SweepDirectory(tmp_path / "kept")
    _metrics(live.run(A).root, [0.9, 0.5])
    kept.root.mkdir()
    assert kept.collect_curves([A], source=live) == kept.curves
    assert kept.read_curves() == ({A: [(50, 0.9), (100, 0.5)]}, {A: "run"})
    assert not kept.runs.exists() and not live.curves.exists()


def test_nothing_is_written_without_a_curve(tmp_path: Path) -> None:
    sweep = SweepDirectory(tmp_path)
    assert sweep.collect_curves([A]) is None
    assert not sweep.curves.exists()
    assert read_metrics_curve(sweep.run(A).metrics)[0] is None
