"""Certified best output weights for concrete dictionaries of rank-r heads on Theorem 3's target (N = 2).

docs/paper.md section 4. The smoothing bound (theory/smoothing_bound.py) says no rank-r model with small value norms can
fit the sawtooth part of the target. Here we test it on concrete dictionaries: for a family of rank-r heads (query and
key maps Q_h, K_h in R^{r x d}, optional score bias, hardmax or softmax), value maps restricted to V_h = a_h I, and
the target's simple part A granted for free with an unconstrained coefficient alpha (this only strengthens the model,
so error lower bounds remain lower bounds for the pure low-rank class), we solve

    min_{alpha, a}  E_n || F - alpha A - sum_h a_h f_h ||^2     subject to a budget on a,

where E_n is the EMPIRICAL mean over a fixed Monte Carlo sample of n contexts (the certificate is for that empirical
distribution; held-out error of the chosen weights on a fresh sample, with its standard error, is reported beside it).
Budgets: "max" is the paper's d H max_h ||V_h||^2 = d H max_h a_h^2 <= B (a box); "frobenius" is
sum_h ||V_h||_F^2 = d sum_h a_h^2 <= B (a ball, which contains the box, so its certified bound also holds for "max").

Reduction. f_h = x_2 + w_h z with w_h the head's weight on x_1 and z = x_1 - x_2; F = M x_2 + c(s) z; A = M x_2 +
(c(s) - psi(s)) z. Every function lies in span(x_2, z) with per-sample Gram [[1, -zeta/2], [-zeta/2, zeta]] (unit
keys, zeta = ||z||^2), so the (H + 2) x (H + 2) Gram matrix of (heads, A, F) is accumulated from scalars. alpha is
eliminated exactly (Schur complement on A), leaving min_a a^T G a - 2 g^T a + c over the budget set.

Certificate (weak duality). For ANY a0, with residual gradient e = g - G a0,
    D(a0) = c - a0^T G a0 - 2 t ||e||_1        (box |a_h| <= t),     c - a0^T G a0 - 2 R ||e||_2   (ball ||a|| <= R)
is <= the objective at every feasible a, because P(a) - D(a0) = (a - a0)^T G (a - a0) - 2 a^T e + 2 t ||e||_1 >= 0.
We evaluate D at cvxpy's solution in numpy (independently of the solver), and subtract a rounding margin
max(0, -lambda_min(G)) diam^2; P - D is the duality gap.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import cvxpy as cp
import numpy as np
import numpy.typing as npt
from scipy.special import expit

from theory.attention import multihead_attention
from theory.biased_target import (
    BiasGrid,
    bias_count,
    margin,
    sample_biased_context,
    sawtooth,
    simple_part,
)
from theory.monte_carlo import MonteCarloEstimate, estimate_mean
from theory.sphere import KEY_KINDS
from theory.validation import (
    check_array,
    check_choice,
    check_dimension,
    check_generator,
    check_int,
    check_rank,
    check_real,
    check_sample_count,
)

FloatArray = npt.NDArray[np.float64]

BUDGET_NORMS = ("max", "frobenius")


@dataclass(frozen=True)
class HeadDictionary:
    """H rank-r heads with V_h = a_h I (a chosen later).

    Attributes:
        Q: (H, r, d) query maps.
        K: (H, r, d) key maps.
        score_bias: (H, 2) additive score biases.
        temperature: (H,) inverse temperatures (inf = hardmax).
        labels: H short descriptions of each head's family.
    """

    Q: FloatArray
    K: FloatArray
    score_bias: FloatArray
    temperature: FloatArray
    labels: tuple[str, ...] = field(default=())

    @property
    def heads(self) -> int:
        return int(self.Q.shape[0])

    @property
    def rank(self) -> int:
        return int(self.Q.shape[1])

    @property
    def d(self) -> int:
        return int(self.Q.shape[2])


def _random_frame(r: int, d: int, rng: np.random.Generator) -> FloatArray:
    """(r, d) orthonormal rows spanning a Haar-random r-dimensional subspace."""
    q, upper = np.linalg.qr(rng.standard_normal((d, r)))  # q (d, r)
    return (q * np.sign(np.diag(upper))).T  # (r, d)


def aligned_heads(
    d: int, r: int, n_subspaces: int, grid: BiasGrid, rng: np.random.Generator, temperature: float = math.inf
) -> HeadDictionary:
    """The construction restricted to rank r: for each random r-plane U, heads Q = K = U with biases b_j (all j).

    Head (U, b) picks x_1 iff <U y, U z> > b: the best a rank-r head can do with the construction's thresholds.

    Args:
        d: ambient dimension (>= 2).
        r: rank, 1 <= r <= d.
        n_subspaces: number of random r-planes (>= 1).
        grid: the bias grid.
        rng: the source of randomness.
        temperature: inverse temperature of these heads (inf = hardmax).

    Returns:
        HeadDictionary with n_subspaces * M heads.
    """
    d = check_dimension(d)
    r = check_rank(r, d)
    n_subspaces = check_int("n_subspaces", n_subspaces, minimum=1)
    rng = check_generator(rng)
    frames = np.stack([_random_frame(r, d, rng) for _ in range(n_subspaces)])  # (S, r, d)
    M = grid.count
    Q = np.repeat(frames, M, axis=0)  # (S M, r, d)
    biases = np.tile(grid.biases, n_subspaces)  # (S M,)
    score_bias = np.stack([-0.5 * biases, 0.5 * biases], axis=1)  # (S M, 2)
    temps = np.full(n_subspaces * M, float(temperature))
    labels = tuple(f"aligned(r={r})" for _ in range(n_subspaces * M))
    return HeadDictionary(Q=Q, K=Q.copy(), score_bias=score_bias, temperature=temps, labels=labels)


def random_heads(
    d: int, r: int, count: int, rng: np.random.Generator, temperatures: tuple[float, ...] = (1.0, 4.0, math.inf)
) -> HeadDictionary:
    """Random rank-r heads: Gaussian Q, K (entries N(0, 1/d)), half with a N(0, 2) score bias, temperatures cycled.

    Args:
        d: ambient dimension (>= 2).
        r: rank, 1 <= r <= d.
        count: number of heads (>= 1).
        rng: the source of randomness.
        temperatures: inverse temperatures to cycle through.

    Returns:
        HeadDictionary with `count` heads.
    """
    d = check_dimension(d)
    r = check_rank(r, d)
    count = check_int("count", count, minimum=1)
    rng = check_generator(rng)
    Q = rng.standard_normal((count, r, d)) / math.sqrt(d)  # (count, r, d)
    K = rng.standard_normal((count, r, d)) / math.sqrt(d)  # (count, r, d)
    biases = rng.normal(0.0, math.sqrt(2.0), count) * (np.arange(count) % 2)  # (count,); odd heads biased
    score_bias = np.stack([-0.5 * biases, 0.5 * biases], axis=1)  # (count, 2)
    temps = np.array([temperatures[i % len(temperatures)] for i in range(count)], dtype=np.float64)
    labels = tuple(f"random(r={r})" for _ in range(count))
    return HeadDictionary(Q=Q, K=K, score_bias=score_bias, temperature=temps, labels=labels)


def concatenate(*parts: HeadDictionary) -> HeadDictionary:
    """Join dictionaries of the same d and r.

    Args:
        parts: dictionaries (at least one).

    Returns:
        The union (heads in order).
    """
    if not parts:
        raise ValueError("parts must hold at least one HeadDictionary")
    if len({(p.rank, p.d) for p in parts}) != 1:
        raise ValueError("parts must share the same rank r and dimension d")
    return HeadDictionary(
        Q=np.concatenate([p.Q for p in parts]),
        K=np.concatenate([p.K for p in parts]),
        score_bias=np.concatenate([p.score_bias for p in parts]),
        temperature=np.concatenate([p.temperature for p in parts]),
        labels=sum((p.labels for p in parts), ()),
    )


def standard_dictionary(
    d: int, r: int, grid: BiasGrid, rng: np.random.Generator, n_subspaces: int = 3, n_random: int = 24
) -> HeadDictionary:
    """Aligned hardmax heads on n_subspaces random r-planes, plus n_random random heads (the family used by the checks).

    Args:
        d: ambient dimension (>= 2).
        r: rank, 1 <= r <= d.
        grid: the bias grid.
        rng: the source of randomness.
        n_subspaces: random r-planes of aligned heads (>= 1).
        n_random: random heads (>= 1).

    Returns:
        HeadDictionary with n_subspaces * M + n_random heads.
    """
    return concatenate(aligned_heads(d, r, n_subspaces, grid, rng), random_heads(d, r, n_random, rng))


def first_key_weights(dictionary: HeadDictionary, X: FloatArray, y: FloatArray) -> FloatArray:
    """Each head's attention weight on x_1 (N = 2): the softmax of two scores is sigmoid of their difference.

    Same definition as theory.attention.attention_weights (checked against it in the tests), specialised to N = 2:
    w_1 = sigmoid(T (<Q y, K (x_1 - x_2)> + score_bias[h, 0] - score_bias[h, 1])); hardmax gives 1, 1/2 or 0.

    Args:
        dictionary: the heads.
        X: (n, 2, d) keys.
        y: (n, d) queries.

    Returns:
        (n, H) weights in [0, 1].
    """
    X = check_array("X", X, ndim=3)
    y = check_array("y", y, ndim=2)
    z = X[:, 0] - X[:, 1]  # (n, d)
    queries = np.einsum("hrd,nd->nhr", dictionary.Q, y)  # (n, H, r)
    keys = np.einsum("hrd,nd->nhr", dictionary.K, z)  # (n, H, r)
    difference = np.einsum("nhr,nhr->nh", queries, keys) + (dictionary.score_bias[:, 0] - dictionary.score_bias[:, 1])
    hard = np.isinf(dictionary.temperature)  # (H,)
    finite_t = np.where(hard, 1.0, dictionary.temperature)  # (H,)
    soft = expit(finite_t[None, :] * difference)  # (n, H)
    step = np.where(difference > 0, 1.0, np.where(difference < 0, 0.0, 0.5))  # (n, H); ties split evenly
    return np.where(hard[None, :], step, soft)  # (n, H)


def _coefficients(
    dictionary: HeadDictionary, grid: BiasGrid, X: FloatArray, y: FloatArray
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Coefficients of (heads, A, F) on x_2 and on z per sample, and zeta = ||z||^2.

    Returns:
        on_x2 (n, H + 2), on_z (n, H + 2), zeta (n,).
    """
    n = X.shape[0]
    M = float(grid.count)
    s = margin(X, y)  # (n,)
    count = bias_count(s, grid)  # (n,)
    saw = sawtooth(s / grid.delta)  # (n,)
    w = first_key_weights(dictionary, X, y)  # (n, H)
    on_x2 = np.concatenate([np.ones_like(w), np.full((n, 2), M)], axis=1)  # (n, H + 2)
    on_z = np.concatenate([w, (count - saw)[:, None], count[:, None]], axis=1)  # (n, H + 2)
    z = X[:, 0] - X[:, 1]  # (n, d)
    zeta = np.einsum("nd,nd->n", z, z)  # (n,)
    return on_x2, on_z, zeta


@dataclass(frozen=True)
class GramStatistics:
    """Empirical Gram matrix of (heads, A, F) on a fixed sample, and the reduced problem after eliminating alpha.

    Attributes:
        full: (H + 2, H + 2) E_n <u, v> over u, v in (f_1 .. f_H, A, F).
        n_samples: the sample size.
        d: ambient dimension.
    """

    full: FloatArray
    n_samples: int
    d: int

    @property
    def heads(self) -> int:
        return int(self.full.shape[0] - 2)

    def reduced(self) -> tuple[FloatArray, FloatArray, float]:
        """(G, g, c): Gram of heads, their inner products with F and ||F||^2, all after projecting out A."""
        H = self.heads
        g_full = self.full
        a_col = g_full[:H, H]  # (H,) <f_h, A>
        a_a = g_full[H, H]
        a_f = g_full[H, H + 1]
        G = g_full[:H, :H] - np.outer(a_col, a_col) / a_a  # (H, H)
        g = g_full[:H, H + 1] - a_col * a_f / a_a  # (H,)
        c = float(g_full[H + 1, H + 1] - a_f * a_f / a_a)
        return G, g, c

    def alpha(self, a: FloatArray) -> float:
        """The optimal free coefficient of A given head weights a."""
        H = self.heads
        return float((self.full[H, H + 1] - self.full[H, :H] @ a) / self.full[H, H])


def gram_statistics(
    dictionary: HeadDictionary,
    grid: BiasGrid,
    n_samples: int,
    rng: np.random.Generator,
    keys: str = "orthonormal",
    batch_size: int = 20000,
) -> GramStatistics:
    """Accumulate the empirical Gram matrix of (heads, A, F) over n_samples fresh contexts.

    Args:
        dictionary: the heads.
        grid: the bias grid.
        n_samples: sample size (>= 2).
        rng: the source of randomness.
        keys: "orthonormal" or "iid".
        batch_size: contexts per batch (>= 1).

    Returns:
        GramStatistics.
    """
    n_samples = check_sample_count("n_samples", n_samples)
    batch_size = check_int("batch_size", batch_size, minimum=1)
    rng = check_generator(rng)
    keys = check_choice("keys", keys, KEY_KINDS)
    size = dictionary.heads + 2
    total = np.zeros((size, size))
    done = 0
    while done < n_samples:
        m = min(batch_size, n_samples - done)
        X, y = sample_biased_context(m, dictionary.d, rng, keys)
        on_x2, on_z, zeta = _coefficients(dictionary, grid, X, y)
        # Per-sample Gram [[1, -zeta/2], [-zeta/2, zeta]] = L L^T with L = [[1, 0], [-zeta/2, sqrt(zeta (1 - zeta/4))]].
        first = on_x2 - 0.5 * zeta[:, None] * on_z  # (m, H + 2)
        second = np.sqrt(np.maximum(zeta * (1.0 - 0.25 * zeta), 0.0))[:, None] * on_z  # (m, H + 2)
        total += first.T @ first + second.T @ second  # (H + 2, H + 2)
        done += m
    return GramStatistics(full=total / n_samples, n_samples=n_samples, d=dictionary.d)


@dataclass(frozen=True)
class BudgetSolution:
    """Best head weights under one budget, with the certificate.

    Attributes:
        budget: B.
        norm: "max" or "frobenius".
        weights: (H,) the head coefficients a (exactly feasible).
        alpha: the free coefficient of A.
        primal: empirical error of (alpha, a): an achievable value.
        dual: certified lower bound on the empirical error of every feasible (alpha, a).
        status: the solver's status.
    """

    budget: float
    norm: str
    weights: FloatArray
    alpha: float
    primal: float
    dual: float
    status: str

    @property
    def gap(self) -> float:
        return self.primal - self.dual


def solve_budget(stats: GramStatistics, budget: float, norm: str = "max", solver: str = "CLARABEL") -> BudgetSolution:
    """Solve the budgeted least squares with cvxpy and certify it by the weak-duality bound of the module docstring.

    Args:
        stats: the empirical Gram statistics.
        budget: B >= 0.
        norm: "max" (d H max a_h^2 <= B) or "frobenius" (d sum a_h^2 <= B).
        solver: a cvxpy QP/SOCP solver name.

    Returns:
        BudgetSolution.
    """
    budget = check_real("budget", budget, minimum=0.0)
    norm = check_choice("norm", norm, BUDGET_NORMS)
    G, g, c = stats.reduced()
    H, d = stats.heads, stats.d
    eigenvalues, eigenvectors = np.linalg.eigh(G)  # G = U diag(lambda) U^T
    root = np.sqrt(np.clip(eigenvalues, 0.0, None))[:, None] * eigenvectors.T  # (H, H); root^T root = G (clipped)
    a = cp.Variable(H)
    radius = math.sqrt(budget / (d * H)) if norm == "max" else math.sqrt(budget / d)
    constraint = [cp.abs(a) <= radius] if norm == "max" else [cp.norm(a, 2) <= radius]
    problem = cp.Problem(cp.Minimize(cp.sum_squares(root @ a) - 2 * g @ a), constraint)
    try:
        problem.solve(solver=solver)
    except cp.error.SolverError:
        problem.solve(solver="SCS", eps=1e-9)
    value = np.zeros(H) if a.value is None else np.asarray(a.value, dtype=np.float64)
    # Project onto the budget set exactly, so the primal value is achievable.
    if norm == "max":
        value = np.clip(value, -radius, radius)
    else:
        norm_value = float(np.linalg.norm(value))
        if norm_value > radius:
            value = value * (radius / norm_value)
    quadratic = float(value @ G @ value)
    primal = quadratic - 2.0 * float(g @ value) + c
    residual_gradient = g - G @ value  # (H,)
    if norm == "max":
        dual = c - quadratic - 2.0 * radius * float(np.sum(np.abs(residual_gradient)))
        diameter2 = 4.0 * radius * radius * H
    else:
        dual = c - quadratic - 2.0 * radius * float(np.linalg.norm(residual_gradient))
        diameter2 = 4.0 * radius * radius
    dual -= max(0.0, -float(eigenvalues[0])) * diameter2  # rounding margin for a numerically indefinite G
    return BudgetSolution(
        budget=budget,
        norm=norm,
        weights=value,
        alpha=stats.alpha(value),
        primal=primal,
        dual=dual,
        status=str(problem.status),
    )


def dictionary_model(
    dictionary: HeadDictionary, weights: FloatArray, alpha: float, grid: BiasGrid
) -> Callable[[FloatArray, FloatArray], FloatArray]:
    """The model alpha A + sum_h a_h f_h as a callable, evaluated through theory.attention.multihead_attention.

    Args:
        dictionary: the heads.
        weights: (H,) head coefficients a (V_h = a_h I).
        alpha: coefficient of the simple part A.
        grid: the bias grid (defines A).

    Returns:
        model(X (n, 2, d), y (n, d)) -> (n, d).
    """
    weights = check_array("weights", weights, shape=(dictionary.heads,))
    alpha = check_real("alpha", alpha)
    d = dictionary.d

    def model(X: FloatArray, y: FloatArray) -> FloatArray:
        out = alpha * simple_part(X, y, grid)  # (n, d)
        for temperature in np.unique(dictionary.temperature):
            idx = np.flatnonzero(dictionary.temperature == temperature)
            V = weights[idx][:, None, None] * np.eye(d)[None, :, :]  # (|idx|, d, d)
            out = out + multihead_attention(
                dictionary.Q[idx], dictionary.K[idx], V, X, y, float(temperature), dictionary.score_bias[idx]
            )
        return out

    return model


def heldout_error(
    dictionary: HeadDictionary,
    grid: BiasGrid,
    solution: BudgetSolution,
    n_samples: int,
    rng: np.random.Generator,
    keys: str = "orthonormal",
    batch_size: int = 20000,
) -> MonteCarloEstimate:
    """Population error of a solution estimated on fresh contexts (mean and standard error).

    Args:
        dictionary: the heads.
        grid: the bias grid.
        solution: the weights to evaluate.
        n_samples: fresh sample size (>= 2).
        rng: the source of randomness (use a stream independent of the training sample).
        keys: "orthonormal" or "iid".
        batch_size: contexts per batch.

    Returns:
        MonteCarloEstimate of E ||F - alpha A - sum_h a_h f_h||^2.
    """
    n_samples = check_sample_count("n_samples", n_samples)
    rng = check_generator(rng)
    errors = []
    done = 0
    coefficient = np.concatenate([-solution.weights, [-solution.alpha, 1.0]])  # (H + 2,) on (heads, A, F)
    while done < n_samples:
        m = min(batch_size, n_samples - done)
        X, y = sample_biased_context(m, dictionary.d, rng, keys)
        on_x2, on_z, zeta = _coefficients(dictionary, grid, X, y)
        res_x2 = on_x2 @ coefficient  # (m,)
        res_z = on_z @ coefficient  # (m,)
        errors.append(res_x2 * res_x2 - zeta * res_x2 * res_z + zeta * res_z * res_z)  # (m,)
        done += m
    return estimate_mean(np.concatenate(errors))


def budget_threshold(budgets: FloatArray, errors: FloatArray, level: float) -> float:
    """The smallest budget at which errors(B) first drops to `level`, interpolated linearly in log B (inf if never).

    Args:
        budgets: (k,) increasing positive budgets.
        errors: (k,) errors at those budgets.
        level: the error level.

    Returns:
        The threshold budget.
    """
    budgets = check_array("budgets", budgets, ndim=1)
    errors = check_array("errors", errors, shape=(budgets.shape[0],))
    level = check_real("level", level)
    if np.any(budgets <= 0) or np.any(np.diff(budgets) <= 0):
        raise ValueError("budgets must be positive and strictly increasing")
    below = np.flatnonzero(errors <= level)
    if below.size == 0:
        return math.inf
    i = int(below[0])
    if i == 0:
        return float(budgets[0])
    x0, x1 = math.log(budgets[i - 1]), math.log(budgets[i])
    e0, e1 = errors[i - 1], errors[i]
    return float(math.exp(x0 + (e0 - level) / (e0 - e1) * (x1 - x0)))
