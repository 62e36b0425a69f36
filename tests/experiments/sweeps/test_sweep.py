"""Sweep orchestration: skip-and-resume, and a sweep SIGKILLed repeatedly that still stores every run exactly once
with the same results as an uninterrupted sweep (the smoke preset: six tiny runs, checkpoints every 5 steps)."""

from __future__ import annotations

import csv
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

import experiments.sweeps.execute as execute
from experiments.analysis.run_curves import load_curves_file, read_metrics_curve
from experiments.analysis.sweep_directory import SweepDirectory
from experiments.cli.main import main
from experiments.studies import get_preset, run_sweep
from experiments.sweeps.store import ResultsStore

ROOT = Path(__file__).resolve().parents[3]


def _results(out: Path) -> dict[str, tuple[str, float, float, int]]:
    with ResultsStore(SweepDirectory(out).store) as store:
        return {
            r.hash: (r.status, r.metrics["best_loss"], r.metrics["final_loss"], r.metrics["steps"])
            for r in store.rows("smoke", "quick")
            if r.metrics is not None
        }


def _started_after(out: Path, moment: float) -> bool:
    if not SweepDirectory(out).store.exists():
        return False
    try:
        connection = sqlite3.connect(SweepDirectory(out).store, timeout=1)
        (latest,) = connection.execute("SELECT MAX(started) FROM runs").fetchone()
        connection.close()
    except sqlite3.OperationalError:  # the schema is being created
        return False
    return latest is not None and latest > moment


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[str, float, float, int]]:
    """An uninterrupted smoke sweep, in this process with one torch thread (as the killed subprocesses use)."""
    out = tmp_path_factory.mktemp("reference")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        summary = run_sweep("smoke", "quick", out, workers=1, progress=False)
    finally:
        torch.set_num_threads(threads)
    assert summary["finished"] == summary["runs"] == 6
    return _results(out)


def test_rerun_skips_finished_runs(tmp_path: Path, reference: dict) -> None:
    out = tmp_path / "sweep"
    torch.set_num_threads(1)
    first = run_sweep("smoke", "quick", out, workers=1, progress=False)
    second = run_sweep("smoke", "quick", out, workers=1, progress=False)
    assert first["finished"] == 6 and second["skipped"] == 6 and second["finished"] == 0
    assert _results(out) == reference  # same configs, same machine: bitwise the same losses
    # Every run's curve was copied beside the store, exactly, so a report needs no run directory.
    curves, sources = load_curves_file(SweepDirectory(out).curves)
    assert sorted(curves) == sorted(reference) and set(sources.values()) == {"run"}
    for key, curve in curves.items():
        assert (curve, "") == read_metrics_curve(SweepDirectory(out).run(key).metrics)


def test_kill_and_resume(tmp_path: Path, reference: dict) -> None:
    """SIGKILL `attnrank sweep smoke` (its whole process group) at random moments 3 times, then let it finish."""
    out = tmp_path / "killed"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    command = [
        sys.executable,
        "-m",
        "experiments.cli.main",
        "sweep",
        "smoke",
        "--out",
        str(out),
        "--workers",
        "1",
        "--no-progress",
    ]
    rng = random.Random(20240716)
    kills = 0
    for _ in range(3):
        launched = time.time()
        process = subprocess.Popen(
            command, cwd=ROOT, env=env, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        # Wait until this process has handed out runs (a row marked running after the launch), then kill at a
        # random moment within the next ~1.5 s (checkpoints every 5 steps, runs of ~0.5-1 s: kills land mid-run,
        # mid-checkpoint or between runs).
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and process.poll() is None and not _started_after(out, launched):
            time.sleep(0.05)
        time.sleep(rng.uniform(0.0, 1.5))
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            kills += 1
        process.wait()
    assert kills >= 1, "the sweep finished before any kill: the test did not test anything"
    assert len(_results(out)) < 6  # the kills interrupted the sweep before it completed
    final = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert final.returncode == 0, final.stderr

    connection = sqlite3.connect(SweepDirectory(out).store)
    keys = [k for (k,) in connection.execute("SELECT hash FROM runs")]
    statuses = {s for (s,) in connection.execute("SELECT status FROM runs")}
    members = connection.execute("SELECT COUNT(*), COUNT(DISTINCT hash) FROM sweep_runs").fetchone()
    connection.close()
    expected = {c.config_hash() for c in get_preset("smoke").runs("quick")}
    assert sorted(keys) == sorted(expected) and len(keys) == len(set(keys)) == 6
    assert statuses == {"finished"}
    assert members == (6, 6)
    assert _results(out) == reference  # identical to the uninterrupted sweep
    for key in expected:  # no step trained twice into the metrics: resumed runs truncate to their checkpoint
        with (SweepDirectory(out).run(key).metrics).open() as stream:
            steps = [int(row[0]) for row in list(csv.reader(stream))[1:]]
        assert steps == sorted(set(steps)) and steps[-1] == 30


def test_unknown_preset_and_scale_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sweep", "nope", "--out", str(tmp_path)]) == 2
    assert "fig1" in capsys.readouterr().err  # lists the allowed presets
    assert main(["sweep", "fig1", "--scale", "huge", "--out", str(tmp_path)]) == 2
    assert "quick" in capsys.readouterr().err
    assert main(["sweep", "smoke", "--scale", "paper", "--out", str(tmp_path)]) == 2  # smoke has only quick
    assert main(["sweep", "smoke", "--set", "stepz=3", "--out", str(tmp_path)]) == 2
    assert not SweepDirectory(tmp_path).store.exists()  # bad input is refused before anything is written


def test_overrides_change_the_hash(tmp_path: Path) -> None:
    torch.set_num_threads(1)
    summary = run_sweep("smoke", "quick", tmp_path, workers=1, progress=False, overrides={"steps": 10})
    assert summary["finished"] == 6
    with ResultsStore(SweepDirectory(tmp_path).store) as store:
        assert all(r.metrics is not None and r.metrics["steps"] == 10 for r in store.rows())
        smoke = {c.config_hash() for c in get_preset("smoke").runs("quick")}
        assert not smoke & {r.hash for r in store.rows()}


def test_failed_run_is_recorded_and_retried(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Failures are stored and retried; on a non-terminal stderr the sweep prints one line per failure and a final
    progress line (training/progress.py), with no carriage returns."""
    calls = {"n": 0}

    def broken(spec: dict, run_dir: Path) -> dict:
        calls["n"] += 1
        raise RuntimeError("boom")

    monkeypatch.setattr(execute, "_train_run", broken)
    summary = run_sweep("smoke", "quick", tmp_path, workers=1, progress=True, overrides={"steps": 5}, pack=False)
    assert summary["failed"] == 6 and calls["n"] == 6
    err = capsys.readouterr().err
    assert err.count(": boom") == 6 and "\r" not in err
    assert err.splitlines()[-1].startswith("smoke/quick: run 6/6 (100.0%), ")
    with ResultsStore(SweepDirectory(tmp_path).store) as store:
        rows = store.rows()
        assert {r.status for r in rows} == {"failed"} and all("boom" in (r.error or "") for r in rows)
    monkeypatch.undo()
    torch.set_num_threads(1)
    again = run_sweep("smoke", "quick", tmp_path, workers=1, progress=False, overrides={"steps": 5})
    assert again["finished"] == 6 and again["skipped"] == 0
    with ResultsStore(SweepDirectory(tmp_path).store) as store:
        assert all(r.attempts == 2 and r.status == "finished" for r in store.rows())


def test_seed_packed_sweep_matches_separate_runs(tmp_path: Path) -> None:
    """--batch-seeds packs the smoke preset's seed pairs (and nothing else); losses agree with train() runs to float32
    rounding (relative 1e-5, ~100 epsilons; see tests/experiments/training/test_packed_training.py)."""
    torch.set_num_threads(1)
    separate = run_sweep(
        "smoke", "quick", tmp_path / "a", workers=1, progress=False, overrides={"steps": 10}, pack=False
    )
    batched = run_sweep(
        "smoke", "quick", tmp_path / "b", workers=1, progress=False, overrides={"steps": 10}, batch_seeds=True
    )
    assert separate["finished"] == batched["finished"] == 6
    with (
        ResultsStore(SweepDirectory(tmp_path / "a").store) as a,
        ResultsStore(SweepDirectory(tmp_path / "b").store) as b,
    ):
        ra = {r.hash: r.metrics for r in a.rows()}
        rb = {r.hash: r.metrics for r in b.rows()}
    assert set(ra) == set(rb)
    for key, metrics in ra.items():
        assert metrics is not None and rb[key] is not None and rb[key]["packed"] == 2  # the two seeds of a cell
        assert rb[key]["final_loss"] == pytest.approx(metrics["final_loss"], rel=1e-5)


def test_seed_packed_theory_runs_record_their_evaluation(tmp_path: Path) -> None:
    """Issue 39: --batch-seeds on theory runs (the depth preset's quick grid, seeds 0 and 1) records each run's
    evaluation by the one recipe: the population error, and Theorem 2's bound beside it for one layer."""
    torch.set_num_threads(1)
    summary = run_sweep(
        "depth", "quick", tmp_path, workers=1, progress=False, overrides={"steps": 10}, batch_seeds=True
    )
    assert summary["finished"] == summary["runs"] and summary["failed"] == 0
    with ResultsStore(SweepDirectory(tmp_path).store) as store:
        rows = store.rows()
    packed = [r for r in rows if r.metrics and r.metrics.get("packed") == 2]
    assert packed, "no seed pair was packed"
    for row in rows:
        assert row.metrics is not None and row.metrics["population_samples"] > 0, row.hash
        assert row.metrics["population_stderr"] > 0
        if row.spec["layers"] == 1:
            bound = row.metrics["theorem2"]  # the bound beside the population error
            assert (bound["d"], bound["r"], bound["H"]) == (row.spec["d"], row.spec["rank"], row.spec["width"] * 8)
            upper = row.metrics["population_error"] + 4 * row.metrics["population_stderr"]
            assert bound["consistent"] == (upper >= bound["bound_lower"])
        else:
            assert "theorem2" not in row.metrics


def test_packed_sweep_matches_separate_runs(tmp_path: Path) -> None:
    """The default sweep packs the smoke preset's six runs (three ranks, two seeds: two packs for two workers); each
    run's losses agree with its unpacked run to float32 rounding (relative 1e-5, as above), and each run directory
    holds an ordinary checkpoint."""
    torch.set_num_threads(1)
    separate = run_sweep(
        "smoke", "quick", tmp_path / "a", workers=1, progress=False, overrides={"steps": 10}, pack=False
    )
    packed = run_sweep("smoke", "quick", tmp_path / "b", workers=2, progress=False, overrides={"steps": 10})
    assert separate["finished"] == packed["finished"] == 6
    with (
        ResultsStore(SweepDirectory(tmp_path / "a").store) as a,
        ResultsStore(SweepDirectory(tmp_path / "b").store) as b,
    ):
        ra = {r.hash: r.metrics for r in a.rows()}
        rb = {r.hash: r.metrics for r in b.rows()}
    assert set(ra) == set(rb)
    for key, metrics in ra.items():
        assert metrics is not None and rb[key] is not None and rb[key]["packed"] >= 2
        assert "packed" not in metrics
        assert rb[key]["final_loss"] == pytest.approx(metrics["final_loss"], rel=1e-5)
        assert rb[key]["best_loss"] == pytest.approx(metrics["best_loss"], rel=1e-5)
        assert (tmp_path / "b" / "runs" / key / "checkpoint.pt").is_file()


def test_a_failed_pack_is_recorded_per_run_and_retried(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An exception while a pack trains marks each of its runs failed (naming the error); the next sweep retries."""

    def broken(configs: list, dirs: list) -> list:
        raise RuntimeError("pack boom")

    monkeypatch.setattr(execute, "train_packed", broken)
    summary = run_sweep("smoke", "quick", tmp_path, workers=1, progress=False, overrides={"steps": 5})
    assert summary["failed"] == 6
    with ResultsStore(SweepDirectory(tmp_path).store) as store:
        assert all(r.status == "failed" and "pack boom" in (r.error or "") for r in store.rows())
    monkeypatch.undo()
    torch.set_num_threads(1)
    again = run_sweep("smoke", "quick", tmp_path, workers=1, progress=False, overrides={"steps": 5})
    assert again["finished"] == 6


def _one_line_error(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err


def test_damaged_store_rebuilt_from_run_files_gives_the_same_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Damage a finished sweep's store: report and sweep refuse it in one line naming --rebuild-store; the rebuild
    restores every run from runs/*/result.json without training, and the report is the same as before."""
    torch.set_num_threads(1)
    sweep = ["sweep", "smoke", "--out", str(tmp_path), "--workers", "1", "--no-progress", "--set", "steps=10"]
    assert main(sweep) == 0
    assert main(["report", str(tmp_path)]) == 0
    original = (tmp_path / "report.md").read_text()
    capsys.readouterr()
    store = SweepDirectory(tmp_path).store
    for side in ("-wal", "-shm"):
        store.with_name(store.name + side).unlink(missing_ok=True)
    store.write_bytes(b"\x00garbage" * 1000)

    assert main(["report", str(tmp_path)]) == 2
    assert "--rebuild-store" in _one_line_error(capsys)
    capsys.readouterr()
    assert main(sweep) == 2
    assert "--rebuild-store" in _one_line_error(capsys)

    assert main([*sweep, "--rebuild-store", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["restored"] == 6 and summary["finished"] == 0 and summary["skipped"] == 6
    assert summary["moved_aside"] and Path(summary["moved_aside"]).read_bytes().startswith(b"\x00garbage")
    assert main(["report", str(tmp_path)]) == 0
    assert (tmp_path / "report.md").read_text() == original
    capsys.readouterr()

    assert main([*sweep, "--rebuild-store", "--json"]) == 0  # a readable store is completed, not moved aside
    again = json.loads(capsys.readouterr().out)
    assert again["restored"] == 0 and again["moved_aside"] is None


def test_foreign_sqlite_file_is_never_written(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    connection = sqlite3.connect(SweepDirectory(tmp_path).store)
    connection.execute("CREATE TABLE photos (id INTEGER)")
    connection.commit()
    connection.close()
    before = SweepDirectory(tmp_path).store.read_bytes()
    assert main(["report", str(tmp_path)]) == 2
    assert "not an attnrank results store" in _one_line_error(capsys)
    assert main(["sweep", "smoke", "--out", str(tmp_path), "--workers", "1", "--no-progress"]) == 2
    assert "not an attnrank results store" in _one_line_error(capsys)
    assert SweepDirectory(tmp_path).store.read_bytes() == before


def test_bad_workers_and_overrides_are_refused_before_any_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["sweep", "smoke", "--out", str(tmp_path), "--workers", "0"]) == 2
    assert "--workers must be an integer >= 1, got 0" in _one_line_error(capsys)  # the one check (sweeps.preflight)
    with pytest.raises(ValueError, match="workers"):
        run_sweep("smoke", "quick", tmp_path, workers=0, progress=False)
    assert main(["sweep", "smoke", "--out", str(tmp_path), "--set", "init=/no/such/weights.npz"]) == 2
    assert "init" in _one_line_error(capsys)  # the encoder cannot load a weight file: refused up front
    theory = ["sweep", "bound-vs-trained", "--out", str(tmp_path), "--set", "init=/no/such/weights.npz"]
    assert main(theory) == 2
    assert "weights.npz" in _one_line_error(capsys)  # the theory model would load it: the file is checked first
    assert main(["sweep", "random-features", "--out", str(tmp_path), "--set", "steps=5"]) == 2
    assert "no training runs" in _one_line_error(capsys)
    assert main(["sweep", "smoke", "--out", str(tmp_path), "--set", "lr=-1"]) == 2
    _one_line_error(capsys)
    assert not SweepDirectory(tmp_path).store.exists() and not (SweepDirectory(tmp_path).runs).exists()
