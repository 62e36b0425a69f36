"""Failures are one line with the right exit code, naming the file or the flag as typed.

The probe's cases: a full disk during `export` (a traceback, exit 1); a killed sweep worker (a BrokenProcessPool
traceback); `sweep --set device="cuda"` on a CPU machine (every run recorded failed, exit 1, an empty stderr, "cuda"
kept in the store); disk-full messages naming no file; flags named other than as typed (`out` for --out, `overrides:`
for --set, `init` for --init, a huge --ffn-dim blamed on five other flags, --init on a directory said "not found");
construction metadata from a file reaching the terminal raw.

A full disk is simulated with a file-size limit (RLIMIT_FSIZE: a write past it fails with EFBIG, as one on a full
disk fails with ENOSPC; both are the same OSError path), in a subprocess so that the limit binds nothing else.
"""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
import threading
import time
from multiprocessing import active_children
from pathlib import Path

import pytest
import torch
from safetensors import safe_open
from safetensors.numpy import save_file

import attnrank
from experiments.cli.main import main
from tests.experiments.cli.cli_fuzz import invoke, refusal_problems
from tests.hostile.common import RUN_FLAGS, TINY_FLAGS, cli_env, snapshot

FILE_SIZE_LIMIT = 4096
"""Bytes a process may write to one file in the disk-full cases: more than config.json, less than a checkpoint."""


def _with_small_disk() -> None:
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails (EFBIG) instead of killing
    resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_SIZE_LIMIT, FILE_SIZE_LIMIT))


def _cli_on_a_full_disk(argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "experiments.cli.main", *argv],
        cwd=cwd,
        capture_output=True,
        text=True,
        env=cli_env(),
        preexec_fn=_with_small_disk,  # noqa: PLW1509 - only sets a resource limit and a signal disposition
        timeout=600,  # a hang guard: each command takes seconds
        check=False,
    )


@pytest.fixture(scope="module")
def weight_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("weights") / "full.safetensors"
    attnrank.save_full_rank(path, 32, 10.0)  # its export (32 x 32 maps, float32) is larger than FILE_SIZE_LIMIT
    return path


def test_a_full_disk_during_export_is_one_line_naming_the_file(weight_file: Path, tmp_path: Path) -> None:
    done = _cli_on_a_full_disk(["export", "--weights", str(weight_file), "--out", "stock.safetensors"], tmp_path)
    lines = done.stderr.splitlines()
    assert done.returncode == 2 and len(lines) == 1 and not done.stdout, done.stderr
    assert lines[0].startswith("attnrank export: error: --out cannot be written") and "stock.safetensors" in lines[0]
    assert os.listdir(tmp_path) == []  # nothing written, no temporary file left


def test_a_full_disk_during_training_is_one_line_naming_the_file(tmp_path: Path) -> None:
    done = _cli_on_a_full_disk(["train", *RUN_FLAGS, "--steps", "20", "--out", "run"], tmp_path)
    lines = done.stderr.splitlines()
    assert done.returncode == 2 and len(lines) == 1, done.stderr
    assert lines[0].startswith("attnrank train: error: cannot write checkpoint.pt") and "run/checkpoint.pt" in lines[0]


def test_a_killed_sweep_worker_is_one_line_and_keeps_the_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two workers train two long runs; one is killed (SIGKILL, as the kernel's out-of-memory killer does): the
    driver stops the other, prints one line and exits 1; the store is intact and marks no run finished."""
    out = tmp_path / "sweep"
    argv = ["sweep", "smoke", "--scale", "quick", "--out", str(out), "--only", "rank=4", "--workers", "2"]
    argv += ["--set", "steps=10000000", "--set", "checkpoint_every=1000000", "--no-pack", "--no-progress"]
    status: list[int] = []
    driver = threading.Thread(target=lambda: status.append(main(argv)))
    children_before = set(active_children())
    driver.start()
    try:
        started = time.monotonic()
        while len(list(out.glob("runs/*/metrics.csv"))) < 2:  # both workers are training
            assert driver.is_alive(), capsys.readouterr().err
            assert time.monotonic() - started < 600, "the runs never started"  # a hang guard, not a measurement
            time.sleep(0.1)  # polling a condition (files the workers write), not waiting for time to pass
        workers = sorted(set(active_children()) - children_before, key=lambda p: p.pid)
        assert len(workers) == 2
        os.kill(workers[0].pid, signal.SIGKILL)
        driver.join(600)
    finally:
        for process in set(active_children()) - children_before:
            process.kill()
    assert not driver.is_alive() and status == [1]
    err = capsys.readouterr().err
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("attnrank sweep: error: a worker process"), err
    from experiments.analysis.sweep_directory import SweepDirectory
    from experiments.sweeps.store import ResultsStore

    with ResultsStore(SweepDirectory(out).store, readonly=True) as store:
        assert {row.status for row in store.rows()} == {"running"}  # resumed by the next sweep


def test_a_missing_device_is_refused_before_the_sweep_writes_anything(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    names = ["cuda:99"] + ([] if torch.cuda.is_available() else ["cuda"])
    for name in names:
        out = tmp_path / "sweep"
        before = snapshot(tmp_path)
        outcome = invoke(["sweep", "smoke", "--out", str(out), "--set", f'device="{name}"'], capsys)
        assert refusal_problems(outcome, before, snapshot(tmp_path)) == [], outcome.err
        assert outcome.err.startswith(f"attnrank sweep: error: --set: device '{name}' requested") and not out.exists()


FLAGS_AS_TYPED = {
    "--out names a file": (["train", *TINY_FLAGS, "--steps", "2", "--out", "FILE"], "--out exists and is not a dir"),
    "sweep --out names a file": (["sweep", "smoke", "--out", "FILE"], "--out exists and is not a directory"),
    "--set out of range": (["sweep", "smoke", "--out", "NEW", "--set", "steps=-3"], "--set: steps must be an integer"),
    "--init a directory": (
        ["train", *TINY_FLAGS, "--model", "theory", "--steps", "2", "--init", "DIR", "--out", "NEW"],
        "--init is a directory, not a file",
    ),
    "--init a missing file": (
        ["train", *TINY_FLAGS, "--model", "theory", "--steps", "2", "--init", "DIR/none", "--out", "NEW"],
        "--init is not an existing file (not found)",
    ),
    "--init with the encoder": (
        ["train", *TINY_FLAGS, "--steps", "2", "--init", "FILE", "--out", "NEW"],
        "--init must be used with model 'theory'",
    ),
    "a huge --ffn-dim": (["train", *TINY_FLAGS[:-4], "--ffn-dim", "10000000000000", "--out", "NEW"], "--ffn-dim: "),
    "a huge --batch-size": (
        ["train", *TINY_FLAGS[:-2], "--batch-size", "100000000000", "--out", "NEW"],
        "--batch-size/--N/--d/--width/--layers: ",
    ),
}


@pytest.mark.parametrize("case", FLAGS_AS_TYPED)
def test_flags_are_named_as_typed(case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv, start = FLAGS_AS_TYPED[case]
    (tmp_path / "FILE").write_text("a file")
    (tmp_path / "DIR").mkdir()
    names = {"FILE": str(tmp_path / "FILE"), "DIR": str(tmp_path / "DIR"), "NEW": str(tmp_path / "new")}
    argv = [names.get(a, a.replace("DIR", str(tmp_path / "DIR"))) for a in argv]
    before = snapshot(tmp_path)
    outcome = invoke(argv, capsys)
    assert refusal_problems(outcome, before, snapshot(tmp_path)) == [], outcome.err
    message = outcome.err.split(": error: ", 1)[1]
    assert message.startswith(start), outcome.err


HOSTILE_TEXT = "evil\x1b[2J\nsecond line\u202e\x07"
"""Metadata a file may carry: a terminal's clear-screen sequence, a line break, a right-to-left override, a bell."""


def _with_metadata(source: Path, target: Path, **changes: str) -> Path:
    with safe_open(str(source), framework="np") as handle:
        tensors = {k: handle.get_tensor(k) for k in handle.keys()}  # noqa: SIM118 - safe_open has no iteration
        metadata = {**dict(handle.metadata() or {}), **changes}
    save_file(tensors, str(target), metadata=metadata)
    return target


def test_metadata_from_a_file_never_reaches_the_terminal_raw(
    weight_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    hostile = _with_metadata(weight_file, tmp_path / "w.safetensors", construction=HOSTILE_TEXT)
    for argv in (
        ["eval", "--weights", str(hostile), "--samples", "100"],
        ["export", "--weights", str(hostile), "--out", str(tmp_path / "stock.safetensors")],
    ):
        outcome = invoke(argv, capsys)
        assert outcome.status == 0, outcome.err
        shown = [line for line in outcome.out.splitlines() if "evil" in line]
        assert len(shown) == 1 and shown[0].endswith("evil\\x1b[2J\\nsecond line\\u202e\\x07"), outcome.out
        assert not any(char in outcome.out + outcome.err for char in "\x1b\u202e\x07")


def test_a_refusal_quoting_a_file_is_one_line_without_control_characters(
    weight_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    hostile = _with_metadata(weight_file, tmp_path / "w.safetensors", task=HOSTILE_TEXT)
    before = snapshot(tmp_path)
    outcome = invoke(["eval", "--weights", str(hostile), "--samples", "100"], capsys)
    assert refusal_problems(outcome, before, snapshot(tmp_path)) == [], outcome.err
    assert "task" in outcome.err and not any(char in outcome.err for char in "\x1b\u202e\x07")
