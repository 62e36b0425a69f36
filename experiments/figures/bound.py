"""The bound-curve figure: Theorem 2's lower bound vs the number of heads, one line per rank, with measured overlays.

``draw_bound_figure(path, d=64, ranks=..., overlays={"random rank-1 heads": (H, err)})`` draws the certified lower
end of ``theory.bounds.rank_lower_bound`` (computed by `experiments.analysis.bound_curves`) on log-log axes (H from 1
to ``max_heads``) and any measured error curves (e.g. the random-feature errors of constructions/random_features.py)
as markers on top. Used by the Theorem 2 paper check under ``attnrank check --full`` and by other figure commands.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import numpy.typing as npt

from experiments.analysis.bound_curves import bound_curve
from theory.validation import check_array, check_dimension, check_int, check_rank

DEFAULT_RANKS = (1, 2, 4, 8, 16, 32)


def draw_bound_figure(
    path: str | Path,
    d: int = 64,
    ranks: Sequence[int] = DEFAULT_RANKS,
    overlays: Mapping[str, tuple[npt.ArrayLike, npt.ArrayLike]] | None = None,
    *,
    max_heads: int = 2**16,
    points: int = 40,
) -> Path:
    """Draw error vs H (log-log): the bound for each rank, plus measured curves; save as PNG.

    Args:
        path: output PNG file (parent directories are created).
        d: dimension >= 2.  ranks: ranks to draw (each in [1, d]).
        overlays: label -> (H (m,), error (m,)) measured curves drawn as markers (e.g. random rank-1 heads).
        max_heads: largest H on the axis (>= 2).  points: bound points per rank (log-spaced, >= 2).
    Returns:
        the path written.
    """
    d = check_dimension(d)
    ranks = [check_rank(r, d) for r in ranks]
    max_heads = check_int("max_heads", max_heads, minimum=2)
    points = check_int("points", points, minimum=2)
    heads = np.unique(np.round(np.logspace(0, np.log10(max_heads), points)).astype(np.int64))  # (m,)
    figure, axes = plt.subplots(figsize=(6.4, 4.6))
    for r in ranks:
        lower = bound_curve(d, r, heads)
        positive = lower > 0
        axes.plot(heads[positive], lower[positive], label=f"bound, r = {r}")
    for label, (h_values, errors) in (overlays or {}).items():
        h_array = check_array(f"overlays[{label!r}] H", h_values, ndim=1)
        e_array = check_array(f"overlays[{label!r}] error", errors, shape=(h_array.shape[0],))
        axes.plot(h_array, e_array, "o", markersize=3.5, label=label)
    axes.set_xscale("log")
    axes.set_yscale("log")
    axes.set_xlabel("number of heads H")
    axes.set_ylabel("E||f - f*||^2 on D_2")
    axes.set_title(f"Theorem 2 lower bound, d = {d}")
    axes.grid(True, which="both", alpha=0.3)
    axes.legend(fontsize=8)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return path
