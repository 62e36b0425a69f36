"""The jemalloc re-exec (`experiments.allocator`): when it applies, that it really preloads, and that it changes no
number."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from experiments.allocator import APPLIED, JEMALLOC_CONF, SWITCH, jemalloc_library, preload_environment, started_as

ROOT = Path(__file__).resolve().parents[2]
LIBRARY = jemalloc_library() if sys.platform.startswith("linux") else None
needs_jemalloc = pytest.mark.skipif(LIBRARY is None, reason="no jemalloc library on this machine")


def test_preload_environment_adds_the_library_and_the_decay_setting() -> None:
    env = preload_environment({"PATH": "/bin"}, "linux", "libjemalloc.so.2")
    assert env == {"PATH": "/bin", "LD_PRELOAD": "libjemalloc.so.2", "MALLOC_CONF": JEMALLOC_CONF, SWITCH: APPLIED}


def test_preload_environment_keeps_what_the_user_set() -> None:
    env = preload_environment({"LD_PRELOAD": "libfoo.so", "MALLOC_CONF": "narenas:1"}, "linux", "libjemalloc.so.2")
    assert env is not None
    assert env["LD_PRELOAD"] == "libjemalloc.so.2 libfoo.so"
    assert env["MALLOC_CONF"] == "narenas:1"


@pytest.mark.parametrize(
    ("environ", "platform", "library"),
    [
        ({SWITCH: "system"}, "linux", "libjemalloc.so.2"),  # switched off
        ({SWITCH: APPLIED}, "linux", "libjemalloc.so.2"),  # the re-executed process itself
        ({}, "darwin", "libjemalloc.2.dylib"),  # not Linux
        ({}, "linux", None),  # not installed
        ({"LD_PRELOAD": "/usr/lib/libtcmalloc.so.4"}, "linux", "libjemalloc.so.2"),  # the user chose an allocator
    ],
)
def test_preload_environment_leaves_the_process_alone(environ: dict[str, str], platform: str, library: str) -> None:
    assert preload_environment(environ, platform, library) is None


@pytest.mark.parametrize(
    ("command_line", "expected"),
    [
        (["python", "/usr/local/bin/attnrank", "train"], True),
        (["python", "-m", "experiments.cli.main", "sweep"], True),
        (["python", "-X", "importtime", "-m", "pytest", "-q"], True),
        (["python", "/usr/bin/pytest"], True),
        (["python", "-c", "import attnrank"], False),  # a Python session: never replaced
        (["python", "-m", "ipykernel_launcher"], False),
        (["python"], False),
    ],
)
def test_started_as(command_line: list[str], expected: bool) -> None:
    assert started_as(command_line, ("attnrank", "experiments.cli.main", "pytest")) is expected


PROBE = """
import os, sys
sys.path.insert(0, {root!r})
from experiments.allocator import reexec_with_allocator
reexec_with_allocator(("attnrank",))
with open("/proc/self/maps") as maps:
    print(os.environ.get("LD_PRELOAD"), "jemalloc" in maps.read())
"""


@needs_jemalloc
@pytest.mark.parametrize(("switch", "expected"), [("", f"{LIBRARY} True"), ("system", "None False")])
def test_a_program_named_attnrank_runs_under_jemalloc_unless_switched_off(
    tmp_path: Path, switch: str, expected: str
) -> None:
    script = tmp_path / "attnrank"  # a program started as `attnrank` (the entry point's name) re-executes itself
    script.write_text(PROBE.format(root=str(ROOT)), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "MALLOC_CONF", SWITCH)}
    if switch:
        env[SWITCH] = switch
    done = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, check=True)
    assert done.stdout.strip() == expected


@needs_jemalloc
def test_this_test_run_is_under_jemalloc() -> None:
    if not started_as(sys.orig_argv, ("pytest", "py.test")) or os.environ.get(SWITCH) == "system":
        pytest.skip("pytest was not started as a program here, or the allocator is switched off")
    assert os.environ.get(SWITCH) == APPLIED
    with open("/proc/self/maps") as maps:
        assert "jemalloc" in maps.read()


@needs_jemalloc
def test_the_allocator_changes_no_number(tmp_path: Path) -> None:
    """The same short `attnrank train` with and without jemalloc: bitwise the same metrics."""
    flags = ["train", "--d", "8", "--N", "4", "--layers", "2", "--steps", "40", "--batch-size", "32"]
    flags += ["--log-every", "10"]
    curves = {}
    for switch in ("", "system"):
        env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "MALLOC_CONF", SWITCH)}
        if switch:
            env[SWITCH] = switch
        out = tmp_path / (switch or "jemalloc")
        command = [sys.executable, "-m", "experiments.cli.main", *flags, "--out", str(out), "--json"]
        subprocess.run(command, env={**env, "PYTHONPATH": str(ROOT)}, capture_output=True, check=True)
        rows = (out / "metrics.csv").read_text(encoding="utf-8").splitlines()[1:]
        curves[switch] = [row.split(",")[:3] for row in rows]  # step, loss, lr (not the seconds)
        assert json.loads((out / "config.json").read_text(encoding="utf-8"))["config"]["steps"] == 40
    assert len(curves[""]) == 4
    assert curves[""] == curves["system"]
