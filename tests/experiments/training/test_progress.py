"""Tests of experiments/training/progress.py and of `attnrank train`'s progress lines when stderr is a pipe."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from experiments.training.progress import Progress, format_duration

ROOT = Path(__file__).resolve().parents[3]
LINE = re.compile(r"^train farthest r=4: step (\d+)/(\d+) \(\d+\.\d%\), (loss \S+, )?\S+ steps/s, ETA \S+$")


def test_format_duration() -> None:
    assert [format_duration(s) for s in (0.4, 7, 125, 3723, float("inf"))] == ["0s", "7s", "2m05s", "1h02m03s", "?"]


def test_lines_every_interval_and_a_last_one_on_a_non_terminal_stream() -> None:
    stream = io.StringIO()  # not a terminal
    with Progress(100, initial=10, desc="job", stream=stream, interval=0.05) as progress:
        for _ in range(5):
            progress.update(2)
            time.sleep(0.06)
        progress.set_loss(0.25)
        time.sleep(0.12)
    lines = stream.getvalue().splitlines()
    assert len(lines) >= 3, lines
    assert lines[-1].startswith("job: step 20/100 (20.0%), loss 0.25, ") and " steps/s, ETA " in lines[-1]
    assert "\r" not in stream.getvalue()


def test_messages_go_between_the_lines_and_not_when_disabled() -> None:
    stream = io.StringIO()
    with Progress(4, desc="sweep", stream=stream, interval=60.0, unit="run") as progress:
        progress.write("run abc failed: boom")
        progress.update(4)
    assert stream.getvalue().splitlines()[0] == "run abc failed: boom"
    assert stream.getvalue().splitlines()[-1].startswith("sweep: run 4/4 (100.0%), ")
    quiet = io.StringIO()
    with Progress(4, stream=quiet, enabled=False) as progress:
        progress.write("not shown")
    assert quiet.getvalue() == ""


def test_disabled_progress_writes_nothing_and_the_interval_is_validated() -> None:
    stream = io.StringIO()
    with Progress(10, stream=stream, interval=0.01, enabled=False) as progress:
        progress.update()
        time.sleep(0.03)
    assert stream.getvalue() == ""
    for bad in (0.0, -1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="progress interval"):
            Progress(10, stream=stream, interval=bad)


def test_train_command_prints_progress_lines_to_a_pipe(tmp_path: Path) -> None:
    """stderr is a pipe: the command prints progress lines (every 0.1 s here) with step, loss, steps/s and ETA."""
    flags = "--task farthest --d 4 --N 3 --rank 4 --ffn-dim 16 --batch-size 64 --steps 400 --log-every 10"
    flags += " --checkpoint-every 400 --progress-interval 0.1 --json"
    command = [sys.executable, "-m", "experiments.cli.main", "train", *flags.split(), "--out", str(tmp_path / "run")]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.startswith("train ")]
    assert len(lines) >= 2, done.stderr
    assert all(LINE.match(line) for line in lines), lines
    assert LINE.match(lines[-1]).groups()[:2] == ("400", "400")  # type: ignore[union-attr]
    assert "loss" in lines[-1]
    steps = [int(LINE.match(line).group(1)) for line in lines]  # type: ignore[union-attr]
    assert steps == sorted(steps)
