"""experiments/reporting/tightness_report.py: the band lines, tables and figures from hand-made records."""

from __future__ import annotations

from pathlib import Path

import matplotlib

from experiments.reporting.tightness_report import band_lines, tightness_section
from tests.run_records import evaluated
from theory.bounds import rank_lower_bound

matplotlib.use("Agg")


def _records() -> list[dict]:
    records = []
    for H in (8, 32, 128):
        bound = rank_lower_bound(8, 1, H).lower
        for seed, factor in ((0, 1.5), (1, 1.6)):
            records.append(
                {
                    "status": "finished",
                    "kind": "train",
                    "steps": 100,
                    "seed": seed,
                    "hash": f"{H}-{seed}",
                    **evaluated(factor * bound, bound=(8, 1, H, bound)),
                    "d": 8,
                    "N": 2,
                    "layers": 1,
                    "width": H // 8,
                    "rank": 1,
                }
            )
        records.append(
            {
                "status": "finished",
                "kind": "least-squares-heads",
                "d": 8,
                "r": 1,
                "H": H,
                **evaluated(2 * bound, 0.002, bound=(8, 1, H, bound)),
                "hash": f"ls-{H}",
            }
        )
    return records


def test_band_lines_give_the_band_and_ratio_at_the_largest_h() -> None:
    (line,) = band_lines(_records(), "quick")
    bound = rank_lower_bound(8, 1, 128).lower
    assert line.startswith("tightness (quick) d=8: r=1 H=128:")
    assert f"{bound:.3g}" in line and "x1.5" in line


def test_section_writes_one_figure_per_d_and_the_tables(tmp_path: Path) -> None:
    run = tmp_path / "runs" / "128-0"
    run.mkdir(parents=True)
    (run / "metrics.csv").write_text("step,loss,lr,time\n25,0.5,0.01,1\n50,0.3,0.01,2\n75,0.25,0.01,3\n100,0.2,0,4\n")
    lines, figures = tightness_section(_records(), tmp_path, "quick")
    assert [p.name for p in figures] == ["tightness-quick-d8.png"]  # the overview is the preset's own figure
    assert all(p.is_file() for p in figures)
    text = "\n".join(lines)
    assert "### d = 8" in text and "| 1 | 128 |" in text and "25.0%" in text  # the last-quarter gain of run 128-0
    assert "fewest heads the bound allows" in text
