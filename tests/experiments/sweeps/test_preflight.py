"""A sweep's preflight: its arguments are refused by name and its memory is estimated before anything is written.

The memory estimate is checked against independent quantities: the parameter count of the model the factory really
builds (the estimate must hold four float32 copies of it: weights, gradients and AdamW's two moments), and counts of
runs in flight worked out by hand for each grouping.
"""

from __future__ import annotations

import dataclasses
import errno
from pathlib import Path

import pytest
import torch

import experiments.training.memory as memory
from experiments.config import TrainConfig
from experiments.models.factory import build_model
from experiments.studies import get_preset, run_sweep
from experiments.sweeps.grouping import MAX_PACK
from experiments.sweeps.preflight import WORKER_BYTES, SweepRequest, check_sweep_request, runs_in_flight, sweep_bytes
from experiments.sweeps.run_specs import RandomFeaturesSpec
from experiments.tasks import make_task
from experiments.training.memory import training_bytes

SMALL = TrainConfig(task="farthest", d=4, N=3, rank=2, ffn_dim=8, steps=2, batch_size=4, device="cpu")


@pytest.mark.parametrize(
    "config",
    [
        SMALL,
        dataclasses.replace(SMALL, d=16, N=8, rank=1, width=4, layers=3, ffn_dim=256, batch_size=128),
        dataclasses.replace(
            SMALL, task="icl", d=8, N=6, rank=8, model="gpt2", positional="additive", embed_dim=32, ffn_dim=64
        ),
    ],
)
def test_the_training_estimate_holds_the_real_parameters_four_times(config: TrainConfig) -> None:
    task = make_task(config.task, config.d, config.N, config.keys)
    parameters = sum(p.numel() for p in build_model(config, task).parameters())
    assert training_bytes(config) >= 4 * 4 * parameters, (training_bytes(config), parameters)


def test_runs_in_flight_follow_the_units_of_each_grouping() -> None:
    cells = [dataclasses.replace(SMALL, d=d, seed=s) for d in (4, 6) for s in range(5)]  # 2 cells x 5 seeds
    assert runs_in_flight(cells, 1, pack=False, batch_seeds=False) == 1
    assert runs_in_flight(cells, 3, pack=False, batch_seeds=False) == 3
    assert runs_in_flight(cells, 1, pack=False, batch_seeds=True) == 5  # one cell's seeds at once
    assert runs_in_flight(cells, 1, pack=True, batch_seeds=False) == min(5, MAX_PACK)  # d differs: two packs
    same_cell = [dataclasses.replace(SMALL, seed=s) for s in range(MAX_PACK + 3)]
    assert runs_in_flight(same_cell, 1, pack=True, batch_seeds=False) == MAX_PACK  # a pack holds at most MAX_PACK
    assert runs_in_flight(cells, 100, pack=False, batch_seeds=False) == 10  # never more than the sweep's runs


def test_sweep_bytes_adds_the_largest_runs_in_flight_and_the_workers() -> None:
    runs = [SMALL, dataclasses.replace(SMALL, d=8, rank=8), dataclasses.replace(SMALL, ffn_dim=512)]
    sizes = sorted((training_bytes(c) for c in runs), reverse=True)
    assert sweep_bytes(runs, 1, pack=False, batch_seeds=False) == sizes[0] + WORKER_BYTES
    assert sweep_bytes(runs, 2, pack=False, batch_seeds=False) == sizes[0] + sizes[1] + 2 * WORKER_BYTES
    features = RandomFeaturesSpec(d=3, head_counts=(10, 1000))
    assert sweep_bytes([features], 4, pack=True, batch_seeds=False) == 8.0 * (6 * 1000**2 + 2 * 1000 * 3) + WORKER_BYTES


def test_a_request_that_fits_passes_and_creates_nothing(tmp_path: Path) -> None:
    check_sweep_request(SweepRequest(get_preset("smoke"), "quick", tmp_path / "sweep", workers=2))
    assert list(tmp_path.iterdir()) == []


def test_a_sweep_that_cannot_fit_is_refused_before_anything_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    needed = sweep_bytes(get_preset("smoke").runs("quick"), 2, pack=True, batch_seeds=False)
    monkeypatch.setattr(memory, "available_memory", lambda: int(needed) - 1)  # one byte short
    out = tmp_path / "sweep"
    with pytest.raises(ValueError, match=r"^workers: 6 runs in flight \(2 worker processes.*more than the"):
        run_sweep("smoke", "quick", out, workers=2, progress=False)
    assert not out.exists()
    monkeypatch.setattr(memory, "available_memory", lambda: int(needed) + 1)  # the control: one byte more fits
    check_sweep_request(SweepRequest(get_preset("smoke"), "quick", out, workers=2))


@pytest.mark.parametrize(
    "arguments, error, name",
    [
        ({"preset": "nope"}, ValueError, "preset"),
        ({"scale": "paper"}, ValueError, "scale"),  # smoke has only quick
        ({"backend": "slurm"}, ValueError, "backend"),
        ({"workers": 0}, ValueError, "workers"),
        ({"workers": "2"}, ValueError, "workers"),
        ({"address": "localhost:1"}, ValueError, "address"),  # only with backend ray
        ({"address": 6379}, TypeError, "address"),
        ({"overrides": [("steps", 3)]}, TypeError, "overrides"),
        ({"overrides": {1: 3}}, TypeError, "overrides"),
        ({"overrides": {"stepz": 3}}, ValueError, "overrides"),
        ({"overrides": {"steps": -3}}, ValueError, "overrides: steps"),
        ({"progress": None}, TypeError, "progress"),
        ({"batch_seeds": 1}, TypeError, "batch_seeds"),
        ({"pack": "no"}, TypeError, "pack"),
        ({"rebuild": 0}, TypeError, "rebuild"),
        ({"out": None}, TypeError, "out"),
        ({"out": ""}, ValueError, "out"),
    ],
)
def test_each_bad_argument_is_refused_by_name(tmp_path: Path, arguments: dict, error: type, name: str) -> None:
    request = {"preset": "smoke", "scale": "quick", "out": tmp_path / "sweep", "workers": 1, **arguments}
    with pytest.raises(error) as caught:
        run_sweep(**request)
    assert str(caught.value).startswith(name), str(caught.value)
    assert list(tmp_path.iterdir()) == []


def test_an_out_that_is_a_file_is_refused_as_the_file_system_would(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(NotADirectoryError) as caught:
        run_sweep("smoke", "quick", blocker, workers=1)
    assert caught.value.errno == errno.ENOTDIR and caught.value.strerror.startswith("out ")
    assert blocker.read_text() == "x"


def test_runs_on_a_gpu_are_not_counted_against_this_machines_memory() -> None:
    on_gpu = dataclasses.replace(SMALL, device="cuda")
    assert sweep_bytes([on_gpu], 1, pack=False, batch_seeds=False) == WORKER_BYTES
    auto = dataclasses.replace(SMALL, device="auto")
    expected = WORKER_BYTES + (0.0 if torch.cuda.is_available() else training_bytes(auto))
    assert sweep_bytes([auto], 1, pack=False, batch_seeds=False) == expected
