"""The learning rate stepped once per epoch (``lr_interval="epoch"``), as the reference's scheduler is (issue 49).

The reference hands a linear-warm-up-and-cosine scheduler to Lightning, which steps it at the end of every epoch. Its
scheduler writes each epoch's rate from the previous one (a recursion); ours computes the closed form
(`experiments.training.schedule.epoch_lr_factor`). The recursion is restated here from its definition, in our words:

    rate_0 = 0;  rate_e = rate_{e-1} + peak / (W - 1) for 0 < e < W;  rate_W = peak;
    rate_e = rate_{e-1} (1 + cos(pi (e - W) / (E - W))) / (1 + cos(pi (e - W - 1) / (E - W))) for e > W,

with the floor eta_min = lr // 10 = 0. The closed form must equal it to rounding: over E = 1000 epochs the recursion
accumulates at most about 1000 float64 roundings of a number <= 1, so 1e-12 (~4500 ulps of 1) bounds the difference.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import sqlite3
from pathlib import Path

import pytest
import torch

from experiments.config import TrainConfig
from experiments.training.loop import train
from experiments.training.schedule import epoch_lr_factor, make_optimizer
from tests.experiments.training.test_schedule_extension import assert_same_runs, metrics_rows


def reference_recursion(epochs: int, warmup: int, peak: float) -> list[float]:
    """The reference scheduler's rates per epoch, by its recursion (module docstring)."""
    rates = [0.0]
    for e in range(1, epochs):
        if e < warmup:
            rates.append(rates[-1] + peak / (warmup - 1))
        elif e == warmup:
            rates.append(peak)
        else:
            span = epochs - warmup
            ratio = (1 + math.cos(math.pi * (e - warmup) / span)) / (1 + math.cos(math.pi * (e - warmup - 1) / span))
            rates.append(rates[-1] * ratio)
    return rates


@pytest.mark.parametrize(("epochs", "warmup"), [(1000, 50), (2000, 100), (20, 1), (60, 3)])
def test_the_closed_form_equals_the_reference_recursion(epochs: int, warmup: int) -> None:
    K = 7  # steps per epoch: every step of an epoch has its epoch's rate
    expected = reference_recursion(epochs, warmup, 1.0)
    for e, rate in enumerate(expected):
        for step in (e * K, e * K + K - 1):
            assert epoch_lr_factor(step, K, epochs * K, warmup * K) == pytest.approx(rate, rel=0, abs=1e-12), e


def test_the_staircase_starts_at_zero_and_peaks_at_the_last_warm_up_epoch() -> None:
    """At the paper's values (1000 epochs of 100 steps, warm-up 50 epochs): 0 for the first 100 steps, then steps of
    1/49, the peak from epoch 49 (step 4900) on, the cosine after epoch 50, near 0 in the last epoch."""
    factor = [epoch_lr_factor(s, 100, 100_000, 5_000) for s in range(0, 100_000, 50)]
    assert factor[0] == factor[1] == 0.0  # steps 0 and 50: epoch 0
    assert factor[2] == pytest.approx(1 / 49)  # step 100: epoch 1
    assert factor[98] == factor[100] == 1.0  # steps 4900 and 5000: epochs 49 and 50
    assert factor[102] < 1.0 and factor[-1] == pytest.approx((1 + math.cos(math.pi * 949 / 950)) / 2)


def test_the_optimizer_steps_the_staircase() -> None:
    """Through torch's scheduler as a run uses it: the rate of every step of an epoch is that epoch's."""
    config = TrainConfig(
        d=4, N=3, rank=4, ffn_dim=8, steps=60, log_every=5, warmup_steps=15, warmup_fraction=0.0, lr_interval="epoch"
    )
    parameter = torch.zeros(1, requires_grad=True)
    optimizer, scheduler = make_optimizer([parameter], config)
    rates = []
    for _ in range(config.steps):
        rates.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
    epochs = reference_recursion(12, 3, config.lr)
    assert rates == pytest.approx([epochs[s // 5] for s in range(60)], rel=0, abs=1e-15)
    assert rates[:5] == [0.0] * 5 and rates[5] == pytest.approx(0.005) and rates[10] == rates[15] == config.lr


def test_the_default_keeps_every_hash_and_the_option_changes_it() -> None:
    """Runs stored before the field existed (the committed replay store) keep their keys; setting it makes a new run."""
    store = Path(__file__).resolve().parents[3] / "results" / "fig1-d64-replay-cpu" / "results.sqlite"
    with contextlib.closing(sqlite3.connect(f"file:{store}?mode=ro", uri=True)) as connection:
        rows = connection.execute("SELECT hash, spec FROM runs").fetchall()
    assert rows
    for key, text in rows:
        spec = json.loads(text)
        config = TrainConfig.from_dict({k: v for k, v in spec.items() if k != "lr_interval"})
        assert config.lr_interval == "step" and config.config_hash() == key
        assert dataclasses.replace(config, lr_interval="epoch").config_hash() != key


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"lr_interval": "batch"}, "lr_interval must be one of"),
        ({"lr_interval": "epoch", "steps": 95}, "schedule_steps must be a whole number of epochs"),
        ({"lr_interval": "epoch", "warmup_fraction": 0.05}, "warmup_steps must be a whole number of epochs"),
        ({"lr_interval": "epoch", "warmup_steps": 15, "warmup_fraction": 0.0}, "got 15 steps"),
    ],
)
def test_a_staircase_that_splits_an_epoch_is_refused(fields: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        TrainConfig(**{"d": 4, "N": 3, "rank": 4, "steps": 100, "log_every": 10, **fields})


def test_a_staircase_run_extends_bitwise(tmp_path: Path) -> None:
    """A prefix of a per-epoch schedule, extended, is the uninterrupted run (checkpoints mid-epoch included)."""
    prefix = TrainConfig(
        task="farthest",
        d=4,
        N=3,
        rank=4,
        ffn_dim=16,
        steps=60,
        schedule_steps=100,
        warmup_steps=15,
        warmup_fraction=0.0,
        lr_interval="epoch",
        batch_size=16,
        log_every=5,
        checkpoint_every=23,
        device="cpu",
    )
    whole = dataclasses.replace(prefix, steps=100)
    train(whole, tmp_path / "whole", progress=False)
    train(prefix, tmp_path / "extended", progress=False)
    train(whole, tmp_path / "extended", progress=False)
    assert_same_runs(tmp_path / "whole", tmp_path / "extended")
    rates = [float(row[2]) for row in metrics_rows(tmp_path / "whole")[1:]]
    assert rates[0] == 0.0 and rates[1] == pytest.approx(prefix.lr / 2) and rates[2] == rates[3] == prefix.lr
