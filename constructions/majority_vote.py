"""Theorem 5: a two-layer transformer whose heads all have rank 1 approximates the nearest neighbour for N = 2.

docs/paper.md section 5 ("majority vote"). Evaluated by `theory.multilayer.multilayer_forward` with update = "query".

Stream layout (D = d + p, p = 1 + d):

    coordinates [0, d)        content: x_i for context token i, y for the query (never written by any head)
    coordinate  d             "pos": the code c_i of context token i (c_1 = +1, c_2 = -1); for the query it starts at 0
                              and layer 1 writes the vote tally into it
    coordinates [d+1, 2d+1)   "out": zero for every token; layer 2 copies the winner's content here

Layer 1, heads h = 1 .. H (rank 1). Q_h = K_h = q_h^T on the content block (q_h uniform unit vectors), so
score_i = T <q_h, y><q_h, x_i>, and head h picks x_1 iff <q_h, y><q_h, x_1 - x_2> > 0 (hardmax). Writing
u = (x_1 - x_2)/|x_1 - x_2|, t = <y, u>: a uniform q_h gets the sign of <y, u> right with probability
1 - arccos|t| / pi (theory.majority_vote_error.head_success_probability). V_h = e_pos e_pos^T copies the picked
token's code into the query's pos coordinate, so after layer 1 the query holds
tally = #(heads picking x_1) - #(heads picking x_2)   (softmax: sum_h (w_h1 - w_h2)).

Layer 2, one head (rank 1). Q = K = e_pos^T: score_i = T * tally * c_i, i.e. +T tally for x_1 and -T tally for x_2, so
the head picks x_1 iff tally > 0 (a tie, tally = 0 exactly, splits the weight evenly under hardmax). V copies the
content block into the out block (V[d+1+k, k] = 1): the query's out block becomes the picked token (or the average
on a tie). The readout reads the out block. The query's content block still holds y (the residual), which is why the
output needs its own d coordinates: no linear readout of [y + x_win] alone could remove y.

Without the codes (``positional_codes=False``: c_1 = c_2 = 0) layer 1 writes 0, the tally is always 0, layer 2 sees a
tie and outputs (x_1 + x_2) / 2, whose error is exactly 1/2 on D_2: the scratch coordinate is what lets a rank-1 head
tell the two tokens apart.

Only the query may be updated: under update = "all" the context tokens would also overwrite their own pos coordinate
with a tally, destroying the codes layer 2 needs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from constructions.multilayer_layout import multilayer_metadata, multilayer_tensors
from constructions.weights_io import save_weights
from theory.majority_vote_error import majority_vote_error
from theory.multilayer import AttentionLayer, MultiLayerWeights
from theory.sphere import sample_sphere
from theory.validation import (
    check_array,
    check_bool,
    check_dimension,
    check_generator,
    check_heads,
    check_instance,
    check_output_file,
    check_real,
    check_seed,
    check_temperature,
)

FloatArray = npt.NDArray[np.float64]

CONSTRUCTION_NAME = "majority-vote"

PREDICTION_SCOPE = (
    "mean over random head directions and D_2 data; one fixed draw of directions differs from it: measured "
    "draw-to-draw sd 0.053 x error at d = 10, H = 301 (20 draws, 4e5 common samples each; range -10% .. +10%)"
)
"""What a majority-vote file's predicted_error averages over (stored as its ``prediction_scope`` metadata).

The spread is measured by ``test_prediction_scope_states_the_measured_draw_to_draw_spread`` (slow) in
tests/constructions/test_majority_vote.py, and at full size by the script in docs/reliability.md."""


@dataclass(frozen=True)
class MajorityVote:
    """A built majority-vote transformer and what describes it.

    Attributes:
        weights: the multi-layer weights (L = 2, H = [heads, 1], r = 1, N = 2, p = 1 + d).
        directions: (heads, d) the layer-1 directions q_h.
        temperature: the inverse temperature it is meant to run at (inf = hardmax).
        predicted_error: the exact expected error over random directions and D_2 data
            (theory.majority_vote_error.majority_vote_error), or nan if not computed.
    """

    weights: MultiLayerWeights
    directions: FloatArray
    temperature: float
    predicted_error: float

    def __post_init__(self) -> None:
        check_instance("weights", self.weights, MultiLayerWeights)
        object.__setattr__(self, "directions", check_array("directions", self.directions, ndim=2))
        object.__setattr__(self, "temperature", check_temperature(self.temperature))
        if not (isinstance(self.predicted_error, float) and math.isnan(self.predicted_error)):
            object.__setattr__(
                self, "predicted_error", check_real("predicted_error", self.predicted_error, minimum=0.0)
            )

    def metadata(self) -> dict[str, object]:
        """Metadata for constructions.weights_io.save_weights (multi-layer layout)."""
        return multilayer_metadata(self.weights, CONSTRUCTION_NAME, self.temperature, self.predicted_error)


def majority_vote_weights(directions: npt.ArrayLike, *, positional_codes: bool = True) -> MultiLayerWeights:
    """The two-layer rank-1 majority vote for given layer-1 directions (see the module docstring).

    Args:
        directions: (H, d) layer-1 directions q_h (rows need not be unit; they are used as given).
        positional_codes: False zeroes the codes (the negative control: error 1/2).

    Returns:
        MultiLayerWeights with L = 2, heads [H, 1], rank 1, N = 2, p = 1 + d.
    """
    q = np.asarray(directions, dtype=np.float64)
    if q.ndim != 2 or q.shape[0] < 1 or q.shape[1] < 2 or not np.all(np.isfinite(q)):
        raise ValueError(f"directions must be a finite (H, d) array with H >= 1, d >= 2, got shape {q.shape}")
    H, d = q.shape
    p = 1 + d
    embed_dim = d + p
    pos = d  # index of the code / tally coordinate
    out = slice(d + 1, 2 * d + 1)  # the output block

    # Layer 1: Q_h = K_h = [q_h, 0, 0] (rank 1 each), V_h = e_pos e_pos^T (writes the picked code into the tally).
    q1 = np.zeros((H, 1, embed_dim))
    q1[:, 0, :d] = q  # (H, 1, D)
    v1 = np.zeros((H, embed_dim, embed_dim))
    v1[:, pos, pos] = 1.0  # (H, D, D)
    layer1 = AttentionLayer(Q=q1, K=q1.copy(), V=v1)

    # Layer 2: Q = K = e_pos^T, score_i = tally * c_i; V copies content [0, d) into the out block.
    q2 = np.zeros((1, 1, embed_dim))
    q2[0, 0, pos] = 1.0
    v2 = np.zeros((1, embed_dim, embed_dim))
    v2[0, out, :d] = np.eye(d)
    layer2 = AttentionLayer(Q=q2, K=q2.copy(), V=v2)

    codes = np.zeros((2, p))  # (N, p)
    if positional_codes:
        codes[0, 0] = 1.0  # c_1 = +1 in the pos coordinate (index 0 of the scratch block = stream index d)
        codes[1, 0] = -1.0  # c_2 = -1
    readout = np.zeros((d, embed_dim))
    readout[:, out] = np.eye(d)  # reads the out block
    return MultiLayerWeights(layers=(layer1, layer2), context_codes=codes, query_code=np.zeros(p), readout=readout)


def build_majority_vote(
    d: int,
    heads: int,
    rng: np.random.Generator,
    temperature: float = math.inf,
    *,
    predict: bool = True,
    positional_codes: bool = True,
) -> MajorityVote:
    """Draw H uniform directions and build the majority vote with its predicted error.

    Args:
        d: token dimension (>= 2).
        heads: number of layer-1 heads H (>= 1).
        rng: source of the random directions.
        temperature: inverse temperature the weights are meant for (inf = hardmax).
        predict: compute the exact predicted error (softmax: seconds for H ~ 100, slower for large H).
        positional_codes: False builds the negative control without codes.

    Returns:
        MajorityVote (weights, directions, temperature, predicted_error).
    """
    d = check_dimension(d)
    heads = check_heads(heads, name="heads")
    rng = check_generator(rng)
    temperature = check_temperature(temperature)
    predict = check_bool("predict", predict)
    positional_codes = check_bool("positional_codes", positional_codes)
    directions = sample_sphere(heads, d, rng)  # (H, d)
    weights = majority_vote_weights(directions, positional_codes=positional_codes)
    if not positional_codes:
        predicted = 0.5  # the tally is always 0: output (x_1 + x_2) / 2, error |x_1 - x_2|^2 / 4 = 1/2 on average
    elif predict:
        predicted = majority_vote_error(d, heads, temperature)
    else:
        predicted = math.nan
    return MajorityVote(weights=weights, directions=directions, temperature=temperature, predicted_error=predicted)


def save_majority_vote(path: str | Path, built: MajorityVote, seed: int) -> Path:
    """Write the majority vote as a multi-layer weight file (task nearest, D_2 keys, the seed of its directions).

    Args:
        path: output file.
        built: the construction (build_majority_vote).
        seed: the seed its directions were drawn with (stored as metadata; an integer >= 0).

    Returns:
        The path written.
    """
    path = check_output_file("path", path)
    built = check_instance("built", built, MajorityVote, "a MajorityVote (from build_majority_vote)")
    seed = check_seed("seed", seed)
    metadata = {
        **built.metadata(),
        "task": "nearest",
        "keys": "orthonormal",
        "seed": seed,
        "prediction_scope": PREDICTION_SCOPE,
    }
    return save_weights(path, multilayer_tensors(built.weights), metadata)
