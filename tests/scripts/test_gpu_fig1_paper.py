"""scripts/gpu_fig1_paper.sh: its DRY_RUN=1 rehearsal of every call on the CPU, its refusal of bad settings, and the
cell selection of scripts/fig1_paper_cells.py.

The rehearsal trains the same groups as the GPU calls (L = 3 and L = 1, c = 1, r in {64, 32, 8}; TF32 groups with
seeds 0-2, fp32 controls with seed 0), each run cut to 2 steps of batch 2 with FFN 8, records them through `attnrank
sweep --only`, and writes every store, report and figure the calls would bring back. By default (REGIME=paper, issue
47) the groups are fig1's paper-scale runs: one initialisation, data seeds 0-2, the reference sampler's fixed set (cut
to 1 batch), the rate stepped per epoch; REGIME=fresh rehearses the fresh-batch grid on the device path. About 2.5
minutes each on a loaded 2-core machine, hence `slow`.
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
PAPER_CALLS = {"1": ["L3-tf32"], "2": ["L3-fp32"], "3": ["L1-tf32"], "5": ["L1-fp32"]}
"""The paper regime's calls and their groups (a call brings back at most 8 files)."""


def _run(out: Path, work: Path, **env: str) -> subprocess.CompletedProcess[str]:
    # A rehearsal checks the plumbing, not the time: its budget is wide enough for a machine loaded many times over
    # (the GPU calls keep the script's default, 420 s).
    environment = {**os.environ, "DRY_RUN": "1", "WORK_DIR": str(work), "OMP_NUM_THREADS": "1", "BUDGET_S": "2400"}
    command = ["bash", str(SCRIPT), str(out)]
    return subprocess.run(command, env={**environment, **env}, capture_output=True, text=True, timeout=3000)


def _cells_module():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("fig1_paper_cells", ROOT / "scripts" / "fig1_paper_cells.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _specs(store: Path) -> list[dict]:
    with sqlite3.connect(f"file:{store}?mode=ro", uri=True) as connection:
        return [json.loads(spec) for (spec,) in connection.execute("SELECT spec FROM runs")]


@pytest.mark.slow
def test_dry_run_rehearses_every_call(tmp_path: Path) -> None:
    """The default regime: fig1's paper scale (the paper's grid in its regime), every group of every call."""
    out, work = tmp_path / "out", tmp_path / "work"
    done = _run(out, work)
    assert done.returncode == 0, done.stderr
    timing = json.loads((out / "timing.json").read_text())
    assert list(timing) == list(GROUPS)
    for group, (layers, precision, runs) in GROUPS.items():
        keep = out / f"fig1-paper-{group}"
        assert timing[group]["runs"] == {"finished": runs}, (group, timing[group])
        assert not timing[group]["stopped_at_limit"] and timing[group]["report_exit_status"] == 0
        report = (keep / "report.md").read_text()
        assert report.count("## fig1 (paper)") == 1 and "### The paper's statistic and the population error" in report
        assert (keep / "fig1-paper.png").stat().st_size > 1000
        assert (keep / "fig1-paper-paper-statistic.png").stat().st_size > 1000
        assert not list(keep.glob("results.sqlite-*")) and not (keep / "runs").exists()  # one file, no checkpoints
        specs = _specs(keep / "results.sqlite")
        assert {(s["layers"], s["width"], s["matmul_precision"], s["sampler"], s["steps"]) for s in specs} == {
            (layers, 1, precision, "reference", 2)
        }
        assert sorted({s["rank"] for s in specs}) == [8, 32, 64] and {s["seed"] for s in specs} == {0}
        data_seeds = {s["data_seed"] if s["data_seed"] is not None else s["seed"] for s in specs}
        assert data_seeds == ({0, 1, 2} if precision == "high" else {0})
        assert {
            (s["schedule_steps"], s["warmup_steps"], s["layer_init"], s["lr"], s["lr_interval"]) for s in specs
        } == {(100_000, 5000, "copies", 0.01, "epoch")}
    for groups in PAPER_CALLS.values():  # what each GPU call brings back: its groups' files, gpu.txt, timing.json
        assert sum(len(list((out / f"fig1-paper-{g}").iterdir())) for g in groups) + 2 <= 8
    assert "no GPU used (DRY_RUN=1)" in (out / "gpu.txt").read_text()


@pytest.mark.slow
def test_dry_run_rehearses_the_fresh_regime(tmp_path: Path) -> None:
    """REGIME=fresh: fig1's fresh-batch grid on the device path, initialisation seeds 0-2, per-step warm-up."""
    out, work = tmp_path / "out", tmp_path / "work"
    done = _run(out, work, REGIME="fresh")
    assert done.returncode == 0, done.stderr
    timing = json.loads((out / "timing.json").read_text())
    assert list(timing) == list(GROUPS)
    for group, (layers, precision, runs) in GROUPS.items():
        keep = out / f"fig1-paper-{group}"
        assert timing[group]["runs"] == {"finished": runs}, (group, timing[group])
        assert (keep / "report.md").read_text().count("## fig1 (fresh)") == 1
        assert (keep / "fig1-fresh.png").stat().st_size > 1000
        specs = _specs(keep / "results.sqlite")
        assert {(s["layers"], s["width"], s["matmul_precision"], s["sampler"], s["steps"]) for s in specs} == {
            (layers, 1, precision, "device", 2)
        }
        assert sorted({s["rank"] for s in specs}) == [8, 32, 64]
        assert {s["seed"] for s in specs} == ({0, 1, 2} if precision == "high" else {0})
        assert {
            (s["schedule_steps"], s["warmup_steps"], s["layer_init"], s.get("lr_interval", "step")) for s in specs
        } == {(100_000, 5000, "copies", "step")}
    assert len([p for p in out.rglob("*") if p.is_file()]) <= 2 + 3 * len(GROUPS)
    # A GPU call brings back at most 8 files: call 3 (two groups) writes 2 x 3 + gpu.txt + timing.json.


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"CALL": "4"}, "CALL must be 1, 2, 3 or 5 with REGIME=paper (or all with DRY_RUN=1; 4 with REGIME=replay)"),
        ({"REGIME": "fresh", "CALL": "5"}, "CALL must be 1, 2 or 3 with REGIME=fresh, got '5'"),
        ({"REGIME": "replay", "CALL": "1"}, "CALL must be 4 with REGIME=replay"),
        ({"REGIME": "fixed"}, "REGIME must be paper, fresh or replay, got 'fixed'"),
        ({"DRY_RUN": "0", "CALL": "all"}, "CALL=all is a rehearsal only"),
        ({"DRY_RUN": "0"}, "CALL must be 1, 2, 3 or 5 with REGIME=paper"),
        ({"DRY_RUN": "0", "CALL": "1", "STEPS": "50"}, "STEPS must be >= 100 with REGIME=paper"),
        ({"STEPS": "200000"}, "STEPS must be an integer in [1, 100000], got '200000'"),
        ({"BUDGET_S": "0"}, "BUDGET_S must be an integer >= 1"),
        ({"CAPTURE": "cudagraph"}, "CAPTURE must be none, graph or compile, got 'cudagraph'"),
        ({"BENCH": "yes"}, "BENCH must be 0 or 1"),
        ({"DRY_RUN": "maybe"}, "DRY_RUN must be 0 or 1"),
        ({"WORK_DIR": '/tmp/gpu"work'}, "WORK_DIR must not contain a double quote or a backslash"),
        ({"WORK_DIR": "/tmp/gpu\\work"}, "WORK_DIR must not contain a double quote or a backslash"),
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
    sets = ["--set", "matmul_precision=high", "--set", "steps=1000"]
    configs = module.cells(3, {0, 1, 2}, sets)  # the paper scale: data seeds, one initialisation
    assert sorted((c.rank, c.data_seed_value) for c in configs) == sorted(
        (r, s) for r in (64, 32, 8) for s in (0, 1, 2)
    )
    for c in configs:
        assert (c.d, c.N, c.layers, c.width, c.ffn_dim, c.batch_size, c.lr, c.seed) == (
            64,
            16,
            3,
            1,
            2048,
            256,
            0.01,
            0,
        )
        assert (c.schedule_steps, c.warmup_steps, c.layer_init, c.steps) == (100_000, 5000, "copies", 1000)
        assert (c.sampler, c.train_batches, c.lr_interval, c.matmul_precision) == ("reference", 100, "epoch", "high")
    fresh = module.cells(3, {0, 1, 2}, ["--set", "sampler=device", *sets], "fig1", "fresh")
    assert sorted((c.rank, c.seed) for c in fresh) == sorted((r, s) for r in (64, 32, 8) for s in (0, 1, 2))
    assert {(c.sampler, c.train_batches, c.lr_interval, c.data_seed) for c in fresh} == {("device", 0, "step", None)}
    assert len(module.cells(1, {0}, sets)) == 3
    with pytest.raises(ValueError, match="expected --set KEY=VALUE pairs"):
        module.cells(3, {0}, ["sampler=device"])
    with pytest.raises(ValueError, match="no fig1 paper run has layers 2"):
        module.cells(2, {0}, [])
    with pytest.raises(ValueError, match="SCALE must be one of paper, fresh"):
        module.cells(3, {0}, [], "fig1", "gpu")


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
