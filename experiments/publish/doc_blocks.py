"""Generated blocks in the docs: tables and numbers written from their sources, so they cannot drift.

A doc (README.md, docs/*.md, results/README.md and results/<store>/README.md) marks a generated block with two lines,

    <!-- BEGIN GENERATED: NAME -->
    ...
    <!-- END GENERATED: NAME -->

and ``attnrank report --docs ROOT`` (ROOT the repository root) rewrites what lies between them from NAME's source,
leaving every other byte of the doc as it is. NAME is a kind and its arguments joined by colons; the kinds
(:data:`BLOCK_KINDS`) are

- ``store-facts:STORE``: a committed store's runs and parameters, claim grade with the numbers behind it, scaling
  verdicts (long stores), training time, wall time per sitting and the revisions the runs recorded
  (``results/STORE/results.sqlite``);
- ``store-claims``: every committed store's claim grade with the numbers behind it (results/README.md);
- ``best-losses:STORE[:FIELD]``: the best loss of every run of the store, one row per cell (the fields that vary
  across the sweep, the seed aside), seeds side by side; with FIELD, one column per value of that field;
- ``long-scale``: every long store's scaling rules, their grade at each budget and their verdict, and the
  score-temperature controls (docs/scaling.md);
- ``tightness``: the tightness store's band per (d, r) (docs/bounds.md);
- ``gpu-step-costs``: milliseconds per step and losses of the first GPU calls, read from the run directories in
  ``results/gpu-2026-12-04/*.tgz`` (each run's ``metrics.csv`` and ``config.json``);
- ``random-features-curve``: the recorded benchmark run of the random-features curve
  (``benchmarks/results/random_features_curve_2026-12-02.json``): times, speed-up and the curve;
- ``bench-attention:DATE``: a recorded run of ``benchmarks/bench_attention.py``
  (``benchmarks/results/bench_attention_DATE.json``): every row's step times, speed-ups and matmul fractions.
- ``regime-control:STORE:CONTROL``: each run of STORE (a fixed training set) beside the same cell of CONTROL (fresh
  batches) at STORE's last population measurement: training loss, population error, the control's loss there.

Rewriting is all or nothing: every block of every doc is computed before a file is written, and a doc whose markers
do not pair (a BEGIN without its END, an END without a BEGIN, a nested BEGIN, names that differ) or that names an
unknown kind is refused with one line naming the file and line. The text depends only on the sources (no clock is
read), so writing twice gives the same bytes, and a test compares every committed doc with what this module writes
now (tests/experiments/reporting/test_doc_blocks.py). The results index (``results/README.md``'s block between its own
markers, `experiments.publish.results_index`) is written by ``attnrank report --index`` and left alone here.
"""

from __future__ import annotations

import csv
import datetime
import io
import json
import math
import re
import tarfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from experiments.analysis.compute_scaling import PowerLawFit, floor_text
from experiments.analysis.records import Record
from experiments.analysis.run_curves import Curve
from experiments.analysis.sweep_directory import STORE_NAME, SweepDirectory
from experiments.analysis.tightness import tightness_cells
from experiments.config import EXECUTION_FIELDS, TrainConfig
from experiments.figures.sweeps import parameter_line
from experiments.publish.results_index import SITTING_GAP, committed_stores
from experiments.reporting.scaling_report import PAPER_TEMPERATURE, claim_records
from experiments.reporting.sweep_report import checked_sweeps
from experiments.studies import CLAIMS, PRESETS, SCALING_RULES, judge
from experiments.sweeps.grading import Verdict, matches, scaling_rule_at_budget
from experiments.sweeps.run_specs import spec_from_record
from experiments.sweeps.scaling_verdicts import scaling_verdict
from experiments.sweeps.store import ResultsStore
from experiments.sweeps.store_records import sweep_records
from experiments.training.evaluation import CURVE_SAMPLES

BEGIN_PREFIX = "<!-- BEGIN GENERATED: "
END_PREFIX = "<!-- END GENERATED: "
MARKER_SUFFIX = " -->"
_MARKER = re.compile(r"^<!-- (BEGIN|END) GENERATED: ([A-Za-z0-9_.:-]+) -->$")

LONG_SCALE = "long"
GPU_CALLS = "results/gpu-2026-12-04"
"""The folder of the first GPU calls: its ``*.tgz`` archives hold each run's ``metrics.csv`` and ``config.json``."""
RANDOM_FEATURES_RUN = "benchmarks/results/random_features_curve_2026-12-02.json"
"""The recorded run of ``benchmarks/bench_random_features.py`` behind docs/random_features.md's numbers."""
RANDOM_FEATURES_ROWS = (1, 16, 256, 4096, 16384)
"""The head counts docs/random_features.md shows of the recorded curve (every power of 2 is in the JSON)."""

NOT_A_CELL_FIELD = frozenset({*EXECUTION_FIELDS, "seed", "data_seed", "log_every", "bf16", "compile"})
"""Config fields that never tell two cells of a sweep apart (the seed is the column; the rest is bookkeeping)."""


@dataclass(frozen=True)
class Block:
    """One generated block of a doc: its name and the 0-based lines of its two markers."""

    name: str
    begin: int
    end: int


RESUME_SLACK = 60.0
"""Seconds by which a run's summed training time may exceed its recorded span (end minus start) before
:func:`store_facts` says it went on from a checkpoint (such a run's start is its last sitting's; its seconds count
every sitting)."""


def _fmt(value: float, digits: int = 3) -> str:
    """``value`` to ``digits`` significant digits, trailing zeros dropped (the reports' style)."""
    return f"{value:.{digits}g}"


def _loss(value: Any) -> str:
    """A best loss to four significant digits, trailing zeros kept (1.000 is the zero predictor, not 1)."""
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(float(value)):
        return "-"
    return f"{float(value):#.4g}"


def _duration(seconds: float) -> str:
    """Seconds as the store READMEs write them: ``974 s (16.2 min)``, ``15182 s (4.22 h)``."""
    if seconds < 120.0:
        return f"{seconds:.0f} s"
    if seconds < 2 * 3600.0:
        return f"{seconds:.0f} s ({seconds / 60.0:.1f} min)"
    return f"{seconds:.0f} s ({seconds / 3600.0:.2f} h)"


def _utc(timestamp: float, with_day: bool) -> str:
    moment = datetime.datetime.fromtimestamp(timestamp, tz=datetime.UTC)
    return moment.strftime("%Y-%m-%d %H:%M:%S" if with_day else "%H:%M:%S")


def sitting_spans(intervals: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    """(start, end) of each sitting: runs' (started, finished) intervals grouped as the results index groups them (a
    gap of more than `SITTING_GAP` seconds begins a new sitting)."""
    spans: list[list[float]] = []
    for start, end in sorted(intervals):
        if spans and start <= spans[-1][1] + SITTING_GAP:
            spans[-1][1] = max(spans[-1][1], end)
        else:
            spans.append([start, end])
    return [(start, end) for start, end in spans]


def _numbers_text(numbers: Mapping[str, float]) -> str:
    return ", ".join(f"{name.replace('_', ' ')} {_fmt(value)}" for name, value in numbers.items())


def _store_path(root: Path, store: str) -> Path:
    path = root / "results" / store / STORE_NAME
    if not path.is_file():
        raise ValueError(f"results/{store}/{STORE_NAME}: no such store")
    return path


def _sweeps(root: Path, store: str) -> list[tuple[str, str, list[Record]]]:
    """(preset, scale, records) of every sweep of a committed store, read-only."""
    with ResultsStore(_store_path(root, store), readonly=True) as opened:
        sweeps: list[tuple[str, str, list[Record]]] = []
        for preset, scale in checked_sweeps(opened, PRESETS):
            sweeps.append((preset, scale, list(sweep_records(opened, preset, scale))))
        return sweeps


def _claim_line(preset: str, scale: str, records: Sequence[Record]) -> str | None:
    """The claim's grade and the numbers behind it, on the runs the sweep report judges."""
    claim = CLAIMS.get(preset)
    if claim is None:
        return None
    judged = claim_records(records) if scale == LONG_SCALE else records
    verdict = judge(preset, judged)
    assert verdict is not None
    where = " (judged at each d's largest budget, temperature 1)" if scale == LONG_SCALE else ""
    return f"- Claim ({claim.statement}){where}: **{verdict.grade.value.upper()}**: {verdict.explanation}."


def store_facts(root: Path, store: str) -> list[str]:
    """``store-facts:STORE``: what ``results/STORE/results.sqlite`` records about its runs (module docstring)."""
    lines = [
        f"Generated from `{STORE_NAME}` by `attnrank report --docs` ([report.md](report.md) has every number):",
        "",
    ]
    for preset, scale, records in _sweeps(root, store):
        statuses: dict[str, int] = {}
        for record in records:
            statuses[record["status"]] = statuses.get(record["status"], 0) + 1
        counted = ", ".join(f"{status} {count}" for status, count in sorted(statuses.items()))
        lines.append(f"- Sweep {preset} ({scale}): {len(records)} runs ({counted}); {parameter_line(records)}.")
        claim = _claim_line(preset, scale, records)
        if claim is not None:
            lines.append(claim)
        if scale == LONG_SCALE:
            for rule in SCALING_RULES.get(preset, ()):
                found = scaling_verdict(rule, records)
                top = (
                    f"{found.budgets[-1][1].value} at {found.budgets[-1][0]:,} steps" if found.budgets else "no budget"
                )
                lines.append(f'- Scaling rule "{rule.name}": {top}; verdict: {found.text}.')
    with ResultsStore(_store_path(root, store), readonly=True) as opened:
        rows = [row for row in opened.rows() if row.status in ("finished", "diverged")]
    seconds = sum(float(r.seconds) for r in rows if r.seconds is not None and math.isfinite(r.seconds))
    intervals = [(r.started, r.finished) for r in rows if r.started is not None and r.finished is not None]
    spans = sitting_spans(intervals)
    lines.append(f"- Training time summed over the {len(rows)} finished runs: {_duration(seconds)}.")
    if spans:
        parts = []
        for i, (start, end) in enumerate(spans):
            same_day = i > 0 and _utc(start, True)[:10] == _utc(spans[i - 1][0], True)[:10]
            parts.append(f"{_utc(start, not same_day)} to {_utc(end, False)} UTC, {_duration(end - start)}")
        sittings = (
            "" if len(spans) == 1 else f" ({len(spans)} sittings: a gap over {SITTING_GAP / 60:g} min begins one)"
        )
        total = "" if len(spans) == 1 else f"; {_duration(sum(end - start for start, end in spans))} in all"
        resumed = sum(
            1
            for r in rows
            if r.seconds is not None
            and r.started is not None
            and r.finished is not None
            and float(r.seconds) > r.finished - r.started + RESUME_SLACK
        )
        caveat = (
            f" ({resumed} run{'s' if resumed > 1 else ''} trained longer than {'their' if resumed > 1 else 'its'} "
            "recorded span: a run that goes on from a checkpoint, resumed or extended, records that sitting's start, "
            "so the span leaves out its earlier training)"
            if resumed
            else ""
        )
        lines.append(f"- Wall time from the runs' start and end times{sittings}: {'; '.join(parts)}{total}{caveat}.")
    counts: dict[str, int] = {}
    first: dict[str, float] = {}
    for row in sorted(rows, key=lambda r: (r.started or 0.0, r.hash)):
        revision = (row.git_revision or "unknown")[:7]
        counts[revision] = counts.get(revision, 0) + 1
        first.setdefault(revision, row.started or 0.0)
    revisions = ", ".join(f"`{rev}` ({counts[rev]})" for rev in sorted(counts, key=lambda rev: (first[rev], rev)))
    lines.append(f"- Revisions the runs recorded (in the order of their first run's start): {revisions}.")
    return lines


def store_claims(root: Path) -> list[str]:
    """``store-claims``: one row per sweep of every committed store: its claim's grade and the numbers behind it (on
    the runs its report judges) and, for a long sweep, each scaling rule's verdict."""
    lines = [
        "Generated from every committed `results/<store>/results.sqlite` by `attnrank report --docs`: each claim's "
        "grade by its own predicate, on the runs the store's report.md judges, with the numbers behind it.",
        "",
        "| store | sweep | claim: grade and the numbers behind it |",
        "|---|---|---|",
    ]
    for path in committed_stores(root / "results"):
        store = path.parent.name
        for preset, scale, records in _sweeps(root, store):
            claim = _claim_line(preset, scale, records)
            if claim is None:
                continue
            text = claim.removeprefix("- ").rstrip(".")
            if scale == LONG_SCALE:
                verdicts = [
                    f"{rule.name}: {scaling_verdict(rule, records).text.split(' (')[0].split(':')[0]}"
                    for rule in SCALING_RULES.get(preset, ())
                ]
                text += "".join(f"; scaling rule {v}" for v in verdicts)
            lines.append(f"| [{store}/]({store}/README.md) | {preset} ({scale}) | {text} |")
    return lines


def _cell_configs(records: Sequence[Record]) -> list[tuple[Record, dict[str, Any]]]:
    """Each training record with its full config (defaults filled in, so older rows compare with newer ones)."""
    out = []
    for record in records:
        if record.get("kind") != "train":
            continue
        config = spec_from_record("train", {k: v for k, v in record.items() if k in TrainConfig.__dataclass_fields__})
        assert isinstance(config, TrainConfig)
        out.append((record, config.to_dict()))
    return out


def _shown(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        return f"{value:g}"
    return "-" if value is None else str(value)


def best_losses(root: Path, store: str, pivot: str | None = None) -> list[str]:
    """``best-losses:STORE[:FIELD]``: a table of every run's best loss (module docstring)."""
    lines: list[str] = []
    for preset, scale, records in _sweeps(root, store):
        configs = _cell_configs(records)
        if not configs:
            continue
        fields = sorted({k for _, c in configs for k in c if k not in NOT_A_CELL_FIELD})
        varying = [f for f in fields if len({json.dumps(c.get(f), sort_keys=True) for _, c in configs}) > 1]
        if pivot is not None and pivot not in varying:
            raise ValueError(f"best-losses:{store}:{pivot}: {pivot} does not vary in {preset} ({scale})")
        keys = [f for f in varying if f != pivot]
        columns = sorted({c[pivot] for _, c in configs}) if pivot is not None else [None]
        cells: dict[tuple[str, ...], dict[Any, list[tuple[int, str]]]] = {}
        for record, config in configs:
            row_key = tuple(_shown(config[k]) for k in keys)
            column = config[pivot] if pivot is not None else None
            cells.setdefault(row_key, {}).setdefault(column, []).append(
                (int(config["seed"]), _loss(record.get("best_loss")))
            )
        seeds = sorted({int(c["seed"]) for _, c in configs})
        seed_text = (
            f"seeds {' / '.join(str(s) for s in seeds)} side by side where a cell has several"
            if len(seeds) > 1
            else f"seed {seeds[0]}"
        )
        head = [*keys, *(f"{pivot} = {_shown(v)}" for v in columns)] if pivot is not None else [*keys, "best loss"]
        lines += [
            f"Best loss of every run of {preset} ({scale}), {seed_text} (generated from `{STORE_NAME}` by "
            "`attnrank report --docs`):",
            "",
            "| " + " | ".join(head) + " |",
            "|" + "---|" * len(head),
        ]
        for row_key in sorted(cells, key=_natural):
            values = []
            for column in columns:
                runs = sorted(cells[row_key].get(column, []))
                values.append(" / ".join(loss for _, loss in runs) if runs else "-")
            lines.append("| " + " | ".join([*row_key, *values]) + " |")
        lines.append("")
    return lines[:-1] if lines else lines


def _natural(key: tuple[str, ...]) -> tuple[Any, ...]:
    """Sort numbers as numbers and text as text (so d = 8 comes before d = 16)."""
    out: list[Any] = []
    for part in key:
        try:
            out.append((0, float(part), ""))
        except ValueError:
            out.append((1, 0.0, part))
    return tuple(out)


def _fit_floor(fit: PowerLawFit | None) -> str:
    if fit is None:
        return "not fitted"
    variance = float(fit.covariance.diagonal()[0])
    se = f" +- {math.sqrt(variance):.2g}" if variance >= 0 else ""
    return f"{floor_text(fit)}{se}"


def long_stores(root: Path) -> list[tuple[str, str, list[Record]]]:
    """(store, preset, records) of every committed long sweep, by store name."""
    out = []
    for path in committed_stores(root / "results"):
        for preset, scale, records in _sweeps(root, path.parent.name):
            if scale == LONG_SCALE:
                out.append((path.parent.name, preset, records))
    return out


def long_scale(root: Path) -> list[str]:
    """``long-scale``: every long store's scaling rules along the ladder, then its score-temperature controls."""
    lines = [
        "Generated from the committed long stores by `attnrank report --docs`. Ratio: the worse cell's best seed over "
        "the better cell's worst seed at each budget (steps); floors: the fitted law's floor of each cell, worse vs "
        "better, +- one standard error.",
        "",
        "| store | rule | grade at each budget (ratio) | verdict | fitted floors |",
        "|---|---|---|---|---|",
    ]
    controls: list[str] = []
    for store, preset, records in long_stores(root):
        for rule in SCALING_RULES.get(preset, ()):
            found = scaling_verdict(rule, records)
            graded = []
            for steps, grade, _ in found.budgets:
                at_budget = [
                    r
                    for r in records
                    if int(r["steps"]) == steps and (matches(r, rule.worse) or matches(r, rule.better))
                ]
                ratio = scaling_rule_at_budget(rule, at_budget).numbers.get("ratio")
                graded.append(f"{_steps(steps)}: {grade.value} ({_fmt(ratio) if ratio is not None else '-'}x)")
            verdict = found.text.split(" (")[0].split(":")[0]
            floors = f"{_fit_floor(found.fits.get('worse'))} vs {_fit_floor(found.fits.get('better'))}"
            lines.append(
                f"| [{store}](../results/{store}/report.md) | {rule.name} | {'; '.join(graded)} | {verdict} | "
                f"{floors} |"
            )
        controls += _temperature_rows(store, preset, records)
    if controls:
        lines += [
            "",
            "Score-temperature controls: the claim's own rule (and fig1's rule at L = 3) on the same cells at "
            "temperature 1 (the paper's score scale) and at 128, where both ran:",
            "",
            "| store | d, steps | judged | temperature 1 | temperature 128 |",
            "|---|---|---|---|---|",
            *controls,
        ]
    return lines


def _steps(steps: int) -> str:
    return f"{steps // 1000}k" if steps % 1000 == 0 else f"{steps / 1000:g}k"


def _temperature_rows(store: str, preset: str, records: Sequence[Record]) -> list[str]:
    by_budget: dict[tuple[int, int], set[float]] = {}
    for r in records:
        by_budget.setdefault((int(r["d"]), int(r["steps"])), set()).add(float(r["temperature"]))
    rows = []
    for d, steps in sorted(
        key for key, temperatures in by_budget.items() if {PAPER_TEMPERATURE, 128.0} <= temperatures
    ):
        subsets = {
            t: [r for r in records if int(r["d"]) == d and int(r["steps"]) == steps and float(r["temperature"]) == t]
            for t in (PAPER_TEMPERATURE, 128.0)
        }
        claim = CLAIMS.get(preset)
        judges: list[tuple[str, Callable[[Sequence[Record]], Verdict | None]]] = [
            ("claim", lambda rs: judge(preset, rs))
        ]
        judges += [] if claim is None else list(claim.extra_judges)
        for name, rule in judges:
            verdicts = [rule(subsets[t]) for t in (PAPER_TEMPERATURE, 128.0)]
            if any(v is None for v in verdicts):
                continue
            texts = [f"**{v.grade.value}** ({_numbers_text(v.numbers)})" for v in verdicts if v is not None]
            rows.append(
                f"| [{store}](../results/{store}/report.md) | {d}, {_steps(steps)} | {name} | {texts[0]} | {texts[1]} |"
            )
    return rows


def tightness(root: Path, store: str = "tightness-cpu") -> list[str]:
    """``tightness``: per (d, r), the best model found beside the certified bound at the smallest H, the tightest H
    and the largest H (errors to 3 decimals; ratio = best found / bound to 3 significant digits)."""
    records = [r for preset, _, rs in _sweeps(root, store) if preset == "tightness" for r in rs]
    cells = [c for c in tightness_cells(records) if c.best_found is not None]
    lines = [
        f"Generated from `results/{store}/{STORE_NAME}` by `attnrank report --docs`; each entry is H: best found vs "
        "certified bound.",
        "",
        "| d | r | smallest H | tightest H | largest H | best found / bound, smallest -> largest H | tightest |",
        "|---|---|---|---|---|---|---|",
    ]

    def entry(cell: Any) -> str:
        return f"{cell.H}: {cell.best_found[0]:.3f} vs {cell.bound:.3f}"

    for d, r in sorted({(c.d, c.r) for c in cells}):
        group = [c for c in cells if (c.d, c.r) == (d, r)]
        shown = [_fmt(c.ratio) for c in group]
        tightest = min(group, key=lambda c: float(_fmt(c.ratio)))
        ties = [str(c.H) for c, text in zip(group, shown, strict=True) if text == _fmt(tightest.ratio)]
        lines.append(
            f"| {d} | {r} | {entry(group[0])} | {entry(tightest)} | {entry(group[-1])} | {shown[0]} -> {shown[-1]} | "
            f"{_fmt(tightest.ratio)} (H = {', '.join(ties)}) |"
        )
    return lines


@dataclass(frozen=True)
class GpuRun:
    """One run directory of a GPU call's archive: its config and what its ``metrics.csv`` recorded."""

    call: str
    preset: str
    config: Mapping[str, Any]
    steps_reached: int
    last_loss: float
    best_loss: float
    ms_per_step: float


def gpu_runs(root: Path) -> list[GpuRun]:
    """Every run with at least two logged epochs in the GPU calls' archives: milliseconds per step from its
    ``metrics.csv`` (the time column between its second and last rows), the loss at its last row and the lowest."""
    runs = []
    archives = sorted((root / GPU_CALLS).glob("*.tgz"))
    if not archives:
        raise ValueError(f"{GPU_CALLS}: no *.tgz archive of the GPU calls")
    for archive in archives:
        call = archive.name.split("-")[0]
        with tarfile.open(archive, "r:gz") as tar:
            members = {PurePosixPath(m.name): m for m in tar.getmembers() if m.isfile()}
            for name in sorted(members):
                if name.name != "metrics.csv" or len(name.parts) < 4 or name.parts[-3] != "runs":
                    continue
                metrics = _member_text(tar, members[name])
                config_member = members.get(name.parent / "config.json")
                if config_member is None:
                    raise ValueError(f"{archive.name}: {name.parent} has metrics.csv but no config.json")
                config = json.loads(_member_text(tar, config_member))
                rows = list(csv.DictReader(io.StringIO(metrics)))
                if len(rows) < 2:
                    continue
                second, last = rows[1], rows[-1]
                seconds = float(last["time"]) - float(second["time"])
                steps = int(last["step"]) - int(second["step"])
                runs.append(
                    GpuRun(
                        call=call,
                        preset=name.parts[-4].removesuffix("-gpu"),
                        config=config.get("config", config),
                        steps_reached=int(last["step"]),
                        last_loss=float(last["loss"]),
                        best_loss=min(float(r["loss"]) for r in rows),
                        ms_per_step=1000.0 * seconds / steps,
                    )
                )
    return runs


def _member_text(tar: tarfile.TarFile, member: tarfile.TarInfo) -> str:
    handle = tar.extractfile(member)
    assert handle is not None
    return handle.read().decode("utf-8")


def gpu_step_costs(root: Path) -> list[str]:
    """``gpu-step-costs``: one row per run of the first GPU calls (module docstring)."""
    lines = [
        f"Generated from the run directories in `{GPU_CALLS}/*.tgz` by `attnrank report --docs`: ms per step = the "
        "time column of the run's `metrics.csv` between its second and last rows, over the steps between them.",
        "",
        "| call | preset | L | r | N | seed | steps reached (of) | loss at stop | best loss | ms per step |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    order = {"fig1": 0, "posn": 1, "conjecture6": 2, "icl": 3}
    runs = sorted(
        gpu_runs(root),
        key=lambda g: (
            g.call,
            order.get(g.preset, 9),
            g.preset,
            -int(g.config["layers"]),
            int(g.config["rank"]),
            int(g.config["seed"]),
        ),
    )
    for g in runs:
        c = g.config
        lines.append(
            f"| {g.call.removeprefix('call')} | {g.preset} | {c['layers']} | {c['rank']} | {c['N']} | {c['seed']} | "
            f"{g.steps_reached} ({c['steps']}) | {g.last_loss:.5f} | {g.best_loss:.4f} | {g.ms_per_step:.1f} |"
        )
    return lines


def random_features_curve(root: Path) -> list[str]:
    """``random-features-curve``: the recorded benchmark run of the random-features curve (module docstring)."""
    path = root / RANDOM_FEATURES_RUN
    if not path.is_file():
        raise ValueError(f"{RANDOM_FEATURES_RUN}: no such file")
    run = json.loads(path.read_text(encoding="utf-8"))
    ratios = [row["baseline_s"] / row["ours_s"] for row in run["rows"] if row.get("baseline_s")]
    dims, heads = list(run["dims"]), list(run["head_counts"])
    lines = [
        f"Generated from `{RANDOM_FEATURES_RUN}` by `attnrank report --docs`:",
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


def bench_attention(root: Path, date: str) -> list[str]:
    """``bench-attention:DATE``: the rows of ``benchmarks/results/bench_attention_DATE.json`` (a recorded run of
    ``benchmarks/bench_attention.py``): per (c, r, mode) the medians of each side, both speed-ups and the fraction of
    the run's larger measured matmul peak each side reached."""
    relative = f"benchmarks/results/bench_attention_{date}.json"
    path = root / relative
    if not path.is_file():
        raise ValueError(f"{relative}: no such file")
    run = json.loads(path.read_text(encoding="utf-8"))
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


REGIME_FIELDS = frozenset({"train_batches", "sampler", "data_seed"})
"""Config fields that say how a run's data was drawn; ``regime-control`` matches cells across regimes without them."""

BUDGET_FIELDS = frozenset({"steps"})
"""A run's budget: ``regime-control`` shows it in a column of its own and matches a run that extends its cell (more
steps along the same schedule) with the control's cell, compared at the same step."""


def _regime_cells(root: Path, store: str) -> list[tuple[tuple[str, ...], Record, Curve | None, Curve | None]]:
    """(cell key, record, loss curve, population curve) of every training run of a committed store; the cell key is
    every field that tells two runs apart except the seeds, the data regime and the budget."""
    sweep = SweepDirectory(root / "results" / store)
    out = []
    for _, _, records in _sweeps(root, store):
        for record, config in _cell_configs(records):
            fields = sorted(k for k in config if k not in NOT_A_CELL_FIELD | REGIME_FIELDS | BUDGET_FIELDS)
            key = tuple(f"{k}={_shown(config[k])}" for k in fields)
            loss, _, _ = sweep.run_curve(str(record["hash"]))
            population, _, _ = sweep.run_curve(str(record["hash"]), "population")
            out.append((key, record, loss, population))
    return out


def _at_step(curve: Curve | None, step: int) -> float | None:
    """The curve's value at ``step`` (its epoch that ends there), or None when the curve has no such point."""
    return next((value for at, value in curve or () if at == step), None)


def control_at_step(curve: Curve | None, step: int) -> str:
    """A control run's epoch loss at ``step``, or where its curve ends when that is before ``step``."""
    if curve and curve[-1][0] < step:
        return f"ends at {curve[-1][0]:,}"
    return _loss(_at_step(curve, step))


def regime_control(root: Path, store: str, control: str) -> list[str]:
    """``regime-control:STORE:CONTROL``: each run of STORE beside the runs of the same cell in CONTROL (the same
    configuration but for the seeds and the data regime), compared at STORE's last population measurement: the run's
    training loss there (on its fixed set when it replays one) and its population error, against the control runs'
    epoch loss at the same step (on fresh batches, an estimate of their population error) and their best loss."""
    controls: dict[tuple[str, ...], list[tuple[int, Curve | None, Any]]] = {}
    for key, record, loss, _ in _regime_cells(root, control):
        controls.setdefault(key, []).append((int(record["seed"]), loss, record.get("best_loss")))
    lines = [
        f"Generated from `results/{store}/` and the control `results/{control}/` (`curves.csv`, `population.csv`, "
        f"`{STORE_NAME}`) by `attnrank report --docs`; each run is compared at its last population measurement, step "
        f"P (population error on the first {CURVE_SAMPLES:,} held-out samples, as the run measured it along its curve; "
        'the control\'s epoch loss on fresh batches estimates its own; "ends at S" where a control run stopped before '
        "P).",
        "",
        "| cell | seed, data seed | data | steps | P | training loss at P | population error at P | control at P: "
        "fresh-batch loss (seeds) | control's best loss over its run (seeds) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    ordered = sorted(_regime_cells(root, store), key=lambda c: (_natural(c[0]), int(c[1]["steps"])))
    for key, record, loss, population in ordered:
        K = int(record.get("train_batches") or 0)
        data = f"{K} batches, {record.get('sampler') or 'default'} sampler" if K else "fresh batches"
        data_seed = record.get("data_seed")
        seeds = f"{record['seed']}, {record['seed'] if data_seed is None else data_seed}"
        cell = " ".join(part for part in key if part.split("=")[0] in ("d", "N", "layers", "rank", "width"))
        matched = sorted(controls.get(key, []), key=lambda c: c[0])
        best_text = " / ".join(_loss(best) for _, _, best in matched) or "no such cell"
        budget = f"{int(record['steps']):,}"
        if not population:
            lines.append(f"| {cell} | {seeds} | {data} | {budget} | - | - | - | - | {best_text} |")
            continue
        step, value = population[-1]
        at_control = " / ".join(control_at_step(curve, step) for _, curve, _ in matched) or "no such cell"
        lines.append(
            f"| {cell} | {seeds} | {data} | {budget} | {step:,} | {_loss(_at_step(loss, step))} | {_loss(value)} | "
            f"{at_control} | {best_text} |"
        )
    return lines


BLOCK_KINDS: dict[str, tuple[Callable[..., list[str]], int, int]] = {
    "store-facts": (store_facts, 1, 1),
    "store-claims": (store_claims, 0, 0),
    "best-losses": (best_losses, 1, 2),
    "long-scale": (long_scale, 0, 0),
    "tightness": (tightness, 0, 1),
    "gpu-step-costs": (gpu_step_costs, 0, 0),
    "random-features-curve": (random_features_curve, 0, 0),
    "bench-attention": (bench_attention, 1, 1),
    "regime-control": (regime_control, 2, 2),
}
"""Block kind -> (generator(root, *arguments) -> lines, fewest arguments, most arguments)."""


def block_lines(root: Path, name: str, where: str = "") -> list[str]:
    """The lines generated for block NAME (``kind:argument:...``) of a doc under ``root``."""
    kind, *arguments = name.split(":")
    if kind not in BLOCK_KINDS:
        raise ValueError(f"{where}unknown generated block {name!r} (kinds: {', '.join(sorted(BLOCK_KINDS))})")
    generator, fewest, most = BLOCK_KINDS[kind]
    if not fewest <= len(arguments) <= most or any(not a for a in arguments):
        raise ValueError(f"{where}block {name!r}: {kind} takes {fewest} to {most} arguments after its name")
    try:
        return generator(root, *arguments)
    except ValueError as exc:
        raise ValueError(f"{where}block {name!r}: {exc}") from None


def find_blocks(text: str, path: Path | str) -> list[Block]:
    """The generated blocks of a doc's text; ValueError naming the file and line when the markers do not pair."""
    blocks: list[Block] = []
    open_name: str | None = None
    open_line = 0
    for number, line in enumerate(text.splitlines()):
        stripped = line.strip()
        if not stripped.startswith((BEGIN_PREFIX, END_PREFIX)):
            continue
        match = _MARKER.match(stripped)
        if match is None:
            raise ValueError(f"{path}:{number + 1}: malformed generated-block marker (expected {BEGIN_PREFIX}NAME -->)")
        side, name = match.groups()
        if side == "BEGIN":
            if open_name is not None:
                raise ValueError(
                    f"{path}:{number + 1}: BEGIN {name} inside block {open_name} (opened at line {open_line + 1})"
                )
            open_name, open_line = name, number
        else:
            if open_name is None:
                raise ValueError(f"{path}:{number + 1}: END {name} without its BEGIN")
            if name != open_name:
                raise ValueError(
                    f"{path}:{number + 1}: END {name} closes block {open_name} (opened at line {open_line + 1})"
                )
            blocks.append(Block(name, open_line, number))
            open_name = None
    if open_name is not None:
        raise ValueError(f"{path}:{open_line + 1}: BEGIN {open_name} without its END")
    return blocks


def doc_files(root: Path) -> list[Path]:
    """The docs that may hold generated blocks: README.md, docs/*.md, results/README.md, results/*/README.md."""
    root = Path(root)
    files = [root / "README.md", *sorted((root / "docs").glob("*.md")), root / "results" / "README.md"]
    files += sorted((root / "results").glob("*/README.md"))
    return [f for f in files if f.is_file()]


def render_doc(root: Path, path: Path) -> str:
    """The text ``path`` would have with every generated block rewritten from its source."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    shown = _relative(root, path)
    blocks = find_blocks(text, shown)
    if not blocks:
        return text
    lines = text.splitlines()
    out: list[str] = []
    previous = 0
    for block in blocks:
        out += lines[previous : block.begin + 1]
        out += block_lines(root, block.name, f"{shown}:{block.begin + 1}: ")
        previous = block.end
    out += lines[previous:]
    return "\n".join(out) + ("\n" if text.endswith("\n") else "")


def _relative(root: Path, path: Path) -> str:
    try:
        return path.resolve().relative_to(Path(root).resolve()).as_posix()
    except ValueError:
        return str(path)


def rendered_docs(root: Path) -> dict[Path, tuple[str, str]]:
    """Every doc under ``root`` with generated blocks: path -> (text now, text with the blocks rewritten)."""
    out = {}
    for path in doc_files(root):
        now = path.read_text(encoding="utf-8", errors="replace")
        if BEGIN_PREFIX not in now and END_PREFIX not in now:
            continue
        out[path] = (now, render_doc(root, path))
    return out


def write_docs(root: Path | str) -> tuple[list[Path], int]:
    """Rewrite every generated block under ``root`` (all computed before any file is written); the docs whose text
    changed and the number of blocks found."""
    root = Path(root)
    if not root.is_dir():
        raise ValueError(f"DIR: repository root not found: {root}")
    if not (root / "README.md").is_file() or not (root / "docs").is_dir():
        raise ValueError(f"DIR: {root} is not the repository root (it needs README.md and docs/)")
    rendered = rendered_docs(root)
    blocks = sum(len(find_blocks(new, path)) for path, (_, new) in rendered.items())
    changed = []
    for path, (now, new) in rendered.items():
        if new != now:
            path.write_text(new, encoding="utf-8")
            changed.append(path)
    return changed, blocks
