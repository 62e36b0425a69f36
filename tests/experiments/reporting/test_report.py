"""The sweep report: figure files linked, paper-vs-ours cells and claims graded (and flipping when the data contradict
them), the store opened read-only, and the tidy CSV export."""

from __future__ import annotations

import csv
import hashlib
from pathlib import Path

import pytest

from experiments.analysis.sweep_directory import SweepDirectory
from experiments.cli.main import main
from experiments.config import TrainConfig
from experiments.reporting.sweep_report import write_report
from experiments.studies import PRESETS, get_preset
from experiments.sweeps.grading import Grade, compare
from experiments.sweeps.preset_kit import PaperNumber
from experiments.sweeps.run_specs import spec_kind
from experiments.sweeps.store import ResultsStore
from tests.run_records import evaluated

PROV = {"git_revision": "abc", "versions": {}}


def _fake(out: Path, preset: str, loss: dict[tuple[int, int], float] | None = None, *, scale: str = "quick") -> None:
    """A store holding ``preset``'s runs at ``scale``; train runs get loss[(rank, N)] (or a rank/N rule), seed s
    times (1 + 0.1 s); random-feature draws a falling curve; theory runs a theorem2 entry above the bound."""
    specs = get_preset(preset).runs(scale)
    with ResultsStore(SweepDirectory(out).store) as store:
        store.register(preset, scale, [(s.config_hash(), spec_kind(s), s.to_dict()) for s in specs])
        for s in specs:
            if isinstance(s, TrainConfig):
                base = (loss or {}).get((s.rank, s.N), 0.5 if s.rank < s.d else 0.05)
                value = base * (1.0 + 0.1 * s.seed)
                metrics: dict = {"best_loss": value, "final_loss": value, "steps": s.steps, "seconds": 1.0}
                if s.model == "theory":
                    metrics.update(evaluated(0.3, bound=(s.d, s.rank, s.heads, 0.1)))
            else:
                counts = list(s.head_counts)
                errors = [0.7 * (0.25 + 0.75 / (1 + k / 8)) for k in range(len(counts))]
                metrics = {"head_counts": counts, "errors": errors, "best_loss": errors[-1], "final_loss": errors[-1]}
                metrics["seconds"] = 0.1
            store.record_result(s.config_hash(), metrics, PROV)


def _fake_fig1(out: Path, loss_of_rank: dict[int, float]) -> None:
    _fake(out, "fig1", {(r, 8): v for r, v in loss_of_rank.items()})


def test_report_grades_and_links_figures(tmp_path: Path) -> None:
    _fake_fig1(tmp_path, {16: 0.37, 8: 0.61, 4: 0.7, 1: 0.8})
    assert main(["report", str(tmp_path)]) == 0
    text = (tmp_path / "report.md").read_text()
    assert (tmp_path / "fig1-quick.png").stat().st_size > 1000
    assert "[fig1-quick.png](fig1-quick.png)" in text and "![fig1 quick](fig1-quick.png)" in text
    assert "| [fig1 (quick)](#fig1-quick) |" in text and "**DIRECTION**" in text
    assert "Grade rules (stated in advance): magnitude = full rank >= 10x below every lower rank" in text
    assert "agrees" not in text  # the factor-2 verdict is retired
    # per cell: within the seed spread, within the stated tolerance, only the ordering, not run
    assert "| L=1 r<=d/4, any c | 0.45 - 0.9 | 0.7 - 0.88 | 4 | MAGNITUDE | paper within our seed spread |" in text
    assert "| L=1 r=d/2, c=1 | 0.7 | 0.61 - 0.671 | 2 | MAGNITUDE | paper within the stated tolerance (x1.25)" in text
    assert "| L=1 full rank, c=1 | 0.015 | 0.37 - 0.407 | 2 | DIRECTION | ours x25 higher; the paper's ordering" in text
    assert "| L=3 full rank, c=1 | 0.003 | - | 0 | - | not run at this scale |" in text


def test_report_magnitude_and_negative_control(tmp_path: Path) -> None:
    _fake_fig1(tmp_path / "m", {16: 0.015, 8: 0.7, 4: 0.7, 1: 0.8})
    write_report(tmp_path / "m", PRESETS)
    text = (tmp_path / "m" / "report.md").read_text()
    assert "**MAGNITUDE**" in text and "| L=1 full rank, c=1 | 0.015 | 0.015 - 0.0165 | 2 | MAGNITUDE |" in text
    _fake_fig1(tmp_path / "n", {16: 0.65, 8: 0.6, 4: 0.7, 1: 0.8})  # full rank loses to r = 8
    write_report(tmp_path / "n", PRESETS)
    text = (tmp_path / "n" / "report.md").read_text()
    assert "**NOT REPRODUCED**" in text
    assert "| L=1 full rank, c=1 | 0.015 | 0.65 - 0.715 | 2 | NOT REPRODUCED | ours x43 higher" in text


def test_compare_orders_low_rank_against_full_rank() -> None:
    records = [
        {"status": "finished", "rank_class": "full", "layers": 3, "best_loss": 0.2},
        {"status": "finished", "rank_class": "low", "layers": 3, "best_loss": 0.5},
    ]
    cells = (
        PaperNumber("full", (0.003, 0.003), {"layers": 3, "rank_class": "full"}),
        PaperNumber("low", (0.04, 0.04), {"layers": 3, "rank_class": "low"}),
    )
    low = compare(cells[1], records, cells)
    assert low.grade is Grade.DIRECTION and "above 'full'" in low.verdict
    reversed_records = [{**records[0], "best_loss": 0.6}, records[1]]
    assert compare(cells[1], reversed_records, cells).grade is Grade.NOT_REPRODUCED
    assert compare(cells[1], records).grade is Grade.NOT_REPRODUCED  # no partner given


@pytest.mark.parametrize(
    "preset", ["figN", "figd", "posn", "random-features", "icl", "bound-vs-trained", "conjecture6"]
)
def test_every_preset_reports_a_grade_and_a_figure(tmp_path: Path, preset: str) -> None:
    _fake(tmp_path, preset)
    write_report(tmp_path, PRESETS)
    text = (tmp_path / "report.md").read_text()
    assert (tmp_path / f"{preset}-quick.png").stat().st_size > 1000
    assert f"[{preset}-quick.png]({preset}-quick.png)" in text
    assert any(f"**{g.value.upper()}**" in text for g in Grade)
    assert "Parameters: d=" in text


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_report_never_writes_to_the_store(tmp_path: Path) -> None:
    _fake_fig1(tmp_path, {16: 0.37, 8: 0.61, 4: 0.7, 1: 0.8})
    before = _digest(SweepDirectory(tmp_path).store)
    assert main(["report", str(tmp_path)]) == 0
    assert _digest(SweepDirectory(tmp_path).store) == before


def test_csv_export_one_tidy_row_per_run(tmp_path: Path) -> None:
    _fake_fig1(tmp_path, {16: 0.37, 8: 0.61, 4: 0.7, 1: 0.8})
    _fake(tmp_path, "random-features")
    assert main(["report", str(tmp_path), "--csv"]) == 0
    with SweepDirectory(tmp_path).runs_csv.open(newline="") as stream:
        rows = list(csv.DictReader(stream))
    assert len(rows) == 8 + 4
    header = list(rows[0])
    assert header[:6] == ["preset", "scale", "hash", "kind", "status", "seed"]
    assert {"rank", "d", "N", "width", "layers", "steps", "best_loss", "final_loss", "errors"} <= set(header)
    fig1 = [r for r in rows if r["preset"] == "fig1"]
    assert {r["status"] for r in fig1} == {"finished"} and {r["seed"] for r in fig1} == {"0", "1"}
    assert sorted(float(r["best_loss"]) for r in fig1 if r["rank"] == "16") == pytest.approx([0.37, 0.407])


def test_report_without_store_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", str(tmp_path)]) == 2
    assert "no results store" in capsys.readouterr().err


def test_compare_uses_the_papers_partner_cells() -> None:
    posn = get_preset("posn").paper
    records = [
        {"status": "finished", "layers": 3, "rank": 4, "rank_class": "low", "positional": "concat", "best_loss": 0.3},
        {"status": "finished", "layers": 3, "rank": 4, "rank_class": "low", "positional": "none", "best_loss": 0.6},
    ]
    concat = compare(posn[0], records, posn)  # L=3 r=4 concat, ordered below "L=3 low rank, no encodings"
    assert concat.grade is Grade.DIRECTION and "below 'L=3 low rank, no encodings'" in concat.verdict
    none = compare(posn[2], records, posn)  # and the none cell above the concat cells
    assert none.grade is Grade.DIRECTION and "above 'L=3 r=4 concat / L=3 r=32 concat'" in none.verdict
    # figN at N = 4: full rank "<= 0.04" and r = d/2 at 0.005 overlap, so the paper does not order them
    fign = get_preset("figN").paper
    cell = next(c for c in fign if c.label == "r=d/2, N=4")
    runs = [
        {"status": "finished", "N": 4, "rank_class": "half", "best_loss": 0.5},
        {"status": "finished", "N": 4, "rank_class": "full", "best_loss": 0.2},
    ]
    ambiguous = compare(cell, runs, fign)
    assert ambiguous.grade is Grade.NOT_REPRODUCED and "do not order" in ambiguous.verdict
