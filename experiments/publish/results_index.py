"""The results index: the generated part of ``results/README.md``, written from the committed stores.

``attnrank report --index results/`` reads every committed ``results/<store>/results.sqlite`` (read-only) and writes,
between two marker comments of ``results/README.md``, one table row per sweep in each store: its preset and scale, its
runs, its claim's grade (by the claim's one predicate, `experiments.studies.judge`, on the runs the sweep report
judges; never graded here), the verdict's named numbers, the training time summed over runs, the wall time, the dates
and the git revisions the runs recorded; for a long store, each scaling rule's verdict. Everything outside the markers
is hand-written context, which the command leaves alone byte for byte.

What counts as committed: in a git checkout, the stores ``git ls-files`` lists (so a live sweep writing an uncommitted
store beside them is ignored); outside git, every ``<dir>/results.sqlite`` found. The text depends only on the stores
and the git history (no clock is read), so writing it twice gives the same bytes, and a test compares the committed
README with what this module writes now.

Times come from the store's records: training time is the sum of the runs' ``seconds``; wall time is measured on the
runs' ``started`` - ``finished`` intervals, grouped into sittings (a gap of more than :data:`SITTING_GAP` seconds
between one run's end and the next run's start begins a new sitting), each sitting counted from its first start to
its last end; so the hours between two sittings of a resumed sweep are not counted.
"""

from __future__ import annotations

import datetime
import math
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from experiments.analysis.sweep_directory import REPORT_NAME, STORE_NAME
from experiments.reporting.scaling_report import claim_records
from experiments.reporting.sweep_report import checked_sweeps
from experiments.studies import CLAIMS, PRESETS, SCALING_RULES, judge
from experiments.sweeps.scaling_verdicts import scaling_verdict
from experiments.sweeps.store import ResultsStore
from experiments.sweeps.store_records import sweep_records

README_NAME = "README.md"
BEGIN = "<!-- BEGIN GENERATED RESULTS INDEX: written by `attnrank report --index`; edit outside the markers -->"
END = "<!-- END GENERATED RESULTS INDEX -->"

LONG_SCALE = "long"
"""The scale whose sweeps the report judges on each d's largest budget and grades along a ladder (docs/scaling.md)."""

SITTING_GAP = 600.0
"""Seconds between one run's end and the next run's start beyond which a resumed sweep's next sitting begins."""

MILESTONES: tuple[tuple[str, str], ...] = (
    (
        "5db6e6a",
        "softmax on a CPU computed by explicit products instead of `scaled_dot_product_attention` for heads of "
        "dimension >= 2 (the same map with different float rounding: a re-run of a store trained before it is not "
        "bit-for-bit identical)",
    ),
)
"""Commits that change what a re-run reproduces: the index says, per store, whether its runs were trained after."""


@dataclass(frozen=True)
class SweepEntry:
    """One sweep (preset, scale) of a store, as the index shows it."""

    preset: str
    scale: str
    runs: int
    statuses: Mapping[str, int]
    grade: str
    numbers: Mapping[str, float]
    scaling: tuple[tuple[str, str, str], ...] = ()
    """(rule name, grade at the top budget with its steps, verdict) per scaling rule of a long sweep."""
    regime: str = "fresh"
    """The training data of the sweep's runs: "fresh" or "K = 100 replayed (reference)" (issue 38)."""
    population: str = "-"
    """The range of the runs' population errors (held-out samples), "-" where no run recorded one."""


@dataclass(frozen=True)
class StoreEntry:
    """One committed store: its sweeps and what its rows record about time and provenance."""

    name: str
    sweeps: tuple[SweepEntry, ...]
    training_seconds: float
    sittings: tuple[float, ...]
    first_day: str
    last_day: str
    revisions: tuple[tuple[str, int], ...]
    milestones: Mapping[str, str] = field(default_factory=dict)


def _git(root: Path, *args: str) -> str | None:
    """stdout of ``git args`` run in ``root``, or None when git or the repository is unavailable."""
    try:
        done = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None


def committed_stores(results_dir: Path) -> list[Path]:
    """``<dir>/results.sqlite`` files directly under ``results_dir`` that git tracks (every one found outside git)."""
    results_dir = Path(results_dir)
    listed = _git(results_dir, "ls-files", "-z", "--", f"*/{STORE_NAME}")
    found = sorted(results_dir.glob(f"*/{STORE_NAME}"))
    for path in found:
        if not path.is_file():
            raise ValueError(f"{path} is not a file (a results store is one SQLite file); remove or rename it")
    if listed is None:
        return found
    tracked = {(results_dir / name).resolve() for name in listed.split("\0") if name}
    return [p for p in found if p.resolve() in tracked]


def _committed_files(results_dir: Path) -> list[str] | None:
    """Paths (relative to ``results_dir``) of every tracked file below it; None outside git."""
    listed = _git(results_dir, "ls-files", "-z", "--", ".")
    return None if listed is None else sorted(name for name in listed.split("\0") if name)


def sitting_spans(intervals: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    """(start, end) of each sitting: runs' (started, finished) intervals, overlapping or apart by at most `SITTING_GAP`
    seconds, merged (a longer gap begins a new sitting)."""
    spans: list[list[float]] = []
    for start, end in sorted(intervals):
        if spans and start <= spans[-1][1] + SITTING_GAP:
            spans[-1][1] = max(spans[-1][1], end)
        else:
            spans.append([start, end])
    return [(start, end) for start, end in spans]


def _sittings(rows: Sequence[tuple[float, float]]) -> tuple[float, ...]:
    """Seconds of each sitting, from the runs' (started, finished) intervals (module docstring)."""
    return tuple(end - start for start, end in sitting_spans(rows))


def _day(timestamp: float) -> str:
    return datetime.datetime.fromtimestamp(timestamp, tz=datetime.UTC).strftime("%Y-%m-%d")


def _milestones(root: Path, revisions: Sequence[tuple[str, int]]) -> dict[str, str]:
    """Per milestone commit: whether the store's runs were trained at revisions that contain it."""
    out: dict[str, str] = {}
    total = sum(n for _, n in revisions)
    for commit, _ in MILESTONES:
        after = 0
        for revision, count in revisions:
            if revision == "unknown" or _git(root, "cat-file", "-e", f"{revision}^{{commit}}") is None:
                out[commit] = "unknown"
                break
            if _git(root, "merge-base", "--is-ancestor", commit, revision) is not None:
                after += count
        else:
            out[commit] = "after" if after == total else "before" if after == 0 else f"{after} of {total} runs after"
    return out


def _sweep_entry(store: ResultsStore, preset: str, scale: str) -> SweepEntry:
    records = sweep_records(store, preset, scale)
    statuses: dict[str, int] = {}
    for r in records:
        statuses[r["status"]] = statuses.get(r["status"], 0) + 1
    judged = claim_records(records) if scale == LONG_SCALE else records  # what the sweep report judges
    verdict = judge(preset, judged) if preset in CLAIMS else None
    scaling: list[tuple[str, str, str]] = []
    if scale == LONG_SCALE:
        for rule in SCALING_RULES.get(preset, ()):
            found = scaling_verdict(rule, records)
            top = f"{found.budgets[-1][1].value.upper()} at {found.budgets[-1][0]:,} steps" if found.budgets else "-"
            said = found.text if found.kind in ("reaches", "projected") else found.kind
            scaling.append((rule.name, top, said.split(" (")[0]))
    trained = [r for r in records if r.get("kind") == "train"]
    regimes = sorted({(int(r.get("train_batches") or 0), str(r.get("sampler") or "cpu")) for r in trained})
    regime = "; ".join("fresh" if K == 0 else f"K = {K} replayed ({sampler})" for K, sampler in regimes) or "-"
    errors = [float(r["population_error"]) for r in records if isinstance(r.get("population_error"), (int, float))]
    population = (
        "-"
        if not errors
        else _number(errors[0])
        if len(errors) == 1
        else f"{_number(min(errors))} - {_number(max(errors))}"
    )
    return SweepEntry(
        preset=preset,
        scale=scale,
        runs=len(records),
        statuses=dict(sorted(statuses.items())),
        grade="-" if verdict is None else verdict.grade.value.upper(),
        numbers={} if verdict is None else dict(verdict.numbers),
        scaling=tuple(scaling),
        regime=regime,
        population=population,
    )


def store_entry(path: Path) -> StoreEntry:
    """Read one store (read-only) into its index entry."""
    path = Path(path)
    with ResultsStore(path, readonly=True) as store:
        sweeps = tuple(_sweep_entry(store, preset, scale) for preset, scale in checked_sweeps(store, PRESETS))
        rows = store.rows()
    done = [r for r in rows if r.status in ("finished", "diverged")]
    seconds = sum(float(r.seconds) for r in done if r.seconds is not None and math.isfinite(r.seconds))
    intervals = [(r.started, r.finished) for r in done if r.started is not None and r.finished is not None]
    counts: dict[str, int] = {}
    first: dict[str, float] = {}
    for r in sorted(done, key=lambda r: (r.started or 0.0, r.hash)):
        revision = r.git_revision or "unknown"
        counts[revision] = counts.get(revision, 0) + 1
        first.setdefault(revision, r.started or 0.0)
    revisions = tuple((rev, counts[rev]) for rev in sorted(counts, key=lambda rev: (first[rev], rev)))
    return StoreEntry(
        name=path.parent.name,
        sweeps=sweeps,
        training_seconds=seconds,
        sittings=_sittings(intervals),
        first_day=_day(min(s for s, _ in intervals)) if intervals else "-",
        last_day=_day(max(e for _, e in intervals)) if intervals else "-",
        revisions=revisions,
        milestones=_milestones(path.parent, revisions),
    )


def _duration(seconds: float) -> str:
    minutes = seconds / 60.0
    if minutes < 1.0:
        return f"{seconds:.0f} s"
    if minutes < 120.0:
        return f"{minutes:.1f} min"
    return f"{minutes / 60.0:.2f} h"


def _number(value: float) -> str:
    return f"{value:.3g}"


def _sweep_anchor(preset: str, scale: str) -> str:
    """The sweep's section in the store's report.md (the heading ``## preset (scale)`` that the report writes)."""
    return f"#{preset.lower()}-{scale}"


def index_lines(results_dir: Path | str) -> list[str]:
    """The generated block (markers included) for the committed stores under ``results_dir``."""
    results_dir = Path(results_dir)
    entries = [store_entry(p) for p in committed_stores(results_dir)]
    lines = [
        BEGIN,
        "",
        "## Index of the committed stores",
        "",
        f"Generated by `attnrank report --index results/` from each committed `{STORE_NAME}`; do not edit this part "
        "by hand (a test fails when it differs from what the command writes now). Grades are the claims' own "
        "predicates (each preset's rule, in its study module under `experiments/studies/`) on the runs each store's "
        "`report.md` judges; the numbers are the verdict's named quantities. Training time is the sum of the runs' "
        "seconds; wall time is measured from the runs' start and end times, per sitting (a gap of more than "
        f"{SITTING_GAP / 60:g} min between runs begins a new sitting, and the time between sittings is not counted). "
        "No store records the number of workers or the machine's load: each store's README says what was noted. "
        "Training data: fresh batches every step, or K batches replayed (the paper's regime; the grades then read "
        "training losses on that set); population error: the range over the sweep's runs of their error on held-out "
        'samples, where recorded (docs/training.md, "Training data").',
        "",
        "| store | sweep | runs | training data | grade | numbers | population error | training time | wall time | "
        "trained (UTC) | revisions (runs) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for entry in entries:
        walls = " + ".join(_duration(s) for s in entry.sittings) or "-"
        if len(entry.sittings) > 1:
            walls += f" ({len(entry.sittings)} sittings)"
        days = entry.first_day if entry.first_day == entry.last_day else f"{entry.first_day} to {entry.last_day}"
        revisions = ", ".join(f"`{rev[:7]}` ({n})" for rev, n in entry.revisions) or "-"
        for sweep in entry.sweeps:
            statuses = ", ".join(f"{k} {v}" for k, v in sweep.statuses.items())
            numbers = ", ".join(f"{k.replace('_', ' ')} {_number(v)}" for k, v in sweep.numbers.items()) or "-"
            report = f"{entry.name}/{REPORT_NAME}{_sweep_anchor(sweep.preset, sweep.scale)}"
            grade = f"[{sweep.grade}]({report})"
            lines.append(
                f"| [{entry.name}/]({entry.name}/) | {sweep.preset} ({sweep.scale}) | {sweep.runs} ({statuses}) | "
                f"{sweep.regime} | {grade} | {numbers} | {sweep.population} | {_duration(entry.training_seconds)} | "
                f"{walls} | {days} | {revisions} |"
            )
    scaling = [(e.name, s, rule) for e in entries for s in e.sweeps for rule in s.scaling]
    if scaling:
        lines += [
            "",
            "Scaling verdicts of the long stores (rules in each study module under `experiments/studies/`, "
            "SCALING_RULES; docs/scaling.md): the rule's grade at its largest budget, and the verdict along the "
            "ladder.",
            "",
            "| store | rule | at the largest budget | verdict |",
            "|---|---|---|---|",
        ]
        for name, sweep, (rule, top, said) in scaling:
            report = f"{name}/{REPORT_NAME}{_sweep_anchor(sweep.preset, sweep.scale)}"
            lines.append(f"| [{name}/]({report}) | {rule} | {top} | {said} |")
    for commit, what in MILESTONES:
        groups: dict[str, list[str]] = {}
        for entry in entries:
            groups.setdefault(entry.milestones.get(commit, "unknown"), []).append(entry.name)
        lines += ["", f"Commit `{commit}`: {what}."]
        for state in sorted(groups):
            lines.append(f"- {state}: {', '.join(groups[state])}")
    others = _other_folders(results_dir, {e.name for e in entries})
    if others:
        lines += ["", "Committed folders without a committed store (their README says what they hold):", ""]
        lines += [f"- [{target}]({target})" for target in others]
    lines += ["", END]
    return lines


def _other_folders(results_dir: Path, stores: set[str]) -> list[str]:
    """READMEs of the committed folders under ``results_dir`` that hold no committed store."""
    files = _committed_files(results_dir)
    if files is None:
        return []
    readmes = [name for name in files if "/" in name and name.endswith("/" + README_NAME)]
    return [name for name in readmes if name.split("/", 1)[0] not in stores]


def spliced(readme: str, block: Sequence[str], path: Path | str = README_NAME) -> str:
    """``readme`` with the text between its markers replaced by ``block``; refuses a README without one pair."""
    begin = [i for i, line in enumerate(readme.splitlines()) if line.strip() == BEGIN]
    end = [i for i, line in enumerate(readme.splitlines()) if line.strip() == END]
    if len(begin) != 1 or len(end) != 1 or begin[0] > end[0]:
        raise ValueError(
            f"{path}: needs exactly one pair of index markers ({BEGIN} ... {END}), in that order, where the "
            "generated index goes"
        )
    lines = readme.splitlines()
    return "\n".join([*lines[: begin[0]], *block, *lines[end[0] + 1 :]]) + "\n"


def new_readme(block: Sequence[str]) -> str:
    """A README for a results folder that has none: a title, the generated block and a hand-written section."""
    return "\n".join(["# Measured results", "", *block, "", "## Notes (hand-written)", ""]) + "\n"


def render(results_dir: Path | str) -> str:
    """The README text the index command would write now (``results_dir/README.md`` with a fresh generated block)."""
    results_dir = Path(results_dir)
    readme = results_dir / README_NAME
    block = index_lines(results_dir)
    if not readme.exists():
        return new_readme(block)
    try:
        text = readme.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{readme}: not UTF-8 text (byte {exc.start}); the index splices into a text README") from None
    return spliced(text, block, readme)


def write_index(results_dir: Path | str) -> tuple[Path, int]:
    """Write the generated part of ``results_dir/README.md``; the README's path and the number of stores indexed."""
    results_dir = Path(results_dir)
    if not results_dir.is_dir():
        raise ValueError(f"DIR: results folder not found: {results_dir}")
    stores = committed_stores(results_dir)
    if not stores:
        raise ValueError(f"DIR: {results_dir} holds no committed <store>/{STORE_NAME}")
    text = render(results_dir)
    readme = results_dir / README_NAME
    readme.write_text(text, encoding="utf-8")
    return readme, len(stores)
