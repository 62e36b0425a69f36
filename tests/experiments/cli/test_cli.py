"""The command line: --help everywhere, and bad input -> one line on stderr, exit status 2, no traceback."""

import subprocess
import sys

import pytest

from experiments.cli.main import build_parser, main


def _subcommand_paths():
    """Every (sub)command path, e.g. ('check',), ('construct', 'full-rank')."""
    parser = build_parser()
    paths = []

    def walk(p, prefix):
        for action in p._actions:
            choices = getattr(action, "choices", None)
            if isinstance(choices, dict) and action.dest in ("command", "kind"):
                for name, sub in choices.items():
                    paths.append((*prefix, name))
                    walk(sub, (*prefix, name))

    walk(parser, ())
    return paths


def test_every_subcommand_has_help(capsys):
    paths = _subcommand_paths()
    assert ("check",) in paths
    for path in paths:
        with pytest.raises(SystemExit) as exit_info:
            main([*path, "--help"])
        assert exit_info.value.code == 0
        assert "usage: attnrank" in capsys.readouterr().out


def test_missing_command_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main([])
    assert exit_info.value.code == 2


def test_os_error_becomes_one_line_and_status_2(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    proc = subprocess.run(
        [sys.executable, "-m", "experiments.cli.main", "check", "--report-dir", str(blocker / "sub")],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert proc.stderr.startswith("attnrank check: error:")
    assert len(proc.stderr.strip().splitlines()) == 1
