"""Random rank-r heads with least-squares output weights, scored on fresh samples (Theorem 2's task, N = 2, D_2).

A construction for the tightness study (docs/bounds.md, "How tight is the bound"): H heads with random query/key maps
Q_h, K_h in R^{r x d} (i.i.d. Gaussian entries, Q_h scaled by 1/sqrt r), softmax at inverse temperature lambda
(lambda = inf: hardmax), value maps V_h = a_h I (the paper's random-feature form, docs/paper.md section 6), the
weights a fitted by least squares on one sample, the temperature chosen on a second sample, the error measured on a
third (fresh) sample by a direct forward pass. Every reported population error is therefore the error of explicit
weights: an achievable error of an H-head rank-r attention layer, which Theorem 2's bound must lie below.

Derivation (why the fit only needs pairs (y, u) and H scalars per sample). Let x_1, x_2 be orthonormal (D_2) and put
u = (x_1 - x_2)/sqrt 2, m = (x_1 + x_2)/sqrt 2 (an orthonormal pair; u is uniform on the sphere and independent of
the query y). Head h's score difference is lambda (<Q_h y, K_h x_1> - <Q_h y, K_h x_2>) = lambda sqrt 2 z_h with
z_h = y^T Q_h^T K_h u, so its two softmax weights are w_1 = sigmoid(lambda sqrt 2 z_h), w_2 = 1 - w_1 and

    w_1 x_1 + w_2 x_2 = (m + t_h u) / sqrt 2,    t_h = w_1 - w_2 = tanh(lambda z_h / sqrt 2)   (hardmax: sign z_h).

The target is x_{i*} = (m + s u) / sqrt 2 with s = sign<u, y>. With V_h = a_h I the model outputs
(A m + <t, a> u) / sqrt 2, A = sum_h a_h, so by orthonormality of m and u, exactly for every sample,

    ||f - f*||^2 = ((A - 1)^2 + (<t, a> - s)^2) / 2.

On n samples (t_i, s_i) the empirical error is a convex quadratic whose minimiser solves
(T^T T / n + 1 1^T) a = T^T s / n + 1 (T: the (n, H) matrix of t's). Its cost is n H^2 for the Gram matrix and H^3
for the solve, never n H d^2. (Full d x d value maps would need an (H d) x (H d) Gram matrix, out of reach at
H d = 32768; at d = 8, H = 64 they lower the error of random hardmax heads from 0.39 to 0.32, so V_h = a_h I gives an
upper end of what random heads achieve, not the best value maps.)

The score does not use this reduction: it draws fresh D_2 contexts and queries, computes each head's softmax weights
over the actual keys and f = sum_h a_h (w_h1 x_1 + w_h2 x_2) (`model_output`, equal to
`theory.attention.multihead_attention` with V_h = a_h I), and averages ||f - x_{i*}||^2 with its standard error.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
import scipy.linalg

from theory.monte_carlo import MonteCarloEstimate, estimate_error
from theory.sphere import sample_context, sample_sphere
from theory.targets import nearest_neighbor
from theory.validation import (
    check_array,
    check_dimension,
    check_generator,
    check_heads,
    check_int,
    check_rank,
    check_temperature,
)

FloatArray = npt.NDArray[np.float64]

DEFAULT_TEMPERATURES = (0.0625, 0.25, 1.0, 4.0, math.inf)
"""Inverse temperatures tried by default (chosen on the validation sample). With unit-variance scores z_h the
smallest makes each head nearly linear in y (it captures the degree-1 part of sign<u, y>; it was the best at every
size tried, e.g. d = 8, r = 1, H = 256: validation error 0.164 against 0.170 at 1 and 0.255 for hardmax), hardmax the
sharpest."""

_BATCH = 8192  # samples per block when forming features (a (8192, H) float64 block: 64 MB at H = 1024)


@dataclass(frozen=True)
class LeastSquaresHeads:
    """A fitted construction and its errors.

    Attributes:
        Q, K: (H, r, d) query and key maps.
        weights: (H,) output weights a (V_h = a_h I).
        temperature: the chosen inverse temperature (math.inf: hardmax).
        in_sample: empirical error of the chosen fit on its own fitting sample.
        validation: inverse temperature -> error on the validation sample of the weights fitted at that temperature.
        fresh: Monte Carlo error on fresh D_2 samples (mean, standard error, sample size).
        fit_samples, validation_samples: sample sizes used.
    """

    Q: FloatArray
    K: FloatArray
    weights: FloatArray
    temperature: float
    in_sample: float
    validation: dict[float, float] = field(default_factory=dict)
    fresh: MonteCarloEstimate | None = None
    fit_samples: int = 0
    validation_samples: int = 0


def sample_rank_heads(d: int, r: int, H: int, rng: np.random.Generator) -> tuple[FloatArray, FloatArray]:
    """H random rank-r heads: Q_h (entries N(0, 1/r)) and K_h (entries N(0, 1)).

    With y and u unit vectors, z_h = y^T Q_h^T K_h u is a sum of r products of N(0, 1/r) and N(0, 1) variables
    (in law), so it has variance 1 at every r and the temperatures mean the same thing at every rank.

    Args:
        d: dimension (>= 2). r: rank, 1 <= r <= d. H: number of heads (>= 1). rng: the source of randomness.

    Returns:
        Q (H, r, d), K (H, r, d).
    """
    d = check_dimension(d)
    r = check_rank(r, d)
    H = check_heads(H)
    rng = check_generator(rng)
    Q = rng.standard_normal((H, r, d)) / math.sqrt(r)  # (H, r, d)
    K = rng.standard_normal((H, r, d))  # (H, r, d)
    return Q, K


def bilinear_scores(Q: FloatArray, K: FloatArray, y: FloatArray, u: FloatArray) -> FloatArray:
    """z[n, h] = y_n^T Q_h^T K_h u_n.

    Args:
        Q, K: (H, r, d). y, u: (n, d).

    Returns:
        (n, H).
    """
    H, r, d = Q.shape
    qy = (y @ Q.reshape(H * r, d).T).reshape(len(y), H, r)  # (n, H, r): Q_h y_n
    ku = (u @ K.reshape(H * r, d).T).reshape(len(u), H, r)  # (n, H, r): K_h u_n
    return np.einsum("nhr,nhr->nh", qy, ku)  # (n, H)


def head_features(z: FloatArray, temperature: float) -> FloatArray:
    """t = w_1 - w_2 of every head from its scores z (module docstring): tanh(lambda z / sqrt 2), or sign(z)."""
    if math.isinf(temperature):
        return np.sign(z)
    return np.tanh(temperature * z / math.sqrt(2.0))


def reduced_errors(weights: FloatArray, t: FloatArray, s: FloatArray) -> FloatArray:
    """Per-sample error ((A - 1)^2 + (<t, a> - s)^2) / 2 (exact for D_2, module docstring): (n,)."""
    A = float(np.sum(weights))
    return 0.5 * ((A - 1.0) ** 2 + (t @ weights - s) ** 2)


def _normal_equations(t: FloatArray, s: FloatArray) -> tuple[FloatArray, FloatArray]:
    """(G, g) with G = T^T T / n + 1 1^T and g = T^T s / n + 1, accumulated in blocks of samples."""
    n, H = t.shape
    G = np.zeros((H, H))
    g = np.zeros(H)
    for start in range(0, n, _BATCH):
        block = t[start : start + _BATCH]  # (m, H)
        G += block.T @ block
        g += block.T @ s[start : start + _BATCH]
    G /= n
    g /= n
    return G + 1.0, g + 1.0


def least_squares_weights(t: FloatArray, s: FloatArray) -> FloatArray:
    """The output weights minimising the empirical error on (t, s) (Cholesky; least squares if G is singular).

    Args:
        t: (n, H) head features. s: (n,) target signs.

    Returns:
        (H,) weights a.
    """
    G, g = _normal_equations(t, s)
    try:
        factor = scipy.linalg.cho_factor(G, lower=True, check_finite=False)
        return np.asarray(scipy.linalg.cho_solve(factor, g, check_finite=False), dtype=np.float64)
    except np.linalg.LinAlgError:  # numerically singular (e.g. duplicated heads): minimum-norm solution
        return np.asarray(np.linalg.lstsq(G, g, rcond=None)[0], dtype=np.float64)


def sample_query_directions(n: int, d: int, rng: np.random.Generator) -> tuple[FloatArray, FloatArray, FloatArray]:
    """n pairs (y, u) of independent uniform unit vectors (the law of (y, (x_1 - x_2)/sqrt 2) under D_2) and s."""
    y = sample_sphere(n, d, rng)  # (n, d)
    u = sample_sphere(n, d, rng)  # (n, d)
    return y, u, np.sign(np.einsum("nd,nd->n", y, u))


def model_output(
    Q: FloatArray, K: FloatArray, weights: FloatArray, temperature: float, X: FloatArray, y: FloatArray
) -> FloatArray:
    """f(X, y) = sum_h a_h sum_i w_hi x_i for N = 2 keys, from the heads' weights over the actual keys.

    Args:
        Q, K: (H, r, d). weights: (H,). temperature: inverse temperature (inf: hardmax, ties split evenly).
        X: (n, 2, d) contexts. y: (n, d) queries.

    Returns:
        (n, d) outputs.
    """
    H, r, d = Q.shape
    qy = (y @ Q.reshape(H * r, d).T).reshape(len(y), H, r)  # (n, H, r): Q_h y
    k1 = (X[:, 0] @ K.reshape(H * r, d).T).reshape(len(y), H, r)  # (n, H, r): K_h x_1
    k2 = (X[:, 1] @ K.reshape(H * r, d).T).reshape(len(y), H, r)  # (n, H, r): K_h x_2
    diff = np.einsum("nhr,nhr->nh", qy, k1 - k2)  # (n, H): score of x_1 minus score of x_2
    if math.isinf(temperature):
        w1 = 0.5 * (1.0 + np.sign(diff))  # hardmax, exact ties split evenly
    else:
        w1 = 0.5 * (1.0 + np.tanh(0.5 * temperature * diff))  # sigmoid(lambda diff), overflow-free
    c1 = w1 @ weights  # (n,): sum_h a_h w_h1
    c2 = (1.0 - w1) @ weights  # (n,): sum_h a_h w_h2
    return c1[:, None] * X[:, 0] + c2[:, None] * X[:, 1]  # (n, d)


def fresh_error(
    Q: FloatArray,
    K: FloatArray,
    weights: FloatArray,
    temperature: float,
    n_samples: int,
    rng: np.random.Generator,
) -> MonteCarloEstimate:
    """Monte Carlo error E||f - x_{i*}||^2 of the construction on fresh D_2 samples (direct forward pass)."""
    d = Q.shape[2]

    def model(X: FloatArray, y: FloatArray) -> FloatArray:
        return model_output(Q, K, weights, temperature, X, y)

    def sampler(m: int, generator: np.random.Generator) -> tuple[FloatArray, FloatArray]:
        return sample_context(m, 2, d, generator, keys="orthonormal")

    return estimate_error(model, nearest_neighbor, sampler, n_samples, rng, batch_size=4096)


def fit_least_squares_heads(
    Q: FloatArray,
    K: FloatArray,
    rng: np.random.Generator,
    *,
    temperatures: Sequence[float] = DEFAULT_TEMPERATURES,
    fit_samples: int,
    validation_samples: int,
    score_samples: int,
) -> LeastSquaresHeads:
    """Fit the output weights of given heads at every temperature, keep the best on validation, score it fresh.

    Args:
        Q, K: (H, r, d) query and key maps.
        rng: the source of randomness (fitting, validation and score samples are drawn from it in that order).
        temperatures: inverse temperatures to try (> 0; math.inf is hardmax).
        fit_samples: size of the fitting sample (>= 2). validation_samples: size of the validation sample (>= 2).
        score_samples: size of the fresh Monte Carlo sample (>= 2).

    Returns:
        LeastSquaresHeads with the chosen temperature, weights, in-sample, validation and fresh errors.
    """
    Q = check_array("Q", Q, ndim=3)
    K = check_array("K", K, ndim=3)
    if Q.shape != K.shape:
        raise ValueError(f"Q and K must have the same shape (H, r, d), got {Q.shape} and {K.shape}")
    rng = check_generator(rng)
    fit_samples = check_int("fit_samples", fit_samples, minimum=2)
    validation_samples = check_int("validation_samples", validation_samples, minimum=2)
    score_samples = check_int("score_samples", score_samples, minimum=2)
    lambdas = [check_temperature(t, name="temperatures") for t in temperatures]
    if not lambdas:
        raise ValueError("temperatures must name at least one inverse temperature")
    d = Q.shape[2]
    y, u, s = sample_query_directions(fit_samples, d, rng)
    z = bilinear_scores(Q, K, y, u)  # (n, H)
    y_val, u_val, s_val = sample_query_directions(validation_samples, d, rng)
    z_val = bilinear_scores(Q, K, y_val, u_val)  # (n_val, H)
    fits: dict[float, tuple[FloatArray, float]] = {}
    validation: dict[float, float] = {}
    for lam in lambdas:
        t = head_features(z, lam)  # (n, H)
        weights = least_squares_weights(t, s)
        fits[lam] = (weights, float(np.mean(reduced_errors(weights, t, s))))
        validation[lam] = float(np.mean(reduced_errors(weights, head_features(z_val, lam), s_val)))
    best = min(lambdas, key=lambda lam: validation[lam])
    weights, in_sample = fits[best]
    fresh = fresh_error(Q, K, weights, best, score_samples, rng)
    return LeastSquaresHeads(
        Q=Q,
        K=K,
        weights=weights,
        temperature=best,
        in_sample=in_sample,
        validation=validation,
        fresh=fresh,
        fit_samples=fit_samples,
        validation_samples=validation_samples,
    )
