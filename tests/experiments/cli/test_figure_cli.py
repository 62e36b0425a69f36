"""`attnrank figure NAME`: bad input is one line and exit 2 with nothing written; small end-to-end runs."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from experiments.analysis.biased_crossing import read_rows
from experiments.cli.main import main


def refusal(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """Run ``attnrank ARGV``, expecting a refusal: exit status 2 (returned or raised by argparse), one stderr line."""
    try:
        status = main(argv)
    except SystemExit as stop:
        status = int(stop.code or 0)
    assert status == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    return err


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["biased-crossing", "--dims", "1"], "--dims"),
        (["biased-crossing", "--dims", "4,x"], "comma-separated"),
        (["biased-crossing", "--steps", "0"], "--steps"),
        (["biased-crossing", "--max-heads-factor", "3"], "power of 2"),
        (["biased-crossing", "--no-train", "--no-construct"], "nothing to measure"),
        (["biased-crossing", "--seeds", "-1"], "--seeds"),
        (["biased-crossing", "--eval-samples", "1"], "--eval-samples"),
        (["biased", "--d", "1"], "--d"),
        (["biased", "--threshold-d", "2"], "--threshold-d"),
        (["biased", "--samples", "1"], "--samples"),
        (["biased-separation", "--dims", "4,1"], "--dims"),
        (["biased-separation", "--heldout-samples", "0"], "--heldout-samples"),
        (["depth", "--eps", "1.5"], "--eps"),
        (["depth", "--d", "0"], "--d"),
        (["depth", "--samples", "1"], "--samples"),
        (["depth", "--seed", "-2"], "--seed"),
    ],
)
def test_bad_arguments_are_one_line_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], needle: str
) -> None:
    out = tmp_path / "out"
    err = refusal(["figure", argv[0], "--out", str(out), *argv[1:]], capsys)
    assert needle in err and err.startswith(f"attnrank figure {argv[0]}: error:")
    assert not out.exists()  # refused before anything was written


def test_out_that_is_a_file_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert "--out" in refusal(["figure", "biased", "--out", str(blocker)], capsys)


def test_unknown_figure_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert "invalid choice" in refusal(["figure", "fig9", "--out", "x"], capsys)


def test_trained_needs_analysed_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "run"
    run.mkdir()
    err = refusal(["figure", "trained", str(run), "--out", str(tmp_path / "f.png")], capsys)
    assert "attnrank analyze" in err and not (tmp_path / "f.png").exists()


def test_biased_crossing_tiny_end_to_end(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """d = 2 (M = 9): the construction is exact at H = M; every file is written; trained rows for both ranks."""
    out = tmp_path / "out"
    argv = ["figure", "biased-crossing", "--out", str(out), "--dims", "2", "--seeds", "0", "--steps", "4"]
    argv += ["--batch-size", "16", "--max-heads-factor", "1", "--eval-samples", "200", "--fit-samples", "2000"]
    argv += ["--heldout-samples", "500", "--planes", "1"]
    assert main(argv) == 0
    assert "sawtooth energy" in capsys.readouterr().out
    with open(out / "biased_crossing.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    exact = [r for r in rows if r["family"] == "construction" and r["H"] == "9"]
    assert len(exact) == 1 and float(exact[0]["error"]) < 1e-9
    assert {(r["r"], r["H"]) for r in rows if r["family"] == "trained"} == {("2", "2"), ("1", "2")}
    again = read_rows(out / "biased_crossing.csv")
    assert len(again) == len(rows) and again[0].family == rows[0]["family"] and again[-1].H == int(rows[-1]["H"])
    assert (out / "biased_crossing_reach.csv").stat().st_size > 0 and (out / "biased_crossing.png").stat().st_size > 0


def test_depth_quick_writes_tables_and_figures(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A reduced depth study: both PNGs and the JSON tables, whose heads-needed rows cover the N grid."""
    out = tmp_path / "depth"
    assert main(["figure", "depth", "--out", str(out), "--quick", "--d", "8", "--samples", "200"]) == 0
    tables = json.loads((out / "depth_tables.json").read_text())
    assert [row["N"] for row in tables["needed"]] == [2, 4, 8]
    assert (out / "theorem5_heads.png").stat().st_size > 0 and (out / "conjecture6_scaling.png").stat().st_size > 0
    assert "fitted exponent" in capsys.readouterr().out


def _analysis(error: object = 0.3, d: object = 4, consistent: bool = True) -> str:
    """analysis.json's evaluation in the one metric record (JSON text): a population error and its bound record."""
    bound = {"d": d, "r": 1, "H": 2, "bound_lower": 0.1, "bound_upper": 0.1, "bound_applies": True}
    population = {"population_error": error, "population_stderr": 0.01, "population_samples": 100}
    return json.dumps({**population, "theorem2": {**bound, "consistent": consistent}})


@pytest.mark.parametrize(
    "analysis, needle",
    [
        ("[1, 2]", "must hold a JSON object"),
        ("\xff", "not a readable JSON file"),
        ('{"layers": []}', "no field theorem2"),
        ('{"theorem2": [1]}', "field theorem2 must be a JSON object"),
        ('{"theorem2": {"d": 4}}', "field theorem2.r"),
        (_analysis(d=True), "field theorem2.d"),
        (_analysis(error=float("nan")), "field population_error"),
        (_analysis(error="x"), "field population_error"),
        (_analysis(consistent=False), "field theorem2.consistent must be True"),
        ('{"theorem2": {"d": 4, "r": 1, "H": 2, "error": 0.3, "error_stderr": 0.01}}', "migrate_records.py"),
    ],
)
def test_a_damaged_analysis_is_one_line_naming_the_file_and_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], analysis: str, needle: str
) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / "analysis.json").write_bytes(analysis.encode("latin-1"))
    err = refusal(["figure", "trained", str(run), "--out", str(tmp_path / "f.png")], capsys)
    assert "analysis.json" in err and needle in err, err
    assert not (tmp_path / "f.png").exists()


def test_trained_draws_a_checked_record(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Positive control for the cases above: a well-formed record is drawn."""
    run = tmp_path / "run"
    run.mkdir()
    (run / "analysis.json").write_text(_analysis())
    assert main(["figure", "trained", str(run), "--out", str(tmp_path / "f.png")]) == 0
    assert (tmp_path / "f.png").stat().st_size > 0
