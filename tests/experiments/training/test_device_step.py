"""The device path of a training step (issue 29), tested on the CPU with the device path forced.

- the device sampler (`experiments.samplers.device`: `Task.sample` in float32): on its generator's device, targets
  decided exactly on the float32 points, the same distribution as the CPU sampler (means of three statistics agree
  within 4 combined standard errors; negative control: a shifted statistic is refused), reproducible per generator
  state;
- runs with ``sampler = "device"``: kill and resume are bitwise exact (the generator's state is in the checkpoint),
  packs match separate runs, the config hash of existing runs is unchanged;
- the step path: capture and matmul precision are recorded; capture is inactive (eager, bitwise equal) on the CPU;
  the optimiser state is saved in the default AdamW's form and loads into other implementations.

CUDA graph capture, ``torch.compile(mode="reduce-overhead")``, the capturable / fused AdamW on a GPU and TF32 cannot
be exercised here (no GPU in CI); `benchmarks/bench_device_step.py` runs them where CUDA is present.
"""

from __future__ import annotations

import csv
import dataclasses
import hashlib
import json
import math
from pathlib import Path

import pytest
import torch

from experiments.config import TrainConfig
from experiments.samplers import SAMPLER_NAMES, get_sampler
from experiments.tasks import FarthestTask, make_task
from experiments.training import step_capture
from experiments.training.loop import train, train_packed
from experiments.training.packed import TrainedRuns
from experiments.training.run_model import load_trained_model
from experiments.training.run_start import fresh_run
from experiments.training.schedule import (
    load_optimizer_state,
    lr_factor,
    make_optimizer,
    optimizer_kind,
    portable_optimizer_state,
    scheduled_lr,
)
from theory.monte_carlo import DEFAULT_Z

TINY = TrainConfig(
    d=8, N=4, ffn_dim=16, steps=40, batch_size=16, log_every=5, checkpoint_every=10, device="cpu", sampler="device"
)


def _rows(path: Path) -> list[list[str]]:
    with (path / "metrics.csv").open() as stream:
        return [row[:3] for row in csv.reader(stream)]


def _weights(path: Path) -> dict[str, torch.Tensor]:
    return torch.load(path / "checkpoint.pt", weights_only=True)["model"]


# ------------------------------------------------------------------------------------------------------- config
def test_new_fields_at_their_defaults_leave_every_hash_unchanged() -> None:
    """The hash is computed as before the fields existed (written out here); capture is an execution field."""
    config = TrainConfig()
    new = ("sampler", "matmul_precision", "capture")
    before = {k: v for k, v in config.to_dict().items() if k not in ("device", "checkpoint_every", *new)}
    later = {"embed_dim": 0, "curriculum_dims": 0, "curriculum_points": 0, "curriculum_dims_increment": 1}
    later |= {"curriculum_points_increment": 2, "curriculum_interval": 2000, "warmup_steps": 0, "schedule_steps": 0}
    later |= {"layer_init": "independent", "train_batches": 0, "data_seed": None, "lr_interval": "step"}
    later |= {"eval_samples": 20_000}
    before = {k: v for k, v in before.items() if k not in later}
    digest = hashlib.sha256(json.dumps(before, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    assert config.config_hash() == digest
    assert dataclasses.replace(config, capture="graph").config_hash() == digest  # how a step is replayed: no new run
    assert dataclasses.replace(config, sampler="device").config_hash() != digest  # another batch stream
    assert dataclasses.replace(config, matmul_precision="high").config_hash() != digest  # other arithmetic


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"sampler": "gpu"}, f"sampler must be one of {', '.join(map(repr, SAMPLER_NAMES))}, got 'gpu'"),
        ({"matmul_precision": "medium"}, "matmul_precision must be one of 'highest', 'high', got 'medium'"),
        ({"capture": "cudagraph"}, "capture must be one of 'none', 'graph', 'compile', got 'cudagraph'"),
        ({"task": "biased", "N": 2, "sampler": "device"}, "sampler must be 'cpu' for the biased task"),
        ({"capture": "graph", "compile": True}, "capture must be 'none' when compile is set"),
        (
            {"task": "icl", "steps": 400, "curriculum_dims": 4, "curriculum_interval": 10, "capture": "graph"},
            "capture must be 'none' for a curriculum run",
        ),
    ],
)
def test_bad_step_path_fields_are_refused(changes: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        TrainConfig(**changes)


# ------------------------------------------------------------------------------------------------ device sampler
@pytest.mark.parametrize(("name", "keys"), [("farthest", "iid"), ("nearest", "orthonormal"), ("nearest", "iid")])
def test_device_batches_are_float32_unit_points_with_exact_targets(name: str, keys: str) -> None:
    task = make_task(name, 8, 6, keys)
    batch = task.sample(64, torch.Generator().manual_seed(3), torch.float32)
    assert batch.tokens.dtype == batch.target.dtype == torch.float32
    assert torch.allclose(batch.context.norm(dim=-1), torch.ones(64, 6), atol=1e-6)
    X = batch.context.double()  # (B, N, d)
    if name == "farthest":
        expected = X[torch.arange(64)[:, None], torch.einsum("bid,bjd->bij", X, X).argmin(dim=2)]  # (B, N, d)
    else:
        assert batch.query is not None
        expected = X[torch.arange(64), torch.einsum("bid,bd->bi", X, batch.query.double()).argmax(dim=1)]  # (B, d)
        if keys == "orthonormal":
            gram = torch.einsum("bid,bjd->bij", X, X)  # (B, N, N)
            assert torch.allclose(gram, torch.eye(6, dtype=torch.float64).expand(64, 6, 6), atol=1e-5)
    assert torch.equal(batch.target.double(), expected)  # the target is one of the float32 points, exactly
    again = task.sample(64, torch.Generator().manual_seed(3), torch.float32)
    assert torch.equal(again.tokens, batch.tokens)  # a function of the generator's state


def _statistic_means(task_name: str, sampler: str, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-sample statistics of n batches' worth of samples: mean and standard error of each (3,)."""
    task = make_task(task_name, 8, 6, "iid")
    generator = get_sampler(sampler).generator(7, torch.device("cpu"))
    batch = task.sample(n, generator, torch.float32 if sampler == "device" else torch.float64)
    X = batch.context.double()
    if task_name == "farthest":
        stats = [
            torch.einsum("bnd,bnd->bn", X, batch.target.double()).mean(dim=1),  # <x_i, farthest(x_i)>
            X[:, :, 0].pow(2).mean(dim=1),  # a coordinate's second moment (1/d)
            torch.einsum("bid,bjd->bij", X, X)[:, 0, 1],  # one pair's inner product (mean 0)
        ]
    else:
        stats = [
            torch.einsum("bd,bd->b", batch.target.double(), batch.query.double()),  # type: ignore[union-attr]
            X[:, 0, 0].pow(2),
            batch.query.double()[:, 1],  # type: ignore[union-attr]
        ]
    values = torch.stack(stats, dim=1)  # (n, 3)
    return values.mean(dim=0), values.std(dim=0) / math.sqrt(n)


@pytest.mark.parametrize("task_name", ["farthest", "nearest"])
def test_device_sampler_draws_the_cpu_samplers_distribution(task_name: str) -> None:
    """Means of three statistics agree within DEFAULT_Z combined standard errors (independent streams, 20000 samples
    each); negative control: shifting a mean by 10 standard errors is caught by the same test."""
    cpu_mean, cpu_se = _statistic_means(task_name, "cpu", 20_000)
    dev_mean, dev_se = _statistic_means(task_name, "device", 20_000)
    z = (dev_mean - cpu_mean).abs() / torch.sqrt(cpu_se**2 + dev_se**2)
    assert bool((z < DEFAULT_Z).all()), z
    shifted = (dev_mean + 10 * dev_se - cpu_mean).abs() / torch.sqrt(cpu_se**2 + dev_se**2)
    assert bool((shifted > DEFAULT_Z).any())


def test_device_icl_batches_follow_the_regression() -> None:
    task = make_task("icl", 6, 5)
    batch = task.sample(32, torch.Generator().manual_seed(0), torch.float32)
    assert batch.aux is not None and batch.tokens.shape == (32, 10, 6) and batch.tokens.dtype == torch.float32
    assert torch.allclose(batch.target, torch.einsum("bnd,bd->bn", batch.context, batch.aux))
    assert torch.equal(batch.tokens[:, 1::2, 0], batch.target)


def test_the_biased_task_has_no_device_sampler() -> None:
    with pytest.raises(ValueError, match="the biased task draws in float64 on the CPU only"):
        make_task("biased", 4, 2).sample(4, torch.Generator(), torch.float32)
    with pytest.raises(ValueError, match="sampler must be 'cpu' for the biased task"):
        TrainConfig(task="biased", N=2, sampler="device")


# ----------------------------------------------------------------------------------------- runs on the device path
def test_a_killed_device_sampler_run_resumes_bitwise(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The device generator's state is saved with every checkpoint: a run killed between checkpoints and resumed
    equals the uninterrupted one bitwise (weights, metrics, result)."""
    reference = train(TINY, tmp_path / "straight", progress=False)
    calls = {"n": 0}
    original = FarthestTask.sample

    def killed(self, batch_size, generator, dtype=torch.float64):  # type: ignore[no-untyped-def]
        if dtype == torch.float64:  # the held-out evaluation's draw, not a training batch
            return original(self, batch_size, generator, dtype)
        calls["n"] += 1
        if calls["n"] == 24:  # between the checkpoints at steps 20 and 30
            raise KeyboardInterrupt
        return original(self, batch_size, generator, dtype)

    monkeypatch.setattr(FarthestTask, "sample", killed)
    with pytest.raises(KeyboardInterrupt):
        train(TINY, tmp_path / "resumed", progress=False)
    monkeypatch.setattr(FarthestTask, "sample", original)
    resumed = train(TINY, tmp_path / "resumed", progress=False)
    assert (resumed.final_loss, resumed.best_loss, resumed.steps) == (
        reference.final_loss,
        reference.best_loss,
        reference.steps,
    )
    assert _rows(tmp_path / "straight") == _rows(tmp_path / "resumed")
    straight, again = _weights(tmp_path / "straight"), _weights(tmp_path / "resumed")
    assert all(torch.equal(straight[name], again[name]) for name in straight)
    # Negative control: the CPU sampler's run of the same config is another run (another stream).
    cpu = train(dataclasses.replace(TINY, sampler="cpu"), tmp_path / "cpu", progress=False)
    assert cpu.final_loss != reference.final_loss


def test_device_sampler_packs_match_separate_runs(tmp_path: Path) -> None:
    """A pack of three runs (ranks and seeds) on the device path: every epoch loss within 1e-5 of its own run."""
    configs = [dataclasses.replace(TINY, steps=20, rank=r, seed=s) for r, s in ((8, 0), (4, 0), (8, 1))]
    packed = train_packed(configs, [tmp_path / f"pack{k}" for k in range(3)])
    for k, config in enumerate(configs):
        alone = train(config, tmp_path / f"alone{k}", progress=False)
        assert packed[k].steps == alone.steps == 20
        pack_rows, alone_rows = _rows(tmp_path / f"pack{k}")[1:], _rows(tmp_path / f"alone{k}")[1:]
        for (_, a, _), (_, b, _) in zip(pack_rows, alone_rows, strict=True):
            assert math.isclose(float(a), float(b), rel_tol=1e-5), (k, a, b)
    assert packed[0].final_loss != packed[2].final_loss  # negative control: the runs differ


def test_the_step_path_is_recorded_and_capture_is_eager_off_cuda(tmp_path: Path) -> None:
    """On the CPU capture 'graph' is inactive: the run steps eagerly (bitwise equal to capture 'none', the same
    config hash) and config.json says so; the matmul precision in force during the run is recorded and restored."""
    before = torch.get_float32_matmul_precision()
    plain = train(dataclasses.replace(TINY, steps=10), tmp_path / "plain", progress=False)
    graph = train(dataclasses.replace(TINY, steps=10, capture="graph"), tmp_path / "graph", progress=False)
    assert (plain.final_loss, plain.best_loss) == (graph.final_loss, graph.best_loss)
    record = json.loads((tmp_path / "graph" / "config.json").read_text())
    assert record["step_path"] == {
        "sampler": "device",
        "capture": "none",
        "optimizer": "default",
        "matmul_precision": "highest",
        "capture_inactive": "capture 'graph' is CUDA-only",
    }
    high = dataclasses.replace(TINY, steps=10, matmul_precision="high")
    train(high, tmp_path / "high", progress=False)
    recorded = json.loads((tmp_path / "high" / "config.json").read_text())
    assert recorded["step_path"]["matmul_precision"] == "high" and recorded["config"]["matmul_precision"] == "high"
    assert torch.get_float32_matmul_precision() == before
    config, _, _ = load_trained_model(tmp_path / "high")
    assert config.matmul_precision == "high" and config.sampler == "device"


def test_make_stepper_is_eager_off_cuda() -> None:
    config = dataclasses.replace(TINY, capture="compile")
    model = torch.nn.Linear(2, 1)
    optimizer, _ = make_optimizer(model.parameters(), config)
    stepper = step_capture.make_stepper(config, torch.device("cpu"), object(), optimizer)  # type: ignore[arg-type]
    assert not isinstance(stepper, (step_capture.GraphStep, step_capture.CompiledStep))
    assert not step_capture.capture_active(config, torch.device("cpu"))
    assert step_capture.capture_active(config, torch.device("cuda"))  # the decision only; nothing runs
    assert step_capture.capture_active(dataclasses.replace(config, capture="none"), torch.device("cuda")) is False


def test_optimizer_kinds_per_device() -> None:
    cuda, cpu = torch.device("cuda"), torch.device("cpu")
    assert optimizer_kind(TINY, cpu) == "default"
    assert optimizer_kind(dataclasses.replace(TINY, capture="graph"), cpu) == "default"
    assert optimizer_kind(dataclasses.replace(TINY, capture="graph"), cuda) == "capturable"
    assert optimizer_kind(dataclasses.replace(TINY, capture="compile"), cuda) == "fused"
    assert optimizer_kind(TINY, cuda) == "fused"
    assert optimizer_kind(dataclasses.replace(TINY, sampler="cpu"), cuda) == "default"


def test_optimizer_state_is_portable_between_implementations() -> None:
    """A state saved from an optimiser holding its learning rate as a tensor (as the capturable AdamW does) is
    written in the default form and loads back into either kind: flags kept, the tensor filled in place."""
    torch.manual_seed(0)
    weights = torch.nn.Parameter(torch.randn(3, 2))
    optimizer, scheduler = make_optimizer([weights], TINY)
    for _ in range(3):
        optimizer.zero_grad()
        weights.pow(2).sum().backward()
        optimizer.step()
        scheduler.step()
    rate = torch.tensor(0.0)
    optimizer.param_groups[0]["lr"] = rate.fill_(scheduled_lr(scheduler))  # a tensor learning rate
    state = portable_optimizer_state(optimizer)
    assert isinstance(state["param_groups"][0]["lr"], float) and state["param_groups"][0]["capturable"] is False
    assert state["param_groups"][0]["lr"] == pytest.approx(TINY.lr * lr_factor(3, 40, TINY.warmup_length), rel=1e-6)
    fresh, _ = make_optimizer([torch.nn.Parameter(weights.detach().clone())], TINY)
    load_optimizer_state(fresh, state)
    assert isinstance(fresh.param_groups[0]["lr"], float)
    assert torch.equal(fresh.state_dict()["state"][0]["exp_avg"], optimizer.state_dict()["state"][0]["exp_avg"])
    holder = torch.tensor(1.0)
    tensor_lr, _ = make_optimizer([torch.nn.Parameter(weights.detach().clone())], TINY)
    tensor_lr.param_groups[0]["lr"] = holder
    load_optimizer_state(tensor_lr, state)
    assert tensor_lr.param_groups[0]["lr"] is holder and float(holder) == pytest.approx(float(rate))


def test_matmul_precision_context_restores() -> None:
    before = torch.get_float32_matmul_precision()
    with step_capture.matmul_precision("high"):
        assert torch.get_float32_matmul_precision() == "high"
    assert torch.get_float32_matmul_precision() == before


@pytest.mark.slow
def test_the_compiled_step_matches_the_eager_step_on_the_cpu() -> None:
    """`CompiledStep` (torch.compile of the losses; mode "reduce-overhead" makes CUDA graphs only on CUDA, so here it
    is plain inductor code) takes the same steps as the eager step, up to float rounding: three steps of a pack of
    two runs on the same batches, losses within 1e-5 relative. Slow: compiling takes tens of seconds on 2 cores."""
    configs = [dataclasses.replace(TINY, seed=s) for s in (0, 1)]
    device = torch.device("cpu")

    def pack() -> TrainedRuns:
        return TrainedRuns([fresh_run(c) for c in configs])

    eager, compiled_runs = pack(), pack()
    compiled = step_capture.CompiledStep(compiled_runs, compiled_runs.optimizer)
    samplers = [get_sampler("device").generator(c.seed, device) for c in configs]
    for _ in range(3):
        batch = eager.draw(eager.task, samplers)
        expected = step_capture.eager_step(eager, eager.optimizer, batch)
        got = compiled(batch)
        assert torch.allclose(got, expected, rtol=1e-5, atol=0), (got, expected)
