"""Tests of experiments/training/evaluation.py (the one recipe; `attnrank train --eval-only`, evaluation.json) and
of the --init step-size warning."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import torch

from constructions.full_rank import save_full_rank
from constructions.weights_io import load_weights
from experiments.cli.main import main
from experiments.config import TrainConfig
from experiments.training.evaluation import evaluate_run, evaluate_trained
from experiments.training.loop import train
from experiments.training.run import build_run
from experiments.training.run_record import POPULATION_KEYS, Evaluation
from experiments.training.schedule import init_step_ratio, make_optimizer

FLAGS = "--task nearest --d 8 --N 2 --keys orthonormal --rank 8 --model theory --temperature 10"
"""The command-line flags of `full_rank_config` (without --init)."""


def full_rank_config(tmp_path: Path, **changes: object) -> TrainConfig:
    """The theory model on nearest / N = 2 / D_2 holding Fact 1's head (d = 8, temperature 10)."""
    path = save_full_rank(tmp_path / "full.safetensors", 8, 10.0)
    config = TrainConfig(
        task="nearest", d=8, N=2, keys="orthonormal", rank=8, model="theory", temperature=10.0, init=str(path)
    )
    return dataclasses.replace(config, **changes)  # type: ignore[arg-type]


def test_eval_only_reports_the_construction_error_and_writes_nothing(tmp_path: Path) -> None:
    config = full_rank_config(tmp_path, device="cpu")
    out = tmp_path / "run"
    result = evaluate_run(config, out, samples=20_000)
    predicted = load_weights(config.init).predicted_error  # type: ignore[arg-type]
    assert result["source"] == "init" and result["step"] == 0 and result["population_samples"] == 20_000
    assert abs(result["population_error"] - predicted) <= 4 * result["population_stderr"], (result, predicted)
    bound = result["theorem2"]  # Theorem 2's own task: the bound beside the population error
    assert (bound["d"], bound["r"], bound["H"]) == (config.d, config.rank, config.heads)
    assert Evaluation.read(result) is not None  # the record's evaluation, as every reader reads it
    assert not out.exists()
    fresh = evaluate_run(dataclasses.replace(config, init=None), None, samples=2000)
    control = predicted + 4 * fresh["population_stderr"]
    assert fresh["source"] == "seed" and fresh["population_error"] > control  # negative control


def test_eval_only_reads_the_checkpoint_of_the_directory(tmp_path: Path) -> None:
    config = TrainConfig(task="farthest", d=4, N=3, rank=4, ffn_dim=16, steps=10, batch_size=16, device="cpu")
    out = tmp_path / "run"
    train(config, out, progress=False)
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    result = evaluate_run(config, out, samples=500)
    assert result["source"] == "checkpoint" and result["step"] == 10
    # Another eval_samples names the same weights: the checkpoint is evaluated on that many samples.
    other = evaluate_run(dataclasses.replace(config, eval_samples=300), out)
    assert other["source"] == "checkpoint" and other["population_samples"] == 300
    with pytest.raises(ValueError, match="belongs to a different config"):  # control: a field that made the weights
        evaluate_run(dataclasses.replace(config, lr=0.02), out)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before  # read only


def test_eval_only_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = full_rank_config(tmp_path)
    args = ["train", *FLAGS.split(), "--init", str(config.init), "--out", str(tmp_path / "run")]
    assert main([*args, "--eval-only", "--eval-samples", "4000", "--json"]) == 0
    captured = capsys.readouterr()
    data = json.loads(captured.out)
    keys = {"population_error", "population_stderr", "population_samples", "theorem2", "step", "source", "out"}
    assert set(data) == keys and data["population_samples"] == 4000
    assert captured.err == "" and not (tmp_path / "run").exists()
    assert main([*args, "--eval-only", "--eval-samples", "1"]) == 2
    assert "--eval-samples must be an integer >= 2" in capsys.readouterr().err


def test_init_warning_depends_on_the_learning_rate(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = full_rank_config(tmp_path)
    args = ["train", *FLAGS.split(), "--init", str(config.init), "--steps", "2", "--log-every", "1", "--no-progress"]
    assert main([*args, "--out", str(tmp_path / "a")]) == 0  # default lr 0.01
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("attnrank train: warning: --lr 0.01 moves the --init weights")
    assert main([*args, "--lr", "1e-4", "--out", str(tmp_path / "b")]) == 0
    assert capsys.readouterr().err == ""


def test_init_step_ratio_is_the_first_adamw_step() -> None:
    """Without warm-up, AdamW's first step moves every coordinate by lr (|g| >> eps): ||step|| = lr sqrt(P)."""
    config = TrainConfig(task="farthest", d=4, N=3, rank=4, ffn_dim=16, lr=1e-3, warmup_fraction=0.0, steps=10)
    task, model = build_run(config, torch.device("cpu"))
    before = torch.cat([p.detach().flatten().clone() for p in model.parameters()])
    optimizer, _ = make_optimizer(model.parameters(), config)
    batch = task.sample(64, torch.Generator().manual_seed(0)).to("cpu")
    task.error(model(batch), batch.target).mean().backward()
    optimizer.step()
    after = torch.cat([p.detach().flatten() for p in model.parameters()])
    moved = float((after - before).norm()) / float(before.norm())
    assert init_step_ratio(model.parameters(), config.lr) == pytest.approx(moved, rel=0.05)
    assert init_step_ratio([torch.zeros(3, requires_grad=True)], 0.1) == float("inf")


def test_a_finished_run_carries_its_evaluation_and_an_older_one_gets_evaluation_json(tmp_path: Path) -> None:
    """evaluate_trained reads the evaluation a finished run wrote into result.json; a run without one (finished
    before the recipe) is evaluated now, by the same recipe, into evaluation.json beside result.json."""
    config = TrainConfig(task="farthest", d=4, N=3, rank=4, ffn_dim=16, steps=10, batch_size=16, device="cpu")
    out = tmp_path / "run"
    result = train(config, out, progress=False)
    assert evaluate_trained(out) == {key: result.extra[key] for key in POPULATION_KEYS}
    older = json.loads((out / "result.json").read_text())
    for key in POPULATION_KEYS:
        del older[key]
    (out / "result.json").write_text(json.dumps(older))
    again = evaluate_trained(out)
    assert again == {key: result.extra[key] for key in POPULATION_KEYS}  # the recipe is deterministic
    assert json.loads((out / "evaluation.json").read_text()) == again
