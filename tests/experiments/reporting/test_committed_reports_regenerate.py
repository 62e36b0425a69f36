"""Every committed store's report.md regenerates byte for byte from what is committed (issue 31).

For each store under results/ whose results.sqlite is tracked by git, the store's tracked files alone (the store,
its curves.csv where it has one, its README and figures) are copied into an empty directory laid out as the
repository is, and ``attnrank report results/<name>`` is run there (in process, from that root, as a newcomer would
from a fresh clone). The report it writes must equal the committed report.md byte for byte: nothing a report prints
may depend on run directories, on the machine, or on a fit's digits beyond what it determines.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from experiments.reporting.sweep_report import write_report

REPOSITORY = Path(__file__).resolve().parents[3]


def _tracked(*patterns: str) -> list[str]:
    try:
        listed = subprocess.run(
            ["git", "ls-files", "--", *patterns], cwd=REPOSITORY, capture_output=True, text=True, check=True
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return []
    return sorted(listed.split())


STORES = sorted(str(Path(p).parent) for p in _tracked("results/*/results.sqlite"))


def test_there_are_committed_stores_to_check() -> None:
    if not (REPOSITORY / ".git").exists():
        pytest.skip("not a git checkout")
    assert len(STORES) >= 15  # the 15 committed sweep stores with a report.md, at least


@pytest.mark.parametrize("store", STORES)
def test_report_regenerates_byte_for_byte(tmp_path: Path, store: str, monkeypatch: pytest.MonkeyPatch) -> None:
    committed = REPOSITORY / store / "report.md"
    if store + "/report.md" not in _tracked(store + "/report.md"):
        pytest.skip(f"{store} commits no report.md")
    for name in _tracked(store):
        target = tmp_path / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(REPOSITORY / name, target)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MPLBACKEND", os.environ.get("MPLBACKEND", "Agg"))
    regenerated = write_report(Path(store))
    assert regenerated.read_bytes() == committed.read_bytes(), f"{store}/report.md does not regenerate"
