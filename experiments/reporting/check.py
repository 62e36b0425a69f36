"""`attnrank check`: run every paper check and write the claim table to `reports/check.md`.

The checks are the pytest modules of `paper_checks/` (one per claim). They run in a child pytest process whose
recorder (paper_checks/conftest.py) writes one JSON row per check; this module turns the rows into a Markdown table
(claim, status, grade, measured value, reference or bound, seconds), prints it and writes it to disk. Figure claims
carry a grade (magnitude / direction / not reproduced, from their one predicate in `experiments.studies`); other
checks show "-". Every PNG the checks drew under the report directory is linked below the table.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
PAPER_CHECKS_DIR = REPO_ROOT / "paper_checks"


@dataclass(frozen=True)
class ClaimResult:
    """One row of the claim table."""

    claim: str
    module: str
    status: str
    measured: str
    reference: str
    seconds: float
    failure: str = ""
    grade: str = ""


def run_checks(
    *,
    full: bool,
    report_dir: Path,
    extra_pytest_args: list[str] | None = None,
    checks_dir: Path = PAPER_CHECKS_DIR,
) -> list[ClaimResult]:
    """Run `pytest paper_checks/` (without `slow` checks unless ``full``) and return one result per check."""
    if not checks_dir.is_dir():
        raise FileNotFoundError(
            f"paper checks not found at {checks_dir}; run attnrank check from a source checkout "
            '(pip install -e ".[dev]")'
        )
    report_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as scratch:
        rows_path = Path(scratch) / "claims.jsonl"
        env = dict(os.environ)
        env["ATTNRANK_CLAIMS_REPORT"] = str(rows_path)
        env["ATTNRANK_CHECK_MODE"] = "full" if full else "quick"
        env["ATTNRANK_REPORT_DIR"] = str(report_dir.resolve())
        command = [
            sys.executable,
            "-m",
            "pytest",
            str(checks_dir),
            "-m",
            "" if full else "not slow",
            "-q",
            "-p",
            "no:cacheprovider",
            *(extra_pytest_args or []),
        ]
        subprocess.run(command, cwd=checks_dir.parent, env=env, check=False)
        if not rows_path.exists():
            raise RuntimeError("the paper checks produced no results (pytest failed before running any check)")
        rows = [json.loads(line) for line in rows_path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [
        ClaimResult(
            claim=row["claim"],
            module=row["module"],
            status=row["status"],
            measured=row.get("measured", ""),
            reference=row.get("reference", ""),
            seconds=float(row.get("seconds", 0.0)),
            failure=row.get("failure", ""),
            grade=row.get("grade", ""),
        )
        for row in rows
    ]


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def figure_links(report_dir: Path) -> list[str]:
    """Markdown links (relative to ``report_dir``, where check.md lives) to every PNG under it, sorted."""
    return [
        f"[{p.relative_to(report_dir)}]({p.relative_to(report_dir).as_posix()})"
        for p in sorted(report_dir.rglob("*.png"))
    ]


def format_table(
    results: list[ClaimResult], *, mode: str, wall_seconds: float, figures: list[str] | None = None
) -> str:
    """The Markdown report: a header line, the claim table (with a grade column for figure claims), the figures
    drawn (``figures``: Markdown links, see :func:`figure_links`), and the failures (if any) spelled out."""
    passed = sum(r.status == "passed" for r in results)
    lines = [
        "# attnrank check",
        "",
        f"Mode: {mode}. {passed} of {len(results)} checks passed in {wall_seconds:.1f} s "
        f"({time.strftime('%Y-%m-%d %H:%M:%S %Z')}).",
        "",
        "| claim | status | grade | measured | reference / bound | seconds |",
        "|---|---|---|---|---|---|",
    ]
    for r in sorted(results, key=lambda r: (r.module, r.claim)):
        status = {"passed": "PASS", "failed": "FAIL", "skipped": "skip"}.get(r.status, r.status)
        grade = r.grade.upper() if r.grade else "-"
        lines.append(
            f"| {_cell(r.claim)} | {status} | {grade} | {_cell(r.measured)} | {_cell(r.reference)} | {r.seconds:.2f} |"
        )
    lines += [
        "",
        "Grades of figure claims (`experiments.studies`, rules stated in advance per figure): MAGNITUDE = the "
        "paper's ratio or gap is reached; DIRECTION = only the ordering holds; NOT REPRODUCED = not even that. "
        "A check asserts the grade its scale can reach and says so in its claim.",
    ]
    if figures:
        lines += ["", "## Figures", ""] + [f"- {link}" for link in figures]
    failures = [r for r in results if r.status == "failed"]
    if failures:
        lines += ["", "## Failures", ""]
        lines += [f"- `{r.module}`: {r.claim}: {r.failure}" for r in failures]
    return "\n".join(lines) + "\n"


def all_passed(results: list[ClaimResult]) -> bool:
    """Exit status 0 requires at least one check and every check passing (skips count as not passing)."""
    return bool(results) and all(r.status == "passed" for r in results)
