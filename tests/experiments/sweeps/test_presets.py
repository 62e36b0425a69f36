"""Sweep presets: every section-6 experiment at every scale resolves to valid, distinct runs with the paper's sizes."""

from __future__ import annotations

import pytest

from experiments.sweeps.presets import PRESETS, SCALES, RandomFeaturesSpec, get_preset, spec_from_record, spec_kind
from experiments.training.loop import TrainConfig

PAPER_PRESETS = ("fig1", "figN", "figd", "posn", "random-features", "icl", "bound-vs-trained", "conjecture6")


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
    """PAPER.md section 6: d = 64, N = 16, L in {1,3,5}, c in {1,8,64}, 7 ranks, 5 seeds, 100k steps, FFN 2048."""
    specs = get_preset("fig1").runs("paper")
    assert all(isinstance(s, TrainConfig) for s in specs)
    configs = [s for s in specs if isinstance(s, TrainConfig)]
    assert len(configs) == 3 * 3 * 7 * 5
    assert {c.layers for c in configs} == {1, 3, 5} and {c.width for c in configs} == {1, 8, 64}
    assert {c.rank for c in configs} == {64, 32, 16, 8, 4, 2, 1} and {c.seed for c in configs} == set(range(5))
    c = configs[0]
    assert (c.d, c.N, c.task, c.steps, c.batch_size, c.ffn_dim, c.lr, c.betas, c.weight_decay, c.warmup_fraction) == (
        64,
        16,
        "farthest",
        100_000,
        256,
        2048,
        0.01,
        (0.9, 0.95),
        0.0,
        0.05,
    )


def test_posn_and_figN_paper_settings() -> None:
    posn = [s for s in get_preset("posn").runs("paper") if isinstance(s, TrainConfig)]
    assert {s.positional for s in posn} == {"none", "additive", "concat"}
    assert all(s.lr == 0.005 and s.steps == 200_000 and s.width == 8 for s in posn)
    assert {s.positional_dim for s in posn if s.positional == "concat"} == {64}
    fign = [s for s in get_preset("figN").runs("paper") if isinstance(s, TrainConfig)]
    assert {s.N for s in fign} == {4, 16, 64, 256} and {(s.layers, s.width) for s in fign} == {(2, 64)}


def test_random_features_paper_scale() -> None:
    specs = get_preset("random-features").runs("paper")
    assert all(isinstance(s, RandomFeaturesSpec) for s in specs)
    assert {s.d for s in specs} == {8, 16, 32, 64}
    assert max(s.head_counts[-1] for s in specs) == 16384


def test_bad_names_list_the_allowed_ones() -> None:
    with pytest.raises(ValueError, match="fig1"):
        get_preset("fig7")
    with pytest.raises(ValueError, match="quick"):
        PRESETS["fig1"].runs("laptop")
    with pytest.raises(ValueError, match="strictly increasing"):
        RandomFeaturesSpec(d=8, head_counts=(4, 2))
    with pytest.raises(ValueError, match="unknown random-features key"):
        spec_from_record("random-features", {"d": 8, "head_counts": [1], "H": 3})
