"""Shared fixtures of the paper checks, and the recorder behind `attnrank check`'s claim table.

A check declares the claim it verifies with ``@pytest.mark.claim("...")`` (falling back to the first line of its
docstring) and reports what it measured and what it compared against through the ``record_claim`` fixture:

    @pytest.mark.claim("Fact 1: the full-rank head's error decays like C sqrt(d) / lambda")
    def test_fact1_rate(record_claim):
        ...
        record_claim(measured=f"C = {c_hat:.4f}", reference=f"C = {c_ref:.4f} (derived)")

A figure claim also passes ``grade=`` (magnitude / direction / not reproduced, from `experiments.studies`),
shown in the grade column of the check report.

When the environment variable ``ATTNRANK_CLAIMS_REPORT`` names a file, one JSON object per check (claim, nodeid,
status, measured, reference, seconds) is written there at the end of the session. Plain ``pytest`` runs skip that.
``report_dir`` is where checks draw figures; ``full_mode`` is true under ``attnrank check --full``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci", max_examples=30, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

_RECORDS: dict[str, dict[str, Any]] = {}


def _claim_of(item: pytest.Item) -> str:
    marker = item.get_closest_marker("claim")
    if marker is not None and marker.args:
        return str(marker.args[0])
    doc = getattr(getattr(item, "function", None), "__doc__", None)
    if doc and doc.strip():
        return doc.strip().splitlines()[0]
    return item.name


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "claim(text): the paper claim a check verifies (shown in the check report)")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        _RECORDS[item.nodeid] = {
            "nodeid": item.nodeid,
            "module": item.nodeid.split("::")[0],
            "claim": _claim_of(item),
            "status": "not run",
            "measured": "",
            "reference": "",
            "seconds": 0.0,
        }


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    record = _RECORDS.get(report.nodeid)
    if record is None:
        return
    record["seconds"] += report.duration
    if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
        record["status"] = "passed" if report.outcome == "passed" else report.outcome
        if report.outcome == "failed":
            crash = getattr(report.longrepr, "reprcrash", None)
            text = crash.message if crash is not None else report.longreprtext.strip()
            record["failure"] = " ".join(text.split())[:300]
    for key, value in report.user_properties:
        if key in ("measured", "reference", "grade"):
            record[key] = value


def pytest_sessionfinish(session: pytest.Session) -> None:
    path = os.environ.get("ATTNRANK_CLAIMS_REPORT")
    if not path:
        return
    with open(path, "w", encoding="utf-8") as handle:
        for record in _RECORDS.values():
            if record["status"] != "not run":
                handle.write(json.dumps(record) + "\n")


@pytest.fixture
def record_claim(request: pytest.FixtureRequest) -> Iterator[Callable[..., None]]:
    """Record the measured value and the independent reference/bound of this check for the claim table."""

    def record(*, measured: str, reference: str, grade: str | None = None) -> None:
        request.node.user_properties.append(("measured", str(measured)))
        request.node.user_properties.append(("reference", str(reference)))
        if grade is not None:
            request.node.user_properties.append(("grade", str(grade)))

    yield record


@pytest.fixture(scope="session")
def full_mode() -> bool:
    """True under `attnrank check --full` (checks may then draw figures and use larger samples)."""
    return os.environ.get("ATTNRANK_CHECK_MODE", "quick") == "full"


@pytest.fixture(scope="session")
def report_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where figures go: `ATTNRANK_REPORT_DIR` (set by `attnrank check`), else a temporary directory."""
    configured = os.environ.get("ATTNRANK_REPORT_DIR")
    path = Path(configured) if configured else tmp_path_factory.mktemp("reports")
    path.mkdir(parents=True, exist_ok=True)
    return path
