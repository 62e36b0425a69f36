"""Benchmark of theory.bounds.rank_lower_bound against a straightforward baseline, in the same process.

Baseline: the textbook evaluation - a Python loop over odd k = 1, 3, ..., K_max with exact integers for the bracket
(math.comb, num_harmonics) and theory.harmonics.sign_energy for e_k, truncated at K_max = 4001 with the remainder
bounded by 1 - (partial energy) (the issue's "upper = lower + tail/2"). It has no certified rounding and its interval
is wide whenever the bracket is still growing past K_max.

Run:  PYTHONPATH=. python benchmarks/bench_bound.py   (prints one row per case: median times, ratio, widths)
"""

from __future__ import annotations

import math
import statistics
import time

from theory.bounds import rank_lower_bound
from theory.harmonics import num_harmonics, sign_energy

K_MAX = 4001
REPEATS = 3


def baseline_bound(d: int, r: int, H: int) -> tuple[float, float]:
    """Truncated sum to K_MAX plus the trivial remainder interval [0, tail/2]."""
    total = 0.0
    energy = 0.0
    for k in range(1, K_MAX + 1, 2):
        e_k = float(sign_energy(d, k))
        energy += e_k
        capacity = H * math.comb(k + r - 1, r - 1)
        n_dk = num_harmonics(d, k)
        if capacity < n_dk:
            total += e_k * (1.0 - capacity / n_dk)
    tail = max(0.0, 1.0 - energy)
    return 0.5 * total, 0.5 * (total + tail)


def _median_seconds(function, *args) -> tuple[float, object]:  # type: ignore[no-untyped-def]
    times, result = [], None
    for _ in range(REPEATS):
        start = time.perf_counter()
        result = function(*args)
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


def main() -> None:
    cases = []
    for d in (16, 64, 256, 1024):
        for r in sorted({1, 8, d // 2, d - 2}):
            for H in (1, max(1, 8 * d // r), 10**6, 10**30):
                cases.append((d, r, H))
    print(
        f"{'d':>5} {'r':>5} {'H':>8} | {'ours ms':>8} {'base ms':>8} {'ratio':>6} | {'our width':>9} {'base width':>10}"
    )
    ratios, ours_small = [], []
    for d, r, H in cases:
        t_ours, ours = _median_seconds(rank_lower_bound, d, r, H)
        t_base, base = _median_seconds(baseline_bound, d, r, H)
        ratio = t_base / t_ours
        ratios.append(ratio)
        ours_small.append(t_ours)
        h_text = str(H) if H < 10**7 else f"1e{len(str(H)) - 1}"
        print(
            f"{d:>5} {r:>5} {h_text:>8} | {1e3 * t_ours:8.2f} {1e3 * t_base:8.2f} {ratio:6.1f} | "
            f"{ours.upper - ours.lower:9.1e} {base[1] - base[0]:10.1e}"
        )
    print(
        f"median speed-up {statistics.median(ratios):.1f}x; ours: median {1e3 * statistics.median(ours_small):.1f} ms, "
        f"max {1e3 * max(ours_small):.1f} ms over {len(cases)} cases (d <= 1024)"
    )


if __name__ == "__main__":
    main()
