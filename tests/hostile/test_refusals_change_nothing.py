"""A refused resume or extension changes nothing: every check runs before any file is touched.

The probe's case: train 20 steps of a 40-step schedule, damage the checkpoint (truncated, empty, a directory, a
symlink, flipped bytes) or metrics.csv, extend to 40 steps: the refusal was clear, but result.json was already gone.
Each damage here is refused in one line naming the file, exit status 2, and every byte of the directory (the finished
result.json above all) is unchanged. The same damages on a plain resume (result.json absent) change nothing either,
and a pack in which one run is damaged leaves the other run's files alone.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from experiments.config import TrainConfig
from experiments.training.loop import train, train_packed
from tests.experiments.cli.cli_fuzz import invoke, refusal_problems
from tests.hostile.common import RUN_FLAGS, SHORT, FifoRescuer, copy_run, snapshot, train_short_run


@pytest.fixture(scope="module")
def short_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished 20-step run of the 40-step schedule (shared: every test damages a copy)."""
    return train_short_run(tmp_path_factory.mktemp("short") / "run")


def _flip_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


def _replace(path: Path, make: Callable[[Path], None]) -> None:
    path.unlink()
    make(path)


def _metrics_cell(run: Path, step: int, column: int, value: str) -> None:
    """Set one cell of metrics.csv (the row of ``step``), every other byte as written."""
    path = run / "metrics.csv"
    lines = path.read_text().splitlines()
    for number, line in enumerate(lines):
        cells = line.split(",")
        if cells[0] == str(step):
            cells[column] = value
            lines[number] = ",".join(cells)
    path.write_text("\n".join(lines) + "\n")


def _metrics_lines(run: Path, keep: Callable[[list[str]], list[str]]) -> None:
    path = run / "metrics.csv"
    path.write_text("\n".join(keep(path.read_text().splitlines())) + "\n")


CHECKPOINT_DAMAGE: dict[str, Callable[[Path], None]] = {
    "truncated": lambda run: (run / "checkpoint.pt").write_bytes((run / "checkpoint.pt").read_bytes()[:100]),
    "empty": lambda run: (run / "checkpoint.pt").write_bytes(b""),
    "directory": lambda run: _replace(run / "checkpoint.pt", Path.mkdir),
    "symlink to another file": lambda run: _replace(run / "checkpoint.pt", lambda p: p.symlink_to(run / "config.json")),
    "dangling symlink": lambda run: _replace(run / "checkpoint.pt", lambda p: p.symlink_to(run / "gone.pt")),
    "symlink to a device": lambda run: _replace(run / "checkpoint.pt", lambda p: p.symlink_to("/dev/zero")),
    "flipped byte": lambda run: _flip_byte(run / "checkpoint.pt"),
    "missing": lambda run: (run / "checkpoint.pt").unlink(),
}
METRICS_DAMAGE: dict[str, Callable[[Path], None]] = {
    "a learning rate changed": lambda run: _metrics_cell(run, 10, 2, "0.5"),
    "a learning rate emptied": lambda run: _metrics_cell(run, 10, 2, ""),
    "a loss made nan": lambda run: _metrics_cell(run, 10, 1, "nan"),
    "a loss made negative": lambda run: _metrics_cell(run, 10, 1, "-0.5"),
    "the last loss changed": lambda run: _metrics_cell(run, 20, 1, "0.123"),
    "a time beyond the checkpoint's": lambda run: _metrics_cell(run, 10, 3, "99999.000"),
    "times out of order": lambda run: _metrics_cell(run, 10, 3, "0.000"),
    "a population value changed": lambda run: _metrics_cell(run, 20, 4, "0.000001"),
    "a population value made inf": lambda run: _metrics_cell(run, 10, 4, "inf"),
    "a row removed": lambda run: _metrics_lines(run, lambda lines: lines[:2] + lines[3:]),
    "a row duplicated": lambda run: _metrics_lines(run, lambda lines: [*lines[:3], lines[2], *lines[3:]]),
    "the header changed": lambda run: _metrics_lines(
        run, lambda lines: ["step,loss,lr,seconds,population", *lines[1:]]
    ),
    "a short row": lambda run: _metrics_lines(run, lambda lines: [*lines[:2], lines[2].rsplit(",", 1)[0], *lines[3:]]),
    "not UTF-8": lambda run: (run / "metrics.csv").write_bytes(b"step,loss\n\xff\xfe\n"),
    "a directory": lambda run: _replace(run / "metrics.csv", Path.mkdir),
}
OTHER_DAMAGE: dict[str, Callable[[Path], None]] = {
    "result.json with a string loss": lambda run: (run / "result.json").write_text(
        (run / "result.json").read_text().replace('"final_loss": ', '"final_loss": "abc", "was": ', 1)
    ),
    "result.json nested 100000 deep": lambda run: (run / "result.json").write_text("[" * 100_000 + "]" * 100_000),
    "config.json nested 100000 deep": lambda run: (run / "config.json").write_text(
        "{" + '"a":{' * 99_999 + "}" * 100_000
    ),
}


def _extend(run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`attnrank train ... --steps 40` on ``run``: refused in one line naming a file, nothing changed."""
    before = snapshot(run.parent)
    outcome = invoke(["train", *RUN_FLAGS, "--steps", "40", "--out", str(run)], capsys)
    assert refusal_problems(outcome, before, snapshot(run.parent)) == [], outcome.err
    assert str(run) in outcome.err, outcome.err


@pytest.mark.parametrize("damage", [*CHECKPOINT_DAMAGE, *METRICS_DAMAGE, *OTHER_DAMAGE])
def test_a_refused_extension_changes_nothing(
    damage: str, short_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = copy_run(short_run, tmp_path / "run")
    {**CHECKPOINT_DAMAGE, **METRICS_DAMAGE, **OTHER_DAMAGE}[damage](run)
    _extend(run, capsys)


@pytest.mark.parametrize("damage", [*(d for d in CHECKPOINT_DAMAGE if d != "missing"), *METRICS_DAMAGE])
def test_a_refused_resume_changes_nothing(
    damage: str, short_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The unfinished run (no result.json) resumed with its own flags: the same damages, the same refusal (a run
    without a checkpoint starts afresh, so "missing" is the extension's case alone)."""
    run = copy_run(short_run, tmp_path / "run")
    (run / "result.json").unlink()
    {**CHECKPOINT_DAMAGE, **METRICS_DAMAGE}[damage](run)
    before = snapshot(tmp_path)
    outcome = invoke(["train", *RUN_FLAGS, "--steps", "20", "--out", str(run)], capsys)
    assert refusal_problems(outcome, before, snapshot(tmp_path)) == [], outcome.err


@pytest.mark.parametrize("name", ["checkpoint.pt", "metrics.csv", "config.json", "result.json"])
def test_a_fifo_in_the_run_directory_is_refused_without_reading(
    name: str, short_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = copy_run(short_run, tmp_path / "run")
    (run / name).unlink()
    fifo = FifoRescuer(run / name)
    try:
        _extend(run, capsys)
    finally:
        fifo.close()
    assert not fifo.rescued, f"a reader blocked on the FIFO {name}"


def test_the_undamaged_extension_goes_on(short_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The control: the same command on an intact copy extends the run to 40 steps."""
    run = copy_run(short_run, tmp_path / "run")
    outcome = invoke(["train", *RUN_FLAGS, "--steps", "40", "--out", str(run), "--json"], capsys)
    assert outcome.status == 0, outcome.err
    assert '"steps": 40' in outcome.out


def test_a_pack_with_one_damaged_run_changes_neither(short_run: Path, tmp_path: Path) -> None:
    """train_packed checks every run's files before writing any: the intact run's finished result stays."""
    intact, damaged = copy_run(short_run, tmp_path / "a"), tmp_path / "b"
    other = TrainConfig.from_dict({**SHORT.to_dict(), "seed": 1})
    train(other, damaged, progress=False)
    (damaged / "checkpoint.pt").write_bytes(b"")
    longer = [TrainConfig.from_dict({**c.to_dict(), "steps": 40}) for c in (SHORT, other)]
    before = snapshot(tmp_path)
    with pytest.raises(ValueError, match="checkpoint.pt"):
        train_packed(longer, [intact, damaged])
    assert snapshot(tmp_path) == before


def test_stale_temporaries_stay_until_a_run_really_starts(short_run: Path, tmp_path: Path) -> None:
    """A refused extension does not even remove a killed write's temporary file (it changes nothing); the accepted
    one does."""
    run = copy_run(short_run, tmp_path / "run")
    stale = run / ".checkpoint.pt.abc.tmp"
    stale.write_bytes(b"half")
    shutil.copyfile(run / "metrics.csv", tmp_path / "metrics.csv")
    _metrics_cell(run, 10, 2, "0.5")
    with pytest.raises(ValueError, match="column lr"):
        train(TrainConfig.from_dict({**SHORT.to_dict(), "steps": 40}), run, progress=False)
    assert stale.exists()
    shutil.copyfile(tmp_path / "metrics.csv", run / "metrics.csv")
    assert train(TrainConfig.from_dict({**SHORT.to_dict(), "steps": 40}), run, progress=False).steps == 40
    assert not stale.exists()


def test_the_lr_column_is_checked_against_a_per_epoch_schedule_too(tmp_path: Path) -> None:
    """lr_interval "epoch" (the rate changes once per epoch, as the reference's scheduler): the intact run extends
    (its lr column is that schedule's), and a changed rate is refused with nothing changed."""
    epochs = TrainConfig.from_dict(
        {**SHORT.to_dict(), "lr_interval": "epoch", "warmup_steps": 10, "warmup_fraction": 0.0}
    )
    longer = TrainConfig.from_dict({**epochs.to_dict(), "steps": 40})
    run = tmp_path / "run"
    train(epochs, run, progress=False)
    damaged = copy_run(run, tmp_path / "damaged")
    _metrics_cell(damaged, 10, 2, "0.0")  # the second epoch trains at the peak (0.01): the first epoch's rate
    before = snapshot(damaged)
    with pytest.raises(ValueError, match="column lr is 0.0, but the run's schedule gives 0.01"):
        train(longer, damaged, progress=False)
    assert snapshot(damaged) == before
    assert train(longer, run, progress=False).steps == 40
