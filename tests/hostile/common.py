"""Shared pieces of the hostile-input tests: a tiny run, a lock held by another process, FIFOs that cannot hang.

The run is the smallest the encoder trains (d = 4, N = 3, batch 16): 20 steps of a 40-step schedule, so that the
same command with ``--steps 40`` extends it, as the probe did. Commands run in this process (`invoke`, as the fuzz
suite does) except where a second process is the point (a lock holder, concurrent writers, a killed worker).
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import shutil
import stat
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

from experiments.config import TrainConfig
from experiments.training.loop import train

ROOT = Path(__file__).resolve().parents[2]
TINY_FLAGS = ["--task", "farthest", "--d", "4", "--N", "3", "--rank", "4", "--ffn-dim", "16", "--batch-size", "16"]
RUN_FLAGS = [*TINY_FLAGS, "--log-every", "5", "--checkpoint-every", "10", "--schedule-steps", "40", "--no-progress"]
"""`attnrank train` flags of the tiny run, but for --steps and --out."""
SHORT = TrainConfig(
    task="farthest", d=4, N=3, rank=4, ffn_dim=16, batch_size=16, log_every=5, checkpoint_every=10,
    schedule_steps=40, steps=20,
)  # fmt: skip
"""The run RUN_FLAGS --steps 20 trains: the first half of its schedule, extended by --steps 40."""


def snapshot(root: Path) -> dict[str, tuple[str, int, str]]:
    """Every path under ``root`` -> (kind, size, sha256 of a regular file's bytes; a link's target). Unlike the fuzz
    suite's snapshot it never opens a FIFO or a device (reading one would block or never end): they are recorded by
    kind alone."""
    state: dict[str, tuple[str, int, str]] = {}
    for directory, subdirs, files in os.walk(root):
        for name in [*subdirs, *files]:
            path = os.path.join(directory, name)
            key = os.path.relpath(path, root)
            mode = os.lstat(path).st_mode
            if stat.S_ISLNK(mode):
                state[key] = ("link", 0, os.readlink(path))
            elif stat.S_ISDIR(mode):
                state[key] = ("dir", 0, "")
            elif stat.S_ISREG(mode):
                data = Path(path).read_bytes()
                state[key] = ("file", len(data), hashlib.sha256(data).hexdigest())
            else:
                state[key] = ("special", 0, oct(stat.S_IFMT(mode)))
    return state


def train_short_run(directory: Path) -> Path:
    """A finished SHORT run in ``directory``."""
    train(SHORT, directory, progress=False)
    return directory


def copy_run(source: Path, target: Path) -> Path:
    shutil.copytree(source, target, symlinks=True)
    return target


def cli_env() -> dict[str, str]:
    """The environment of a subprocess `attnrank`: this worktree's code first, no allocator re-execution."""
    return {**os.environ, "PYTHONPATH": str(ROOT), "MPLBACKEND": "Agg", "ATTNRANK_ALLOCATOR": "system"}


HOLDER = """
import sys
from experiments.training.run_lock import run_directory_lock
with run_directory_lock(sys.argv[1]):
    print("held", flush=True)
    sys.stdin.read()  # until the test closes our stdin (or kills us)
"""


@contextlib.contextmanager
def lock_held_elsewhere(directory: Path) -> Iterator[subprocess.Popen[str]]:
    """``directory``'s writer lock held by another process (a stand-in for a running `attnrank train` or sweep
    worker) for the duration of the block; yields that process."""
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(directory)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=cli_env(),
    )
    try:
        assert holder.stdout is not None
        line = holder.stdout.readline()  # the condition waited on: the holder says it holds the lock
        assert line.strip() == "held", (line, holder.communicate(timeout=60))
        yield holder
    finally:
        if holder.poll() is None:
            holder.kill()
        holder.communicate(timeout=60)


class FifoRescuer:
    """A FIFO that cannot hang a test: if a reader blocks on it (the defect under test), the rescuer opens it for
    writing after ``patience`` seconds and closes it, so the reader sees end-of-file and the test fails on
    ``rescued`` instead of hanging. ``patience`` is a hang guard, not a measurement."""

    def __init__(self, path: Path, patience: float = 60.0) -> None:
        self.path, self.rescued = path, False
        os.mkfifo(path)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, args=(patience,), daemon=True)
        self._thread.start()

    def _watch(self, patience: float) -> None:
        if self._stop.wait(patience):
            return
        try:  # succeeds only when a reader has the FIFO open (is blocked on it)
            descriptor = os.open(self.path, os.O_WRONLY | os.O_NONBLOCK)
        except OSError as exc:
            if exc.errno not in (errno.ENXIO, errno.ENOENT):
                raise
            return
        self.rescued = True
        os.close(descriptor)

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
