"""scripts/gpu_fig1_paper.sh: its DRY_RUN=1 rehearsal of every call on the CPU, its refusal of bad settings, and the
cell selection of scripts/fig1_paper_cells.py.

The rehearsal trains the same groups as the GPU calls (fig1's paper-scale runs at L = 3 and L = 1, c = 1, r in
{64, 32, 8}; TF32 groups with seeds 0-2, fp32 controls with seed 0) on the device path, each run cut to 2 steps of
batch 2 with FFN 8, records them through `attnrank sweep --only`, and writes every store, report and figure the
calls would bring back: about 2.5 minutes on a loaded 2-core machine, hence `slow`.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sqlite3
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "gpu_fig1_paper.sh"
GROUPS = {
    "L3-tf32": (3, "high", 9),
    "L3-fp32": (3, "highest", 3),
    "L1-tf32": (1, "high", 9),
    "L1-fp32": (1, "highest", 3),
}
"""Each group of the calls: depth, matmul precision, runs."""


def _run(out: Path, work: Path, **env: str) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "DRY_RUN": "1", "WORK_DIR": str(work), "OMP_NUM_THREADS": "1", **env}
    command = ["bash", str(SCRIPT), str(out)]
    return subprocess.run(command, env=environment, capture_output=True, text=True, timeout=1200)


def _cells_module():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("fig1_paper_cells", ROOT / "scripts" / "fig1_paper_cells.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_dry_run_rehearses_every_call(tmp_path: Path) -> None:
    out, work = tmp_path / "out", tmp_path / "work"
    done = _run(out, work)
    assert done.returncode == 0, done.stderr
    timing = json.loads((out / "timing.json").read_text())
    assert list(timing) == list(GROUPS)
    for group, (layers, precision, runs) in GROUPS.items():
        keep = out / f"fig1-paper-{group}"
        assert timing[group]["runs"] == {"finished": runs}, (group, timing[group])
        assert not timing[group]["stopped_at_limit"] and timing[group]["report_exit_status"] == 0
        assert (keep / "report.md").read_text().count("## fig1 (paper)") == 1
        assert (keep / "fig1-paper.png").stat().st_size > 1000
        assert not list(keep.glob("results.sqlite-*")) and not (keep / "runs").exists()  # one file, no checkpoints
        with sqlite3.connect(f"file:{keep / 'results.sqlite'}?mode=ro", uri=True) as store:
            specs = [json.loads(spec) for (spec,) in store.execute("SELECT spec FROM runs")]
        assert {(s["layers"], s["width"], s["matmul_precision"], s["sampler"], s["steps"]) for s in specs} == {
            (layers, 1, precision, "device", 2)
        }
        assert sorted({s["rank"] for s in specs}) == [8, 32, 64]
        assert {(s["schedule_steps"], s["warmup_steps"], s["layer_init"], s["lr"]) for s in specs} == {
            (100_000, 5000, "copies", 0.01)
        }
    assert len([p for p in out.rglob("*") if p.is_file()]) <= 2 + 3 * len(GROUPS)
    assert "no GPU used (DRY_RUN=1)" in (out / "gpu.txt").read_text()
    # A GPU call brings back at most 8 files: call 3 (two groups) writes 2 x 3 + gpu.txt + timing.json.


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"CALL": "4"}, "CALL must be 1, 2 or 3 (or all with DRY_RUN=1; 4 with REGIME=replay), got '4'"),
        ({"REGIME": "replay", "CALL": "1"}, "CALL must be 4 with REGIME=replay"),
        ({"REGIME": "fixed"}, "REGIME must be fresh or replay, got 'fixed'"),
        ({"DRY_RUN": "0", "CALL": "all"}, "CALL=all is a rehearsal only"),
        ({"DRY_RUN": "0"}, "CALL must be 1, 2 or 3"),
        ({"STEPS": "200000"}, "STEPS must be an integer in [1, 100000], got '200000'"),
        ({"BUDGET_S": "0"}, "BUDGET_S must be an integer >= 1"),
        ({"CAPTURE": "cudagraph"}, "CAPTURE must be none, graph or compile, got 'cudagraph'"),
        ({"BENCH": "yes"}, "BENCH must be 0 or 1"),
        ({"DRY_RUN": "maybe"}, "DRY_RUN must be 0 or 1"),
    ],
)
def test_bad_settings_exit_2_with_one_line_and_write_nothing(tmp_path: Path, env: dict[str, str], message: str) -> None:
    out, work = tmp_path / "out", tmp_path / "work"
    done = _run(out, work, **env)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1, lines
    assert lines[0].startswith(f"gpu_fig1_paper.sh: error: {message}"), lines
    assert not out.exists() and not work.exists()


def test_the_cells_are_figure_1s_deciding_runs_with_the_overrides() -> None:
    module = _cells_module()
    sets = ["--set", "sampler=device", "--set", "matmul_precision=high", "--set", "steps=1000"]
    configs = module.cells(3, {0, 1, 2}, sets)
    assert sorted((c.rank, c.seed) for c in configs) == sorted((r, s) for r in (64, 32, 8) for s in (0, 1, 2))
    for c in configs:
        assert (c.d, c.N, c.layers, c.width, c.ffn_dim, c.batch_size, c.lr) == (64, 16, 3, 1, 2048, 256, 0.01)
        assert (c.schedule_steps, c.warmup_steps, c.layer_init, c.steps) == (100_000, 5000, "copies", 1000)
        assert (c.sampler, c.matmul_precision) == ("device", "high")
    assert len(module.cells(1, {0}, sets)) == 3
    with pytest.raises(ValueError, match="expected --set KEY=VALUE pairs"):
        module.cells(3, {0}, ["sampler=device"])
    with pytest.raises(ValueError, match="no fig1 paper run has layers 2"):
        module.cells(2, {0}, [])


@pytest.mark.slow
def test_dry_run_rehearses_the_replay_call(tmp_path: Path) -> None:
    """REGIME=replay: the fig1-d64-replay paper runs, packed by depth, on the reference sampler's fixed set."""
    out, work = tmp_path / "out", tmp_path / "work"
    done = _run(out, work, REGIME="replay")
    assert done.returncode == 0, done.stderr
    timing = json.loads((out / "timing.json").read_text())
    assert {group: timing[group]["runs"] for group in timing} == {
        "R3-tf32": {"finished": 3},
        "R1-tf32": {"finished": 1},
    }
    for group in timing:
        with sqlite3.connect(f"file:{out / f'fig1-paper-{group}' / 'results.sqlite'}?mode=ro", uri=True) as store:
            rows = [
                (json.loads(spec), json.loads(metrics))
                for spec, metrics in store.execute("SELECT spec, metrics FROM runs")
            ]
        assert {(s["sampler"], s["train_batches"], s["steps"], s["seed"]) for s, _ in rows} == {("reference", 1, 2, 0)}
        assert all(m["population_samples"] == 20_000 for _, m in rows)


def test_the_replay_cells_are_the_replay_presets_paper_runs() -> None:
    module = _cells_module()
    configs = module.cells(3, {0, 1}, ["--set", "steps=1000"], "fig1-d64-replay")
    assert sorted((c.rank, c.data_seed_value) for c in configs) == [(32, 0), (32, 1), (64, 0)]
    assert {(c.sampler, c.train_batches, c.seed, c.steps) for c in configs} == {("reference", 100, 0, 1000)}
    with pytest.raises(ValueError, match="PRESET must be fig1 or fig1-d64-replay"):
        module.cells(3, {0}, [], "fig1-d64")
