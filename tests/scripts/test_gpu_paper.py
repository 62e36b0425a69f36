"""scripts/gpu_paper.sh: its DRY_RUN=1 rehearsal on the CPU, its time limit, its refusal of bad settings.

The rehearsal runs the same four sweeps (`--scale gpu`) as the GPU call, each run cut to 2 steps of batch 2 with FFN 8,
so every store, report and figure the GPU call would write is written. Only the FFN and batch shrink: the models keep
the paper's sizes, and their held-out evaluations (4,096 samples at each of the two logged steps, 20,000 at the end)
dominate the rehearsal's time (conjecture6's c = 8 rank-1 layers have 512 heads each). Measured 2026-12-07 at nice 5
beside two training processes on the 2-core machine: fig1 107 s, posn 738 s, and conjecture6 passed its 777 s share
of the budget, so run it on a quiet machine (`pytest -m slow tests/scripts`), hence `slow`.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
from pathlib import Path

import pytest

from experiments.studies import get_preset

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "gpu_paper.sh"
PRESETS = ("fig1", "posn", "conjecture6", "icl")


def _run(out: Path, work: Path, **env: str) -> subprocess.CompletedProcess[str]:
    # A rehearsal checks the plumbing, not the time: its budget is wide enough for a machine loaded many times over
    # (the GPU call keeps the script's default, 450 s). The time-limit control below sets its own BUDGET_S.
    environment = {**os.environ, "DRY_RUN": "1", "WORK_DIR": str(work), "OMP_NUM_THREADS": "1", "BUDGET_S": "2400"}
    command = ["bash", str(SCRIPT), str(out)]
    return subprocess.run(command, env={**environment, **env}, capture_output=True, text=True, timeout=3000)


@pytest.mark.slow
def test_dry_run_writes_every_store_report_and_figure(tmp_path: Path) -> None:
    out, work = tmp_path / "out", tmp_path / "work"
    done = _run(out, work)
    assert done.returncode == 0, done.stderr
    timing = json.loads((out / "gpu-timing.json").read_text())
    assert list(timing) == list(PRESETS)
    for preset in PRESETS:
        keep = out / f"{preset}-gpu"
        expected = len(get_preset(preset).runs("gpu"))
        assert timing[preset]["runs"] == {"finished": expected}, (preset, timing[preset])
        assert not timing[preset]["stopped_at_limit"] and timing[preset]["report_exit_status"] == 0
        assert (keep / "report.md").read_text().count(f"## {preset} (gpu)") == 1
        assert (keep / f"{preset}-gpu.png").stat().st_size > 1000
        assert not list(keep.glob("results.sqlite-*")) and not (keep / "runs").exists()  # one file, no checkpoints
        with sqlite3.connect(f"file:{keep / 'results.sqlite'}?mode=ro", uri=True) as store:
            rows = [
                (json.loads(spec), json.loads(metrics))
                for spec, metrics in store.execute("SELECT spec, metrics FROM runs")
            ]
        assert {(spec["steps"], spec["eval_samples"]) for spec, _ in rows} == {(2, 64)}
        assert all(metrics["population_samples"] == 64 for _, metrics in rows)  # the rehearsal's evaluation size
    assert "no GPU used (DRY_RUN=1)" in (out / "gpu.txt").read_text()
    # The same command again resumes: every run is found finished and nothing trains.
    again = _run(out, work, PRESETS="posn")
    assert again.returncode == 0, again.stderr
    assert json.loads((work / "posn-gpu.sweep.json").read_text())["skipped"] == len(get_preset("posn").runs("gpu"))


@pytest.mark.slow
def test_a_sweep_past_its_limit_is_stopped_and_the_script_goes_on(tmp_path: Path) -> None:
    """Negative control for the time budget: with BUDGET_S = 2 the fig1 sweep cannot finish (python alone takes
    longer to start); it is stopped (exit status 124) and the script still writes its timing."""
    out, work = tmp_path / "out", tmp_path / "work"
    done = _run(out, work, PRESETS="fig1", BUDGET_S="2")
    assert done.returncode == 0, done.stderr
    timing = json.loads((out / "gpu-timing.json").read_text())["fig1"]
    assert timing["stopped_at_limit"] and timing["exit_status"] == 124 and timing["wall_s"] < 30
    assert timing["runs"].get("finished", 0) < len(get_preset("fig1").runs("gpu"))


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"PRESETS": "fig1 depth"}, "PRESETS: unknown preset 'depth' (allowed: fig1 posn conjecture6 icl)"),
        ({"PRESETS": " "}, "PRESETS is empty"),
        ({"BUDGET_S": "0"}, "BUDGET_S must be an integer >= 1"),
        ({"WORKERS": "two"}, "WORKERS must be an integer >= 1"),
        ({"DRY_RUN": "yes"}, "DRY_RUN must be 0 or 1"),
        ({"WORK_DIR": '/tmp/gpu"work'}, "WORK_DIR must not contain a double quote or a backslash"),
        ({"WORK_DIR": "/tmp/gpu\\work"}, "WORK_DIR must not contain a double quote or a backslash"),
    ],
)
def test_bad_settings_exit_2_with_one_line_and_write_nothing(tmp_path: Path, env: dict[str, str], message: str) -> None:
    out, work = tmp_path / "out", tmp_path / "work"
    done = _run(out, work, **env)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and lines[0].startswith(f"gpu_paper.sh: error: {message}"), lines
    assert not out.exists() and not work.exists()
