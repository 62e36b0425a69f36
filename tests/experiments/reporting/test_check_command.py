"""`attnrank check` machinery: the claim recorder, the report table and the exit status, on a tiny check suite."""

import shutil
import textwrap
from pathlib import Path

from experiments.reporting.check import (
    PAPER_CHECKS_DIR,
    ClaimResult,
    all_passed,
    figure_links,
    format_table,
    run_checks,
)

SUITE = '''
import pytest


@pytest.mark.claim("Two plus two is four")
def test_arithmetic(record_claim):
    record_claim(measured="4", reference="4 (exact)", grade="direction")
    assert 2 + 2 == 4


def test_falls_back_to_docstring(record_claim):
    """A deliberately failing claim."""
    record_claim(measured="5", reference="4")
    assert 2 + 3 == 4


@pytest.mark.slow
@pytest.mark.claim("A slow claim")
def test_slow():
    assert True
'''


def _suite(tmp_path: Path) -> Path:
    checks = tmp_path / "paper_checks"
    checks.mkdir()
    shutil.copy(PAPER_CHECKS_DIR / "conftest.py", checks / "conftest.py")
    (checks / "test_suite.py").write_text(textwrap.dedent(SUITE))
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers =\n    slow: slow\n")
    return checks


def test_quick_mode_records_claims_and_skips_slow(tmp_path):
    results = run_checks(full=False, report_dir=tmp_path / "reports", checks_dir=_suite(tmp_path))
    by_claim = {r.claim: r for r in results}
    assert set(by_claim) == {"Two plus two is four", "A deliberately failing claim."}
    assert by_claim["Two plus two is four"].status == "passed"
    assert by_claim["Two plus two is four"].measured == "4"
    assert by_claim["Two plus two is four"].grade == "direction"
    assert by_claim["A deliberately failing claim."].grade == ""
    assert by_claim["A deliberately failing claim."].status == "failed"
    assert "assert" in by_claim["A deliberately failing claim."].failure
    assert not all_passed(results)


def test_full_mode_runs_slow_checks(tmp_path):
    results = run_checks(full=True, report_dir=tmp_path / "reports", checks_dir=_suite(tmp_path))
    assert "A slow claim" in {r.claim for r in results}


def test_table_lists_every_claim_and_failures():
    results = [
        ClaimResult("claim a", "m.py", "passed", "0.1", "<= 0.2", 1.5, grade="magnitude"),
        ClaimResult("claim | b", "m.py", "failed", "0.3", "<= 0.2", 0.5, failure="AssertionError: too big"),
    ]
    table = format_table(results, mode="quick", wall_seconds=2.0, figures=["[a.png](a.png)"])
    assert "| claim a | PASS | MAGNITUDE | 0.1 | <= 0.2 | 1.50 |" in table
    assert "claim \\| b | FAIL | - |" in table
    assert "## Figures" in table and "- [a.png](a.png)" in table
    assert "1 of 2 checks passed" in table
    assert "AssertionError: too big" in table
    assert not all_passed(results) and not all_passed([])
    assert all_passed(results[:1])


def test_figure_links_are_relative_to_the_report(tmp_path):
    (tmp_path / "sweep-fig1").mkdir()
    (tmp_path / "sweep-fig1" / "fig1-quick.png").write_bytes(b"png")
    (tmp_path / "bound.png").write_bytes(b"png")
    assert figure_links(tmp_path) == [
        "[bound.png](bound.png)",
        "[sweep-fig1/fig1-quick.png](sweep-fig1/fig1-quick.png)",
    ]
