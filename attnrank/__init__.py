"""attnrank: check the claims of "On the Benefits of Rank in Attention Layers" (Amsel, Yehudai, Bruna) numerically.

The public Python API in one place; everything here is defined in `theory/`, `constructions/` or `experiments/`
(see docs/architecture.md) and re-exported unchanged. The paper's statements are summarised in docs/paper.md.

Bounds (Theorem 2, Fact 1):
    rank_lower_bound(d, r, H) -> BoundInterval   certified lower bound on the error of any H-head rank-r attention
    min_heads(d, r, eps) -> int                    the fewest heads the bound allows for error eps
    full_rank_error(d, temperature) -> float       the exact error of Fact 1's single full-rank softmax head
Constructions, as weight files (safetensors):
    save_full_rank, construct_random_features / save_random_features, build_majority_vote / save_majority_vote,
    build_biased_construction / save_biased_construction, load_weights, save_weights
Evaluating and exporting:
    evaluate(path, task=..., N=..., samples=..., seed=...) -> dict   Monte Carlo error next to the file's prediction
    weight_file_model(weights) -> model(X, y)                         the reference (numpy) evaluator of a file
    torch_mha_export(weights), stock_attention(export)               a stock torch.nn.MultiheadAttention
Importing models trained elsewhere (docs/import.md):
    import_torch_mha(path, num_heads, out), torch_mha_import(state_dict, num_heads)   stock attention -> weight file
    import_reference_encoder(path, out_dir, num_heads=..., task=...)                  reference encoder -> run dir
    reference_state_from_encoder(encoder, prefix)                                     our encoder -> reference layout
Training and sweeping:
    TrainConfig, train(config, out_dir), train_packed(configs, out_dirs) (K runs in one process and one step),
    load_trained_model(out_dir) (in the run's recorded precision: a float64 import comes back float64)
    PRESETS, run_sweep(preset, scale, out)
Reading a store (a sweep's --out directory, or a committed one under results/):
    read_store(directory) -> [RunRow]   every run: spec, status, metrics (the one run record: population error, ...)
    read_curves(directory, column="loss" | "population") -> {run hash: [(step, value)]}   its training curves
The paper's training data (docs/training.md, "Training data"):
    reference_training_set(d, N, batch_size, batches, seed, workers=7) -> (X, target)   the reference's fixed set,
        bitwise, each (batches, batch_size, N, d) float32
"""

from constructions.biased import build_biased_construction, save_biased_construction
from constructions.evaluate import evaluate_weight_file as evaluate
from constructions.evaluate import weight_file_model
from constructions.export_torch import stock_attention, torch_mha_export
from constructions.full_rank import save_full_rank
from constructions.import_torch import import_torch_mha, torch_mha_import
from constructions.majority_vote import build_majority_vote, save_majority_vote
from constructions.random_features import construct_random_features, save_random_features
from constructions.weights_io import WeightFile, load_weights, save_weights
from experiments.cli.version import package_version
from experiments.config import TrainConfig, TrainResult
from experiments.models.reference_layout import reference_state_from_encoder
from experiments.samplers.reference_data import reference_training_set
from experiments.studies import PRESETS, run_sweep
from experiments.sweeps.readers import read_curves, read_store
from experiments.training.imported_run import import_reference_encoder
from experiments.training.loop import train, train_packed
from experiments.training.run_model import load_trained_model
from theory.bounds import BoundInterval, full_rank_error, min_heads, rank_lower_bound

__version__ = package_version()

__all__ = [
    "PRESETS",
    "BoundInterval",
    "TrainConfig",
    "TrainResult",
    "WeightFile",
    "__version__",
    "build_biased_construction",
    "build_majority_vote",
    "construct_random_features",
    "evaluate",
    "full_rank_error",
    "import_reference_encoder",
    "import_torch_mha",
    "load_trained_model",
    "load_weights",
    "min_heads",
    "rank_lower_bound",
    "read_curves",
    "read_store",
    "reference_state_from_encoder",
    "reference_training_set",
    "run_sweep",
    "save_biased_construction",
    "save_full_rank",
    "save_majority_vote",
    "save_random_features",
    "save_weights",
    "stock_attention",
    "torch_mha_export",
    "torch_mha_import",
    "train",
    "train_packed",
    "weight_file_model",
]
