"""Fuzz: every command refuses bad input in one line on stderr, exit status 2, no traceback, no file touched.

The table (`cli_fuzz.bad_argv_table`) crosses every numeric, string and path flag of every command with junk and
out-of-range values, plus argparse's own errors; hypothesis adds generated junk for each flag kind. Cases run
in-process (`experiments.cli.main.main`) in a directory holding a real weight file, a finished run, a report and a
decoy file, whose every byte is compared before and after; a few run as real subprocesses to check the exit path.
"""

from __future__ import annotations

import contextlib
import io
import math
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from constructions.full_rank import save_full_rank
from experiments.cli.main import main
from tests.experiments.cli.cli_fuzz import (
    BOUND,
    EVAL,
    FULL_RANK,
    IMPORT_MHA,
    IMPORT_REFERENCE,
    MAJORITY_VOTE,
    RANDOM_FEATURES,
    TRAIN,
    Outcome,
    bad_argv_table,
    import_argv_table,
    invoke,
    materialise,
    refusal_problems,
    snapshot,
)
from tests.experiments.models.reference_checkpoints import random_reference_state

TABLE = bad_argv_table()
MIN_CASES = 500


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory every case runs in: a real weight file, a decoy file, an existing report and an empty DIR."""
    root = tmp_path_factory.mktemp("fuzz")
    save_full_rank(root / "good.safetensors", 3, 10.0)
    (root / "decoy.txt").write_text("do not touch\n")
    (root / "DIR").mkdir()
    (root / "reports").mkdir()
    (root / "reports" / "check.md").write_text("# an earlier report\n")
    (root / "run").mkdir()
    return root


def test_the_table_has_at_least_500_cases() -> None:
    print(f"fuzz table: {len(TABLE)} bad-input cases")
    assert len(TABLE) >= MIN_CASES, len(TABLE)


def test_every_bad_input_is_refused_in_one_line(
    workspace: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """All table cases in one test (one fixture set-up); the failures are listed together."""
    monkeypatch.chdir(workspace)
    failures = []
    before = snapshot(workspace)
    slow = []
    for case_id, argv in TABLE:
        start = time.perf_counter()
        outcome = invoke(materialise(argv, workspace), capsys)
        if time.perf_counter() - start > 0.5:
            slow.append(f"{time.perf_counter() - start:.1f}s {case_id}")
        after = snapshot(workspace)
        problems = refusal_problems(outcome, before, after)
        if problems:
            failures.append(f"{case_id}: {'; '.join(problems)} | stderr: {outcome.err.strip()[:200]}")
            before = after
    print(f"fuzz table: {len(TABLE)} cases, {len(failures)} refused improperly; slow: {slow}")
    assert not failures, "\n".join(failures)


_INT_FLAGS = [(BOUND, "--d"), (BOUND, "--rank"), (FULL_RANK, "--d"), (EVAL, "--samples"), (TRAIN, "--steps")]
_FLOAT_FLAGS = [(FULL_RANK, "--temperature"), (TRAIN, "--lr"), (MAJORITY_VOTE, "--temperature")]
_OUT_OF_RANGE = [
    (BOUND, "--rank", st.one_of(st.integers(max_value=0), st.integers(min_value=9, max_value=10**30))),
    (FULL_RANK, "--d", st.one_of(st.integers(max_value=1), st.integers(min_value=10**6, max_value=10**30))),
    (EVAL, "--samples", st.integers(max_value=1)),
    (TRAIN, "--steps", st.integers(max_value=0)),
    (TRAIN, "--batch-size", st.one_of(st.integers(max_value=0), st.integers(min_value=10**12, max_value=10**30))),
    (RANDOM_FEATURES, "--heads", st.one_of(st.integers(max_value=0), st.integers(min_value=10**7, max_value=10**30))),
]


def _is_valid_int(text: str) -> bool:
    try:
        int(text)
    except ValueError:
        return False
    return True


def _is_valid_real(flag: str, text: str) -> bool:
    """What the flag accepts: --lr a real in (0, 10]; a temperature a real > 0 or inf typed as such."""
    try:
        value = float(text)
    except ValueError:
        return False
    if flag == "--lr":
        return math.isfinite(value) and 0 < value <= 10
    return value > 0 and (math.isfinite(value) or text.strip().lower() in ("inf", "+inf", "infinity", "+infinity"))


@settings(max_examples=40)
@given(which=st.sampled_from(_INT_FLAGS), junk=st.text(max_size=12).filter(lambda t: not _is_valid_int(t)))
def test_generated_junk_for_integer_flags(which, junk, tmp_path_factory) -> None:
    _check_generated(which, junk, tmp_path_factory)


@settings(max_examples=40)
@given(data=st.data(), which=st.sampled_from(_FLOAT_FLAGS))
def test_generated_junk_for_real_flags(data, which, tmp_path_factory) -> None:
    junk = data.draw(st.text(max_size=12).filter(lambda t: not _is_valid_real(which[1], t)), label="junk")
    _check_generated(which, junk, tmp_path_factory)


@settings(max_examples=40)
@given(data=st.data(), index=st.integers(0, len(_OUT_OF_RANGE) - 1))
def test_generated_out_of_range_integers(data, index, tmp_path_factory) -> None:
    base, flag, values = _OUT_OF_RANGE[index]
    _check_generated((base, flag), str(data.draw(values, label="value")), tmp_path_factory)


def _check_generated(which, value: str, tmp_path_factory: pytest.TempPathFactory) -> None:
    base, flag = which
    argv = list(base)
    if flag in argv:
        argv[argv.index(flag) + 1] = value
    else:
        argv += [flag, value]
    root = tmp_path_factory.mktemp("gen")
    out = root / "out"
    argv = [str(out) if a in ("new.safetensors", "newrun") else a for a in argv]
    if "good.safetensors" in argv:
        save_full_rank(root / "good.safetensors", 3, 10.0)
        argv = [str(root / "good.safetensors") if a == "good.safetensors" else a for a in argv]
    before = snapshot(root)
    outcome = _run_captured(argv)
    problems = refusal_problems(outcome, before, snapshot(root))
    assert not problems, (argv, problems, outcome.err)


def _run_captured(argv: list[str]):
    """`invoke` without capsys (hypothesis tests cannot take function-scoped fixtures): redirect by hand."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status = main(argv)
        except SystemExit as exc:
            status = exc.code if isinstance(exc.code, int) else 1
    return Outcome(int(status), out.getvalue(), err.getvalue())


SUBPROCESS_CASES = [
    ["bound", "--d", "8", "--rank", "2", "--heads", "1e999999999999"],
    ["construct", "full-rank", "--d", "100000", "--out", "big.safetensors"],
    ["train", "--batch-size", "1000000000", "--out", "run", "--no-progress"],
    ["check", "-k", "(("],
]
"""A few cases through a real process (the in-process table covers the rest; each process start costs seconds)."""


@pytest.mark.parametrize("argv", SUBPROCESS_CASES, ids=lambda a: " ".join(a)[:40])
def test_the_real_exit_path(argv: list[str], tmp_path: Path) -> None:
    """The installed entry point: status 2 and one stderr line from a real process."""
    (tmp_path / "reports").mkdir()
    (tmp_path / "reports" / "check.md").write_text("# kept\n")
    before = snapshot(tmp_path)
    proc = subprocess.run(
        [sys.executable, "-m", "experiments.cli.main", *argv],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    problems = refusal_problems(Outcome(proc.returncode, proc.stdout, proc.stderr), before, snapshot(tmp_path))
    assert not problems, (problems, proc.stderr)
    shutil.rmtree(tmp_path / "reports")


# --- attnrank import -------------------------------------------------------------------------------------------------

IMPORT_TABLE = import_argv_table()


@pytest.fixture(scope="module")
def import_workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The valid inputs of `import_argv_table` (mha.pt, ref.ckpt) next to foreign files: a weight file, a decoy, an
    empty DIR and a finished training run (its checkpoint.pt is a torch file, but not a state dict)."""
    root = tmp_path_factory.mktemp("import-fuzz")
    save_full_rank(root / "good.safetensors", 3, 10.0)
    (root / "decoy.txt").write_text("do not touch\n")
    (root / "DIR").mkdir()
    torch.save(torch.nn.MultiheadAttention(4, 2).state_dict(), root / "mha.pt")
    state = random_reference_state(d=4, num_heads=2, positional_dim=2, max_length=4)
    torch.save({"epoch": 1, "state_dict": {f"model.{k}": v for k, v in state.items()}}, root / "ref.ckpt")
    run = ["train", "--task", "farthest", "--d", "4", "--N", "3", "--rank", "4", "--ffn-dim", "8", "--steps", "2"]
    assert main([*run, "--batch-size", "4", "--out", str(root / "run"), "--no-progress"]) == 0
    return root


def test_the_import_table_bases_are_accepted(import_workspace: Path, tmp_path: Path, capsys, monkeypatch) -> None:  # noqa: ANN001
    """Positive control: each base argv of the import table succeeds, so a refused case is refused for its change."""
    shutil.copytree(import_workspace, tmp_path / "w")
    monkeypatch.chdir(tmp_path / "w")
    for base in (IMPORT_MHA, IMPORT_REFERENCE):
        outcome = invoke(materialise(base, tmp_path / "w"), capsys)
        assert outcome.status == 0, (base, outcome.err)


def test_every_bad_import_argv_is_refused_in_one_line(import_workspace: Path, capsys, monkeypatch) -> None:  # noqa: ANN001
    monkeypatch.chdir(import_workspace)
    failures = []
    before = snapshot(import_workspace)
    for case_id, argv in IMPORT_TABLE:
        outcome = invoke(materialise(argv, import_workspace), capsys)
        after = snapshot(import_workspace)
        problems = refusal_problems(outcome, before, after)
        if problems:
            failures.append(f"{case_id}: {'; '.join(problems)} | stderr: {outcome.err.strip()[:200]}")
            before = after
    print(f"import fuzz table: {len(IMPORT_TABLE)} cases, {len(failures)} refused improperly")
    assert len(IMPORT_TABLE) >= 100 and not failures, "\n".join(failures)
