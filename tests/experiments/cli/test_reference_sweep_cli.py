"""`attnrank sweep --reference CONFIG [SWEEP] --out DIR` at a tiny size (issue 49): the runs it builds, their data (the
reference sampler's fixed set), their learning rate per epoch (the staircase), the report, and clean refusals.

The tiny files are written here in the reference's layout: d = 8, N = 4, batch 4, K = 2 batches, 60 epochs (120
steps, warm-up 60 // 20 = 3 epochs), one head of rank 8, data seeds 0 and 1.
"""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import pytest
import torch

from experiments.analysis.sweep_directory import SweepDirectory
from experiments.cli.main import main
from experiments.samplers import get_sampler
from experiments.samplers.reference_data import reference_training_set
from experiments.sweeps.reference_configs import read_reference
from experiments.tasks import make_task

TINY_CONFIG = """\
experiment_name: tiny
trainer:
  max_epochs: 60
  limit_train_batches: 2
  devices: 1
  callbacks: []
model: {dim_feedforward: 16, bias: true, positional_dim: 0, additive_positional: false, width_multiplier: 1}
data: {dim: 8, num_points: 4, batch_size: 4, dataset_class: task.NearestPointDataset, num_queries: -1,
       num_workers: 7}
optimizer: {lr: 0.01, betas: [0.9, 0.95], weight_decay: 0}
lr_scheduler:
"""
TINY_SWEEP = """\
data.seed: [0, 1]
model.nheads: [1]
model.num_layers: [1]
"""


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    config, sweep = tmp_path / "tiny_config.yaml", tmp_path / "tiny_sweep.yaml"
    config.write_text(TINY_CONFIG)
    sweep.write_text(TINY_SWEEP)
    return config, sweep


def _cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    status = main(args)
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_print_config_lists_the_runs_and_the_skipped_keys_and_writes_nothing(
    files: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, _ = _cli(["sweep", "--reference", *map(str, files), "--print-config", "--json"], capsys)
    assert status == 0
    listing = json.loads(out)
    assert (listing["preset"], listing["scale"], len(listing["runs"])) == ("reference", "files", 2)
    assert [run["data_seed"] for run in listing["runs"]] == [None, 1]  # data seed 0 is the run's seed 0
    assert all(run["lr_interval"] == "epoch" and run["steps"] == 120 for run in listing["runs"])
    assert [key.split(": ")[1] for key in listing["skipped_keys"]] == [
        "experiment_name skipped (names the reference's log folder)",
        "trainer.devices skipped (where Lightning runs; the device is the run's own)",
        "trainer.callbacks skipped (logging and checkpoint callbacks)",
    ]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tiny_config.yaml", "tiny_sweep.yaml"]


def test_the_files_grid_trains_on_the_reference_set_with_the_staircase(
    files: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "sweep"
    args = ["sweep", "--reference", *map(str, files), "--out", str(out), "--workers", "1", "--set", "device=cpu"]
    args += ["--set", "checkpoint_every=60"]  # two population points per run, not twenty (time)
    status, printed, err = _cli([*args, "--no-progress", "--json"], capsys)
    assert status == 0, err
    summary = json.loads(printed)
    assert (summary["preset"], summary["scale"], summary["finished"]) == ("reference", "files", 2)
    assert "attnrank sweep: skipped: tiny_config.yaml: trainer.devices skipped" in err
    runs = read_reference(*files).runs
    task = make_task("farthest", 8, 4)
    for run in runs:
        # The data: the reference's fixed set of K = 2 batches for the run's data seed, bitwise.
        X, _ = reference_training_set(8, 4, 4, 2, seed=run.data_seed_value)
        fixed = get_sampler(run.sampler).fixed_set(run, task, torch.device("cpu"))
        assert all(torch.equal(fixed[k].tokens, X[k]) for k in range(2))
        # The learning rate of each epoch (metrics.csv: the rate of the epoch's last step), restated from the
        # reference's scheduler: 0, then peak / (W - 1) steps up to the peak at epoch W - 1 = 2, then the cosine.
        with open(SweepDirectory(out).run(run.config_hash()).metrics, newline="") as handle:
            rates = [float(row["lr"]) for row in csv.DictReader(handle)]
        expected = [0.0, 0.005, 0.01] + [0.005 * (1 + math.cos(math.pi * (e - 3) / 57)) for e in range(3, 60)]
        assert rates == pytest.approx(expected, rel=1e-12, abs=1e-15)
    status, _, err = _cli(["report", str(out)], capsys)
    assert status == 0, err
    report = (out / "report.md").read_text()
    assert "## reference (files)" in report and "### The paper's statistic and the population error" in report
    assert "lr stepped once per epoch" in report and "| r=8 | 2 |" not in report  # one cell: no varying field
    assert "| every run | 2 | " in report and (out / "reference-files.png").is_file()
    again, printed, _ = _cli([*args, "--no-progress", "--json"], capsys)  # resumes: nothing left to train
    assert again == 0 and json.loads(printed)["skipped"] == 2


@pytest.mark.parametrize(
    ("config_change", "sweep_change", "message"),
    [
        (("num_workers: 7", "num_workers: 0"), None, "tiny_config.yaml: data.num_workers = 0: must be 7"),
        (("max_epochs: 60", "max_epochs: 10"), None, "tiny_config.yaml: trainer.max_epochs = 10: must be >= 20"),
        (("  devices: 1\n", "  devices: 1\n  accumulate_grad_batches: 4\n"), None, "trainer.accumulate_grad_batches:"),
        (None, ("model.nheads: [1]", "model.nheads: [3]"), "tiny_sweep.yaml: model.nheads = 3: must divide"),
        (None, ("data.seed: [0, 1]", "data.seed: 0"), "tiny_sweep.yaml: data.seed = 0: must be a non-empty list"),
    ],
)
def test_what_cannot_be_honoured_is_one_line_exit_2_and_nothing_written(
    files: tuple[Path, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    config_change: tuple[str, str] | None,
    sweep_change: tuple[str, str] | None,
    message: str,
) -> None:
    for path, change in zip(files, (config_change, sweep_change), strict=True):
        if change is not None:
            path.write_text(path.read_text().replace(*change))
    out = tmp_path / "sweep"
    status, _, err = _cli(["sweep", "--reference", *map(str, files), "--out", str(out)], capsys)
    lines = err.strip().splitlines()
    assert status == 2 and len(lines) == 1 and lines[0].startswith("attnrank sweep: error: "), err
    assert message in lines[0] and not out.exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["fig1", "--reference", "CONFIG"], "--reference trains the files' grid; drop PRESET (fig1)"),
        (["--reference", "CONFIG", "--scale", "paper"], "--scale applies to a preset"),
        (["--reference", "CONFIG", "SWEEP", "SWEEP"], "--reference takes CONFIG.yaml and at most one SWEEP.yaml"),
        (["reference", "--scale", "files"], "preset reference takes its runs from files: use --reference"),
        (["--scale", "quick"], "PRESET is required (or --reference CONFIG.yaml [SWEEP.yaml])"),
        (["--reference", "CONFIG", "SWEEP"], "--out is required"),
        (["--reference", "MISSING"], "MISSING.yaml: configuration file not found"),
    ],
)
def test_flag_combinations_are_refused(
    files: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    named = {"CONFIG": str(files[0]), "SWEEP": str(files[1]), "MISSING": str(tmp_path / "MISSING.yaml")}
    with_out = [] if "--out is required" in message else ["--out", str(tmp_path / "o")]
    status, _, err = _cli(["sweep", *(named.get(a, a) for a in args), *with_out], capsys)
    assert status == 2 and len(err.strip().splitlines()) == 1 and message in err, err
    assert not (tmp_path / "o").exists()
