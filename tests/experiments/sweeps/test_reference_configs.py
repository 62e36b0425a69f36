"""The reference's own experiment files read into runs (`experiments.sweeps.reference_configs`, issue 49).

The fixtures under data/reference/ were written for these tests in the layout of the reference implementation's
LightningCLI files (a config and sweep files of lists) with the paper's values: Figure 1's grid and its supplementary
c = 64, L = 3 runs. The first test is the one that keeps a preset from drifting from the reference again: fig1's paper
scale, written by hand, must be exactly the runs these files build (Figure 1 keeps the supplementary runs at lr 0.01).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from experiments.config import TrainConfig
from experiments.studies import get_preset
from experiments.sweeps.reference_configs import read_reference

FIXTURES = Path(__file__).parent / "data" / "reference"
CONFIG = FIXTURES / "fig1_config.yaml"
SWEEP = FIXTURES / "fig1_sweep.yaml"
SUPPLEMENT = FIXTURES / "fig1_supp_sweep.yaml"


def _hashes(runs: list[TrainConfig]) -> list[str]:
    return sorted(run.config_hash() for run in runs)


def test_fig1_paper_scale_is_the_reference_files_grid() -> None:
    main = read_reference(CONFIG, SWEEP).runs
    supplement = read_reference(CONFIG, SUPPLEMENT).runs
    assert len(main) == 7 * 3 * 3 * 5 and len(supplement) == 2 * 3 * 4
    in_figure = [*main, *(run for run in supplement if run.lr == 0.01)]
    paper = [run for run in get_preset("fig1").runs("paper") if isinstance(run, TrainConfig)]
    assert len(paper) == len(in_figure) == 321
    assert _hashes(paper) == _hashes(in_figure)
    # The execution fields (not hashed) agree too, but for the device each machine picks.
    by_hash = {run.config_hash(): run for run in in_figure}
    for run in paper:
        assert run.checkpoint_every == by_hash[run.config_hash()].checkpoint_every


def test_the_runs_are_trained_in_the_reference_regime() -> None:
    runs = read_reference(CONFIG, SWEEP).runs
    first = runs[0]  # data.seed 0, nheads 1, L = 1, c = 1: the first key of the sweep file varies slowest
    assert (first.d, first.N, first.rank, first.layers, first.width, first.data_seed_value) == (64, 16, 64, 1, 1, 0)
    assert (runs[1].width, runs[3].layers, runs[9].rank, runs[63].data_seed) == (8, 3, 32, 1)
    for run in runs:
        assert (run.sampler, run.train_batches, run.log_every) == ("reference", 100, 100)
        assert (run.steps, run.schedule_steps, run.warmup_steps, run.lr_interval) == (100_000, 100_000, 5_000, "epoch")
        assert (run.lr, run.betas, run.weight_decay, run.ffn_dim, run.batch_size) == (0.01, (0.9, 0.95), 0.0, 2048, 256)
        assert (run.seed, run.layer_init, run.model, run.task, run.positional) == (
            0,
            "copies",
            "encoder",
            "farthest",
            "none",
        )
    supplement = read_reference(CONFIG, SUPPLEMENT).runs
    assert {(r.steps, r.warmup_steps, r.batch_size) for r in supplement} == {(200_000, 10_000, 64)}
    assert sorted({r.lr for r in supplement}) == [0.003, 0.01, 0.03, 0.1]


def test_keys_that_change_nothing_are_reported() -> None:
    grid = read_reference(CONFIG, SWEEP)
    assert [key.path for key in grid.skipped] == ["experiment_name", "trainer.logger", "trainer.strategy"]
    assert all(str(key).startswith("fig1_config.yaml: ") for key in grid.skipped)


ONE_RUN = """\
seed_everything: 613
trainer: {max_epochs: 40, limit_train_batches: 3}
model: {nheads: 2, num_layers: 3, dim_feedforward: 32}
data: {dim: 16, num_points: 8, batch_size: 4, dataset_class: task.NearestPointDataset, num_queries: -1,
       num_workers: 7, seed: 3}
optimizer:
  class_path: torch.optim.AdamW
  init_args: {lr: 3e-3, betas: [0.9, 0.95], weight_decay: 0}
"""


def test_a_config_alone_is_one_run_and_the_class_path_form_of_the_optimizer_is_read(tmp_path: Path) -> None:
    config = tmp_path / "one.yaml"
    config.write_text(ONE_RUN)
    grid = read_reference(config)
    (run,) = grid.runs
    assert (run.d, run.N, run.rank, run.layers, run.width, run.data_seed, run.lr) == (16, 8, 8, 3, 1, 3, 0.003)
    assert (run.steps, run.warmup_steps, run.train_batches, run.checkpoint_every) == (120, 6, 3, 6)
    assert [key.path for key in grid.skipped] == ["seed_everything"]


def test_the_optimizer_defaults_are_torch_adamw_s(tmp_path: Path) -> None:
    """A file that names no betas or weight decay trains with AdamW's own defaults, as the reference's would."""
    config = tmp_path / "defaults.yaml"
    config.write_text(CONFIG.read_text().replace("  betas: [0.9, 0.95]\n  weight_decay: 0\n", "  lr: 0.01\n"))
    (run, *_) = read_reference(config, SWEEP).runs
    assert (run.betas, run.weight_decay) == ((0.9, 0.999), 0.01)


def _variant(tmp_path: Path, old: str, new: str) -> Path:
    text = CONFIG.read_text()
    assert old in text
    path = tmp_path / "variant.yaml"
    path.write_text(text.replace(old, new, 1))
    return path


CONFIG_REFUSALS = [
    ("  num_workers: 7\n", "  num_workers: 0\n", "data.num_workers = 0: must be 7"),
    ("  max_epochs: 1000\n", "  max_epochs: 19\n", "trainer.max_epochs = 19: must be >= 20"),
    ("  limit_train_batches: 100\n", "  limit_train_batches: 1.0\n", "trainer.limit_train_batches = 1.0: must be a"),
    ("  limit_train_batches: 100\n", "", "trainer.limit_train_batches: required, and not given (nor in the sweep"),
    ("  bias: true\n", "  bias: false\n", "model.bias = False: must be true"),
    ("task.NearestPointDataset", "task.NearestPointDatasetOrthogonal", "data.dataset_class = 'task.NearestPointData"),
    ("  num_queries: -1\n", "  num_queries: 4\n", "data.num_queries = 4: must be -1"),
    ("  num_queries: -1\n", "", "data.num_queries: required, and not given"),
    ("trainer:\n", "trainer:\n  gradient_clip_val: 1.0\n", "trainer.gradient_clip_val: not a key this toolkit can"),
    ("trainer:\n", "trainer:\n  precision: 16-mixed\n", "trainer.precision = '16-mixed': must be 32"),
    ("model:\n", "model:\n  dim: 64\n", "model.dim = 64: is linked to data.dim"),
    ("lr_scheduler:\n", "lr_scheduler:\n  eta_min: 0.001\n", "lr_scheduler.eta_min = 0.001: is linked"),
    ("lr_scheduler:\n", "lr_scheduler:\n  warmup_start_lr: 0.001\n", "warmup_start_lr = 0.001: must be 0"),
    ("  weight_decay: 0\n", "  weight_decay: 0\n  amsgrad: true\n", "optimizer.amsgrad = True: must be false"),
    ("  weight_decay: 0\n", "  weight_decay: 0\n  eps: 1.0e-6\n", "optimizer.eps = 1e-06: must be 1e-08"),
    ("  weight_decay: 0\n", "  weight_decay: -1\n", "optimizer.weight_decay must be a real number"),
    ("  betas: [0.9, 0.95]\n", "  betas: [0.9, 1.5]\n", "optimizer.betas[1] = 1.5: must be a number in [0, 1)"),
    ("  additive_positional: false\n", "  additive_positional: true\n  positional_dim: 64\n", "appears twice"),
    (
        "  positional_dim: 0\n  additive_positional: false\n",
        "  positional_dim: 64\n  additive_positional: true\n",
        "additive_positional = True: with positional_dim = 64",
    ),
    ("experiment_name:", "ckpt_path: last.ckpt\nexperiment_name:", "ckpt_path = 'last.ckpt': resuming"),
    ("experiment_name:", "fit_loop: {}\nexperiment_name:", "fit_loop: not a key of the reference's command line"),
    ("data:\n", "data:\n  device_name: cuda\n", "data.device_name = 'cuda': must be absent"),
    ("trainer:\n", "trainer:\n  max_steps: 5000\n", "trainer.max_steps = 5000: must be -1"),
    (
        "model:\n  dim_feedforward: 2048\n  bias: true\n  positional_dim: 0\n  additive_positional: false\n",
        "model: [1, 2]\n",
        "model = [1, 2]: must be a mapping",
    ),
    ("  batch_size: 256\n", "  batch_size: [256\n", "not valid YAML"),
]


@pytest.mark.parametrize(("old", "new", "message"), CONFIG_REFUSALS)
def test_what_cannot_be_honoured_in_a_config_is_refused_naming_file_and_key(
    tmp_path: Path, old: str, new: str, message: str
) -> None:
    config = _variant(tmp_path, old, new)
    with pytest.raises(ValueError) as refused:
        read_reference(config, SWEEP)
    text = str(refused.value)
    assert text.startswith(str(config)) and message in text and "\n" not in text, text


def test_the_data_seed_is_required(tmp_path: Path) -> None:
    """Without data.seed the reference draws a fresh seed per run: a run that cannot be repeated is refused."""
    sweep = tmp_path / "no_seed.yaml"
    sweep.write_text("\n".join(line for line in SWEEP.read_text().splitlines() if "data.seed" not in line) + "\n")
    with pytest.raises(
        ValueError,
        match=r"data.seed: required, and not given \(nor in the sweep file no_seed.yaml\) \(without it the reference",
    ):
        read_reference(CONFIG, sweep)


SWEEP_REFUSALS = [
    ("model.nheads: [3]\n", "model.nheads = 3: must divide data.dim + model.positional_dim = 64"),
    ("data.seed: 4\n", "data.seed = 4: must be a non-empty list"),
    ("data.seed: [1, 2, 1]\n", "data.seed = [1, 2, 1]: lists 1 twice"),
    ("trainer.logger: [a, b]\n", "trainer.logger = ['a', 'b']: changes nothing here"),
    ("model.rank: [8]\n", "model.rank: not a key this toolkit honours"),
    ("seed: [1]\n", "seed: a sweep key must be a dotted path SECTION.KEY"),
    ("model.maxN: [16]\n", "model.maxN: is linked to data.num_points"),
    ("data.num_workers: [3]\n", "data.num_workers = 3: must be 7"),
    ("trainer.max_epochs: [1000, 1000.0]\n", "lists 1000.0 twice"),
]


@pytest.mark.parametrize(("line", "message"), SWEEP_REFUSALS)
def test_what_cannot_be_honoured_in_a_sweep_is_refused_naming_file_and_key(
    tmp_path: Path, line: str, message: str
) -> None:
    sweep = tmp_path / "sweep.yaml"
    key = line.split(":")[0]
    kept = [text for text in SWEEP.read_text().splitlines() if not text.startswith(key + ":")]
    sweep.write_text("\n".join(kept) + "\n" + line)
    with pytest.raises(ValueError) as refused:
        read_reference(CONFIG, sweep)
    text = str(refused.value)
    assert text.startswith(str(sweep)) and message in text and "\n" not in text, text
