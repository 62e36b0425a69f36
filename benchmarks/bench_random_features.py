"""Benchmark: the paper's random-feature curve, fast nested solver vs a straightforward dense baseline.

The curve (docs/paper.md section 6): for each d in --dims and each of --trials independent draws of 2^M heads
(M = --max-log2-heads, paper: d in {8, 16, 32, 64}, M = 14, 5 trials), the optimal error 1 - b^T C^{-1} b of the
first H = 2^0 .. 2^M heads (nested prefixes of one draw, so both implementations see the same heads).

* ours: constructions.random_features.prefix_errors (block-wise in-place C with torch's arcsin, b from the sign
  expansion, one Cholesky factor of the leading 4096 block for every H <= 4096, block elimination + conjugate
  gradients on the well-conditioned Schur complement for larger H).
* baseline (written here, deliberately plain): for every H separately, C = 1/2 + (2/pi^2) arcsin(QQ^T) arcsin(KK^T)
  formed entry-wise in float64 numpy, b from a tensor-product Gauss-Jacobi quadrature of its defining integral
  (once per draw), a = numpy.linalg.solve(C, b), error 1 - b^T a.

Both run in this process on the same heads; the script prints wall times, the ratio and the largest relative
difference of the errors (required: <= 1e-4), then the curve table (mean, min, max over trials).

Usage:
    PYTHONPATH=. python benchmarks/bench_random_features.py   # paper curve; ~1.5 h with the baseline on every draw
    PYTHONPATH=. python benchmarks/bench_random_features.py --max-log2-heads 11 --trials 2
    ... --baseline-trials 1   # baseline on the first trial of each d only (ratio over the matched runs)
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np
from scipy import special

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from constructions.random_features import prefix_errors, sample_heads  # noqa: E402


def baseline_target_kernel(cosines: np.ndarray, d: int, nodes: int = 96) -> np.ndarray:
    """b(c) = 1/2 + (1/2) E_y[sign<q, y> (2/pi) arcsin<k, y>] by Gauss-Jacobi quadrature (d >= 4).

    With q = e_1 and k = c e_1 + s e_2 (s = sqrt(1 - c^2)): y_1 = t has density prop. to (1 - t^2)^{(d-3)/2};
    given t, y_2 = sqrt(1 - t^2) t' with t' of density prop. to (1 - t'^2)^{(d-4)/2}. The average over u of
    sign<k, u> sign<u, y> is (2/pi) arcsin<k, y> (Grothendieck), and the integrand is even under (t, t') -> -(t, t'),
    so E = 2 int_0^1 int_{-1}^1 (2/pi) arcsin(c t + s sqrt(1 - t^2) t') dens dt' dt.
    """
    beta = (d - 3) / 2.0
    alpha = (d - 4) / 2.0
    x, w = special.roots_jacobi(nodes, beta, 0.0)  # weight (1 - x)^beta on [-1, 1]
    t = (1.0 + x) / 2.0  # (nodes,) in [0, 1]: (1 - t)^beta (1 + t)^beta = const (1 - x)^beta (1 + t)^beta
    outer = w * (1.0 + t) ** beta
    outer /= outer.sum()  # (nodes,) the density of |y_1| on [0, 1]
    inner_x, inner_w = special.roots_jacobi(nodes, alpha, alpha)  # weight (1 - t'^2)^alpha
    inner_w = inner_w / inner_w.sum()  # (nodes,)
    c = np.asarray(cosines, dtype=np.float64)  # (H,)
    s = np.sqrt(np.clip(1.0 - c * c, 0.0, 1.0))  # (H,)
    values = np.empty(c.shape)
    for start in range(0, c.size, 1024):
        cc, ss = c[start : start + 1024, None, None], s[start : start + 1024, None, None]
        argument = cc * t[None, :, None] + ss * np.sqrt(1.0 - t * t)[None, :, None] * inner_x[None, None, :]
        integrand = (2.0 / math.pi) * np.arcsin(np.clip(argument, -1.0, 1.0))  # (h, nodes, nodes)
        values[start : start + 1024] = np.einsum("hij,i,j->h", integrand, outer, inner_w)
    return 0.5 + 0.5 * values


def baseline_errors(q: np.ndarray, k: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Straightforward dense errors: per H, full C entry-wise in numpy and numpy.linalg.solve."""
    d = q.shape[1]
    b = baseline_target_kernel(np.sum(q * k, axis=1), d)  # (H_max,)
    errors = []
    for m in counts:
        qm, km, bm = q[:m], k[:m], b[:m]
        C = 0.5 + (2.0 / math.pi**2) * np.arcsin(np.clip(qm @ qm.T, -1.0, 1.0)) * np.arcsin(
            np.clip(km @ km.T, -1.0, 1.0)
        )
        a = np.linalg.solve(C, bm)
        errors.append(1.0 - float(bm @ a))
        del C
    return np.array(errors)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dims", default="8,16,32,64", help="comma-separated dimensions (>= 4)")
    parser.add_argument("--max-log2-heads", type=int, default=14, help="largest H = 2^M (paper: 14)")
    parser.add_argument("--trials", type=int, default=5, help="independent draws per dimension (paper: 5)")
    parser.add_argument("--baseline-trials", type=int, default=None, help="run the baseline on the first T trials")
    parser.add_argument("--baseline-dims", default=None, help="comma-separated dims that get a baseline (default: all)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", default=None, help="also write the results to this JSON file")
    args = parser.parse_args(argv)
    dims = [int(x) for x in args.dims.split(",")]
    if any(d < 4 for d in dims):
        raise ValueError(f"--dims must be >= 4 (the baseline quadrature), got {dims}")
    if not 0 <= args.max_log2_heads <= 16:
        raise ValueError(f"--max-log2-heads must be in [0, 16], got {args.max_log2_heads}")
    if args.trials < 1:
        raise ValueError(f"--trials must be >= 1, got {args.trials}")
    baseline_trials = args.trials if args.baseline_trials is None else args.baseline_trials
    if not 0 <= baseline_trials <= args.trials:
        raise ValueError(f"--baseline-trials must be in [0, {args.trials}], got {baseline_trials}")
    baseline_dims = dims if args.baseline_dims is None else [int(x) for x in args.baseline_dims.split(",") if x]
    counts = 2 ** np.arange(args.max_log2_heads + 1)  # (P,)
    errors = np.empty((len(dims), args.trials, counts.size))  # (D, T, P)
    ours_total = ours_matched = base_total = 0.0
    worst_relative = 0.0
    rows = []
    start_all = time.perf_counter()
    # trial-major order: an interrupted run still holds every dimension for its first trials
    for trial in range(args.trials):
        for i, d in enumerate(dims):
            q, k = sample_heads(int(counts[-1]), d, np.random.default_rng([args.seed, d, trial]))
            t0 = time.perf_counter()
            result = prefix_errors(q, k, counts)
            ours = time.perf_counter() - t0
            ours_total += ours
            errors[i, trial] = result.errors
            row = {
                "d": d,
                "trial": trial,
                "ours_s": ours,
                "cg_iterations": result.cg_iterations.tolist(),
                "errors": result.errors.tolist(),
            }
            if trial < baseline_trials and d in baseline_dims:
                t0 = time.perf_counter()
                reference = baseline_errors(q, k, counts)
                base = time.perf_counter() - t0
                base_total += base
                ours_matched += ours
                relative = float(np.max(np.abs(result.errors - reference) / np.abs(reference)))
                worst_relative = max(worst_relative, relative)
                row.update(baseline_s=base, max_relative_difference=relative)
            rows.append(row)
            print(json.dumps(row), flush=True)
    whole = time.perf_counter() - start_all
    mean = errors.mean(axis=1)  # (D, P)
    low, high = errors.min(axis=1), errors.max(axis=1)
    print(f"\ncurve: d in {dims}, H = 2^0 .. 2^{args.max_log2_heads}, {args.trials} trials (seed {args.seed})")
    print(f"ours, whole curve ({len(dims) * args.trials} draws):      {ours_total:9.1f} s")
    if base_total > 0:
        ratio = base_total / ours_matched
        matched = sum(1 for row in rows if "baseline_s" in row)
        print(f"baseline, {matched} matched draws:               {base_total:9.1f} s")
        print(f"ours on the same draws:                   {ours_matched:9.1f} s")
        print(f"speed-up (baseline / ours, same draws):   {ratio:9.2f}x")
        print(f"baseline whole curve (scaled by draws):   {base_total * len(rows) / matched:9.1f} s")
        print(f"largest relative difference of errors:    {worst_relative:9.2e}  (required <= 1e-4)")
    print(f"wall time of this script:                 {whole:9.1f} s\n")
    header = "H".rjust(7) + "".join(f"   d = {d}: mean [min, max]".ljust(34) for d in dims)
    print(header)
    for p, m in enumerate(counts):
        line = str(int(m)).rjust(7)
        for i in range(len(dims)):
            line += f"   {mean[i, p]:.4f} [{low[i, p]:.4f}, {high[i, p]:.4f}]".ljust(34)
        print(line)
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {
                    "dims": dims,
                    "head_counts": counts.tolist(),
                    "trials": args.trials,
                    "baseline_trials": baseline_trials,
                    "errors": errors.tolist(),
                    "ours_total_s": ours_total,
                    "baseline_total_s": base_total,
                    "ours_matched_s": ours_matched,
                    "max_relative_difference": worst_relative,
                    "rows": rows,
                }
            )
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
