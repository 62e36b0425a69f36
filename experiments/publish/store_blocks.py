"""The docs' generated blocks over the committed stores (`experiments.publish.doc_blocks` rewrites them): each store's
facts and best losses, every store's claim line, a fixed-set store beside its fresh-batch control. Each block's marker
names the store it reads (``store-facts:fig1-cpu``): the store declares its blocks in its README.

- ``store-facts:STORE``: the store's runs and parameters, claim grade with the numbers behind it, scaling verdicts
  (long stores), training time, wall time per sitting and the revisions the runs recorded;
- ``store-claims``: every committed store's claim grade with the numbers behind it (results/README.md);
- ``best-losses:STORE[:FIELD]``: the best loss of every run of the store, one row per cell (the fields that vary
  across the sweep, the seed aside), seeds side by side; with FIELD, one column per value of that field;
- ``regime-control:STORE:CONTROL``: each run of STORE (a fixed training set) beside the same cell of CONTROL (fresh
  batches) at STORE's last population measurement: training loss, population error, the control's loss there.
"""

from __future__ import annotations

import datetime
import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

from experiments.analysis.records import Record
from experiments.analysis.run_curves import Curve
from experiments.analysis.sweep_directory import CURVES_NAME, POPULATION_NAME, REPORT_NAME, STORE_NAME
from experiments.config import EXECUTION_FIELDS, TrainConfig
from experiments.figures.sweeps import parameter_line
from experiments.publish.results_index import SITTING_GAP, committed_stores, sitting_spans
from experiments.reporting.doc_sources import RESULTS_NAME, DocBlockKind, DocSources
from experiments.reporting.scaling_report import claim_records
from experiments.studies import CLAIMS, SCALING_RULES, judge
from experiments.sweeps.preset_kit import LONG
from experiments.sweeps.run_specs import spec_from_record
from experiments.sweeps.scaling_verdicts import scaling_verdict
from experiments.sweeps.store import ResultsStore
from experiments.training.evaluation import CURVE_SAMPLES

NOT_A_CELL_FIELD = frozenset({*EXECUTION_FIELDS, "seed", "data_seed", "log_every", "bf16", "compile"})
"""Config fields that never tell two cells of a sweep apart (the seed is the column; the rest is bookkeeping)."""

RESUME_SLACK = 60.0
"""Seconds by which a run's summed training time may exceed its recorded span (end minus start) before
:func:`store_facts` says it went on from a checkpoint (such a run's start is its last sitting's; its seconds count
every sitting)."""


def significant(value: float, digits: int = 3) -> str:
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


def numbers_text(numbers: Mapping[str, float]) -> str:
    return ", ".join(f"{name.replace('_', ' ')} {significant(value)}" for name, value in numbers.items())


def claim_line(preset: str, scale: str, records: Sequence[Record]) -> str | None:
    """The claim's grade and the numbers behind it, on the runs the sweep report judges."""
    claim = CLAIMS.get(preset)
    if claim is None:
        return None
    judged = claim_records(records) if scale == LONG else records
    verdict = judge(preset, judged)
    assert verdict is not None
    where = " (judged at each d's largest budget, temperature 1)" if scale == LONG else ""
    return f"- Claim ({claim.statement}){where}: **{verdict.grade.value.upper()}**: {verdict.explanation}."


def store_facts(sources: DocSources, store: str) -> list[str]:
    """``store-facts:STORE``: what ``results/STORE/results.sqlite`` records about its runs (module docstring)."""
    lines = [
        f"Generated from `{STORE_NAME}` by `attnrank report --docs` ([{REPORT_NAME}]({REPORT_NAME}) has every number):",
        "",
    ]
    for preset, scale, records in sources.sweeps(store):
        statuses: dict[str, int] = {}
        for record in records:
            statuses[record["status"]] = statuses.get(record["status"], 0) + 1
        counted = ", ".join(f"{status} {count}" for status, count in sorted(statuses.items()))
        lines.append(f"- Sweep {preset} ({scale}): {len(records)} runs ({counted}); {parameter_line(records)}.")
        claim = claim_line(preset, scale, records)
        if claim is not None:
            lines.append(claim)
        if scale == LONG:
            for rule in SCALING_RULES.get(preset, ()):
                found = scaling_verdict(rule, records)
                top = (
                    f"{found.budgets[-1][1].value} at {found.budgets[-1][0]:,} steps" if found.budgets else "no budget"
                )
                lines.append(f'- Scaling rule "{rule.name}": {top}; verdict: {found.text}.')
    with ResultsStore(sources.store(store).store, readonly=True) as opened:
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


def store_claims(sources: DocSources) -> list[str]:
    """``store-claims``: one row per sweep of every committed store: its claim's grade and the numbers behind it (on
    the runs its report judges) and, for a long sweep, each scaling rule's verdict."""
    lines = [
        f"Generated from every committed `{RESULTS_NAME}/<store>/{STORE_NAME}` by `attnrank report --docs`: each "
        f"claim's grade by its own predicate, on the runs the store's {REPORT_NAME} judges, with the numbers behind "
        "it.",
        "",
        "| store | sweep | claim: grade and the numbers behind it |",
        "|---|---|---|",
    ]
    for path in committed_stores(sources.root / RESULTS_NAME):
        store = path.parent.name
        for preset, scale, records in sources.sweeps(store):
            claim = claim_line(preset, scale, records)
            if claim is None:
                continue
            text = claim.removeprefix("- ").rstrip(".")
            if scale == LONG:
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


def best_losses(sources: DocSources, store: str, pivot: str | None = None) -> list[str]:
    """``best-losses:STORE[:FIELD]``: a table of every run's best loss (module docstring)."""
    lines: list[str] = []
    for preset, scale, records in sources.sweeps(store):
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


REGIME_FIELDS = frozenset({"train_batches", "sampler", "data_seed"})
"""Config fields that say how a run's data was drawn; ``regime-control`` matches cells across regimes without them."""

BUDGET_FIELDS = frozenset({"steps"})
"""A run's budget: ``regime-control`` shows it in a column of its own and matches a run that extends its cell (more
steps along the same schedule) with the control's cell, compared at the same step."""


def _regime_cells(sources: DocSources, store: str) -> list[tuple[tuple[str, ...], Record, Curve | None, Curve | None]]:
    """(cell key, record, loss curve, population curve) of every training run of a committed store; the cell key is
    every field that tells two runs apart except the seeds, the data regime and the budget."""
    sweep = sources.store(store)
    out = []
    for _, _, records in sources.sweeps(store):
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


def regime_control(sources: DocSources, store: str, control: str) -> list[str]:
    """``regime-control:STORE:CONTROL``: each run of STORE beside the runs of the same cell in CONTROL (the same
    configuration but for the seeds and the data regime), compared at STORE's last population measurement: the run's
    training loss there (on its fixed set when it replays one) and its population error, against the control runs'
    epoch loss at the same step (on fresh batches, an estimate of their population error) and their best loss."""
    controls: dict[tuple[str, ...], list[tuple[int, Curve | None, Any]]] = {}
    for key, record, loss, _ in _regime_cells(sources, control):
        controls.setdefault(key, []).append((int(record["seed"]), loss, record.get("best_loss")))
    lines = [
        f"Generated from `{RESULTS_NAME}/{store}/` and the control `{RESULTS_NAME}/{control}/` (`{CURVES_NAME}`, "
        f"`{POPULATION_NAME}`, "
        f"`{STORE_NAME}`) by `attnrank report --docs`; each run is compared at its last population measurement, step "
        f"P (population error on the first {CURVE_SAMPLES:,} held-out samples, as the run measured it along its curve; "
        'the control\'s epoch loss on fresh batches estimates its own; "ends at S" where a control run stopped before '
        "P).",
        "",
        "| cell | seed, data seed | data | steps | P | training loss at P | population error at P | control at P: "
        "fresh-batch loss (seeds) | control's best loss over its run (seeds) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    ordered = sorted(_regime_cells(sources, store), key=lambda c: (_natural(c[0]), int(c[1]["steps"])))
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


DOC_BLOCKS = (
    DocBlockKind("store-facts", store_facts, 1, 1),
    DocBlockKind("store-claims", store_claims),
    DocBlockKind("best-losses", best_losses, 1, 2),
    DocBlockKind("regime-control", regime_control, 2, 2),
)
"""The block kinds of this module (module docstring)."""
