"""Sweep presets: every section-6 experiment at every scale resolves to valid, distinct runs with the paper's sizes."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from experiments.config import TrainConfig
from experiments.studies import PRESETS, get_preset, module_of
from experiments.studies.depth import DEPTH_INIT_P
from experiments.sweeps.preset_kit import SCALES, divisors_pow2
from experiments.sweeps.run_specs import RandomFeaturesSpec, spec_from_record, spec_kind

PAPER_PRESETS = (
    "fig1",
    "figN",
    "figd",
    "posn",
    "random-features",
    "icl",
    "bound-vs-trained",
    "conjecture6",
    "depth",
)


@pytest.mark.parametrize("name", PAPER_PRESETS)
@pytest.mark.parametrize("scale", SCALES)
def test_every_preset_resolves_and_round_trips(name: str, scale: str) -> None:
    specs = get_preset(name).runs(scale)
    assert specs
    hashes = {s.config_hash() for s in specs}
    assert len(hashes) == len(specs)
    for spec in specs:
        again = spec_from_record(spec_kind(spec), spec.to_dict())
        assert again == spec and again.config_hash() == spec.config_hash()


def test_fig1_paper_grid_is_the_papers() -> None:
    """docs/paper.md section 6 and issue 47: d = 64, N = 16, L in {1,3,5}, c in {1,8,64}, 7 ranks, data seeds 0-4 with
    one initialisation, 1000 epochs of one fixed set of 100 reference-sampler batches (100k steps, the rate stepped
    per epoch), FFN 2048; and the supplementary c = 64, L = 3 runs (r = 32, 16; batch 64; 2000 epochs; data seeds
    6-8) at lr 0.01. (tests/experiments/sweeps/test_reference_configs.py holds it equal to the reference's files.)"""
    configs = [s for s in get_preset("fig1").runs("paper") if isinstance(s, TrainConfig)]
    main = [c for c in configs if c.batch_size == 256]
    supplement = [c for c in configs if c.batch_size == 64]
    assert len(main) == 3 * 3 * 7 * 5 and len(supplement) == 2 * 3 and len(configs) == 321
    assert {c.layers for c in main} == {1, 3, 5} and {c.width for c in main} == {1, 8, 64}
    assert {c.rank for c in main} == {64, 32, 16, 8, 4, 2, 1} and {c.data_seed_value for c in main} == set(range(5))
    assert {(c.layers, c.width, c.rank, c.data_seed) for c in supplement} == {
        (3, 64, r, s) for r in (32, 16) for s in (6, 7, 8)
    }
    assert {c.seed for c in configs} == {0}  # one initialisation
    for c in configs:
        assert (c.d, c.N, c.task, c.ffn_dim, c.lr, c.betas, c.weight_decay) == (
            64,
            16,
            "farthest",
            2048,
            0.01,
            (0.9, 0.95),
            0.0,
        )
        assert (c.sampler, c.train_batches, c.log_every, c.lr_interval, c.layer_init) == (
            "reference",
            100,
            100,
            "epoch",
            "copies",
        )
        epochs = 1000 if c.batch_size == 256 else 2000
        assert (c.steps, c.schedule_steps, c.warmup_steps, c.warmup_fraction) == (
            epochs * 100,
            epochs * 100,
            epochs // 20 * 100,
            0.0,
        )


def test_fig1_fresh_grid_keeps_the_former_paper_scale() -> None:
    """The fresh-batch grid (the paper scale until issue 47): five initialisation seeds, fresh batches, per-step
    warm-up 5000 of 100k (preset_kit.paper_recipe); its runs keep their hashes (tests/.../preset_specs.json)."""
    configs = [s for s in get_preset("fig1").runs("fresh") if isinstance(s, TrainConfig)]
    assert len(configs) == 3 * 3 * 7 * 5 and {c.seed for c in configs} == set(range(5))
    assert {(c.sampler, c.train_batches, c.lr_interval, c.data_seed) for c in configs} == {("cpu", 0, "step", None)}
    assert {(c.warmup_steps, c.schedule_steps, c.layer_init, c.batch_size) for c in configs} == {
        (5_000, 100_000, "copies", 256)
    }


def test_fig1_d64_replay_differs_from_the_paper_scale_in_its_warm_up_alone() -> None:
    """fig1-d64-replay trains fig1's deciding cells in the paper's data regime with the per-step warm-up (its store
    was started before the staircase existed); with the rate stepped per epoch its runs are paper-scale runs."""
    paper = {c.config_hash() for c in get_preset("fig1").runs("paper") if isinstance(c, TrainConfig)}
    replay = [c for c in get_preset("fig1-d64-replay").runs("paper") if isinstance(c, TrainConfig)]
    assert replay and not paper & {c.config_hash() for c in replay}
    assert {replace(c, lr_interval="epoch").config_hash() for c in replay} <= paper


def test_posn_and_figN_paper_settings() -> None:
    posn = [s for s in get_preset("posn").runs("paper") if isinstance(s, TrainConfig)]
    assert {s.positional for s in posn} == {"none", "additive", "concat"}
    assert all(s.lr == 0.005 and s.steps == 200_000 and s.width == 8 for s in posn)
    assert {s.positional_dim for s in posn if s.positional == "concat"} == {64}
    fign = [s for s in get_preset("figN").runs("paper") if isinstance(s, TrainConfig)]
    assert {s.N for s in fign} == {4, 16, 64, 256} and {(s.layers, s.width) for s in fign} == {(2, 64)}


def test_random_features_paper_scale() -> None:
    specs = get_preset("random-features").runs("paper")
    solves = [s for s in specs if isinstance(s, RandomFeaturesSpec)]
    assert len(solves) == len(specs)
    assert {s.d for s in solves} == {8, 16, 32, 64}
    assert max(s.head_counts[-1] for s in solves) == 16384


def test_bad_names_list_the_allowed_ones() -> None:
    with pytest.raises(ValueError, match="fig1"):
        get_preset("fig7")
    with pytest.raises(ValueError, match="quick"):
        PRESETS["fig1"].runs("laptop")
    with pytest.raises(ValueError, match="strictly increasing"):
        RandomFeaturesSpec(d=8, head_counts=(4, 2))
    with pytest.raises(ValueError, match="unknown random-features key"):
        spec_from_record("random-features", {"d": 8, "head_counts": [1], "H": 3})


def _train_configs(name: str, scale: str) -> list[TrainConfig]:
    return [s for s in get_preset(name).runs(scale) if isinstance(s, TrainConfig)]


def test_fig1_quick_is_tuned_for_magnitude() -> None:
    """docs/tuning.md: L = 1, c = 1, full rank and lower ranks on two seeds, score temperature 128, 800 steps."""
    configs = _train_configs("fig1", "quick")
    assert {(c.layers, c.width, c.d, c.N) for c in configs} == {(1, 1, 16, 8)}
    assert {c.seed for c in configs} == {0, 1} and 16 in {c.rank for c in configs} and min(c.rank for c in configs) == 1
    assert {(c.temperature, c.steps) for c in configs} == {(128.0, 800)}


def test_fig1_cpu_has_every_rank_at_one_and_three_layers() -> None:
    configs = _train_configs("fig1", "cpu")
    d = configs[0].d
    for layers in (1, 3):
        ranks = {c.rank for c in configs if c.layers == layers and c.width == 1}
        assert ranks == set(divisors_pow2(d)), (layers, ranks)
    assert all(len({c.seed for c in configs if (c.layers, c.width, c.rank) == k}) >= 2 for k in _keys(configs))


def _keys(configs: list[TrainConfig]) -> set[tuple[int, int, int]]:
    return {(c.layers, c.width, c.rank) for c in configs}


@pytest.mark.parametrize("scale", SCALES)
def test_depth_pairs_two_layers_with_one_layer_at_equal_heads(scale: str) -> None:
    """depth: theory models on nearest neighbour (N = 2, D_2); apart from the starting-point arms (their own test)
    the runs are rank 1 and every two-layer H has a one-layer partner."""
    every = _train_configs("depth", scale)
    assert all((c.model, c.task, c.N, c.keys) == ("theory", "nearest", 2, "orthonormal") for c in every)
    configs = [c for c in every if c.init is None and c.positional_dim != DEPTH_INIT_P and c.rank == 1]
    two = {(c.heads, c.seed) for c in configs if c.layers == 2}
    one = {(c.heads, c.seed) for c in configs if c.layers == 1}
    assert two and two == one
    assert all(c.positional == "concat" and c.positional_dim > 0 for c in configs if c.layers == 2)
    assert all(c.positional == "none" for c in configs if c.layers == 1)
    assert len({h for h, _ in two}) >= 3


@pytest.mark.parametrize("scale", ["cpu", "paper"])
def test_depth_construction_arms_have_scratch_twins(scale: str) -> None:
    """Every run started from a construction has a run equal to it but for init (the same model from scratch), at the
    same schedule and seeds as the preset's other runs; the quick scale has no arms."""
    configs = _train_configs("depth", scale)
    started = [c for c in configs if c.init is not None]
    by_hash = {c.config_hash() for c in configs}
    assert {c.construction_init.name for c in started if c.construction_init} == {"majority-vote", "full-rank"}
    assert {c.init for c in started} == {
        "construction:majority-vote", "construction:majority-vote@100", "construction:full-rank",
        "construction:full-rank@100",
    }  # fmt: skip
    for c in started:
        twin = TrainConfig.from_dict({**c.to_dict(), "init": None})
        assert twin.config_hash() in by_hash, c
        assert (c.steps, c.batch_size, c.lr) == (configs[0].steps, configs[0].batch_size, configs[0].lr)
    assert {c.seed for c in started} == {c.seed for c in configs}
    majority = [c for c in started if c.layers == 2]
    assert all(c.rank == 1 and c.positional_dim == DEPTH_INIT_P and c.heads == 17 * c.width for c in majority)
    assert not [c for c in _train_configs("depth", "quick") if c.init is not None or c.positional_dim == DEPTH_INIT_P]


@pytest.mark.parametrize("name", ["fig1", "posn", "conjecture6", "icl"])
def test_gpu_scale_is_the_paper_scale_s_deciding_cells_with_fewer_steps(name: str) -> None:
    """Every gpu run is a paper run with only steps, checkpoint_every and log_every changed, steps = GPU_STEPS; both
    sides of each claim's comparison are there (two ranks, or two encodings), with two seeds each."""
    strip = ("steps", "checkpoint_every", "log_every")
    source = "fresh" if name == "fig1" else "paper"  # fig1's gpu cells are its fresh-batch grid's (issue 47)
    paper = {json.dumps({k: v for k, v in c.to_dict().items() if k not in strip}, sort_keys=True)
             for c in _train_configs(name, source)}  # fmt: skip
    gpu = _train_configs(name, "gpu")
    assert gpu and all(json.dumps({k: v for k, v in c.to_dict().items() if k not in strip}, sort_keys=True) in paper
                       for c in gpu)  # fmt: skip
    assert {c.steps for c in gpu} == {module_of(name).GPU_STEPS} and all(
        c.checkpoint_every == c.steps // 10 for c in gpu
    )
    assert {c.seed for c in gpu} == {0, 1}
    assert len({c.rank for c in gpu}) == 2 or {c.positional for c in gpu} == {"none", "concat"}


def test_conjecture6_long_temperature_control_twins_the_ladder_at_20k() -> None:
    """The temperature-1 control runs are the temperature-128 ladder's 20k runs with only the temperature changed, and
    the scaling rules (stated for the ladder) never read them."""
    from dataclasses import replace

    from experiments.studies import SCALING_RULES
    from experiments.sweeps.grading import matches

    specs = [s for s in get_preset("conjecture6").runs("long") if isinstance(s, TrainConfig)]
    control = [s for s in specs if s.temperature == 1.0]
    ladder_20k = {s.config_hash() for s in specs if s.temperature == 128.0 and s.steps == 20_000}
    assert len(control) == 8
    assert {replace(s, temperature=128.0).config_hash() for s in control} == ladder_20k
    for rule in SCALING_RULES["conjecture6"]:
        for s in control:
            record = {**s.to_dict(), "kind": "train"}
            assert not matches(record, rule.worse) and not matches(record, rule.better)
        twins = [{**s.to_dict(), "kind": "train"} for s in specs if s.temperature == 128.0]
        assert any(matches(r, rule.worse) for r in twins) and any(matches(r, rule.better) for r in twins)
