"""Tests of experiments/training/imported_run.py: a reference checkpoint becomes a run directory every reader accepts.

The independent side is the reference forward of `tests.experiments.models.reference_checkpoints` (stock modules, the
layout's description). A run directory keeps the file's precision. From a float32 file, outputs are compared at
float32's precision: every weight is float32 (rounded by at most eps32 / 2 relatively), and through two post-norm
layers of width <= 8 the outputs (norm = the last scale, ~1) move by a few hundred eps32 at most. From a float64 file
the run is float64 (import.json records it) and its evaluation reproduces the reference's to FLOAT64_TOLERANCE.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from experiments.analysis.trained import analyze_run
from experiments.config import TrainConfig
from experiments.tasks import Batch, make_task
from experiments.training.checkpoints import load_checkpoint
from experiments.training.evaluation import EVAL_BATCH, POPULATION_SEED, evaluate_run
from experiments.training.imported_run import import_reference_encoder, write_imported_run
from experiments.training.run_directory import IMPORT_NAME as IMPORT_RECORD
from experiments.training.run_model import load_trained_model
from tests.experiments.models.reference_checkpoints import random_reference_state, reference_forward

EPS32 = float(torch.finfo(torch.float32).eps)
FLOAT32_TOLERANCE = 512 * EPS32
FLOAT64_TOLERANCE = 1e-12
"""About 4500 eps(float64): the two forwards sum the same products in another order (measured 2e-16 to 7e-15)."""


def _lightning_checkpoint(path: Path, state: dict[str, torch.Tensor]) -> Path:
    """The reference's Lightning checkpoint: the weights under state_dict with the module prefix, plus loop state."""
    torch.save(
        {
            "epoch": 4,
            "global_step": 400,
            "pytorch-lightning_version": "2.2.0",
            "state_dict": {f"model.{k}": v.float() for k, v in state.items()},
            "optimizer_states": [{"state": {}, "param_groups": [{"lr": 0.01, "params": []}]}],
            "lr_schedulers": [],
            "hyper_parameters": {"lr": 0.01, "scale_batch": False},
        },
        path,
    )
    return path


def test_an_imported_checkpoint_is_a_run_whose_model_is_the_reference(tmp_path: Path) -> None:
    state = random_reference_state(d=4, num_heads=2, width=2, layers=2, ffn_dim=6, positional_dim=2, max_length=5)
    source = _lightning_checkpoint(tmp_path / "last.ckpt", state)
    run = import_reference_encoder(source, tmp_path / "run", num_heads=2, task="farthest")
    assert sorted(p.name for p in run.out_dir.iterdir()) == ["checkpoint.pt", "config.json", IMPORT_RECORD]
    assert (run.config.N, run.config.heads, run.config.rank, run.config.positional) == (5, 4, 3, "concat")
    config, task, model = load_trained_model(run.out_dir)
    assert config == run.config
    stored = {k: v.float().double() for k, v in state.items()}  # the file's float32 weights, computed in float64
    X = torch.randn(6, 4, 5, generator=torch.Generator().manual_seed(0), dtype=torch.float64)  # (B, d, N)
    with torch.no_grad():
        ours = model.network(X.permute(0, 2, 1).float()).permute(0, 2, 1).double()  # (B, d, N)
        expected = reference_forward(stored, X, 2)
    gap = float((ours - expected).abs().max())
    print(f"float32 run directory vs float64 reference forward: {gap:.3g} (tolerance {FLOAT32_TOLERANCE:.3g})")
    assert gap < FLOAT32_TOLERANCE
    checkpoint = load_checkpoint(run.out_dir / "checkpoint.pt")  # digest, step, stats verified
    assert checkpoint["step"] == 0 and checkpoint["optimizer"]["state"] == {}
    record = json.loads((run.out_dir / IMPORT_RECORD).read_text())
    assert record["container"] == "Lightning checkpoint" and record["prefix"] == "model."
    assert record["inferred"]["N"] == 5 and record["given"]["N"] is None


def test_the_task_error_of_the_run_is_the_reference_forwards_error(tmp_path: Path) -> None:
    """`train --eval-only` (evaluate_run) of a float64 file scores the same samples as the reference forward, in
    float64 (before import.json recorded the precision, the run was float32 and agreed to 4e-8 only)."""
    state = random_reference_state(d=4, num_heads=2, width=1, layers=1, ffn_dim=8, seed=5)
    source = tmp_path / "weights.pt"
    torch.save(state, source)
    run = import_reference_encoder(source, tmp_path / "run", num_heads=2, task="nearest", N=2, keys="orthonormal")
    n = 512
    evaluation = evaluate_run(run.config, run.out_dir, samples=n)
    assert (evaluation["step"], evaluation["source"], evaluation["population_samples"]) == (0, "checkpoint", n)
    batch = run_task_batch(run.config, n)
    with torch.no_grad():
        outputs = reference_forward(state, batch.tokens.permute(0, 2, 1), 2)  # the file's float64 weights
    errors = (outputs.permute(0, 2, 1)[:, -1, :] - batch.target).pow(2).sum(dim=-1)  # (n,): the query token's answer
    mine = evaluation["population_error"]
    print(f"eval-only population error {mine!r}, reference forward on the same samples {float(errors.mean())!r}")
    assert json.loads((run.out_dir / IMPORT_RECORD).read_text())["dtype"] == "float64"
    assert abs(mine - float(errors.mean())) < FLOAT64_TOLERANCE * max(1.0, float(errors.mean()))
    report = analyze_run(run.out_dir, samples=n)
    assert report["population_error"] == mine  # the one recipe: same held-out samples, same batches
    assert report["theorem2"]["bound_applies"] is False and report["run"]["imported_from"].startswith("reference")


def run_task_batch(config: TrainConfig, n: int) -> Batch:
    """The one batch evaluate_run draws for ``n`` <= the recipe's batch (the held-out stream)."""
    assert n <= EVAL_BATCH
    task = make_task(config.task, config.d, config.N, config.keys)
    return task.sample(n, torch.Generator().manual_seed(POPULATION_SEED))


def test_an_import_never_overwrites_and_leaves_nothing_on_refusal(tmp_path: Path) -> None:
    state = random_reference_state(d=4, num_heads=2)
    torch.save(state, tmp_path / "weights.pt")
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "notes.txt").write_text("mine")
    with pytest.raises(ValueError, match="out_dir must be a new or empty directory"):
        import_reference_encoder(tmp_path / "weights.pt", tmp_path / "taken", num_heads=2, task="farthest", N=3)
    with pytest.raises(ValueError, match="num_heads must divide"):
        import_reference_encoder(tmp_path / "weights.pt", tmp_path / "new", num_heads=3, task="farthest", N=3)
    run = import_reference_encoder(tmp_path / "weights.pt", tmp_path / "new", num_heads=2, task="farthest", N=3)
    with pytest.raises(ValueError, match="model_state does not fit"):
        write_imported_run(run.config, {"network.bogus": torch.zeros(1)}, tmp_path / "other", {})
    leftovers = sorted(p.name for p in tmp_path.iterdir())
    assert leftovers == ["new", "taken", "weights.pt"], leftovers  # no staging directory, no half-written run


def test_the_public_import_functions_name_a_bad_argument(tmp_path: Path) -> None:
    import attnrank

    torch.save(random_reference_state(d=4, num_heads=2), tmp_path / "weights.pt")
    good = {"num_heads": 2, "task": "farthest", "N": 3}
    with pytest.raises(TypeError, match="out_dir must be"):
        attnrank.import_reference_encoder(tmp_path / "weights.pt", 3, **good)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="path must be"):
        attnrank.import_reference_encoder(None, tmp_path / "a", **good)  # type: ignore[arg-type]
    with pytest.raises(FileNotFoundError):
        attnrank.import_reference_encoder(tmp_path / "missing.pt", tmp_path / "a", **good)
    for name, value, message in (
        ("num_heads", "2", "num_heads must be an integer"),
        ("task", "x", "task must be"),
        ("N", 0, "N must be"),
        ("keys", "x", "keys must be"),
    ):
        with pytest.raises(ValueError, match=message):
            attnrank.import_reference_encoder(tmp_path / "weights.pt", tmp_path / "a", **{**good, name: value})
    with pytest.raises(TypeError, match="encoder must be"):
        attnrank.reference_state_from_encoder(torch.nn.Linear(2, 2))  # type: ignore[arg-type]
    assert not (tmp_path / "a").exists()
