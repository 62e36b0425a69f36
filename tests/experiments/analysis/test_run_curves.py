"""experiments/analysis/run_curves.py: curves copied beside a store exactly, read back as untrusted input."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from experiments.analysis.run_curves import load_curves_file, write_curves_file
from experiments.analysis.sweep_directory import CURVES_NAME

A, B = "a" * 64, "b" * 64


@given(st.lists(st.floats(min_value=1e-300, max_value=1e300), min_size=1, max_size=20))
def test_losses_round_trip_exactly(tmp_path_factory: pytest.TempPathFactory, losses: list[float]) -> None:
    path = tmp_path_factory.mktemp("curves") / CURVES_NAME
    curve = [(10 * (i + 1), loss) for i, loss in enumerate(losses)]
    write_curves_file(path, {A: curve}, {A: "run"})
    assert load_curves_file(path) == ({A: curve}, {A: "run"})


def test_the_file_is_sorted_and_deterministic(tmp_path: Path) -> None:
    first, second = tmp_path / "1.csv", tmp_path / "2.csv"
    curves = {B: [(1, 0.5), (2, 0.25)], A: [(5, math.inf)]}
    write_curves_file(first, curves, {A: "run", B: "re-run abc: x"})
    write_curves_file(second, dict(reversed(list(curves.items()))), {B: "re-run abc: x", A: "run"})
    assert first.read_bytes() == second.read_bytes()
    assert first.read_text().splitlines()[1].startswith(A)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("step,loss\n", "header must be"),
        (f"hash,step,loss,source\n{A},1,0.5\n", "4 fields expected"),
        ("hash,step,loss,source\nxyz,1,0.5,run\n", "field hash"),
        (f"hash,step,loss,source\n{A},one,0.5,run\n", "fields step (int) and loss (float)"),
        (f"hash,step,loss,source\n{A},1,0.5,run\n{A},2,0.4,re-run\n", "two sources"),
        (f"hash,step,loss,source\n{A},2,0.5,run\n{A},1,0.4,run\n", "increasing"),
        (f"hash,step,loss,source\n{A},0,0.5,run\n", "increasing and >= 1"),
    ],
)
def test_a_malformed_file_is_refused_naming_file_and_line(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / CURVES_NAME
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ValueError, match=re.escape(message)) as caught:
        load_curves_file(path)
    assert str(path) in str(caught.value)
