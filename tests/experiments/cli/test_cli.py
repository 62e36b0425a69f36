"""The command line: --help everywhere, and bad input -> one line on stderr, exit status 2, no traceback."""

import importlib.metadata
import os
import subprocess
import sys

import pytest

from experiments.cli.main import build_parser, main
from experiments.cli.version import PYPROJECT, package_version


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


def test_version_prints_the_distribution_version_and_exits_0(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.strip() == f"attnrank {package_version()}"
    proc = subprocess.run(
        [sys.executable, "-m", "experiments.cli.main", "--version"], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0 and proc.stdout.strip().startswith("attnrank ") and proc.stderr == ""


def test_version_falls_back_to_pyproject(tmp_path):
    assert package_version() == importlib.metadata.version("attnrank")
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text('[tool.x]\nversion = "0.0.1"\n\n[project]\nname = "x"\nversion = "9.8.7"\n[tool.y]\n')
    assert package_version("no-such-distribution-attnrank", pyproject) == "9.8.7"
    pyproject.write_text('[project]\nname = "x"\n\n[tool.x]\nversion = "0.0.1"\n')
    assert package_version("no-such-distribution-attnrank", pyproject) == "unknown"  # not the [tool.x] version
    assert package_version("no-such-distribution-attnrank", tmp_path / "missing.toml") == "unknown"
    source_version = package_version("no-such-distribution-attnrank", PYPROJECT)
    assert source_version == importlib.metadata.version("attnrank")  # the installed tree is this source tree


def test_the_cli_selects_a_non_interactive_plot_backend_unless_mplbackend_is_set():
    script = "import matplotlib, sys; from experiments.cli.main import main; main(sys.argv[1:]); "
    script += "print(matplotlib.get_backend())"
    env = {k: v for k, v in os.environ.items() if k != "MPLBACKEND"}
    proc = subprocess.run(
        [sys.executable, "-c", script, "bound", "--d", "4", "--rank", "1", "--heads", "2"],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1].lower() == "agg"
    proc = subprocess.run(
        [sys.executable, "-c", script, "bound", "--d", "4", "--rank", "1", "--heads", "2"],
        capture_output=True,
        text=True,
        env={**env, "MPLBACKEND": "svg"},
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1].lower() == "svg"


def _refusal(argv, capsys):
    try:
        status = main(argv)
    except SystemExit as exc:
        status = exc.code
    captured = capsys.readouterr()
    return status, captured.out, captured.err


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (
            ["bound", "--d", "x", "--rank", "1", "--heads", "2"],
            "attnrank bound: error: argument --d: invalid int value",
        ),
        (["bound", "--d", "4"], "attnrank bound: error: the following arguments are required: --rank, --heads"),
        (["bound", "--d", "4", "--rank", "1", "--heads", "2", "--nope"], "unrecognized arguments: --nope"),
        (["construct", "full-rank"], "attnrank construct full-rank: error: the following arguments are required"),
        (["bound", "--d", "8", "--rank", "9", "--heads", "2"], "attnrank bound: error: --rank must be an integer in"),
        (["construct", "full-rank", "--d", "3", "--temperature", "1e400", "--out", "x"], "overflows a float64"),
    ],
)
def test_argparse_and_library_errors_are_one_line_naming_the_flag(argv, expected, capsys):
    status, out, err = _refusal(argv, capsys)
    assert status == 2 and out == "" and err.count("\n") == 1 and expected in err, err
    assert "usage:" not in err


def test_library_parameter_names_become_flags():
    from experiments.cli.main import name_flag

    flags = {"r": "--rank", "batch_size": "--batch-size", "betas[0]": "--beta1"}
    assert name_flag("r must be an integer in [1, 8], got 9", flags) == "--rank must be an integer in [1, 8], got 9"
    assert name_flag("batch_size must be >= 1", flags).startswith("--batch-size must")
    assert name_flag("betas[0] must be in [0, 1)", flags).startswith("--beta1 must")
    assert name_flag("some.file: metadata r must be", flags) == "some.file: metadata r must be"  # files keep fields


def test_output_paths_are_checked_before_anything_is_written(tmp_path):
    from experiments.cli.arguments import check_output_dir, check_output_file

    blocker = tmp_path / "file"
    blocker.write_text("x")
    for bad, message in [
        ("", "empty path"),
        (tmp_path, "is a directory"),
        (blocker / "child.safetensors", "is not a directory"),
        ("/proc/attnrank-test/x.safetensors", "cannot write"),
    ]:
        with pytest.raises(ValueError, match=message):
            check_output_file(bad, "--out")
    with pytest.raises(ValueError, match="is not a directory"):
        check_output_dir(blocker, "--out")
    assert (
        check_output_file(tmp_path / "new" / "deeper" / "f.safetensors")
        == tmp_path / "new" / "deeper" / "f.safetensors"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]  # nothing created by the checks


def test_memory_estimates_refuse_what_does_not_fit(capsys):
    from experiments.cli.arguments import available_memory, check_memory

    assert available_memory() > 0
    check_memory(1024, "a kibibyte", "--d")
    with pytest.raises(ValueError, match=r"--d: the things need about .* more than the .* of memory available"):
        check_memory(10.0**20, "the things", "--d")
    status, _, err = _refusal(["construct", "full-rank", "--d", "1000000", "--out", "x.safetensors"], capsys)
    assert status == 2 and "--d: the d x d weight matrices" in err and "TiB" in err


def test_check_keeps_the_earlier_report_when_no_check_ran(tmp_path, capsys, monkeypatch):
    import experiments.cli.commands.check as check_command

    report = tmp_path / "check.md"
    report.write_text("# earlier\n")
    status, _, err = _refusal(["check", "--report-dir", str(tmp_path), "-k", "(("], capsys)
    assert status == 2 and "is not a pytest -k expression" in err
    monkeypatch.setattr(check_command, "run_checks", lambda **kwargs: [])
    status, _, err = _refusal(["check", "--report-dir", str(tmp_path), "-k", "nothing_matches"], capsys)
    assert status == 2 and "no checks match -k 'nothing_matches'" in err and "left unchanged" in err
    assert report.read_text() == "# earlier\n"
