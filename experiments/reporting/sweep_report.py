"""The sweep report: ``<out>/report.md`` with one PNG per figure, our numbers beside the paper's, and a grade per claim.

Everything is read from the results store (`experiments.sweeps.store`), opened read-only: the report never writes to
the database. For each (preset, scale) in the store:

- the figure (`experiments.figures.sweeps`) as ``<out>/<preset>-<scale>.png``, linked from the report;
- the preset's claim, graded by its one predicate (`experiments.sweeps.claims`): ``magnitude`` / ``direction`` /
  ``not reproduced`` / ``not evaluated``, with the grade rules stated in advance and the numbers behind the grade;
- a table of docs/paper.md section 6's numbers beside ours, graded per cell (:func:`compare`): whether the paper's
  value lies within our seed spread, within the stated tolerance of it, or only the ordering against the cell's
  partner (full rank against rank d/2, low rank against full rank, concat against none) holds;
- every run's losses and time.

``attnrank report DIR --csv`` also writes ``DIR/runs.csv`` (:func:`write_csv`): one tidy row per run (preset, scale,
hash, status, every config field, seed, the scalar metrics) for pandas.
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from experiments.analysis.records import Record
from experiments.config import TrainConfig
from experiments.figures.sweeps import DRAWS_PAPER_NUMBERS, FIGURES, parameter_line, regime_line
from experiments.reporting.construction_arms_report import construction_arms_lines
from experiments.reporting.curve_sections import depth_ladder_section, population_section, projection_section
from experiments.reporting.scaling_report import claim_records, scaling_section
from experiments.reporting.tightness_report import band_lines, tightness_section
from experiments.sweeps.claims import CLAIMS, judge
from experiments.sweeps.grading import Grade, Verdict
from experiments.sweeps.preset_kit import GPU, LONG, PaperNumber, Preset, rank_class
from experiments.sweeps.presets import get_preset
from experiments.sweeps.run_specs import spec_from_record
from experiments.sweeps.runner import RUNS_DIR, store_path
from experiments.sweeps.store import ResultsStore
from experiments.sweeps.studies.random_features import RANDOM_FEATURES_TOLERANCE

CELL_FACTOR = 1.25
"""Stated tolerance of a training-loss cell: the paper's values are read off log-scale figures, so a value within a
factor 1.25 of our seed spread counts as reached (``magnitude``)."""

CELL_ABSOLUTE = RANDOM_FEATURES_TOLERANCE
"""Stated tolerance of a random-feature cell (an error level, not a loss ratio): +-0.03 around our spread over draws."""

CSV_NAME = "runs.csv"

EXTRA_SECTIONS: dict[str, Callable[[Preset, Sequence[Record], Path, str], tuple[list[str], list[Path]]]] = {
    "tightness-bands": lambda preset, records, out, scale: tightness_section(records, out, scale),
    "curve-projections": projection_section,
    "depth-ladder": depth_ladder_section,
    "training-vs-population": population_section,
}
"""Report sections a preset may ask for beyond the ones every sweep gets (`Preset.report_sections`): name ->
``(preset, records, out, scale) -> (markdown lines, figures written)``."""


def sweep_records(store: ResultsStore, preset: str, scale: str) -> list[dict[str, Any]]:
    """One dictionary per run of the sweep: spec fields, metrics, status, hash, seconds, rank_class and heads."""
    records = []
    for row in store.rows(preset, scale):
        record: dict[str, Any] = {**row.spec, "status": row.status, "hash": row.hash, "kind": row.kind}
        if row.kind == "train":
            config = spec_from_record("train", row.spec)
            assert isinstance(config, TrainConfig)
            record["rank_class"] = rank_class(config)
            record["heads"] = config.heads
        if row.metrics:
            record.update(row.metrics)
        record["seconds"] = row.seconds
        records.append(record)
    return records


def _matches(record: Record, where: Mapping[str, Any]) -> bool:
    return all(record.get(k) == v for k, v in where.items() if v != "max")


def _our_values(number: PaperNumber, records: Sequence[Record]) -> list[float]:
    """Every matching finished run's value: best_loss (seeds and configs), or the error at the largest H (draws)."""
    matching = [r for r in records if r.get("status") == "finished" and _matches(r, number.where)]
    if "H" in number.where:
        return [float(r["errors"][-1]) for r in matching if r.get("errors")]
    values = []
    for r in matching:
        loss = r.get("best_loss")
        if isinstance(loss, (int, float)) and not isinstance(loss, bool) and math.isfinite(loss):
            values.append(float(loss))
    return values


def _partner(
    number: PaperNumber, cells: Sequence[PaperNumber]
) -> tuple[str, dict[str, Any], tuple[float, float]] | None:
    """The cell the paper orders ``number`` against: (label, selector of our runs, the paper's range), or None.

    Concat is ordered against no encodings at the same depth (and back); full rank against rank d/2 (else low rank)
    with the same other fields; a lower rank against full rank at the same depth, width or N (any width when the cell
    names none). Random-feature cells have no partner (their ordering, the fall with H, is the claim's).
    """
    where = dict(number.where)
    if "H" in where:
        return None
    paper: list[PaperNumber] = []
    ours: dict[str, Any] = {}
    if where.get("positional") in ("concat", "none"):
        other = "none" if where["positional"] == "concat" else "concat"
        ours = {**where, "positional": other}
        paper = [
            c for c in cells if c.where.get("positional") == other and c.where.get("layers") == where.get("layers")
        ]
    elif where.get("rank_class") == "full":
        base = {k: v for k, v in where.items() if k != "rank_class"}
        for cls in ("half", "low"):
            ours = {**base, "rank_class": cls}
            paper = [c for c in cells if dict(c.where) == ours]
            if paper:
                break
    elif where.get("rank_class") in ("half", "low") or "rank" in where:
        base = {k: v for k, v in where.items() if k not in ("rank_class", "rank")}
        ours = {**base, "rank_class": "full"}
        paper = [
            c
            for c in cells
            if c.where.get("rank_class") == "full" and all(c.where.get(k) == v for k, v in base.items() if k in c.where)
        ]
    paper = [c for c in paper if c is not number]
    if not paper:
        return None
    label = " / ".join(c.label for c in paper)
    return label, ours, (min(c.value[0] for c in paper), max(c.value[1] for c in paper))


@dataclass(frozen=True)
class Comparison:
    """A row of the report's paper-vs-ours table.

    Attributes:
        label: the paper's cell. paper: its value (low, high). ours: our spread (min, max) over matching runs (seeds,
        draws, configurations), or None. runs: matching finished runs. grade: the cell's Grade (None: not run).
        verdict: the grade's reason in words.
    """

    label: str
    paper: tuple[float, float]
    ours: tuple[float, float] | None
    runs: int
    grade: Grade | None
    verdict: str


def compare(number: PaperNumber, records: Sequence[Record], cells: Sequence[PaperNumber] = ()) -> Comparison:
    """Grade one paper cell against our runs (rules stated in advance).

    - ``magnitude``: the paper's value (or range) lies within our spread (min to max over the matching runs' seeds,
      draws and configurations), or within the stated tolerance of it (:data:`CELL_FACTOR` x1.25 for training
      losses, :data:`CELL_ABSOLUTE` +-0.03 for random-feature errors);
    - ``direction``: outside that, but the paper's ordering against the cell's partner (:func:`_partner`: full rank vs
      rank d/2, lower rank vs full rank, concat vs none) holds between our spreads (no overlap, same side);
    - ``not reproduced``: outside, and the ordering is reversed, overlapping, or there is no partner to order against.
    """
    values = _our_values(number, records)
    low, high = number.value
    if not values:
        return Comparison(number.label, number.value, None, 0, None, "not run at this scale")
    ours = (min(values), max(values))
    where = "our spread over draws" if "H" in number.where else "our seed spread"
    if ours[0] <= high and low <= ours[1]:
        return Comparison(number.label, number.value, ours, len(values), Grade.MAGNITUDE, f"paper within {where}")
    if "H" in number.where:
        widened = (ours[0] - CELL_ABSOLUTE, ours[1] + CELL_ABSOLUTE)
        tolerance = f"+-{CELL_ABSOLUTE:g}"
    else:
        widened = (ours[0] / CELL_FACTOR, ours[1] * CELL_FACTOR)
        tolerance = f"x{CELL_FACTOR:g}"
    if widened[0] <= high and low <= widened[1]:
        text = f"paper within the stated tolerance ({tolerance}) of {where}"
        return Comparison(number.label, number.value, ours, len(values), Grade.MAGNITUDE, text)
    offset = f"ours x{ours[0] / high:.2g} higher" if ours[0] > high else f"ours x{low / max(ours[1], 1e-300):.2g} lower"
    partner = _partner(number, cells)
    if partner is None:
        text = f"{offset}; no ordering partner for this cell"
        return Comparison(number.label, number.value, ours, len(values), Grade.NOT_REPRODUCED, text)
    label, selector, paper_partner = partner
    partner_values = _our_values(PaperNumber(label, paper_partner, selector), records)
    if not partner_values:
        text = f"{offset}; partner '{label}' not run at this scale"
        return Comparison(number.label, number.value, ours, len(values), Grade.NOT_REPRODUCED, text)
    if low <= paper_partner[1] and paper_partner[0] <= high:
        text = f"{offset}; the paper's values do not order this cell against '{label}'"
        return Comparison(number.label, number.value, ours, len(values), Grade.NOT_REPRODUCED, text)
    above = low > paper_partner[1]
    holds = ours[0] > max(partner_values) if above else ours[1] < min(partner_values)
    relation = "above" if above else "below"
    partner_range = _range((min(partner_values), max(partner_values)))
    text = f"{offset}; the paper's ordering ({relation} '{label}', ours {partner_range}) " + (
        "holds" if holds else "does not hold"
    )
    grade = Grade.DIRECTION if holds else Grade.NOT_REPRODUCED
    return Comparison(number.label, number.value, ours, len(values), grade, text)


def population_text(record: Record) -> str:
    """A run's population error as "mean +- stderr", or "-" for a run recorded before it was measured."""
    error, stderr = record.get("population_error"), record.get("population_stderr")
    if not isinstance(error, (int, float)) or isinstance(error, bool):
        return "-"
    return f"{_fmt(float(error))} +- {float(stderr):.2g}" if isinstance(stderr, (int, float)) else _fmt(float(error))


def _fmt(value: float) -> str:
    return "nan" if not math.isfinite(value) else f"{value:.3g}"


def _range(pair: tuple[float, float] | None) -> str:
    if pair is None:
        return "-"
    return _fmt(pair[0]) if pair[0] == pair[1] else f"{_fmt(pair[0])} - {_fmt(pair[1])}"


def _grade_word(grade: Grade | None) -> str:
    return "-" if grade is None else grade.value.upper()


def sweep_section(
    store: ResultsStore, out: Path, preset_name: str, scale: str
) -> tuple[list[str], list[Path], Verdict | None]:
    """Markdown lines for one sweep, the figures written beside the report, and the claim's verdict."""
    preset = get_preset(preset_name)
    records = sweep_records(store, preset_name, scale)
    counts: dict[str, int] = {}
    for r in records:
        counts[r["status"]] = counts.get(r["status"], 0) + 1
    run_seconds = sum(float(r["seconds"]) for r in records if isinstance(r.get("seconds"), (int, float)))
    lines = [f"## {preset_name} ({scale})", "", preset.description + ".", ""]
    lines.append(f"Parameters: {parameter_line(records)}.")
    lines.append("")
    lines.append(f"Training data: {regime_line(records)}.")
    lines.append("")
    lines.append(
        f"Runs: {len(records)} ({', '.join(f'{k} {v}' for k, v in sorted(counts.items()))}); "
        f"training time summed over runs: {run_seconds:.1f} s."
    )
    lines.append("")
    figures: list[Path] = []
    every_run = records
    if scale == LONG:  # budgets are never mixed: the claim, figure and paper cells read each d's largest budget
        records = [dict(r) for r in claim_records(every_run)]
        lines += [
            f"The long scale trains each deciding cell along a ladder of budgets (docs/scaling.md). The claim, the "
            f"figure and the paper's cells below read the largest budget of each d ({len(records)} runs); the "
            "compute-scaling section after them reads every run.",
            "",
        ]
    figure = FIGURES.get(preset.figure)
    if figure is not None and any(r["status"] == "finished" for r in records):
        name = f"{preset_name}-{scale}.png"
        extra = {"paper": preset.paper} if preset.figure in DRAWS_PAPER_NUMBERS else {}
        figure(records, out / name, f"{preset_name} ({scale})", **extra)
        figures.append(out / name)
        lines += [f"![{preset_name} {scale}]({name})", "", f"Figure: [{name}]({name}).", ""]
    for section in preset.report_sections:  # the figure's own sections (tightness: its band tables, a figure per d)
        extra_lines, drawn = EXTRA_SECTIONS[section](preset, records, out, scale)
        lines += extra_lines
        figures += drawn
    verdict = judge(preset_name, records)
    if verdict is not None:
        claim = CLAIMS[preset_name]
        lines += [f"Claim ({preset.claim}): **{_grade_word(verdict.grade)}**. {verdict.explanation}.", ""]
        if claim.magnitude:
            rules = f"magnitude = {claim.magnitude}; direction = {claim.direction or '-'}"
            lines += [f"Grade rules (stated in advance): {rules}.", ""]
    lines += construction_arms_lines(records, out / RUNS_DIR)  # runs started from a construction (depth), if any
    if preset.paper:
        lines += [
            "| paper cell | paper | ours (spread over matching runs) | runs | grade | why |",
            "|---|---|---|---|---|---|",
        ]
        for number in preset.paper:
            c = compare(number, records, preset.paper)
            grade = _grade_word(c.grade)
            lines.append(f"| {c.label} | {_range(c.paper)} | {_range(c.ours)} | {c.runs} | {grade} | {c.verdict} |")
        lines += [
            "",
            f"A cell is MAGNITUDE when the paper's value lies within our spread or within the stated tolerance of it "
            f"(x{CELL_FACTOR:g} for losses read off the paper's log-scale figures, +-{CELL_ABSOLUTE:g} for "
            "random-feature errors); DIRECTION when only the paper's ordering against the named cell holds between "
            "our spreads; NOT REPRODUCED otherwise. Rank classes (full r = d, half r = d/2, low r <= d/4) make a "
            "smaller d comparable.",
        ]
        if scale != "paper":
            sizes = "the paper's models with far fewer steps" if scale == GPU else "smaller models and far fewer steps"
            lines += [
                "",
                f"Scale {scale} uses {sizes} than the paper (docs/paper.md section 6), so "
                "its absolute losses are expected to sit above the paper's; the claim's grade says what this scale "
                "reproduces.",
            ]
        lines.append("")
    else:
        lines += ["The paper publishes no numbers for this experiment; ours are the reference.", ""]
    if scale == LONG:
        scaling_lines, drawn = scaling_section(preset_name, every_run, out, scale)
        lines += scaling_lines
        figures += drawn
    lines += [
        "| run | status | config | best loss | final loss | population error | seconds |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in every_run:
        if r["kind"] == "train":
            desc = (
                f"d={r['d']} N={r['N']} r={r['rank']} c={r['width']} L={r['layers']} pos={r['positional']} "
                f"seed={r['seed']}" + (f" steps={r['steps']} T={r['temperature']:g}" if scale == LONG else "")
            ) + (f" p={r['positional_dim']} init={r['init']}" if r.get("init") else "")
            desc += f" data_seed={r['data_seed']}" if r.get("data_seed") is not None else ""
            desc += f" K={r['train_batches']}" if r.get("train_batches") else ""
        elif r["kind"] == "least-squares-heads":
            desc = f"d={r['d']} r={r['r']} H={r['H']}: random heads, least-squares output weights"
        else:
            desc = f"d={r['d']} draw={r['trial']} H<={r['head_counts'][-1]}"
        best, final = r.get("best_loss"), r.get("final_loss")
        lines.append(
            f"| {r['hash'][:10]} | {r['status']} | {desc} | "
            f"{_fmt(float(best)) if best is not None else '-'} | {_fmt(float(final)) if final is not None else '-'} | "
            f"{population_text(r)} | "
            f"{_fmt(float(r['seconds'])) if isinstance(r.get('seconds'), (int, float)) else '-'} |"
        )
    lines.append("")
    return lines, figures, verdict


def _open_store(out: Path) -> ResultsStore:
    path = store_path(out)
    if not path.is_file():
        raise ValueError(f"{out} holds no results store ({path.name}); run `attnrank sweep PRESET --out {out}` first")
    return ResultsStore(path, readonly=True)


def checked_sweeps(store: ResultsStore) -> list[tuple[str, str]]:
    """The store's (preset, scale) sweeps, each checked before anything is drawn: a preset and scale this version
    knows, and rows that read back (`ResultsStore.rows` checks every field a report reads). ValueError naming the
    store and the sweep otherwise, so a damaged store is refused with one line and nothing written."""
    sweeps = store.sweeps()
    if not sweeps:
        raise ValueError(f"{store.path} records no sweep")
    for preset_name, scale in sweeps:
        try:
            preset = get_preset(preset_name)
        except ValueError:
            raise ValueError(
                f"{store.path}: field sweep_runs.preset names no preset of this version: {preset_name!r:.60}"
            ) from None
        if scale not in preset.scales:
            raise ValueError(
                f"{store.path}: field sweep_runs.scale of preset {preset_name} must be one of "
                f"{', '.join(preset.scales)}, got {scale!r:.60}"
            )
        store.rows(preset_name, scale)
    return sweeps


def write_report(out: Path | str) -> Path:
    """Write ``<out>/report.md`` (and the figures) from ``<out>/results.sqlite`` (opened read-only); its path."""
    out = Path(out)
    lines = ["# attnrank sweep report", "", f"Store: `{store_path(out)}` (read only).", ""]
    figures: list[Path] = []
    with _open_store(out) as store:
        sweeps = checked_sweeps(store)
        summary = ["| sweep | claim | grade |", "|---|---|---|"]
        body: list[str] = []
        for preset_name, scale in sweeps:
            section, drawn, verdict = sweep_section(store, out, preset_name, scale)
            body += section
            figures += drawn
            grade = "-" if verdict is None else _grade_word(verdict.grade)
            anchor = f"#{preset_name.lower()}-{scale}"
            summary.append(f"| [{preset_name} ({scale})]({anchor}) | {get_preset(preset_name).claim} | {grade} |")
    lines += summary + [""]
    if figures:
        lines += ["Figures: " + ", ".join(f"[{p.name}]({p.name})" for p in figures) + ".", ""]
    lines += body
    report = out / "report.md"
    report.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return report


def tightness_bands(out: Path | str) -> list[str]:
    """The band [bound, best found] per d of every tightness sweep in ``<out>/results.sqlite`` (none: [])."""
    lines: list[str] = []
    with _open_store(Path(out)) as store:
        for preset_name, scale in store.sweeps():
            if "tightness-bands" in get_preset(preset_name).report_sections:
                lines += band_lines(sweep_records(store, preset_name, scale), scale)
    return lines


def _cell(value: Any) -> Any:
    if isinstance(value, (list, tuple, dict)):
        return json.dumps(value, sort_keys=True)
    return value


def tidy_rows(store: ResultsStore) -> list[dict[str, Any]]:
    """One flat row per (sweep, run): preset, scale, hash, kind, status, config fields, metrics (nested ones as
    ``theorem2.error`` etc.; lists as JSON text), error."""
    rows = []
    for preset_name, scale in store.sweeps():
        for row in store.rows(preset_name, scale):
            flat: dict[str, Any] = {"preset": preset_name, "scale": scale, "hash": row.hash, "kind": row.kind}
            flat["status"] = row.status
            flat.update({k: _cell(v) for k, v in row.spec.items()})
            for key, value in (row.metrics or {}).items():
                if isinstance(value, Mapping):
                    flat.update({f"{key}.{k}": _cell(v) for k, v in value.items()})
                else:
                    flat[key] = _cell(value)
            flat["seconds"] = row.seconds
            flat["attempts"] = row.attempts
            flat["git_revision"] = row.git_revision
            flat["error"] = (row.error or "").splitlines()[0] if row.error else ""
            rows.append(flat)
    return rows


def _columns(rows: Iterable[Mapping[str, Any]]) -> list[str]:
    first = ["preset", "scale", "hash", "kind", "status", "seed"]
    seen: dict[str, None] = {}
    for row in rows:
        seen.update(dict.fromkeys(row))
    return [c for c in first if c in seen] + [c for c in seen if c not in first]


def write_csv(out: Path | str) -> Path:
    """Write ``<out>/runs.csv``: every run of every sweep in the store as one tidy row (for pandas.read_csv)."""
    out = Path(out)
    with _open_store(out) as store:
        rows = tidy_rows(store)
    path = out / CSV_NAME
    with path.open("w", newline="", encoding="utf-8") as stream:
        writer = csv.DictWriter(stream, fieldnames=_columns(rows), restval="")
        writer.writeheader()
        writer.writerows(rows)
    return path
