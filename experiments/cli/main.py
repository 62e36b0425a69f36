"""The `attnrank` command line: the entry point and its error handling.

Subcommands live one per module in `experiments/cli/commands/` and are discovered here. This is the one error path
(docs/reliability.md): bad input (a ValueError, or an OSError such as a missing file or an unwritable output path,
raised by the validating library functions; an OverflowError; a MemoryError that slipped past the commands' memory
estimates) becomes one line ``attnrank COMMAND: error: MESSAGE`` on stderr and exit status 2, never a traceback.
argparse's own usage errors (unknown flag, missing required flag, a value that is not a number) are the same one
line (no usage block) and also exit with 2. A library message that names a parameter (``r must be ...``) is rewritten
to name the flag as the user typed it (``--rank must be ...``). Figures are drawn off-screen: the matplotlib backend
is chosen here, before any command runs (Agg, unless MPLBACKEND names another).
"""

from __future__ import annotations

import argparse
import importlib
import os
import pkgutil
import re
import sys
from collections.abc import Sequence
from typing import NoReturn

from experiments.allocator import reexec_with_allocator
from experiments.cli import commands
from experiments.cli.arguments import PARAMETER_ALIASES
from experiments.cli.terminal_text import printable
from experiments.cli.version import package_version


class OneLineArgumentParser(argparse.ArgumentParser):
    """An ArgumentParser whose usage errors are one line, ``PROG: error: MESSAGE``, and exit status 2 (no usage block).

    Subparsers inherit the class (``add_subparsers`` uses the parent's type), so every (sub)command behaves alike.
    """

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {one_line(message)}\n")


def one_line(text: str) -> str:
    """``text`` with its line breaks folded into spaces (a refusal is always exactly one line) and every other
    control character escaped (`experiments.cli.terminal_text.printable`: a message may quote a file's text)."""
    folded = " ".join(part.strip() for part in str(text).splitlines() if part.strip()) or "(no message)"
    return printable(folded)


def _selected_parsers(parser: argparse.ArgumentParser, args: argparse.Namespace) -> list[argparse.ArgumentParser]:
    """The chain of (sub)parsers that parsed ``args``: the top parser, the command's, a construct kind's."""
    chain = [parser]
    while True:
        current = chain[-1]
        for action in current._actions:
            if isinstance(action, argparse._SubParsersAction) and getattr(args, action.dest, None) in action.choices:
                chain.append(action.choices[getattr(args, action.dest)])
                break
        else:
            return chain


def flag_names(parser: argparse.ArgumentParser, args: argparse.Namespace) -> dict[str, str]:
    """Parameter name -> flag as the user types it (``batch_size`` -> ``--batch-size``, ``r`` -> ``--rank``)."""
    flags: dict[str, str] = {}
    for sub in _selected_parsers(parser, args):
        for action in sub._actions:
            if action.option_strings and action.dest not in ("help", "version"):
                long = [o for o in action.option_strings if o.startswith("--")]
                flags[action.dest] = (long or action.option_strings)[0]
    for name, dest in PARAMETER_ALIASES.items():
        if dest in flags and name not in flags:
            flags[name] = flags[dest]
    return flags


_LEADING_NAME = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*(?:\[\d+\])?)( must | is | has | exists | cannot |: )")


def name_flag(message: str, flags: dict[str, str]) -> str:
    """Rewrite a leading library parameter name into its flag: ``r must be ...`` -> ``--rank must be ...``,
    ``out exists and is not a directory`` -> ``--out exists ...``, ``overrides: steps ...`` -> ``--set: steps ...``."""
    match = _LEADING_NAME.match(message)
    if match and match.group(1) in flags:
        return flags[match.group(1)] + message[len(match.group(1)) :]
    return message


def error_message(exc: BaseException) -> str:
    """The one-line text of a refused request."""
    if isinstance(exc, MemoryError):
        detail = str(exc)
        return f"not enough memory for this request{f' ({detail})' if detail else ''}; use smaller sizes"
    if isinstance(exc, OSError) and exc.filename:
        return f"{exc.strerror or exc}: {exc.filename}"
    return str(exc)


def _command_modules() -> list[str]:
    """Names of the subcommand modules (``min_heads`` implements ``attnrank min-heads``; ``import_``, a keyword's
    command, ``attnrank import``)."""
    return sorted(m.name for m in pkgutil.iter_modules(commands.__path__) if not m.name.startswith("_"))


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The full parser, or (``only`` = a command name) a parser holding just that command, or (``only = ""``) none.

    Importing a command module pulls in its libraries (torch, sympy, ...), so `main` loads only the module of the
    command being run; the top-level ``--help`` loads them all to list them, ``--version`` none.
    """
    parser = OneLineArgumentParser(
        prog="attnrank",
        description="Check the claims of 'On the Benefits of Rank in Attention Layers' numerically, compute its "
        "bounds, build its constructions as weights and train transformers against them.",
    )
    parser.add_argument("--version", action="version", version=f"attnrank {package_version()}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    subparsers.required = True
    names = _command_modules()
    if only == "":
        names = []
    elif only is not None:
        module = only.replace("-", "_")
        module = module if module in names else module + "_"  # a keyword command: `attnrank import` is import_.py
        if module in names:
            names = [module]
    for name in names:
        importlib.import_module(f"{commands.__name__}.{name}").add_parser(subparsers)
    return parser


def select_plot_backend() -> None:
    """Draw figures with the non-interactive Agg backend unless MPLBACKEND names one (pyplot is not imported)."""
    if os.environ.get("MPLBACKEND"):
        return
    os.environ["MPLBACKEND"] = "Agg"
    matplotlib = sys.modules.get("matplotlib")
    # Imported already (main() called in-process) but pyplot not yet: set it explicitly. Once pyplot is imported its
    # backend is fixed and switching would close open figures, so it is left alone.
    if matplotlib is not None and "matplotlib.pyplot" not in sys.modules:
        matplotlib.use("Agg")


LONG_COMMANDS = ("train", "sweep", "check")
"""Commands that run under jemalloc (`experiments.allocator`): re-executed once, when started as a program."""


def main(argv: Sequence[str] | None = None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    first = next((a for a in arguments if not a.startswith("-")), None)
    if argv is None and first in LONG_COMMANDS:
        reexec_with_allocator(("attnrank", "experiments.cli.main"))
    if first is None and "-h" not in arguments and "--help" not in arguments:
        first = ""  # --version or a usage error: no command module needs loading
    select_plot_backend()
    parser = build_parser(only=first)
    args = parser.parse_args(arguments)
    try:
        status = args.handler(args)
    except (ValueError, OSError, OverflowError, MemoryError) as exc:
        prog = _selected_parsers(parser, args)[-1].prog
        message = name_flag(one_line(error_message(exc)), flag_names(parser, args))
        print(f"{prog}: error: {message}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"attnrank {args.command}: interrupted", file=sys.stderr)
        return 130
    return int(status or 0)


if __name__ == "__main__":
    sys.exit(main())
