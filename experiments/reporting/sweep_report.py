"""The sweep report: ``<out>/report.md`` with one PNG per figure, our numbers beside the paper's, and a grade per claim.

Everything is read from the results store (`experiments.sweeps.store`), opened read-only: the report never writes to
the database. For each (preset, scale) in the store:

- the figure (`experiments.figures.sweeps`) as ``<out>/<preset>-<scale>.png``, linked from the report;
- the preset's claim, graded by its one predicate (`experiments.studies`): ``magnitude`` / ``direction`` /
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
import io
import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from experiments.analysis.records import Record
from experiments.analysis.sweep_directory import SweepDirectory
from experiments.figures.sweeps import parameter_line, regime_line
from experiments.json_files import write_text_atomically
from experiments.reporting.scaling_report import claim_records, scaling_section
from experiments.sweeps.grading import (
    CELL_ABSOLUTE,
    CELL_FACTOR,
    Grade,
    PaperNumber,
    Verdict,
    compare,
    range_text,
    value_text,
)
from experiments.sweeps.preset_kit import LONG, Preset
from experiments.sweeps.store import ResultsStore
from experiments.sweeps.store_records import sweep_records


def population_text(record: Record) -> str:
    """A run's population error as "mean +- stderr", or "-" for a run recorded before it was measured."""
    error, stderr = record.get("population_error"), record.get("population_stderr")
    if not isinstance(error, (int, float)) or isinstance(error, bool):
        return "-"
    return (
        f"{value_text(float(error))} +- {float(stderr):.2g}"
        if isinstance(stderr, (int, float))
        else value_text(float(error))
    )


PAPER_REGIME = (
    "The paper's values are the lowest epoch-mean training loss on one fixed set of 100 batches of 256, replayed over "
    "1,000 epochs (a 100,000-step schedule), each the minimum over the runs of its cell (docs/paper.md section 6)"
)
"""What every training-loss number of docs/paper.md section 6 measures: the yardstick of `paper_regime_note`."""


def training_budgets(records: Iterable[Record]) -> list[int]:
    """The distinct step counts of the training runs among ``records``, ascending (one per budget a store holds)."""
    return sorted({int(r["steps"]) for r in records if r.get("kind") == "train" and r.get("steps") is not None})


def paper_regime_note(trained: Sequence[Record]) -> str:
    """How the training runs ``trained`` stand to the paper's numbers: their steps against their schedule, their
    data regime and their sizes, beside what the paper's values measure (`PAPER_REGIME`)."""
    budgets = training_budgets(trained)
    schedules = sorted({int(r.get("schedule_steps") or r["steps"]) for r in trained})
    steps = _joined_numbers(budgets)
    if schedules != budgets:
        steps += f" steps of a {_joined_numbers(schedules)}-step schedule"
    else:
        steps += " steps (each its own whole schedule)"
    sets = sorted({int(r.get("train_batches") or 0) for r in trained})
    if sets == [0]:
        data = (
            "on fresh batches every step, so their training loss estimates the population error, not a loss on a "
            "memorised set"
        )
    elif 0 not in sets:
        data = f"on one fixed set of {_joined_numbers(sets)} batches replayed every epoch, as the paper's runs"
    else:
        data = f"some on fresh batches, some on fixed sets of {_joined_numbers([k for k in sets if k])} batches"
    sizes = f"d = {_joined_numbers(sorted({int(r['d']) for r in trained}))}"
    sizes += f", N = {_joined_numbers(sorted({int(r['N']) for r in trained}))}"
    return (
        f"These runs train {steps}, {data}, at {sizes}. {PAPER_REGIME}. Where runs train fewer steps, on fresh "
        "batches or at a smaller d, their losses are expected above the paper's; the claim's grade says what they "
        "reproduce."
    )


def _joined_numbers(values: Sequence[int]) -> str:
    texts = [f"{v:,}" for v in values]
    return texts[0] if len(texts) == 1 else ", ".join(texts[:-1]) + " and " + texts[-1]


def _grade_word(grade: Grade | None) -> str:
    return "-" if grade is None else grade.value.upper()


def sweep_section(
    store: ResultsStore, out: Path, preset: Preset, scale: str
) -> tuple[list[str], list[Path], Verdict | None]:
    """Markdown lines for one sweep, the figures written beside the report, and the claim's verdict: what the preset
    holds (its figure, its sections, its claim, its cells and their rule), rendered."""
    preset_name = preset.name
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
    figure = preset.figure
    if figure is not None and any(r["status"] == "finished" for r in records):
        name = f"{preset_name}-{scale}.png"
        extra = {"paper": preset.paper} if figure.takes_paper else {}
        figure.draw(records, out / name, f"{preset_name} ({scale})", **extra)
        figures.append(out / name)
        lines += [f"![{preset_name} {scale}]({name})", "", f"Figure: [{name}]({name}).", ""]
    for section in (s for s in preset.report_sections if s.place == "before-claim"):
        extra_lines, drawn = section.render(preset, records, out, scale)
        lines += extra_lines
        figures += drawn
    claim = preset.rule
    verdict = None if claim is None else claim.judge(records)
    if claim is not None and verdict is not None:
        lines += [f"Claim ({preset.claim}): **{_grade_word(verdict.grade)}**. {verdict.explanation}.", ""]
        if claim.magnitude:
            rules = f"magnitude = {claim.magnitude}; direction = {claim.direction or '-'}"
            lines += [f"Grade rules (stated in advance): {rules}.", ""]
    for section in (s for s in preset.report_sections if s.place == "after-claim"):
        extra_lines, drawn = section.render(preset, records, out, scale)
        lines += extra_lines
        figures += drawn
    if preset.paper:
        budgets = training_budgets(r for r in records if r.get("status") == "finished") or [0]
        for budget in budgets:
            at_budget = [r for r in records if len(budgets) == 1 or r.get("steps") == budget]
            if len(budgets) > 1:
                lines += [f"At {budget:,} steps (the runs that trained {budget:,} steps; a table per budget):", ""]
            lines += [
                "| paper cell | paper | ours (spread over matching runs) | runs | grade | why |",
                "|---|---|---|---|---|---|",
            ]
            for number in preset.paper:
                c = compare(number, at_budget, preset.paper, preset.cell_rule)
                if len(budgets) > 1 and not c.runs:
                    continue  # a cell this budget does not hold (its run trained another budget)
                grade, why = _grade_word(c.grade), c.verdict
                partner = preset.cell_rule.partner(number, preset.paper)
                if len(budgets) > 1 and c.grade is not Grade.MAGNITUDE and partner is not None:
                    label, selector, value = partner
                    if not preset.cell_rule.values(PaperNumber(label, value, selector), at_budget):
                        offset = why.split(";")[0]
                        grade, why = "-", f"{offset}; '{label}' did not train {budget:,} steps: no ordering to grade"
                ours = range_text(c.ours)
                lines.append(f"| {c.label} | {range_text(c.paper)} | {ours} | {c.runs} | {grade} | {why} |")
            lines.append("")
        lines += [
            f"A cell is MAGNITUDE when the paper's value lies within our spread or within the stated tolerance of it "
            f"(x{CELL_FACTOR:g} for losses read off the paper's log-scale figures, +-{CELL_ABSOLUTE:g} for "
            "random-feature errors); DIRECTION when only the paper's ordering against the named cell holds between "
            "our spreads; NOT REPRODUCED otherwise. Rank classes (full r = d, half r = d/2, low r <= d/4) make a "
            "smaller d comparable.",
        ]
        trained = [r for r in records if r.get("kind") == "train"]
        if trained:
            lines += ["", paper_regime_note(trained)]
        lines.append("")
    else:
        lines += [preset.paper_note, ""]
    if scale == LONG:
        scaling_lines, drawn = scaling_section(preset, every_run, out, scale)
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
        best_text = value_text(float(best)) if best is not None else "-"
        final_text = value_text(float(final)) if final is not None else "-"
        lines.append(
            f"| {r['hash'][:10]} | {r['status']} | {desc} | {best_text} | {final_text} | "
            f"{population_text(r)} | "
            f"{value_text(float(r['seconds'])) if isinstance(r.get('seconds'), (int, float)) else '-'} |"
        )
    lines.append("")
    return lines, figures, verdict


def _open_store(out: Path) -> ResultsStore:
    path = SweepDirectory(out).store
    if not path.is_file():
        raise ValueError(f"{out} holds no results store ({path.name}); run `attnrank sweep PRESET --out {out}` first")
    return ResultsStore(path, readonly=True)


def checked_sweeps(store: ResultsStore, presets: Mapping[str, Preset]) -> list[tuple[str, str]]:
    """The store's (preset, scale) sweeps, each checked before anything is drawn: a preset and scale this version
    knows, and rows that read back (`ResultsStore.rows` checks every field a report reads). ValueError naming the
    store and the sweep otherwise, so a damaged store is refused with one line and nothing written."""
    sweeps = store.sweeps()
    if not sweeps:
        raise ValueError(f"{store.path} records no sweep")
    for preset_name, scale in sweeps:
        preset = presets.get(preset_name)
        if preset is None:
            raise ValueError(
                f"{store.path}: field sweep_runs.preset names no preset of this version: {preset_name!r:.60}"
            )
        if scale not in preset.scales:
            raise ValueError(
                f"{store.path}: field sweep_runs.scale of preset {preset_name} must be one of "
                f"{', '.join(preset.scales)}, got {scale!r:.60}"
            )
        store.rows(preset_name, scale)
    return sweeps


def write_report(out: Path | str, presets: Mapping[str, Preset]) -> Path:
    """Write ``<out>/report.md`` (and the figures) from ``<out>/results.sqlite`` (opened read-only); its path.

    Args:
        out: the sweep directory.
        presets: the presets by name (`experiments.studies.PRESETS`: the registry sits above this room, so its
            callers pass it down).
    """
    out = Path(out)
    lines = ["# attnrank sweep report", "", f"Store: `{SweepDirectory(out).store}` (read only).", ""]
    figures: list[Path] = []
    with _open_store(out) as store:
        sweeps = checked_sweeps(store, presets)
        summary = ["| sweep | claim | grade |", "|---|---|---|"]
        body: list[str] = []
        for preset_name, scale in sweeps:
            preset = presets[preset_name]
            section, drawn, verdict = sweep_section(store, out, preset, scale)
            body += section
            figures += drawn
            grade = "-" if verdict is None else _grade_word(verdict.grade)
            anchor = f"#{preset_name.lower()}-{scale}"
            summary.append(f"| [{preset_name} ({scale})]({anchor}) | {preset.claim} | {grade} |")
    lines += summary + [""]
    if figures:
        lines += ["Figures: " + ", ".join(f"[{p.name}]({p.name})" for p in figures) + ".", ""]
    lines += body
    report = SweepDirectory(out).report
    write_text_atomically(report, "\n".join(lines) + "\n")
    return report


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
    path = SweepDirectory(out).runs_csv
    text = io.StringIO(newline="")
    writer = csv.DictWriter(text, fieldnames=_columns(rows), restval="")
    writer.writeheader()
    writer.writerows(rows)
    write_text_atomically(path, text.getvalue())
    return path
