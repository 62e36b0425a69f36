"""One module per `attnrank figure NAME` (biased, biased-separation, biased-crossing, depth, trained).

Each module defines ``add_parser(subparsers)``, adding its sub-subparser (named after the figure) and setting
``handler``. A handler checks every flag before computing, computes its rows with `experiments.analysis`, writes
them beside the PNG that an `experiments.figures` module draws, and prints the tables. Discovered by
`experiments/cli/commands/figure.py`.
"""
