"""Theorem 2's certified lower bound as a curve in the head count H, for figures that draw it beside measurements."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from theory.bounds import rank_lower_bound
from theory.validation import check_array, check_dimension, check_rank


def bound_curve(d: int, r: int, heads: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """Certified lower ends of Theorem 2's bound at the given head counts.

    Args:
        d: dimension >= 2.  r: rank, 1 <= r <= d.  heads: (m,) head counts (integers >= 1).
    Returns:
        (m,) lower bounds.
    """
    d = check_dimension(d)
    r = check_rank(r, d)
    values = check_array("heads", heads, ndim=1)
    return np.array([rank_lower_bound(d, r, int(h)).lower for h in values])
