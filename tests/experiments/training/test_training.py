"""Tests of experiments/training/: schedule, run directory and metrics, exact resume, divergence, refusals, seeding."""

from __future__ import annotations

import csv
import dataclasses
import json
import math
from pathlib import Path

import pytest
import torch

from constructions.full_rank import save_full_rank
from constructions.weights_io import load_weights
from experiments.config import TrainConfig, TrainResult
from experiments.tasks import Batch, FarthestTask, estimate_task_error
from experiments.training.checkpoints import write_checkpoint_file
from experiments.training.loop import train
from experiments.training.packed import TrainedRuns
from experiments.training.run import build_run, resolve_device
from experiments.training.run_model import load_trained_model
from experiments.training.schedule import lr_factor, make_optimizer

# A tiny run: d = 4, N = 3, one layer, FFN width 16, batches of 16, 30 steps (well under a second each).
TINY = TrainConfig(
    task="farthest", d=4, N=3, rank=4, ffn_dim=16, steps=30, batch_size=16, log_every=5, checkpoint_every=10
)


def params(out_dir: Path) -> dict[str, torch.Tensor]:
    return torch.load(out_dir / "checkpoint.pt", weights_only=True)["model"]


def assert_same_params(a: Path, b: Path) -> None:
    pa, pb = params(a), params(b)
    assert pa.keys() == pb.keys()
    for key in pa:
        assert torch.equal(pa[key], pb[key]), key


# -------------------------------------------------------------------------------------------------------- schedule
def test_lr_schedule_warmup_then_cosine() -> None:
    steps = 100
    factors = [lr_factor(s, steps, 5) for s in range(steps)]
    assert factors[:5] == [0.2, 0.4, 0.6, 0.8, 1.0]  # linear warm-up over round(0.05 * 100) = 5 steps
    assert factors[5] == 1.0 and all(a >= b for a, b in zip(factors[5:], factors[6:], strict=False))
    assert factors[-1] == pytest.approx(0.5 * (1 + math.cos(math.pi * 94 / 95)))
    # The optimiser sees the same factors through torch's LambdaLR.
    model = torch.nn.Linear(2, 2)
    optimizer, scheduler = make_optimizer(model.parameters(), dataclasses.replace(TINY, steps=steps, lr=0.5))
    seen = []
    for _ in range(steps):
        seen.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
    assert seen == pytest.approx([0.5 * f for f in factors], rel=1e-12)
    assert isinstance(optimizer, torch.optim.AdamW)
    group = optimizer.param_groups[0]
    assert group["betas"] == (0.9, 0.95) and group["weight_decay"] == 0.0


# ---------------------------------------------------------------------------------------------------- training runs
def test_train_writes_run_directory(tmp_path: Path) -> None:
    result = train(TINY, tmp_path, progress=False)
    assert not result.diverged and result.steps == 30
    for name in ("config.json", "metrics.csv", "checkpoint.pt", "result.json"):
        assert (tmp_path / name).exists(), name
    with (tmp_path / "metrics.csv").open() as stream:
        rows = list(csv.DictReader(stream))
    assert [int(r["step"]) for r in rows] == [5, 10, 15, 20, 25, 30]
    losses = [float(r["loss"]) for r in rows]
    assert result.final_loss == losses[-1] and result.best_loss == min(losses)
    assert float(rows[0]["lr"]) == pytest.approx(TINY.lr * lr_factor(4, 30, round(0.05 * 30)))
    recorded = json.loads((tmp_path / "config.json").read_text())
    assert recorded["config"] == TINY.to_dict() and recorded["config_hash"] == TINY.config_hash()
    assert {"git_revision", "versions", "device"} <= set(recorded) and "torch" in recorded["versions"]
    assert TrainResult.from_dict(json.loads((tmp_path / "result.json").read_text())) == result
    # A finished run returns its result without training again.
    assert train(TINY, tmp_path, progress=False) == result


def test_training_lowers_the_loss(tmp_path: Path) -> None:
    """The farthest-point task from scratch: 150 steps of a full-rank layer beat the best constant map (error ~ 1)."""
    config = dataclasses.replace(TINY, steps=150, batch_size=64, log_every=25)
    result = train(config, tmp_path, progress=False)
    with (tmp_path / "metrics.csv").open() as stream:
        first = float(next(csv.DictReader(stream))["loss"])
    assert result.best_loss < 0.8 * first, (first, result.best_loss)


def test_interrupted_run_resumes_to_the_same_result(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    reference = train(TINY, tmp_path / "straight", progress=False)
    calls = {"n": 0}
    original = FarthestTask.sample

    def interrupted(self, batch_size, generator):  # type: ignore[no-untyped-def]
        calls["n"] += batch_size == TINY.batch_size  # training draws only (population evaluations draw larger)
        if calls["n"] == 24:  # between the checkpoints at 20 and 30
            raise KeyboardInterrupt
        return original(self, batch_size, generator)

    monkeypatch.setattr(FarthestTask, "sample", interrupted)
    with pytest.raises(KeyboardInterrupt):
        train(TINY, tmp_path / "resumed", progress=False)
    assert torch.load(tmp_path / "resumed" / "checkpoint.pt", weights_only=True)["step"] == 20
    monkeypatch.setattr(FarthestTask, "sample", original)
    resumed = train(TINY, tmp_path / "resumed", progress=False)
    assert (resumed.final_loss, resumed.best_loss, resumed.steps) == (
        reference.final_loss,
        reference.best_loss,
        reference.steps,
    )
    assert_same_params(tmp_path / "straight", tmp_path / "resumed")
    straight_rows = (tmp_path / "straight" / "metrics.csv").read_text().splitlines()
    resumed_rows = (tmp_path / "resumed" / "metrics.csv").read_text().splitlines()
    assert [r.split(",")[:3] for r in straight_rows] == [r.split(",")[:3] for r in resumed_rows]


def test_non_finite_loss_stops_the_run_cleanly(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The 7th step's loss is made nan (lr is capped at 10 by TrainConfig, so no learning rate overflows here)."""
    calls = {"n": 0}
    original = TrainedRuns.losses

    def losses(self: TrainedRuns, batches: Batch) -> torch.Tensor:
        calls["n"] += 1
        value = original(self, batches)
        return value * math.nan if calls["n"] == 7 else value

    monkeypatch.setattr(TrainedRuns, "losses", losses)
    config = dataclasses.replace(TINY, steps=20, warmup_fraction=0.0, checkpoint_every=5)
    result = train(config, tmp_path, progress=False)
    assert result.diverged and math.isnan(result.final_loss)
    assert result.steps < 20  # stopped at the first non-finite loss (checked every step on the CPU)
    saved = json.loads((tmp_path / "result.json").read_text())
    assert saved["diverged"] is True and saved["final_loss"] == "nan"
    if (tmp_path / "checkpoint.pt").exists():  # only finite models are ever checkpointed
        assert all(torch.isfinite(t).all() for t in params(tmp_path).values())


def test_bf16_autocast_runs(tmp_path: Path) -> None:
    result = train(dataclasses.replace(TINY, bf16=True, steps=10), tmp_path, progress=False)
    assert math.isfinite(result.final_loss)


# ------------------------------------------------------------------------------------------------------- refusals
def test_checkpoint_of_another_config_is_refused(tmp_path: Path) -> None:
    train(dataclasses.replace(TINY, steps=10), tmp_path, progress=False)
    with pytest.raises(ValueError, match="different config \\(steps: 10 there vs 30 now"):
        train(TINY, tmp_path, progress=False)
    (tmp_path / "config.json").unlink()
    (tmp_path / "result.json").unlink()
    with pytest.raises(ValueError, match="checkpoint.pt belongs to a different config"):
        train(TINY, tmp_path, progress=False)


def test_corrupt_checkpoint_is_refused(tmp_path: Path) -> None:
    train(dataclasses.replace(TINY, steps=10, checkpoint_every=5), tmp_path, progress=False)
    (tmp_path / "result.json").unlink()
    data = (tmp_path / "checkpoint.pt").read_bytes()
    (tmp_path / "checkpoint.pt").write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError, match="corrupt or unreadable checkpoint"):
        train(dataclasses.replace(TINY, steps=10, checkpoint_every=5), tmp_path, progress=False)
    torch.save({"step": 3}, tmp_path / "checkpoint.pt")
    with pytest.raises(ValueError, match="not a training checkpoint \\(missing version"):
        train(dataclasses.replace(TINY, steps=10, checkpoint_every=5), tmp_path, progress=False)


def test_checkpoint_with_mismatched_tensors_is_refused(tmp_path: Path) -> None:
    config = dataclasses.replace(TINY, steps=10, checkpoint_every=5)
    train(config, tmp_path, progress=False)
    (tmp_path / "result.json").unlink()
    state = torch.load(tmp_path / "checkpoint.pt", weights_only=True)
    key = next(iter(state["model"]))
    state["model"][key] = torch.zeros(1)
    write_checkpoint_file(tmp_path / "checkpoint.pt", state)  # a valid digest: the tensors are what is wrong
    with pytest.raises(ValueError, match="checkpoint does not match the model"):
        train(config, tmp_path, progress=False)


def test_load_trained_model(tmp_path: Path) -> None:
    train(TINY, tmp_path, progress=False)
    config, task, model = load_trained_model(tmp_path)
    assert config == TINY and task.name == "farthest" and not model.training
    batch = task.sample(4, torch.Generator().manual_seed(0)).to("cpu")
    assert model(batch).shape == batch.target.shape


def test_device_resolution() -> None:
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert resolve_device("auto").type == expected
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="CUDA is not available"):
            resolve_device("cuda")


# ------------------------------------------------------------------------------------ tasks, models, initialisation
@pytest.mark.parametrize(
    "changes",
    [
        {"task": "nearest", "keys": "orthonormal", "N": 2},
        {"task": "nearest", "keys": "iid", "N": 5, "model": "theory", "rank": 2},
        {"task": "farthest", "model": "theory", "rank": 2, "value": "full"},
        {"task": "biased", "N": 2, "keys": "orthonormal"},
        {"task": "icl", "N": 4, "positional": "additive"},
        {"task": "icl", "N": 4, "positional": "additive", "model": "gpt2", "embed_dim": 8, "rank": 2},
        {"task": "farthest", "positional": "additive", "model": "gpt2", "embed_dim": 8, "rank": 8},
        {"task": "farthest", "attention": "hardmax", "temperature": 4.0},
        {"task": "farthest", "positional": "concat", "positional_dim": 2, "layers": 2, "rank": 3},
        {
            "task": "nearest",
            "N": 2,
            "model": "theory",
            "positional": "concat",
            "positional_dim": 2,
            "layers": 2,
            "rank": 3,
            "value": "full",
        },
        {"task": "nearest", "N": 2, "model": "theory", "layers": 2, "rank": 1},
    ],
)
def test_every_task_and_model_trains(tmp_path: Path, changes: dict) -> None:
    config = dataclasses.replace(TINY, steps=3, log_every=3, checkpoint_every=3, **changes)
    result = train(config, tmp_path, progress=False)
    assert result.steps == 3 and math.isfinite(result.final_loss)


def test_init_from_the_full_rank_construction_starts_at_its_error(tmp_path: Path) -> None:
    """Fact 1's head (Q = K = V = I, temperature 10) loaded into the theory model: its MC error on D_2 (20000 samples)
    is within 4 s.e. of the construction's predicted error (theory.bounds.full_rank_error, an exact quadrature)."""
    path = save_full_rank(tmp_path / "full.safetensors", 8, 10.0)
    predicted = load_weights(path).predicted_error
    config = TrainConfig(
        task="nearest", d=8, N=2, keys="orthonormal", rank=8, model="theory", temperature=10.0, init=str(path)
    )
    task, model = build_run(config, torch.device("cpu"))
    estimate = estimate_task_error(model, task, 20_000, torch.Generator().manual_seed(7))
    assert estimate.contains(predicted), (estimate, predicted)
    # Negative control: a freshly initialised model of the same shape is far from it.
    _, fresh = build_run(dataclasses.replace(config, init=None), torch.device("cpu"))
    assert not estimate_task_error(fresh, task, 20_000, torch.Generator().manual_seed(7)).contains(predicted)
    # Training from the file keeps it near the optimum: the first epoch's loss is already small.
    result = train(
        dataclasses.replace(config, steps=5, log_every=5, lr=1e-4, batch_size=256), tmp_path / "run", progress=False
    )
    assert result.final_loss < 2 * predicted
