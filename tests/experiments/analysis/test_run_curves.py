"""experiments/analysis/run_curves.py: curves copied beside a store exactly, read back as untrusted input."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from experiments.analysis.run_curves import (
    CURVES_NAME,
    collect_curves,
    load_curves_file,
    read_metrics_curve,
    run_curve,
    write_curves_file,
)

A, B = "a" * 64, "b" * 64


def _metrics(run_dir: Path, losses: list[float], every: int = 50) -> None:
    run_dir.mkdir(parents=True, exist_ok=True)
    rows = ["step,loss,lr,time"] + [f"{every * (i + 1)},{loss!r},0.01,{i}" for i, loss in enumerate(losses)]
    (run_dir / "metrics.csv").write_text("\n".join(rows) + "\n", encoding="utf-8")


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


def test_run_directory_first_then_the_curves_file(tmp_path: Path) -> None:
    out, runs = tmp_path / "sweep", tmp_path / "sweep" / "runs"
    _metrics(runs / A, [0.9, 0.5])
    _metrics(runs / B, [0.8, 0.4, 0.2])
    assert collect_curves(out, runs, [A, B]) == out / CURVES_NAME
    for name in (A, B):  # the runs' directories are gone (as in a fresh clone): the committed file answers
        (runs / name / "metrics.csv").unlink()
    assert run_curve(runs, A) == ([(50, 0.9), (100, 0.5)], "", "run")
    assert run_curve(runs, B)[0] == [(50, 0.8), (100, 0.4), (150, 0.2)]
    curve, why, source = run_curve(runs, "c" * 64)
    assert curve is None and "no curve in curves.csv" in why and source == ""
    _metrics(runs / A, [0.7])  # a run directory present again wins over the file
    assert run_curve(runs, A)[0] == [(50, 0.7)]
    collect_curves(out, runs, [A, B])  # and a new collection keeps B, whose directory is gone
    assert load_curves_file(out / CURVES_NAME)[0] == {A: [(50, 0.7)], B: [(50, 0.8), (100, 0.4), (150, 0.2)]}


def test_nothing_is_written_without_a_curve(tmp_path: Path) -> None:
    assert collect_curves(tmp_path, tmp_path / "runs", [A]) is None
    assert not (tmp_path / CURVES_NAME).exists()
    assert read_metrics_curve(tmp_path / "runs" / A / "metrics.csv")[0] is None
