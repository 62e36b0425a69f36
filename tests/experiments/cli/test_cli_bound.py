"""CLI tests of `attnrank bound`, `attnrank min-heads` and `attnrank construct full-rank` (through cli.main)."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest

from constructions.weights_io import load_weights
from experiments.cli.main import main
from theory.bounds import full_rank_error, min_heads, rank_lower_bound


def _json(capsys, argv):
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


def test_bound_json(capsys):
    out = _json(capsys, ["bound", "--d", "64", "--rank", "8", "--heads", "512", "--json"])
    assert (out["d"], out["r"], out["H"]) == (64, 8, 512)
    assert (out["lower_bound"], out["upper_bound"]) == tuple(rank_lower_bound(64, 8, 512))
    assert 0.0 < out["lower_bound"] <= out["upper_bound"] <= 0.5


def test_bound_accepts_scientific_notation_exactly(capsys):
    out = _json(capsys, ["bound", "--d", "64", "--rank", "8", "--heads", "1e300", "--json"])
    assert out["H"] == 10**300 and isinstance(out["H"], int)
    assert out["log10_H"] == 300.0


def test_bound_text_output(capsys):
    assert main(["bound", "--d", "16", "--rank", "2", "--heads", "8"]) == 0
    text = capsys.readouterr().out
    assert "lower_bound" in text and "upper_bound" in text
    # The interval encloses the lower bound B(d, r, H); the text must not read as bounds on the error itself.
    assert "brackets Theorem 2's certified LOWER bound on the error" in text and "not the error itself" in text


def test_bound_json_interval_brackets_the_lower_bound(capsys):
    out = _json(capsys, ["bound", "--d", "32", "--rank", "4", "--heads", "1e6", "--json"])
    lo, hi = out["interval"]
    assert [lo, hi] == [out["lower_bound"], out["upper_bound"]] and lo <= hi
    assert {"lower_bound", "upper_bound", "d", "r", "H", "log10_H"} <= set(out)


def test_min_heads_json_is_valid_with_huge_counts(capsys):
    out = _json(capsys, ["min-heads", "--d", "64", "--rank", "8", "--eps", "0.01", "--json"])
    assert out["heads"] == min_heads(64, 8, 0.01)
    assert out["log10_heads"] == pytest.approx(math.log10(out["heads"]))
    assert out["log10_heads"] > 30
    assert out["lower_bound_at_heads"] <= 0.01 < out["lower_bound_below"]


def test_construct_full_rank(capsys, tmp_path):
    path = tmp_path / "full.safetensors"
    out = _json(capsys, ["construct", "full-rank", "--d", "16", "--temperature", "100", "--out", str(path), "--json"])
    assert out["path"] == str(path)
    assert out["predicted_error"] == full_rank_error(16, 100.0)
    assert load_weights(path).metadata["construction"] == "full-rank"


@pytest.mark.parametrize(
    "argv",
    [
        ["bound", "--d", "64", "--rank", "8", "--heads", "1.5"],
        ["bound", "--d", "64", "--rank", "8", "--heads", "zero"],
        ["bound", "--d", "64", "--rank", "8", "--heads", "0"],
        ["bound", "--d", "64", "--rank", "65", "--heads", "2"],
        ["bound", "--d", "1", "--rank", "1", "--heads", "2"],
        ["min-heads", "--d", "64", "--rank", "8", "--eps", "0"],
        ["min-heads", "--d", "64", "--rank", "8", "--eps", "0.7"],
        ["construct", "full-rank", "--d", "8", "--temperature", "-1", "--out", "unused.safetensors"],
    ],
)
def test_bad_input_exits_2_with_one_line(capsys, argv):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "error" in err and "Traceback" not in err


def test_subprocess_bad_input_has_no_traceback():
    result = subprocess.run(
        [sys.executable, "-m", "experiments.cli.main", "min-heads", "--d", "8", "--rank", "1", "--eps", "-1"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 2
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1
