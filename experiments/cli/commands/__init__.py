"""One module per `attnrank` subcommand.

Each module defines ``add_parser(subparsers)``, which adds its subparser and sets ``handler`` (a callable taking
the parsed ``argparse.Namespace`` and returning an exit status) with ``parser.set_defaults(handler=...)``.
`experiments.cli.main` discovers the modules here automatically, so adding a command never touches a shared file.
"""
