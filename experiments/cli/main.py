"""The `attnrank` command line.

Subcommands live one per module in `experiments/cli/commands/` and are discovered here. Bad input (a ValueError,
or an OSError such as a missing file, raised by the validating library functions) becomes one line on stderr and
exit status 2, never a traceback; argparse's own usage errors also exit with 2.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
from collections.abc import Sequence

from experiments.cli import commands


class UsageError(ValueError):
    """Bad input detected by a command itself (as opposed to by a library function)."""


def _command_modules() -> list[str]:
    """Names of the subcommand modules (``min_heads`` implements ``attnrank min-heads``)."""
    return sorted(m.name for m in pkgutil.iter_modules(commands.__path__) if not m.name.startswith("_"))


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The full parser, or (``only`` = a command name) a parser holding just that command.

    Importing a command module pulls in its libraries (torch, sympy, cvxpy, ...), so `main` loads only the module of
    the command being run; the top-level ``--help`` loads them all to list them.
    """
    parser = argparse.ArgumentParser(
        prog="attnrank",
        description="Check the claims of 'On the Benefits of Rank in Attention Layers' numerically, compute its "
        "bounds, build its constructions as weights and train transformers against them.",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    subparsers.required = True
    names = _command_modules()
    if only is not None and only.replace("-", "_") in names:
        names = [only.replace("-", "_")]
    for name in names:
        importlib.import_module(f"{commands.__name__}.{name}").add_parser(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    first = next((a for a in arguments if not a.startswith("-")), None)
    parser = build_parser(only=first)
    args = parser.parse_args(arguments)
    try:
        status = args.handler(args)
    except (ValueError, OSError) as exc:
        message = f"{exc.strerror}: {exc.filename}" if isinstance(exc, OSError) and exc.filename else str(exc)
        print(f"attnrank {args.command}: error: {message}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"attnrank {args.command}: interrupted", file=sys.stderr)
        return 130
    return int(status or 0)


if __name__ == "__main__":
    sys.exit(main())
