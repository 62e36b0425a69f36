"""Tests of experiments/config.py: validation, round trips, hashes that never change, no torch at import."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from experiments.config import CURVE_SAMPLES, EVALUATION_SAMPLES, Curriculum, TrainConfig


def test_config_round_trip_and_hash() -> None:
    config = TrainConfig(task="nearest", d=8, N=2, keys="orthonormal", rank=2, width=2, lr=0.003)
    again = TrainConfig.from_dict(json.loads(json.dumps(config.to_dict())))
    assert again == config and again.config_hash() == config.config_hash()
    assert config.heads == 8  # c d / r = 2 * 8 / 2
    assert dataclasses.replace(config, device="cpu").config_hash() == config.config_hash()  # execution knob
    assert dataclasses.replace(config, seed=1).config_hash() != config.config_hash()


def test_paper_defaults() -> None:
    c = TrainConfig()
    assert (c.lr, c.betas, c.weight_decay, c.warmup_fraction, c.batch_size) == (0.01, (0.9, 0.95), 0.0, 0.05, 256)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"rank": 17}, "rank must be an integer in \\[1, 16\\]"),
        ({"rank": 3}, "rank must divide d = 16"),
        ({"task": "sorting"}, "task must be one of"),
        ({"lr": 0.0}, "lr must be"),
        ({"betas": (0.9, 1.0)}, "betas\\[1\\]"),
        ({"positional": "concat"}, "positional_dim must be >= 1"),
        ({"positional_dim": 4}, "positional_dim must be 0"),
        ({"task": "nearest", "keys": "orthonormal", "N": 17}, "N must be <= d"),
        ({"task": "icl", "model": "theory"}, "icl"),
        ({"model": "gpt2", "positional": "additive"}, "embed_dim must be >= 1 for model 'gpt2'"),
        ({"model": "gpt2", "embed_dim": 32}, "positional must be 'additive' for model 'gpt2'"),
        ({"model": "gpt2", "embed_dim": 30, "positional": "additive", "rank": 4}, "rank must divide embed_dim = 30"),
        ({"embed_dim": 32}, "embed_dim must be 0 unless model is 'gpt2'"),
        ({"device": "tpu"}, "device must be"),
        ({"bf16": 1}, "bf16 must be true or false"),
        ({"steps": 0}, "steps must be"),
        ({"steps": 200, "schedule_steps": 100}, "schedule_steps must be 0 .* or >= steps = 200, got 100"),
        ({"schedule_steps": -1}, "schedule_steps must be"),
        ({"warmup_steps": 50}, "warmup_steps and warmup_fraction are exclusive"),
        ({"warmup_steps": 2000, "warmup_fraction": 0.0}, "warmup_steps must be < the schedule's length 2000"),
        ({"warmup_steps": -5, "warmup_fraction": 0.0}, "warmup_steps must be"),
        ({"layer_init": "shared"}, "layer_init must be one of"),
        ({"eval_samples": 1}, "eval_samples must be an integer >= 2, got 1"),
        ({"eval_samples": 10**12}, "eval_samples must be an integer in \\[2, "),
        ({"eval_samples": 64.5}, "eval_samples must be an integer"),
        ({"layer_init": "copies", "model": "theory"}, "layer_init must be 'independent' unless model is 'encoder'"),
    ],
)
def test_invalid_configs(changes: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        dataclasses.replace(TrainConfig(), **changes)


def test_unknown_key_is_an_error() -> None:
    with pytest.raises(ValueError, match="unknown config key\\(s\\): colour"):
        TrainConfig.from_dict({"colour": "red"})


def test_config_hash_of_0_1_0_configs_is_unchanged() -> None:
    """embed_dim and the curriculum fields (added after 0.1.0) enter the hash only when set, so result stores written
    by 0.1.0 still match."""
    config = TrainConfig()
    later = ("embed_dim", "curriculum_dims", "curriculum_points", "curriculum_dims_increment")
    later += ("curriculum_points_increment", "curriculum_interval", "warmup_steps", "schedule_steps", "layer_init")
    later += ("sampler", "matmul_precision", "capture", "train_batches", "data_seed", "lr_interval", "eval_samples")
    old_fields = {k: v for k, v in config.to_dict().items() if k not in ("device", "checkpoint_every", *later)}
    old_hash = hashlib.sha256(json.dumps(old_fields, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    assert config.config_hash() == old_hash
    gpt2 = dataclasses.replace(config, model="gpt2", embed_dim=16, positional="additive")
    assert gpt2.config_hash() != dataclasses.replace(gpt2, embed_dim=32).config_hash()


def test_config_hashes_are_pinned() -> None:
    """Hashes recorded before experiments/config.py existed (result stores key runs by them): byte-identical."""
    assert TrainConfig().config_hash() == "0b743d1bec279967ee4cd6b15f43376740e5a63cfa23cef1108e5dfe195e22e2"
    gpt2 = TrainConfig(model="gpt2", embed_dim=16, positional="additive", task="icl", N=4)
    assert gpt2.config_hash() == "ec119e02e49b5c33da7b45de72235a0bb1adb5ac52c2814e1094aaee0aa858ec"


def test_importing_the_config_does_not_load_torch() -> None:
    """Presets and the command line build configs without paying for torch (a fresh interpreter)."""
    code = "import sys, experiments.config; assert 'torch' not in sys.modules, 'torch was imported'"
    subprocess.run([sys.executable, "-c", code], check=True)


# ------------------------------------------------------------------------------------------------ the icl curriculum
ICL = {"task": "icl", "model": "gpt2", "embed_dim": 16, "positional": "additive", "d": 8, "N": 10, "steps": 3000}
CURRICULUM = {"curriculum_dims": 2, "curriculum_points": 4, "curriculum_interval": 200}


def test_curriculum_round_trip_and_hash() -> None:
    config = TrainConfig.from_dict({**ICL, **CURRICULUM})
    again = TrainConfig.from_dict(json.loads(json.dumps(config.to_dict())))
    assert again == config and again.config_hash() == config.config_hash()
    assert again.curriculum == config.curriculum is not None
    plain = TrainConfig.from_dict(ICL)
    assert plain.curriculum is None and plain.config_hash() != config.config_hash()
    # Every schedule field is part of the run's identity once a curriculum is on.
    for name, value in (
        ("curriculum_dims", 3),
        ("curriculum_points", 5),
        ("curriculum_dims_increment", 2),
        ("curriculum_points_increment", 1),
        ("curriculum_interval", 100),
    ):
        assert dataclasses.replace(config, **{name: value}).config_hash() != config.config_hash(), name


def test_curriculum_fields_at_their_defaults_leave_the_hash_unchanged() -> None:
    """The hash of a config without a curriculum is computed as before the fields existed (written out here)."""
    config = TrainConfig.from_dict(ICL)
    new_fields = ("curriculum_dims", "curriculum_points", "curriculum_dims_increment")
    new_fields += ("curriculum_points_increment", "curriculum_interval", "warmup_steps", "schedule_steps", "layer_init")
    new_fields += (
        "sampler",
        "matmul_precision",
        "capture",
        "train_batches",
        "data_seed",
        "lr_interval",
        "eval_samples",
    )
    before = {k: v for k, v in config.to_dict().items() if k not in ("device", "checkpoint_every", *new_fields)}
    digest = hashlib.sha256(json.dumps(before, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    assert config.config_hash() == digest


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"curriculum_dims": 9}, "curriculum_dims must be an integer in \\[0, 8\\], got 9"),
        ({"curriculum_dims": -1}, "curriculum_dims must be an integer in \\[0, 8\\]"),
        ({"curriculum_points": 11}, "curriculum_points must be an integer in \\[0, 10\\], got 11"),
        ({"curriculum_dims": 2, "curriculum_interval": 0}, "curriculum_interval must be an integer >= 1"),
        ({"curriculum_dims": 2, "curriculum_dims_increment": 0}, "curriculum_dims_increment must be"),
        ({"curriculum_points": 2, "curriculum_points_increment": 0.5}, "curriculum_points_increment must be"),
        ({"curriculum_interval": 500}, "curriculum_interval applies only to a curriculum"),
        ({"curriculum_dims_increment": 2}, "curriculum_dims_increment applies only to a curriculum"),
        # dims 2 -> 8 in +1 stages of 600 steps: the full task only from step 3600 > 3000 steps.
        ({"curriculum_dims": 2, "curriculum_interval": 600}, "only at step 3600 .* steps must be >= 3650, got 3000"),
        # stages of 496 steps: full task from step 2976, less than one epoch (log_every 50) before the end.
        ({"curriculum_dims": 2, "curriculum_interval": 496}, "only at step 2976 .* must be >= 3026, got 3000"),
    ],
)
def test_invalid_curricula(changes: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        TrainConfig.from_dict({**ICL, **changes})


def test_curriculum_may_end_exactly_one_epoch_before_the_last_step() -> None:
    config = TrainConfig.from_dict({**ICL, "curriculum_dims": 2, "curriculum_interval": 495, "log_every": 30})
    assert config.curriculum is not None and config.curriculum.end_step == 2970 == config.steps - config.log_every
    with pytest.raises(ValueError, match="must be >= 3020, got 3000"):
        dataclasses.replace(config, log_every=50)
    assert dataclasses.replace(config, log_every=10).curriculum == config.curriculum


def test_curriculum_only_for_icl() -> None:
    with pytest.raises(ValueError, match="curriculum_dims and curriculum_points must be 0 unless task is 'icl'"):
        TrainConfig(task="farthest", d=16, N=8, curriculum_points=4, curriculum_interval=100)


def _simulated_stages(curriculum: Curriculum, steps: int) -> list[tuple[int, int]]:
    """Garg et al.'s update rule step by step: after every interval-th step, grow each axis by its increment, capped."""
    dims, points, stages = curriculum.dims, curriculum.points, []
    for step in range(steps):
        stages.append((dims, points))
        if (step + 1) % curriculum.interval == 0:
            dims = min(curriculum.d, dims + curriculum.dims_increment)
            points = min(curriculum.N, points + curriculum.points_increment)
    return stages


@given(
    d=st.integers(2, 12),
    N=st.integers(1, 12),
    data=st.data(),
)
def test_curriculum_schedule_matches_the_update_rule(d: int, N: int, data: st.DataObject) -> None:
    curriculum = Curriculum(
        d=d,
        N=N,
        dims=data.draw(st.integers(1, d)),
        points=data.draw(st.integers(1, N)),
        dims_increment=data.draw(st.integers(1, 3)),
        points_increment=data.draw(st.integers(1, 3)),
        interval=data.draw(st.integers(1, 5)),
    )
    steps = curriculum.end_step + 2 * curriculum.interval
    simulated = _simulated_stages(curriculum, steps)
    assert [(curriculum.dims_at(s), curriculum.points_at(s)) for s in range(steps)] == simulated
    # end_step is the first step of the full task, and the full task stays.
    full = [s for s, stage in enumerate(simulated) if stage == (d, N)]
    assert full[0] == curriculum.end_step and full == list(range(curriculum.end_step, steps))


def test_garg_curriculum_reaches_the_full_task_at_step_30000() -> None:
    """docs/paper.md section 6: dimensions 5 -> 20 (+1) and points 11 -> 41 (+2) every 2000 steps: 15 stages each."""
    garg = TrainConfig.from_dict(
        {**ICL, "d": 20, "N": 41, "steps": 500_000, "curriculum_dims": 5, "curriculum_points": 11}
    ).curriculum
    assert garg is not None and (garg.dims_increment, garg.points_increment, garg.interval) == (1, 2, 2000)
    assert garg.end_step == 30_000
    assert (garg.dims_at(29_999), garg.points_at(29_999)) == (19, 39)
    assert (garg.dims_at(0), garg.points_at(0), garg.dims_at(2000), garg.points_at(2000)) == (5, 11, 6, 13)


def test_curriculum_on_one_axis_keeps_the_other_full() -> None:
    config = TrainConfig.from_dict({**ICL, "curriculum_points": 4, "curriculum_interval": 100})
    curriculum = config.curriculum
    assert curriculum is not None and curriculum.dims == 8
    assert [curriculum.points_at(s) for s in (0, 99, 100, 200, 300, 10_000)] == [4, 4, 6, 8, 10, 10]
    assert curriculum.end_step == 300


def test_schedule_length_and_warmup_length() -> None:
    """The schedule is schedule_steps long when set, else steps; the warm-up is warmup_steps when set, else the
    fraction of the schedule's length (so a prefix run warms up as the whole run would)."""
    plain = TrainConfig(steps=2000)
    assert (plain.schedule_length, plain.warmup_length) == (2000, 100)
    prefix = TrainConfig(steps=2000, schedule_steps=10_000)
    assert (prefix.schedule_length, prefix.warmup_length) == (10_000, 500)
    paper = TrainConfig(steps=20_000, schedule_steps=100_000, warmup_steps=5000, warmup_fraction=0.0)
    assert (paper.schedule_length, paper.warmup_length) == (100_000, 5000)


def test_extends_only_a_shorter_run_of_the_same_named_schedule() -> None:
    short = TrainConfig(steps=200, schedule_steps=1000, log_every=50)
    longer = dataclasses.replace(short, steps=600)
    assert longer.extends(short) and not short.extends(longer) and not short.extends(short)
    assert dataclasses.replace(longer, device="cpu", checkpoint_every=7).extends(short)  # execution fields are free
    assert not dataclasses.replace(longer, lr=0.005).extends(short)  # another run
    assert not dataclasses.replace(longer, schedule_steps=2000).extends(short)  # another schedule
    unnamed = TrainConfig(steps=200)  # schedule_steps 0: the schedule ends at steps, so more steps is another run
    assert not dataclasses.replace(unnamed, steps=600).extends(unnamed)


def test_eval_samples_enters_the_hash_only_when_set_and_bounds_the_curve() -> None:
    """A run scored on fewer held-out samples records another population error, so it is another run; at the default
    it hashes as before the field existed. The curve's points never use more samples than the evaluation."""
    config = TrainConfig()
    assert config.eval_samples == EVALUATION_SAMPLES and config.curve_samples() == CURVE_SAMPLES < EVALUATION_SAMPLES
    coarse = dataclasses.replace(config, eval_samples=64)
    assert coarse.config_hash() != config.config_hash() and coarse.curve_samples() == 64
    assert dataclasses.replace(config, eval_samples=64.0).config_hash() == coarse.config_hash()  # 64.0 is 64
    assert TrainConfig.from_dict(coarse.to_dict()) == coarse
    stored = {k: v for k, v in config.to_dict().items() if k != "eval_samples"}  # a spec stored before the field
    assert TrainConfig.from_dict(stored).config_hash() == config.config_hash()


def test_schedule_and_layer_init_fields_enter_the_hash_only_when_set() -> None:
    config = TrainConfig(steps=2000)
    for changes in ({"schedule_steps": 4000}, {"warmup_steps": 100, "warmup_fraction": 0.0}, {"layer_init": "copies"}):
        assert dataclasses.replace(config, **changes).config_hash() != config.config_hash(), changes
