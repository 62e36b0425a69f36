"""Figures: drawing only, from rows computed by `experiments.analysis` or read from the results store.

Nothing here computes, trains or parses a command line (the standalone studies are run by `attnrank figure NAME`,
`experiments/cli/figure_kinds/`; the sweep figures by `attnrank report`). No module chooses a matplotlib backend at
import; a command that writes image files calls :func:`use_file_backend` first (the ``attnrank`` entry point does).
"""

from __future__ import annotations

import matplotlib

FILE_BACKEND = "Agg"
"""The non-interactive backend that writes PNG files without a display."""


def use_file_backend() -> None:
    """Select the file-writing backend (Agg): call from a command line before drawing, never at import."""
    matplotlib.use(FILE_BACKEND)
