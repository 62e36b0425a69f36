"""jemalloc for long CPU work: the process re-executes itself once with the allocator preloaded.

Why: a CPU training step at d = 64 allocates its 32 MiB activations afresh in every layer. glibc's malloc serves
blocks that large with a fresh ``mmap`` (its threshold cannot exceed 32 MiB) and returns them on ``free``, so every
step pays first-touch page faults on every activation: the ReLU passes, a per-layer copy and one layout of the FFN's
matrix products ran at half speed or less for it (issue 51's profile). jemalloc with its decay switched off
(``MALLOC_CONF=dirty_decay_ms:-1,muzzy_decay_ms:-1``, the setting PyTorch's own CPU launcher
``torch.backends.xeon.run_cpu`` uses) keeps those pages mapped and reuses them; ``benchmarks/bench_cpu_step.py``
measures the difference. The allocator never touches the arithmetic: losses are bitwise the same with and without.

A library cannot be swapped under a running process, so `reexec_with_allocator` (called first thing by
``attnrank train``, ``sweep`` and ``check``, and by the test run through the pytest plugin
`experiments.allocator_plugin`) replaces the process, once, with the same command line and ``LD_PRELOAD`` naming
jemalloc. It does nothing:

- when ``ATTNRANK_ALLOCATOR=system`` (the switch to keep the C library's malloc), or the switch is already
  ``jemalloc-applied`` (this process is the re-executed one);
- off Linux, or when no jemalloc library is installed (``libjemalloc2`` on Debian and Ubuntu);
- when ``LD_PRELOAD`` already names an allocator (jemalloc, tcmalloc, mimalloc): the user chose one.

A ``MALLOC_CONF`` the user set is kept. Standard library only: this runs before torch is imported.
"""

from __future__ import annotations

import ctypes.util
import os
import sys
from collections.abc import Mapping, Sequence

SWITCH = "ATTNRANK_ALLOCATOR"
"""Environment switch: ``system`` keeps the C library's malloc; the re-executed process carries ``APPLIED``."""
APPLIED = "jemalloc-applied"
JEMALLOC_CONF = "dirty_decay_ms:-1,muzzy_decay_ms:-1"
"""Keep freed pages mapped (no decay back to the system): what removes the first-touch faults."""
KNOWN_ALLOCATORS = ("jemalloc", "tcmalloc", "mimalloc")
HELP = (
    "On Linux this command re-executes itself once with jemalloc preloaded when the library is installed "
    "(libjemalloc2 on Debian/Ubuntu): the same numbers, a faster CPU step; ATTNRANK_ALLOCATOR=system turns it off."
)


def jemalloc_library() -> str | None:
    """The name of the installed jemalloc shared library as the dynamic loader finds it, or None."""
    return ctypes.util.find_library("jemalloc")


def preload_environment(environ: Mapping[str, str], platform: str, library: str | None) -> dict[str, str] | None:
    """The environment to re-execute with, or None when the process should go on as it is (module docstring)."""
    switch = environ.get(SWITCH, "")
    if switch in ("system", APPLIED) or not platform.startswith("linux") or library is None:
        return None
    preloaded = environ.get("LD_PRELOAD", "")
    if any(name in preloaded for name in KNOWN_ALLOCATORS):
        return None
    env = dict(environ)
    env["LD_PRELOAD"] = f"{library} {preloaded}".strip()
    env.setdefault("MALLOC_CONF", JEMALLOC_CONF)
    env[SWITCH] = APPLIED
    return env


def started_as(command_line: Sequence[str], entry_points: Sequence[str]) -> bool:
    """Whether the interpreter command line ``command_line`` (``sys.orig_argv``) runs one of ``entry_points``: a
    script of that name (``attnrank``, ``pytest``) or a module run with ``-m`` (``experiments.cli.main``, ``pytest``).

    Only such a process is re-executed: a Python session that calls ``main()`` or ``pytest.main()`` in-process must
    never be replaced under its user.
    """
    arguments = iter(command_line[1:])
    for argument in arguments:
        if argument in ("-X", "-W"):  # interpreter options that take a value
            next(arguments, None)
        elif argument == "-c" or argument.startswith("-c"):
            return False
        elif argument.startswith("-m"):
            module = argument[2:] or next(arguments, "")
            return module in entry_points
        elif not argument.startswith("-"):
            return os.path.basename(argument) in entry_points
    return False


def reexec_with_allocator(entry_points: Sequence[str]) -> None:
    """Replace this process by its own command line with jemalloc preloaded, when it was started as one of
    ``entry_points`` (`started_as`) and `preload_environment` says so.

    The command line is ``sys.orig_argv`` (the interpreter's own argv, ``-m`` and script path included), run by
    ``sys.executable``. Returns only when nothing is to be done, or when the ``exec`` itself fails.
    """
    argv = list(sys.orig_argv)
    if not started_as(argv, entry_points):
        return
    library = jemalloc_library() if sys.platform.startswith("linux") else None
    env = preload_environment(os.environ, sys.platform, library)
    if env is None:
        return
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execve(sys.executable, [sys.executable, *argv[1:]], env)
    except OSError:
        return  # go on with the C library's malloc: slower, the same numbers
