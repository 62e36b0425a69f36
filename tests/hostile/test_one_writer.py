"""One writer per run directory: a second `attnrank train`, `attnrank.train`, `train_packed` or sweep worker is refused
in one line naming the directory and the holder's process id, before it writes anything; a stale lock is taken over.

The probe's cases: two `attnrank train` with one --out (seeds 0 and 1) both exited 0 and left config.json of one
and checkpoint.pt / result.json of the other; `attnrank.train` trained into a directory a sweep worker held.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from experiments.config import TrainConfig
from experiments.sweeps.execute import execute_task
from experiments.sweeps.work import RunTask
from experiments.training.checkpoints import load_checkpoint
from experiments.training.loop import train, train_packed
from experiments.training.run_lock import RunDirectoryBusy, lock_holder
from tests.experiments.cli.cli_fuzz import invoke, refusal_problems
from tests.hostile.common import RUN_FLAGS, SHORT, cli_env, lock_held_elsewhere, snapshot, train_short_run


def test_a_second_cli_writer_is_refused_and_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "run"
    run.mkdir()
    with lock_held_elsewhere(run) as holder:
        before = snapshot(tmp_path)
        outcome = invoke(["train", *RUN_FLAGS, "--steps", "20", "--out", str(run)], capsys)
        assert refusal_problems(outcome, before, snapshot(tmp_path)) == []
        assert str(run) in outcome.err and f"process {holder.pid}" in outcome.err, outcome.err


def test_a_refusal_inside_the_lock_leaves_no_new_directory(tmp_path: Path) -> None:
    """A writer refused after taking the lock of a directory it created (here: a damaged --init weight file, read
    only once the run is built) removes the directory and its lock file again."""
    weights = tmp_path / "w.safetensors"
    weights.write_bytes(b"not a weight file")
    config = TrainConfig(task="nearest", d=4, N=2, rank=4, model="theory", steps=10, batch_size=16, init=str(weights))
    before = snapshot(tmp_path)
    with pytest.raises(ValueError, match="w.safetensors"):
        train(config, tmp_path / "new" / "run", progress=False)
    assert snapshot(tmp_path) == before


def test_the_python_api_and_a_pack_are_refused_naming_the_holder(tmp_path: Path) -> None:
    run, other = tmp_path / "run", tmp_path / "other"
    with lock_held_elsewhere(run) as holder:
        before = snapshot(tmp_path)
        with pytest.raises(RunDirectoryBusy, match=f"process {holder.pid}"):
            train(SHORT, run, progress=False)
        second = TrainConfig.from_dict({**SHORT.to_dict(), "seed": 1})
        with pytest.raises(ValueError, match=f"{run}.*process {holder.pid}"):
            train_packed([second, SHORT], [other, run])  # the free directory is not written either
        assert snapshot(tmp_path) == before


def test_a_sweep_worker_is_refused_and_reports_the_run_failed(tmp_path: Path) -> None:
    run = tmp_path / "runs" / SHORT.config_hash()
    with lock_held_elsewhere(run) as holder:
        before = snapshot(tmp_path)
        outcome = execute_task(RunTask(SHORT.config_hash(), "train", SHORT.to_dict(), str(run)))
        assert snapshot(tmp_path) == before
    assert not outcome.ok and outcome.error is not None
    first = outcome.error.splitlines()[0]
    assert first.startswith("RunDirectoryBusy: ") and str(run) in first and f"process {holder.pid}" in first


def test_a_stale_lock_of_a_killed_process_is_taken_over(tmp_path: Path) -> None:
    run = tmp_path / "run"
    with lock_held_elsewhere(run) as holder:
        assert lock_holder(run) == holder.pid
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=60)
    assert lock_holder(run) == holder.pid  # the dead holder's id is still written there: a stale lock file
    result = train(SHORT, run, progress=False)
    assert result.steps == 20 and lock_holder(run) is None  # released: it names no holder


TRAINER = [sys.executable, "-m", "experiments.cli.main", "train", *RUN_FLAGS, "--json"]


def test_two_trainers_started_together_leave_one_consistent_run(tmp_path: Path) -> None:
    """The probe's case with real processes: seeds 0 and 1 into one --out at once. Whichever comes second is refused
    (the directory busy, or, had the first already finished, holding another config): exactly one exits 0, and
    config.json, checkpoint.pt and result.json are all of that one's seed."""
    run = tmp_path / "run"
    steps = "60"  # the runs usually overlap; if not, the second meets a finished run of another seed: refused too
    trainers = [
        subprocess.Popen(
            [*TRAINER, "--steps", steps, "--schedule-steps", "400", "--seed", str(seed), "--out", str(run)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=cli_env(),
        )
        for seed in (0, 1)
    ]
    streams = [t.communicate(timeout=900) for t in trainers]  # a hang guard: each trains for seconds
    outcomes = [(t.returncode, out, err) for t, (out, err) in zip(trainers, streams, strict=True)]
    winners = [seed for seed, (code, _, _) in enumerate(outcomes) if code == 0]
    assert len(winners) == 1, outcomes
    (winner,) = winners
    code, out, err = outcomes[1 - winner]
    lines = err.splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("attnrank train: error: ") and not out, outcomes
    assert str(run) in lines[0]
    recorded = json.loads((run / "config.json").read_text())["config"]
    assert recorded["seed"] == winner
    assert load_checkpoint(run / "checkpoint.pt")["config"].seed == winner
    printed = json.loads(outcomes[winner][1])
    assert json.loads((run / "result.json").read_text())["final_loss"] == printed["final_loss"]


def test_re_running_the_finished_run_after_its_writer_is_gone_returns_it(tmp_path: Path) -> None:
    """The control: with the lock free again, the finished run is returned, not trained twice."""
    run = train_short_run(tmp_path / "run")
    before = snapshot(run)
    assert train(SHORT, run, progress=False).steps == 20
    assert snapshot(run) == before and lock_holder(run) is None
