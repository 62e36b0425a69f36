"""Packed training (experiments.training.loop.train_packed) against separate train() runs of the same configs.

Reference: experiments.training.loop.train on each config alone (a pack of one: each run's own model, its unstacked
parameters and ``F.linear`` products, one optimiser per run; a pack runs the same modules on stacked parameters with
batched products, experiments.models.run_axis). Tolerance: relative 1e-5 on every epoch-mean loss of metrics.csv,
about 100 float32 epsilons (1.2e-7) of rounding accumulated over 20 Adam steps (batched products may sum in another
order); the measured gap is below 1e-7. Negative control: the runs of each pack differ from each other by far more.
"""

from __future__ import annotations

import csv
import dataclasses
import math
from pathlib import Path

import pytest
import torch

from experiments.config import TrainConfig
from experiments.models.run_axis import stack_models
from experiments.samplers import get_sampler
from experiments.tasks import make_task
from experiments.training.loop import RunFilesHooks, train, train_packed
from experiments.training.packed import TrainedRuns
from experiments.training.run_loop import Training
from experiments.training.run_model import load_trained_model
from experiments.training.run_start import fresh_run

RTOL = 1e-5


def _base(**fields: object) -> dict:
    return {
        "d": 8,
        "N": 4,
        "ffn_dim": 16,
        "steps": 20,
        "batch_size": 32,
        "log_every": 5,
        "checkpoint_every": 10,
        "device": "cpu",
        **fields,
    }


def _encoder_pack(**fields: object) -> list[TrainConfig]:
    """Three ranks (one head of 8, four of 2, eight of 1), two seeds each (all six distinct), two temperatures."""
    base = _base(task="farthest", **fields)
    return [
        TrainConfig(**base, rank=r, seed=10 * r + s, temperature=t)  # type: ignore[arg-type]
        for r in (8, 2, 1)
        for s, t in ((0, 1.0), (1, 4.0))
    ]


def _theory_pack(**fields: object) -> list[TrainConfig]:
    base = _base(task="nearest", keys="orthonormal", N=2, model="theory", value="full", rank=1, **fields)
    return [TrainConfig(**base, seed=s, temperature=t) for s, t in ((0, 1.0), (1, 4.0), (2, 2.0))]  # type: ignore[arg-type]


def _losses(run_dir: Path) -> list[float]:
    with (run_dir / "metrics.csv").open(newline="") as stream:
        return [float(row[1]) for row in list(csv.reader(stream))[1:]]


PACKS = {
    "encoder, two layers": lambda: _encoder_pack(layers=2),
    "encoder, width 2, concatenated positions": lambda: _encoder_pack(width=2, positional="concat", positional_dim=8),
    "encoder, nearest, additive positions": lambda: [
        dataclasses.replace(c, task="nearest", keys="iid", positional="additive") for c in _encoder_pack()
    ],
    "theory, two layers, scratch coordinates": lambda: _theory_pack(layers=2, positional="concat", positional_dim=8),
    "theory, one layer": lambda: _theory_pack(layers=1, width=2),
}


@pytest.mark.parametrize("name", list(PACKS))
def test_packed_runs_match_separate_runs(tmp_path: Path, name: str) -> None:
    torch.set_num_threads(1)
    configs = PACKS[name]()
    packed_results = train_packed(configs, [tmp_path / f"packed{i}" for i in range(len(configs))])
    separate = [train(c, tmp_path / f"alone{i}", progress=False) for i, c in enumerate(configs)]
    finals = []
    for i, (p, s) in enumerate(zip(packed_results, separate, strict=True)):
        assert not p.diverged and p.steps == s.steps == 20 and p.extra["packed"] == len(configs)
        population = p.extra["population_error"]  # the same model up to float rounding, the same held-out samples
        assert population == pytest.approx(s.extra["population_error"], rel=RTOL)
        assert p.extra["population_samples"] == s.extra["population_samples"]
        ours, theirs = _losses(tmp_path / f"packed{i}"), _losses(tmp_path / f"alone{i}")
        assert len(ours) == len(theirs) == 4
        for a, b in zip(ours, theirs, strict=True):
            assert a == pytest.approx(b, rel=RTOL)
        assert p.best_loss == pytest.approx(s.best_loss, rel=RTOL)
        finals.append(s.final_loss)
    # negative control: the runs of the pack learn different things, so the agreement above is not trivial
    gaps = [abs(a - b) / abs(b) for i, a in enumerate(finals) for b in finals[i + 1 :]]
    assert min(gaps) > 10 * RTOL  # the closest two runs differ by > 10x the tolerance


def _interrupt_after_step(monkeypatch: pytest.MonkeyPatch, step: int) -> None:
    """Make a pack raise (as a kill would stop it) right after it has saved its checkpoints at ``step``."""
    original = RunFilesHooks.save

    def save_then_stop(self: RunFilesHooks, training: Training) -> None:
        original(self, training)
        if training.step == step:
            raise KeyboardInterrupt

    monkeypatch.setattr(RunFilesHooks, "save", save_then_stop)


def test_a_killed_pack_resumes_as_a_pack_or_run_by_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Killed after its step-10 checkpoints, a pack resumed as a pack gives bitwise the uninterrupted pack's losses;
    one of its runs resumed alone by train() agrees with them to float rounding."""
    torch.set_num_threads(1)
    configs = _encoder_pack()[:4]
    whole = train_packed(configs, [tmp_path / f"whole{i}" for i in range(4)])
    dirs = [tmp_path / f"killed{i}" for i in range(4)]
    with monkeypatch.context() as patch:
        _interrupt_after_step(patch, 10)
        with pytest.raises(KeyboardInterrupt):
            train_packed(configs, dirs)
    assert all(not (d / "result.json").exists() and (d / "checkpoint.pt").exists() for d in dirs)
    alone = train(configs[3], dirs[3], progress=False)  # one run finishes alone, from its own checkpoint
    resumed = train_packed(configs, dirs)  # the other three as a pack; the finished one is read back
    assert resumed[3].to_dict() == alone.to_dict()
    for i in range(3):
        assert _losses(dirs[i]) == _losses(tmp_path / f"whole{i}")  # bitwise
        assert resumed[i].final_loss == whole[i].final_loss
    for a, b in zip(_losses(dirs[3]), _losses(tmp_path / "whole3"), strict=True):
        assert a == pytest.approx(b, rel=RTOL)


def test_a_packed_run_directory_is_an_ordinary_one(tmp_path: Path) -> None:
    """load_trained_model reads a packed run's checkpoint; its model gives the loss the pack reported last."""
    torch.set_num_threads(1)
    configs = _theory_pack(layers=1)
    dirs = [tmp_path / f"run{i}" for i in range(3)]
    train_packed([dataclasses.replace(c, steps=5, log_every=5) for c in configs], dirs)
    for i, directory in enumerate(dirs):
        config, task, model = load_trained_model(directory)
        assert config.seed == configs[i].seed and config.steps == 5
        batch = make_task("nearest", 8, 2, "orthonormal").sample(64, torch.Generator().manual_seed(0)).to("cpu")
        with torch.no_grad():
            assert math.isfinite(float(task.error(model(batch), batch.target).mean()))


def test_a_diverging_run_stops_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Run 1's loss made nan from step 7 on: it is stopped there and keeps its step-5 checkpoint (checkpoint_every
    5); the others train on and match their separate runs."""
    torch.set_num_threads(1)
    configs = [dataclasses.replace(c, checkpoint_every=5) for c in _encoder_pack()[:3]]
    original = TrainedRuns.losses
    calls = {"n": 0}

    def poisoned(self: TrainedRuns, batches: object) -> torch.Tensor:
        losses = original(self, batches)  # type: ignore[arg-type]
        if len(self) == 1:  # the runs trained alone below, for comparison
            return losses
        calls["n"] += 1
        if calls["n"] >= 7:
            losses = losses * torch.tensor([1.0, math.nan, 1.0])
        return losses

    monkeypatch.setattr(TrainedRuns, "losses", poisoned)
    results = train_packed(configs, [tmp_path / f"p{i}" for i in range(3)])
    assert results[1].diverged and results[1].steps == 7 and math.isnan(results[1].final_loss)
    assert torch.load(tmp_path / "p1" / "checkpoint.pt", weights_only=True)["step"] == 5
    for i in (0, 2):
        alone = train(configs[i], tmp_path / f"a{i}", progress=False)
        assert not results[i].diverged and results[i].steps == 20
        assert results[i].final_loss == pytest.approx(alone.final_loss, rel=RTOL)


def test_refusals_name_the_reason(tmp_path: Path) -> None:
    configs = _encoder_pack()
    dirs = [tmp_path / "a", tmp_path / "b"]

    def refused(configs: list[TrainConfig], message: str, out_dirs: list[Path] = dirs) -> None:
        with pytest.raises(ValueError, match=message):
            train_packed(configs, out_dirs[: len(configs)] or [tmp_path / "a"])
        assert not any(d.exists() for d in dirs)  # refused before anything is created

    refused(
        [configs[0], dataclasses.replace(configs[1], layers=2)],
        "configs cannot share one pack: .*differ only in seed, data_seed, temperature and .encoder. rank; these "
        "differ in layers",
    )
    refused([dataclasses.replace(configs[0], attention="hardmax")], "hardmax")
    refused([configs[0], configs[0]], "distinct runs")
    refused([], "non-empty")
    refused(configs[:2], "one directory per config", [tmp_path / "a"])
    refused(configs[:2], "distinct directories", [tmp_path / "a", tmp_path / "a"])


@pytest.mark.parametrize("name", ["encoder", "theory"])
def test_a_packs_fixed_tensors_live_with_its_parameters(name: str) -> None:
    """A pack's score scales are made on its parameters' device: a pack of models on another device than the CPU
    (here the data-free `meta` device, standing in for a GPU) must hold no CPU tensor. Before this was fixed, every
    packed encoder and theory run on a GPU stopped at its first step with "found at least two devices, cuda:0 and cpu"
    (the gpu-scale call of 2026-12-04)."""
    from experiments.models.factory import build_model

    configs = _encoder_pack() if name == "encoder" else _theory_pack()
    first = configs[0]
    task = make_task(first.task, first.d, first.N, first.keys, curriculum=first.curriculum)
    pack = stack_models([build_model(c, task).to("meta") for c in configs])
    fixed = {
        f"{module_name}.{key}": value
        for module_name, module in pack.named_modules()
        for key, value in vars(module).items()
        if isinstance(value, torch.Tensor)
    }
    assert fixed, "the pack holds no fixed tensor: the test checks nothing"
    assert {p.device.type for p in pack.parameters()} == {"meta"}
    assert {key: value.device.type for key, value in fixed.items()} == dict.fromkeys(fixed, "meta")


@pytest.mark.parametrize("sampler", ["cpu", "device"])
def test_a_packs_draw_is_each_runs_own_draw_bitwise(sampler: str) -> None:
    """A pack stacks its runs' samples where they were drawn and moves them at once (TrainedRuns.draw); batch k of
    the stack is bitwise the batch run k alone draws from the same generator state (the sampler's own draw)."""
    configs = [dataclasses.replace(c, sampler=sampler, data_seed=c.seed) for c in _encoder_pack()[:3]]
    runs = TrainedRuns([fresh_run(c) for c in configs])
    alone = [fresh_run(c) for c in configs]
    stacked = runs.draw(runs.task, [run.generator for run in runs.runs])
    own = [get_sampler(sampler).draw(run.task, run.config.batch_size, run.generator, run.device) for run in alone]
    assert stacked.tokens.dtype == torch.float32 and stacked.tokens.shape[0] == 3
    for k, batch in enumerate(own):
        assert torch.equal(stacked.tokens[k], batch.tokens) and torch.equal(stacked.target[k], batch.target)
    assert not torch.equal(stacked.tokens[0], stacked.tokens[1])  # each run its own stream


def test_the_device_samplers_generator_check_holds_for_a_pack() -> None:
    """The device sampler refuses a generator on another device type than the run's, alone or in a pack (a CUDA
    generator is stood in for by its device attribute: this machine may have no GPU)."""
    from types import SimpleNamespace

    configs = [dataclasses.replace(c, sampler="device") for c in _encoder_pack()[:2]]
    runs = TrainedRuns([fresh_run(c) for c in configs])
    on_gpu = SimpleNamespace(device=torch.device("cuda", 0))
    with pytest.raises(ValueError, match="the device sampler's generator is on cuda:0, the run on cpu"):
        runs.draw(runs.task, [runs.runs[0].generator, on_gpu])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="the device sampler's generator is on cuda:0, the run on cpu"):
        get_sampler("device").draw(runs.task, 4, on_gpu, torch.device("cpu"))  # type: ignore[arg-type]
