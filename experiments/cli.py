"""The `attnrank` command line.

Subcommands live one per module in `experiments/commands/` and are discovered here. Bad input (a ValueError,
or an OSError such as a missing file, raised by the validating library functions) becomes one line on stderr and
exit status 2, never a traceback; argparse's own usage errors also exit with 2.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
from collections.abc import Sequence

from experiments import commands


class UsageError(ValueError):
    """Bad input detected by a command itself (as opposed to by a library function)."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="attnrank",
        description="Check the claims of 'On the Benefits of Rank in Attention Layers' numerically, compute its "
        "bounds, build its constructions as weights and train transformers against them.",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    subparsers.required = True
    for module_info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda m: m.name):
        if module_info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{commands.__name__}.{module_info.name}")
        module.add_parser(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
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
