"""The results index (`attnrank report --index`): results/README.md's generated part is current, agrees with every
committed report.md, and the command leaves the hand-written part alone, ignores uncommitted stores and refuses bad
input in one line."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from experiments.cli.main import main
from experiments.publish.results_index import (
    BEGIN,
    END,
    _sittings,
    committed_stores,
    index_lines,
    render,
    spliced,
    store_entry,
)

ROOT = Path(__file__).resolve().parents[3]
RESULTS = ROOT / "results"
SMALL_STORE = RESULTS / "icl-cpu" / "results.sqlite"
GIT = shutil.which("git")
IN_GIT = GIT is not None and (ROOT / ".git").exists()


@pytest.mark.skipif(not IN_GIT, reason="needs the git checkout (the index lists committed stores only)")
def test_committed_results_readme_is_what_the_index_command_writes() -> None:
    committed = (RESULTS / "README.md").read_text(encoding="utf-8")
    assert render(RESULTS) == committed, (
        "results/README.md's generated index is stale: run `attnrank report --index results/` and commit the result"
    )


@pytest.mark.skipif(not IN_GIT, reason="needs the git checkout (the index lists committed stores only)")
def test_index_grades_are_the_committed_reports_grades() -> None:
    """Each sweep's grade in the index equals the grade in the summary table of its store's committed report.md."""
    stores = committed_stores(RESULTS)
    assert stores, "no committed store found under results/"
    for path in stores:
        report = (path.parent / "report.md").read_text(encoding="utf-8")
        for sweep in store_entry(path).sweeps:
            row = re.search(rf"^\| \[{re.escape(sweep.preset)} \({sweep.scale}\)\]\([^)]*\) \| .* \| ([A-Z ]+|-) \|$",
                            report, re.M)  # fmt: skip
            assert row, f"{path.parent.name}/report.md has no summary row for {sweep.preset} ({sweep.scale})"
            assert row.group(1) == sweep.grade, f"{path.parent.name}: index {sweep.grade}, report {row.group(1)}"


def test_live_uncommitted_store_is_not_indexed() -> None:
    """A store that git does not track (a live sweep writing into results/) is never read: the index holds exactly the
    tracked stores."""
    if not IN_GIT:
        pytest.skip("needs the git checkout")
    names = {p.parent.name for p in committed_stores(RESULTS)}
    tracked = subprocess.run(
        ["git", "ls-files", "--", "*/results.sqlite"], cwd=RESULTS, capture_output=True, text=True, check=True
    ).stdout.split()
    assert names == {Path(t).parent.name for t in tracked}


def _git_repo(root: Path) -> dict[str, str]:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@t",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@t",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_CONFIG_NOSYSTEM": "1",
    }
    subprocess.run(["git", "init", "-q", str(root)], check=True, env=env)
    return env


@pytest.mark.skipif(GIT is None, reason="needs git")
def test_index_reads_only_committed_stores_and_keeps_the_hand_written_text(tmp_path: Path) -> None:
    env = _git_repo(tmp_path)
    results = tmp_path / "results"
    for name in ("kept-cpu", "live-cpu"):
        (results / name).mkdir(parents=True)
        shutil.copyfile(SMALL_STORE, results / name / "results.sqlite")
    (results / "notes").mkdir()
    (results / "notes" / "README.md").write_text("# notes\n", encoding="utf-8")
    hand = "# Results\n\nHand-written intro.\n\n" + BEGIN + "\nSTALE-BLOCK\n" + END + "\n\n## Notes\n\nkept as typed \n"
    (results / "README.md").write_text(hand, encoding="utf-8")
    subprocess.run(
        ["git", "add", "results/kept-cpu/results.sqlite", "results/notes/README.md"], cwd=tmp_path, check=True, env=env
    )
    subprocess.run(["git", "commit", "-qm", "stores"], cwd=tmp_path, check=True, env=env)

    assert [p.parent.name for p in committed_stores(results)] == ["kept-cpu"]
    assert main(["report", "--index", str(results), "--json"]) == 0
    text = (results / "README.md").read_text(encoding="utf-8")
    assert text.startswith("# Results\n\nHand-written intro.\n\n" + BEGIN + "\n")
    assert text.endswith(END + "\n\n## Notes\n\nkept as typed \n")
    assert "[kept-cpu/](kept-cpu/)" in text and "live-cpu" not in text
    assert "| icl (cpu) | 8 (finished 8) | fresh | [DIRECTION](kept-cpu/report.md#icl-cpu) |" in text
    assert "[notes/README.md](notes/README.md)" in text  # a committed folder without a store is linked
    assert "STALE-BLOCK" not in text
    # deterministic: a second run writes the same bytes
    assert main(["report", "--index", str(results)]) == 0
    assert (results / "README.md").read_text(encoding="utf-8") == text


def test_outside_git_every_store_found_is_indexed(tmp_path: Path) -> None:
    if GIT is not None:
        inside = subprocess.run(["git", "rev-parse"], cwd=tmp_path, capture_output=True, check=False)
        if inside.returncode == 0:
            pytest.skip("the temporary folder lies inside a git checkout")
    (tmp_path / "a-cpu").mkdir()
    shutil.copyfile(SMALL_STORE, tmp_path / "a-cpu" / "results.sqlite")
    assert [p.parent.name for p in committed_stores(tmp_path)] == ["a-cpu"]
    assert main(["report", "--index", str(tmp_path)]) == 0  # no README yet: one is created with the markers
    text = (tmp_path / "README.md").read_text(encoding="utf-8")
    assert BEGIN in text and END in text and "[a-cpu/](a-cpu/)" in text


def test_splice_replaces_only_the_marked_block() -> None:
    readme = "intro\n" + BEGIN + "\nx\ny\n" + END + "\ntail\n"
    assert spliced(readme, [BEGIN, "new", END]) == "intro\n" + BEGIN + "\nnew\n" + END + "\ntail\n"
    for broken in ("no markers\n", BEGIN + "\n", END + "\n" + BEGIN + "\n", (BEGIN + "\n" + END + "\n") * 2):
        with pytest.raises(ValueError, match="index markers"):
            spliced(broken, [BEGIN, END])


def test_sittings_split_on_gaps() -> None:
    assert _sittings([]) == ()
    assert _sittings([(0.0, 10.0), (5.0, 20.0), (30.0, 40.0)]) == (40.0,)  # overlapping or a short gap: one sitting
    assert _sittings([(1000.0, 1100.0), (0.0, 100.0)]) == (100.0, 100.0)  # a gap over SITTING_GAP: two


def test_index_lines_are_bracketed_by_the_markers(tmp_path: Path) -> None:
    (tmp_path / "s-cpu").mkdir()
    shutil.copyfile(SMALL_STORE, tmp_path / "s-cpu" / "results.sqlite")
    lines = index_lines(tmp_path)
    assert lines[0] == BEGIN and lines[-1] == END


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["report", "--index", "missing-folder"], "results folder not found"),
        (["report", "--index", "DIRECTORY", "--csv"], "--csv applies to a sweep directory"),
        (["report", "--index", "DIRECTORY"], "holds no committed"),
        (["report", "--index", "WITH_README"], "index markers"),
    ],
)
def test_index_refusals_are_one_line_with_status_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    with_readme = tmp_path / "with-readme"
    (with_readme / "s-cpu").mkdir(parents=True)
    shutil.copyfile(SMALL_STORE, with_readme / "s-cpu" / "results.sqlite")
    (with_readme / "README.md").write_text("# hand-written only\n", encoding="utf-8")
    paths = {"missing-folder": str(tmp_path / "missing"), "DIRECTORY": str(empty), "WITH_README": str(with_readme)}
    argv = [paths.get(a, a) for a in argv]
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err, err
    assert (with_readme / "README.md").read_text(encoding="utf-8") == "# hand-written only\n"  # nothing written


def test_index_json_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "s-cpu").mkdir()
    shutil.copyfile(SMALL_STORE, tmp_path / "s-cpu" / "results.sqlite")
    capsys.readouterr()
    assert main(["report", "--index", str(tmp_path), "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed == {"index": str(tmp_path / "README.md"), "stores": 1}
