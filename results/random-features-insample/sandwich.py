"""The first-order size of the in-sample bias, kappa / (2 n), measured for the heads of one exact weight file.

Usage (repository root): python results/random-features-insample/sandwich.py EXACT.safetensors [SAMPLES] [SEED]

EXACT.safetensors is written by `attnrank construct random-features` without --fit-samples (so V_h = a*_h I holds the
exact population optimum). With psi = S (S^T a* - s) + 1 (1^T a* - 1) the per-sample gradient of the error at a*
(S: the head signs, s: the target sign; notation of constructions/random_features_in_sample.py) and G = 2 C the
Hessian, the least-squares fit on n samples has, to first order in 1/n,

    E[in-sample error] = L* - kappa / (2 n),   E[population error of the fit] = L* + kappa / (2 n),
    kappa = tr(G^{-1} Cov psi) = E[e^2 S^T G^{-1} S] - m^T G^{-1} m,   e = S^T a* - s,  m = E[S e].

With e^2 independent of S (the textbook homoscedastic case) kappa = E[e^2] (H - 1^T G^{-1} 1) ~ 2 L* H, i.e. a bias of
L* H / n. Prints one JSON object: H, L*, kappa (Monte Carlo mean and standard error), kappa / (2 L* H).
"""

from __future__ import annotations

import json
import sys

import numpy as np
import scipy.linalg

from constructions.random_features import kernel_matrix, target_kernel, weight_error
from constructions.random_features_in_sample import sample_signs
from constructions.weights_io import load_weights


def main() -> None:
    path = sys.argv[1]
    samples = int(sys.argv[2]) if len(sys.argv) > 2 else 20_000
    rng = np.random.default_rng(int(sys.argv[3]) if len(sys.argv) > 3 else 99)
    tensors = load_weights(path).tensors
    q, k = tensors["Q"][:, 0].astype(np.float64), tensors["K"][:, 0].astype(np.float64)  # (H, d)
    a = tensors["V"][:, 0, 0].astype(np.float64)  # (H,)
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    k /= np.linalg.norm(k, axis=1, keepdims=True)
    C = kernel_matrix(q, k)  # (H, H)
    optimum = weight_error(C, target_kernel(q, k), a)
    L = scipy.linalg.cholesky(2.0 * C, lower=True)  # G = 2 C = L L^T
    weighted, sums, done = [], np.zeros(q.shape[0]), 0
    while done < samples:
        m = min(4096, samples - done)
        S, s = sample_signs(q, k, m, rng)  # (m, H), (m,)
        S64 = S.astype(np.float64)
        e = S64 @ a - s  # (m,) residual at a*
        W = scipy.linalg.solve_triangular(L, S64.T, lower=True)  # (H, m): L^{-1} S_i
        weighted.append(e**2 * np.einsum("hm,hm->m", W, W))  # e_i^2 S_i^T G^{-1} S_i
        sums += S64.T @ e
        done += m
    values = np.concatenate(weighted)  # (samples,)
    mean_grad = sums / samples + (a.sum() - 1.0)  # E[psi] (~0 at the optimum)
    correction = float(np.sum(scipy.linalg.solve_triangular(L, mean_grad, lower=True) ** 2))
    kappa = float(values.mean()) - correction
    stderr = float(values.std(ddof=1) / np.sqrt(samples))
    H = q.shape[0]
    print(
        json.dumps(
            {
                "H": H,
                "population_optimum": optimum,
                "kappa": kappa,
                "kappa_stderr": stderr,
                "samples": samples,
                "kappa_over_2_L_H": kappa / (2.0 * optimum * H),
            }
        )
    )


if __name__ == "__main__":
    main()
