"""One module per `attnrank construct KIND` (full-rank, random-features, majority-vote, biased, ...).

Each module defines ``add_parser(subparsers)``, adding its sub-subparser (named after the construction) and setting
``handler`` (a callable taking the parsed namespace and returning an exit status). Every kind takes ``--out FILE``
and ``--json`` and prints at least ``predicted_error`` and the file written. Discovered by
`experiments/cli/commands/construct.py`.
"""
