"""Error of the two-layer rank-1 majority vote of Theorem 5 (N = 2): exact quadrature, softmax bound, asymptote.

docs/paper.md section 5. The construction (constructions/majority_vote.py) uses H layer-1 heads, q_h = k_h unit vectors
drawn uniformly; head h picks x_1 iff <q_h, y><q_h, x_1 - x_2> > 0 and writes the picked token's code (+1 for x_1,
-1 for x_2) into the query's tally; the layer-2 head copies x_1 if the tally is positive, x_2 if negative, and their
average on a tie (hardmax). The errors below are averages over the data (D_2 keys) AND over the random directions q_h:
the expected error of a randomly drawn construction.

Derivation (hardmax). Let u = (x_1 - x_2)/|x_1 - x_2| and t = <y, u>; t has the coordinate density
c_d (1 - t^2)^{(d-3)/2} (u is uniform and independent of y). Given (y, u), the heads are i.i.d. and each is right with
probability p(t) = 1 - arccos|t| / pi (the hyperplane q^perp separates y from the reflected query with that
probability). The number K of right heads is Binomial(H, p(t)), the margin M = 2K - H. A wrong pick costs
|x_1 - x_2|^2 and a tie costs |x_1 - x_2|^2 / 4; |x_1 - x_2| is independent of u with E|x_1 - x_2|^2 = 2 (for D_2 it
is exactly 2; for i.i.d. uniform keys also 2 on average), so

    error(d, H) = E_t[ 2 P(M < 0) + (1/2) P(M = 0) ]          (the tie term only for even H).

Quadrature: t = sin(phi), phi in [0, pi/2] (symmetric in t), dt-density c_d cos^{d-2}(phi) dphi (smooth for every
d >= 2), p = 1/2 + phi/pi; Gauss-Legendre on pieces whose breakpoints follow the two scales of the integrand,
phi ~ 1/sqrt(H) (the binomial) and phi ~ 1/sqrt(d) (the density).

Asymptote. For H >> d, p - 1/2 ~ |t|/pi near t = 0, M/sqrt(H) ~ Normal((2/pi)|t| sqrt H, 1), so
error ~ int 2 Phi(-(2/pi)|t| sqrt H) c_d dt = sqrt(2 pi) c_d / sqrt(H) (using int_0^inf Phi(-s) ds = 1/sqrt(2 pi)),
and c_d ~ sqrt(d / (2 pi)) gives error ~ sqrt(d / H): constant 1, so H = d / eps^2 heads reach error eps.

Softmax (finite temperature T, D_2 keys). Head h's vote becomes v_h = tanh(T a_h / 2), a_h = <q_h, y><q_h, x_1 - x_2>,
and the layer-2 weight on the right token is sigmoid(2 T c* S) with S = sum_h v_h and c* the right code. Writing
(g_1, g_2) = rho (cos, sin)(phi) for the projection of q on (u, y_perp): a = (rho^2 / sqrt 2)(t + cos psi) with
psi uniform on the circle and rho^2 ~ Beta(1, (d-2)/2) (rho = 1 for d = 2). The leak l_h = |v_h - sign a_h| =
2 sigmoid(-T |a_h|) lies in (0, 1], so c* S >= M - Lambda with Lambda = sum_h l_h, and for every lambda >= 0

    E[2 sigmoid(-2 T c* S)^2 | t] <= E[2 sigmoid(-2 T (M - lambda))^2] + 2 P(Lambda > lambda),

with Bernstein's inequality for the last term (l_h i.i.d. in [0, 1] given t). We minimise over a grid of lambda per t.
This is an upper bound (soft votes of unsure heads are small, not wrong, so the truth is usually lower); at T = inf
it equals the exact hardmax error (no leak, sigmoid(-inf * M)^2 = 1[M < 0] + 1[M = 0] / 4).
"""

from __future__ import annotations

import functools
import math

import numpy as np
import numpy.typing as npt
from scipy.fft import irfft, next_fast_len, rfft
from scipy.special import expit, roots_jacobi, roots_legendre
from scipy.stats import binom

from theory.sphere import coordinate_density_constant
from theory.validation import check_dimension, check_heads, check_int, check_real, check_temperature

FloatArray = npt.NDArray[np.float64]

_NODES_PER_PIECE = 24
_NODES_PER_PIECE_SOFT = 10


def head_success_probability(t: npt.ArrayLike) -> FloatArray:
    """Probability that one random rank-1 head (q = k uniform) picks the nearest of two keys.

    Args:
        t: cosine of the angle between y and x_1 - x_2 (any shape, values in [-1, 1]).

    Returns:
        1 - arccos|t| / pi, same shape as t.
    """
    values = np.asarray(t, dtype=np.float64)
    if np.any(~np.isfinite(values)) or np.any(np.abs(values) > 1.0):
        raise ValueError("t must contain values in [-1, 1]")
    return 1.0 - np.arccos(np.abs(values)) / math.pi


def _phi_nodes(d: int, H: int, per_piece: int = _NODES_PER_PIECE) -> tuple[FloatArray, FloatArray]:
    """Gauss-Legendre nodes and weights on [0, pi/2] with breakpoints at the scales 1/sqrt(H) and 1/sqrt(d)."""
    half_pi = math.pi / 2
    breaks = {0.0, half_pi}
    for scale in (math.pi / (2 * math.sqrt(H)), 1.0 / math.sqrt(d)):
        for k in range(-4, 40):
            point = scale * 2.0**k
            if point < half_pi:
                breaks.add(point)
    edges = np.array(sorted(breaks))  # (P + 1,)
    x, w = roots_legendre(per_piece)  # (n,), (n,) on [-1, 1]
    lo, hi = edges[:-1, None], edges[1:, None]  # (P, 1)
    nodes = (lo + hi) / 2 + (hi - lo) / 2 * x[None, :]  # (P, n)
    weights = (hi - lo) / 2 * w[None, :]  # (P, n)
    return nodes.ravel(), weights.ravel()


def _hard_error_given_p(H: int, p: FloatArray) -> FloatArray:
    """2 P(M < 0) + P(M = 0) / 2 for K ~ Binomial(H, p), M = 2K - H (vectorised over p)."""
    below = binom.cdf(math.ceil(H / 2) - 1, H, p)  # P(K < H/2)
    tie = binom.pmf(H // 2, H, p) if H % 2 == 0 else np.zeros_like(p)
    return 2.0 * below + 0.5 * tie


_LEGENDRE_64 = roots_legendre(64)


@functools.lru_cache(maxsize=64)
def _radius_rule(d: int) -> tuple[FloatArray, FloatArray]:
    """Quadrature rule for rho^2 ~ Beta(1, (d-2)/2), the squared norm of a uniform unit vector's 2-D projection."""
    if d == 2:
        return np.array([1.0]), np.array([1.0])
    b = (d - 2) / 2.0
    # Density b (1 - x)^{b - 1} on [0, 1]: Gauss-Jacobi with weight (1 - s)^{b - 1} on [-1, 1], x = (s + 1) / 2.
    s, w = roots_jacobi(48, b - 1.0, 0.0)
    return (s + 1.0) / 2.0, w / np.sum(w)


def _vote_atoms(d: int, t: float, temperature: float) -> tuple[FloatArray, FloatArray]:
    """Quadrature atoms (values, weights) of one head's soft vote c* v = tanh(T a / 2) given t >= 0 (c* = +1).

    a = (rho^2 / sqrt 2)(t + cos psi) with rho^2 ~ Beta(1, (d-2)/2) (rho = 1 for d = 2) and psi uniform on [0, pi]
    (cos is symmetric); Gauss-Jacobi in rho^2 and Gauss-Legendre in psi split at the sign change cos psi = -t.
    """
    rho2, rho_w = _radius_rule(d)  # (R,), (R,)
    x, w = _LEGENDRE_64
    kink = math.acos(-t)
    psi = np.concatenate([kink / 2 * (x + 1), kink + (math.pi - kink) / 2 * (x + 1)])  # (128,)
    psi_w = np.concatenate([kink / 2 * w, (math.pi - kink) / 2 * w]) / math.pi  # (128,), sums to 1
    a = rho2[None, :] / math.sqrt(2.0) * (t + np.cos(psi))[:, None]  # (128, R)
    votes = np.tanh(temperature * a / 2.0)  # (128, R)
    return votes.ravel(), (psi_w[:, None] * rho_w[None, :]).ravel()


def _soft_error_given_t(H: int, t: float, temperature: float, d: int, lattice: int) -> float:
    """E[2 sigmoid(-2 T c* S)^2 | t] for the soft tally S = sum of H i.i.d. votes (lattice law, FFT power)."""
    values, weights = _vote_atoms(d, t, temperature)  # (A,), (A,)
    # Spread each atom linearly onto the lattice k / J, k = -J .. J (keeps the mean; adds variance <= 1 / (4 J^2)).
    position = (values + 1.0) * lattice  # (A,) in [0, 2J]
    lower = np.clip(np.floor(position).astype(np.int64), 0, 2 * lattice - 1)  # (A,)
    frac = position - lower  # (A,)
    single = np.bincount(lower, weights * (1.0 - frac), minlength=2 * lattice + 1)  # (2J+1,)
    single += np.bincount(lower + 1, weights * frac, minlength=2 * lattice + 1)
    size = 2 * H * lattice + 1  # support of the H-fold sum
    n_fft = next_fast_len(size, real=True)
    law = irfft(rfft(single, n_fft) ** H, n_fft)[:size]  # (size,); law of J (S + H), no wrap-around

    tally = np.arange(size) / lattice - H  # (size,) values of S
    loss = 2.0 * expit(-2.0 * temperature * tally) ** 2  # (size,)
    return float(np.sum(np.clip(law, 0.0, None) * loss))


def majority_vote_error(d: int, H: int, temperature: float = math.inf, *, lattice: int = 128) -> float:
    """Expected error E||f - f*||^2 of the two-layer rank-1 majority vote with H random layer-1 heads (N = 2).

    Args:
        d: token dimension (>= 2).
        H: number of layer-1 heads (>= 1); even H includes the tie term.
        temperature: math.inf (hardmax: exact up to quadrature, D_2 or i.i.d. keys) or a finite inverse temperature
            > 0 (D_2 keys; the soft tally's law on a lattice of spacing 1/lattice, O(H lattice log) work per node,
            meant for H <= ~1e4).
        lattice: lattice points per unit of the soft tally (>= 8; softmax only).

    Returns:
        The error, in [0, 2].
    """
    d = check_dimension(d)
    H = check_heads(H)
    temperature = check_temperature(temperature)
    lattice = check_int("lattice", lattice, minimum=8)
    phi, w = _phi_nodes(d, H, _NODES_PER_PIECE if math.isinf(temperature) else _NODES_PER_PIECE_SOFT)  # (m,), (m,)
    t = np.sin(phi)  # (m,)
    density = 2.0 * coordinate_density_constant(d) * np.cos(phi) ** (d - 2)  # (m,); both signs of t
    if math.isinf(temperature):
        values = _hard_error_given_p(H, 0.5 + phi / math.pi)  # (m,)
    else:
        values = np.array([_soft_error_given_t(H, float(s), temperature, d, lattice) for s in t])  # (m,)
    return float(np.clip(np.sum(w * density * values), 0.0, 2.0))


def majority_vote_asymptote(d: int, H: float, *, refined: bool = False) -> float:
    """Large-H asymptote of the hardmax majority-vote error.

    Args:
        d: token dimension (>= 2).
        H: number of heads (> 0, real allowed).
        refined: False gives sqrt(d / H) (our constant 1, the large-d limit); True gives sqrt(2 pi) c_d / sqrt(H),
            the exact large-H limit at this d.

    Returns:
        The asymptotic error.
    """
    d = check_dimension(d)
    H = check_real("H", H, minimum=0.0, strict_minimum=True)
    if refined:
        return math.sqrt(2.0 * math.pi) * coordinate_density_constant(d) / math.sqrt(H)
    return math.sqrt(d / H)


def majority_vote_heads(d: int, epsilon: float, *, max_heads: int = 10**8) -> int:
    """Smallest odd H whose exact hardmax majority-vote error is <= epsilon (bisection; error decreases in odd H).

    Args:
        d: token dimension (>= 2).
        epsilon: target error in (0, 2).
        max_heads: search limit (>= 1).

    Returns:
        The smallest odd head count reaching epsilon.
    """
    d = check_dimension(d)
    epsilon = check_real("epsilon", epsilon, minimum=0.0, maximum=2.0, strict_minimum=True, strict_maximum=True)
    if majority_vote_error(d, 1) <= epsilon:
        return 1
    lo, hi = 0, 1  # indices j of odd H = 2 j + 1; error(lo) > epsilon
    while majority_vote_error(d, 2 * hi + 1) > epsilon:
        lo, hi = hi, 2 * hi
        if 2 * hi + 1 > max_heads:
            raise ValueError(f"epsilon = {epsilon} needs more than max_heads = {max_heads} heads at d = {d}")
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if majority_vote_error(d, 2 * mid + 1) > epsilon:
            lo = mid
        else:
            hi = mid
    return 2 * hi + 1
