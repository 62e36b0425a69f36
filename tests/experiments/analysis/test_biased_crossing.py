"""experiments/analysis/biased_crossing.py: the reach rule, the grids and the trained config."""

from __future__ import annotations

import math

import pytest

from experiments.analysis.biased_crossing import (
    CrossingRow,
    construction_heads,
    crossing_ranks,
    level_status,
    reach_table,
    trained_config,
    trained_heads,
)


def row(family: str, r: int, H: int, error: float, stderr: float = 0.001, seed: int = -1, d: int = 4) -> CrossingRow:
    return CrossingRow(d, family, r, H, seed, error, stderr, 1000, error, 0, 0.0)


def test_level_status_uses_both_ends_of_the_interval() -> None:
    assert level_status(0.05, 0.01, 0.1) == "below"  # 0.05 + 0.04 <= 0.1
    assert level_status(0.07, 0.01, 0.1) == "undecided"  # 0.11 > 0.1 >= 0.03
    assert level_status(0.15, 0.01, 0.1) == "above"  # 0.11 > 0.1
    assert level_status(0.15, 0.01, 0.1, z=6.0) == "undecided"
    assert level_status(math.inf, math.inf, 0.1) == "above"
    assert level_status(math.nan, math.nan, 0.1) == "undecided"
    with pytest.raises(ValueError, match="level"):
        level_status(0.1, 0.01, 0.0)


def test_reach_table_first_h_per_family_and_rank() -> None:
    rows = [
        row("construction", 4, 8, 0.3),
        row("construction", 4, 16, 0.02),
        row("construction", 4, 33, 0.0, 0.0),
        row("constructed", 2, 66, 0.15),
        row("trained", 2, 8, 0.2, seed=0),
        row("trained", 2, 8, 0.011, seed=1),  # one seed below counts
        row("trained", 1, 8, 0.2, seed=0),
        row("trained", 1, 16, 0.2, seed=0),
        row("trained", 1, 16, 0.01, 0.01, seed=1),  # undecided, not below
    ]
    table = reach_table(rows, {4: [0.025], 6: [0.025]})
    found = {(e["family"], e["r"]): e for e in table}
    assert [(e["family"], e["r"]) for e in table] == [
        ("construction", 4),
        ("constructed", 2),
        ("trained", 2),
        ("trained", 1),
    ]
    assert found[("construction", 4)]["first_H"] == 16 and found[("construction", 4)]["max_H"] == 33
    assert found[("constructed", 2)]["first_H"] is None and found[("constructed", 2)]["above"] == 1
    assert found[("trained", 2)]["first_H"] == 8 and found[("trained", 2)]["best"] == 0.011
    assert found[("trained", 1)]["first_H"] is None
    assert found[("trained", 1)]["above"] == 2 and found[("trained", 1)]["models"] == 3
    assert reach_table(rows, {6: [0.025]}) == []  # no d = 6 rows


def test_grids_and_ranks() -> None:
    assert trained_heads(4, 16) == [4, 8, 16, 32, 64]
    assert trained_heads(6, 1) == [6]
    assert construction_heads(4, [4, 8, 16, 32, 64]) == [4, 8, 16, 17, 32, 33]
    assert crossing_ranks(6) == [6, 5, 3, 1] and crossing_ranks(2) == [2, 1]
    for d in (4, 6):
        for r in crossing_ranks(d):
            for H in trained_heads(d, 16):
                config = trained_config(d, r, H, 0, 10, 8)
                assert config.heads == H and config.rank == r and config.task == "biased"
    with pytest.raises(ValueError, match="multiple of d"):
        trained_config(6, 4, 5, 0, 10, 8)
