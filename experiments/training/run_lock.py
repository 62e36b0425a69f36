"""One writer per run directory: the advisory lock every writer takes on ``<run>/.lock`` before it writes anything.

Two processes training into one directory used to corrupt each other (config.json of one, checkpoint.pt and
result.json of the other, both exiting 0; issue 50). Every writer of a run directory therefore holds this lock for as
long as it writes: `experiments.training.loop.train` and `experiments.training.loop.train_packed` (so ``attnrank
train``, the Python API and every sweep worker, `experiments.sweeps.execute`), and a sweep driver while it seeds an
extension's directory (`experiments.sweeps.extensions`). A second writer is refused at once, never made to wait: a
`RunDirectoryBusy` (a ValueError, so the command line prints it as its one line, exit status 2) naming the directory
and the holder's process id, raised before the refused process has written anything.

The lock is ``fcntl.flock`` on ``.lock``, which the kernel releases when its holder exits or dies, however it dies:
a lock file left by a killed process is taken over by the next writer (no stale lock to clear by hand). The holder
writes its process id into the file, for the refusal to name. The file is never deleted while in use (a process
waiting on a deleted file would lock a different inode than the next one); after locking, the holder checks that
the path still names the inode it locked, and locks again otherwise.

Within one process the lock is re-entrant for the thread that holds it (a sweep worker locks a run's directory and
then calls `train`, which locks it again); another thread of the same process is refused like another process.

A directory that the refused or failed writer created itself (it did not exist before) is removed again, with its
lock file, when the writer leaves it empty, so a refusal leaves nothing behind. On Windows, where flock does not
exist, there is no lock (a sweep's single driver is then the only guard).

Torch-free: the sweep driver takes the lock without loading torch.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from experiments.training.run_directory import RunDirectory

if sys.platform != "win32":  # flock is POSIX-only
    import fcntl

LOCK_ATTEMPTS = 8
"""How often a writer re-locks when the lock file it locked was replaced meanwhile (module docstring)."""


class RunDirectoryBusy(ValueError):
    """Another writer holds the run directory's lock (its process id is in the message)."""


@dataclass
class _Holding:
    """A lock this process holds: the thread holding it, how many times it entered, the open lock file."""

    thread: int
    depth: int
    handle: IO[bytes]


_HELD: dict[Path, _Holding] = {}
_HELD_GUARD = threading.Lock()


def lock_holder(run_dir: Path | str) -> int | None:
    """The process id written in ``run_dir``'s lock file (the current or last holder), or None when it names none."""
    path = RunDirectory(Path(run_dir)).lock
    try:
        descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return None
    with os.fdopen(descriptor, "rb") as stream:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            return None
        text = stream.read(32).decode("ascii", "replace").strip()
    return int(text) if text.isdigit() else None


def _created_directories(root: Path) -> list[Path]:
    """Create ``root`` (and missing parents); the directories created, deepest first."""
    missing = []
    for directory in (root, *root.parents):
        if directory.exists():
            break
        missing.append(directory)
    root.mkdir(parents=True, exist_ok=True)
    return missing


def _open_lock_file(path: Path) -> IO[bytes]:
    """The lock file opened for writing (created if absent); anything but a regular file is refused unopened, since
    opening a FIFO for writing blocks until a reader appears."""
    try:
        descriptor = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_NONBLOCK", 0), 0o644)
    except OSError as exc:
        code = exc.errno if exc.errno is not None else errno.EIO
        raise type(exc)(code, f"run directory lock cannot be opened ({exc.strerror or exc})", str(path)) from exc
    if not stat.S_ISREG(os.fstat(descriptor).st_mode):
        os.close(descriptor)
        raise ValueError(f"{path}: the run directory's lock file is not a regular file; remove it")
    os.set_blocking(descriptor, True)
    return os.fdopen(descriptor, "r+b")


def _busy(root: Path) -> RunDirectoryBusy:
    holder = lock_holder(root)
    who = f"process {holder}" if holder is not None else "another process"
    return RunDirectoryBusy(
        f"{root}: run directory is being written by {who} (it holds {root / '.lock'}); one writer per run directory: "
        "wait for it to finish, or stop it, then run again"
    )


def _acquire(root: Path) -> IO[bytes]:
    """Lock ``root``'s lock file without waiting (RunDirectoryBusy when another writer holds it); the open file."""
    path = RunDirectory(root).lock
    for _ in range(LOCK_ATTEMPTS):
        handle = _open_lock_file(path)
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            raise _busy(root) from None
        except BaseException:
            handle.close()
            raise
        try:
            same = os.stat(path).st_ino == os.fstat(handle.fileno()).st_ino
        except FileNotFoundError:
            same = False
        if same:
            handle.seek(0)
            handle.truncate()
            handle.write(f"{os.getpid()}\n".encode("ascii"))
            handle.flush()
            return handle
        handle.close()  # the file was replaced between open and lock: lock the one the path names now
    raise _busy(root)


def _release(handle: IO[bytes]) -> None:
    try:
        handle.seek(0)
        handle.truncate()  # a released lock names no holder
        fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
    finally:
        handle.close()


def _remove_if_left_empty(root: Path, created: list[Path]) -> None:
    """Remove the directories this writer created when it leaves nothing in them but its lock file."""
    if not created:
        return
    with contextlib.suppress(OSError):
        if {p.name for p in root.iterdir()} <= {RunDirectory(root).lock.name}:
            RunDirectory(root).lock.unlink(missing_ok=True)
            for directory in created:
                directory.rmdir()


@contextlib.contextmanager
def run_directory_lock(run_dir: Path | str) -> Iterator[Path]:
    """Hold ``run_dir``'s writer lock (module docstring) while the block runs; creates the directory if needed.

    Raises:
        RunDirectoryBusy: another process (or thread) holds it; nothing has been written.
    Yields:
        the run directory as a Path.
    """
    root = Path(run_dir)
    created = _created_directories(root)
    if sys.platform == "win32":  # pragma: no cover - no flock
        yield root
        return
    key = root.resolve()
    me = threading.get_ident()
    with _HELD_GUARD:
        holding = _HELD.get(key)
        if holding is not None and holding.thread == me:
            holding.depth += 1
    if holding is not None and holding.thread == me:
        try:
            yield root
        finally:
            with _HELD_GUARD:
                holding.depth -= 1
        return
    try:
        handle = _acquire(root)
    except BaseException:
        _remove_if_left_empty(root, created)
        raise
    with _HELD_GUARD:
        _HELD[key] = _Holding(me, 1, handle)
    failed = True
    try:
        yield root
        failed = False
    finally:
        with _HELD_GUARD:
            del _HELD[key]
        _release(handle)
        if failed:
            _remove_if_left_empty(root, created)
