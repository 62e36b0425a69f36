"""The docs' generated blocks from recorded benchmark runs (`experiments.publish.doc_blocks` rewrites them): each
reads ``benchmarks/results/<benchmark>_DATE.json``, the DATE named by the block's marker.

- ``random-features-curve:DATE``: a recorded run of the random-features curve (``benchmarks/bench_random_features.py``):
  times, speed-up and the curve (docs/random_features.md);
- ``bench-attention:DATE``: a recorded run of ``benchmarks/bench_attention.py``: every row's step times, speed-ups and
  matmul fractions (docs/models.md).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from experiments.reporting.doc_sources import DocBlockKind, DocSources

BENCHMARK_RESULTS = "benchmarks/results"
"""Where the recorded benchmark runs are, from the repository root."""
RANDOM_FEATURES_ROWS = (1, 16, 256, 4096, 16384)
"""The head counts docs/random_features.md shows of the recorded curve (every power of 2 is in the JSON)."""


def _recorded_run(sources: DocSources, benchmark: str, date: str) -> tuple[str, Path, dict[str, Any]]:
    """(path from the root, path, JSON object) of the recorded run ``BENCHMARK_RESULTS/<benchmark>_<date>.json``."""
    relative = f"{BENCHMARK_RESULTS}/{benchmark}_{date}.json"
    path = sources.root / relative
    if not path.is_file():
        raise ValueError(f"{relative}: no such file")
    run: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return relative, path, run


def random_features_curve(sources: DocSources, date: str) -> list[str]:
    """``random-features-curve:DATE``: the recorded run of ``benchmarks/bench_random_features.py`` on DATE
    (``benchmarks/results/random_features_curve_DATE.json``): its times, speed-up and curve (module docstring)."""
    relative, path, run = _recorded_run(sources, "random_features_curve", date)
    ratios = [row["baseline_s"] / row["ours_s"] for row in run["rows"] if row.get("baseline_s")]
    dims, heads = list(run["dims"]), list(run["head_counts"])
    lines = [
        f"Generated from `{relative}` by `attnrank report --docs`:",
        "",
        f"- **Whole paper curve, baseline on every draw** (d in {{{', '.join(map(str, dims))}}}, H = 2^0 .. "
        f"2^{int(math.log2(heads[-1]))}, {run['trials']} draws each, {len(run['rows'])} draws, each draw solved by "
        f"both in the same process): ours **{run['ours_total_s']:.1f} s**, baseline **{run['baseline_total_s']:.1f} "
        f"s**, speed-up **{run['baseline_total_s'] / run['ours_matched_s']:.2f}x**; per-draw ratios "
        f"{min(ratios):.3g}x - {max(ratios):.3g}x; largest relative difference of the errors "
        f"**{run['max_relative_difference']:.3g}** (required <= 1e-4){_script_wall_time(path)}. CG iterations for "
        f"H = {heads[-2]} / {heads[-1]}: {_cg_iterations(run, dims[0])} at d = {dims[0]}, "
        f"{_cg_iterations(run, dims[-1])} at d = {dims[-1]}.",
        "",
        f"Curve (mean [min, max] over {run['trials']} draws, seed 0):",
        "",
        "| H | " + " | ".join(f"d = {d}" for d in dims) + " |",
        "|---|" + "---|" * len(dims),
    ]
    for H in RANDOM_FEATURES_ROWS:
        k = heads.index(H)
        cells = []
        for i, _ in enumerate(dims):
            errors = [draws[k] for draws in run["errors"][i]]
            cells.append(f"{sum(errors) / len(errors):.4f} [{min(errors):.4f}, {max(errors):.4f}]")
        lines.append(f"| {H} | " + " | ".join(cells) + " |")
    return lines


def _script_wall_time(json_path: Path) -> str:
    """``; wall time of the script N s`` from the run's log beside its JSON (empty when the log does not say)."""
    log = json_path.with_suffix(".log")
    if log.is_file():
        found = re.search(r"wall time of this script:\s*([0-9.]+) s", log.read_text(encoding="utf-8"))
        if found:
            return f"; wall time of the script {float(found.group(1)):.0f} s"
    return ""


def _cg_iterations(run: Mapping[str, Any], d: int) -> str:
    """The range over a dimension's draws of the CG iterations at the two largest head counts: ``28-29 / 45-46``."""
    rows = [row for row in run["rows"] if row["d"] == d]
    parts = []
    for k in (-2, -1):
        values = sorted({int(row["cg_iterations"][k]) for row in rows})
        parts.append(str(values[0]) if values[0] == values[-1] else f"{values[0]}-{values[-1]}")
    return " / ".join(parts)


def _milliseconds(value: float) -> str:
    """Whole milliseconds from 100 ms up, three significant digits below."""
    return f"{value:.0f}" if value >= 100 else f"{value:.3g}"


def bench_attention(sources: DocSources, date: str) -> list[str]:
    """``bench-attention:DATE``: the rows of ``benchmarks/results/bench_attention_DATE.json`` (a recorded run of
    ``benchmarks/bench_attention.py``): per (c, r, mode) the medians of each side, both speed-ups and the fraction of
    the run's larger measured matmul peak each side reached."""
    relative, _, run = _recorded_run(sources, "bench_attention", date)
    machine = run["machine"]
    lines = [
        f"Generated from `{relative}` by `attnrank report --docs` (run {run['date'][:16].replace('T', ' ')} UTC, "
        f"revision `{machine['git_revision'][:7]}`, {machine['threads']} threads, 1-minute load "
        f"{machine['load_average_1min']:.1f} before and {run['load_average_after']:.1f} after; matmul peak "
        f"{run['peak_GFLOPs_before']:.1f} GFLOP/s before and {run['peak_GFLOPs_after']:.1f} after):",
        "",
        "| c | r | H | mode | stock ms | ours ms | speedup (medians) | speedup (minima) | stock % peak | ours % peak |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    order = {"whole": 0, "attention": 1}
    for row in sorted(run["rows"], key=lambda r: (-int(r["c"]), -int(r["r"]), order.get(r["mode"], 9))):
        lines.append(
            f"| {row['c']} | {row['r']} | {row['H']} | {row['mode']} | {_milliseconds(row['baseline_ms'])} | "
            f"{_milliseconds(row['ours_ms'])} | {row['speedup']:.2f} | {row['speedup_of_minima']:.2f} | "
            f"{100 * row['baseline_flop_fraction']:.1f}% | {100 * row['ours_flop_fraction']:.1f}% |"
        )
    return lines


DOC_BLOCKS = (
    DocBlockKind("random-features-curve", random_features_curve, 1, 1),
    DocBlockKind("bench-attention", bench_attention, 1, 1),
)
"""The block kinds of this module (module docstring)."""
