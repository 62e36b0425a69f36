"""The report of one run directory: ``<run>/report.md`` from its config, its analysis and, if imported, its source.

`attnrank report DIR` writes it when DIR is a run directory (``config.json``, no results store): a run of
`attnrank train` or one written by `attnrank import`. It reads, and checks rather than trusts:

- ``config.json`` (`experiments.training.run_directory.RunDirectory.read_config`);
- ``analysis.json``, written by `attnrank analyze DIR` (required: the report draws no samples of its own); its
  ``run`` entry must describe the same task, d, N, rank, heads and layers as the config, or it is refused as stale;
- ``import.json`` when present (the source file, its sha256, what was inferred and given);
- ``result.json`` when present (the training result, `RunDirectory.read_result`; an imported run has none).

Every number printed is checked by type and range first (an angle outside [0, 180], a negative norm or error, a nan
where only M = 0 gives one, an effective rank outside [1, D]): a damaged file is refused naming the file and the
field, never published.

The report states the population error on the task (the one recipe, `experiments.training.evaluation`) with its
standard error and sample size, Theorem 2's bound beside it where
the analysis computed one, and per layer the summed score form and one row per head (angle to +-I, effective and
numerical rank, Frobenius norm).
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from experiments.analysis.sweep_directory import SweepDirectory
from experiments.config import TrainConfig
from experiments.json_files import read_json_object, write_text_atomically
from experiments.model_kinds import model_kind
from experiments.training.run_directory import RunDirectory
from experiments.training.run_record import POPULATION_KEYS, Evaluation

REPORT_NAME = "report.md"
_RUN_FIELDS = ("task", "d", "N", "rank", "heads", "layers")
_SUMMARY_FIELDS = ("angle_to_I_deg", "angle_to_minus_I_deg", "effective_rank", "numerical_rank", "frobenius_norm")


def is_run_directory(out: Path | str) -> bool:
    """Whether ``out`` is a run directory (config.json) rather than a sweep directory (results.sqlite)."""
    out = Path(out)
    store = SweepDirectory(out).store
    return os.path.lexists(RunDirectory(out).config) and not store.exists()  # a FIFO there is refused


def _read_json(path: Path) -> Any:
    """The JSON object of ``path`` by the one reader (`experiments.json_files.read_json_object`)."""
    return read_json_object(path)


def _number(value: Any) -> float:
    """A JSON number, or the strings "nan" / "inf" / "-inf" that experiments.json_files writes for them."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ValueError(f"expected a number, got {value!r}")
    number = float(value)
    if isinstance(value, str) and value not in ("nan", "inf", "-inf"):
        raise ValueError(f"expected a number, got {value!r}")
    return number


ANGLE_SLACK = 1e-9
"""Degrees by which the two angles of a summary may miss summing to 180 (both come from one float64 angle)."""


def _check_summary(summary: Any, where: str, path: Path, size: int | None) -> dict[str, float]:
    """A score form's summary (`experiments.analysis.trained.summarize_matrix`), checked by type and range: the
    Frobenius norm finite >= 0; the angles to +I and -I in [0, 180] summing to 180, or both nan for M = 0 only;
    the effective rank 0 for M = 0, else in [1, D]; the numerical rank an integer in [0, D] (D = ``size``, the
    layer's d_model, when recorded)."""
    if not isinstance(summary, Mapping):
        raise ValueError(f"{path}: field {where} must be an object")
    try:
        values = {key: _number(summary[key]) for key in _SUMMARY_FIELDS}
    except KeyError as exc:
        raise ValueError(f"{path}: field {where}.{exc.args[0]} is missing") from exc
    except ValueError as exc:
        raise ValueError(f"{path}: field {where}: {exc}") from exc
    norm, rank = values["frobenius_norm"], summary["numerical_rank"]
    angle, opposite, effective = values["angle_to_I_deg"], values["angle_to_minus_I_deg"], values["effective_rank"]
    largest = math.inf if size is None else size
    problems = []
    if not (math.isfinite(norm) and norm >= 0):
        problems.append(f"frobenius_norm must be finite and >= 0, got {norm!r}")
    elif norm == 0:
        if not (math.isnan(angle) and math.isnan(opposite) and effective == 0):
            problems.append("a zero score form has nan angles and effective rank 0")
    elif not (0 <= angle <= 180 and 0 <= opposite <= 180 and abs(angle + opposite - 180) <= ANGLE_SLACK):
        problems.append(f"angles to I and -I must lie in [0, 180] and sum to 180, got {angle!r} and {opposite!r}")
    elif not 1 - ANGLE_SLACK <= effective <= largest + ANGLE_SLACK:
        problems.append(f"effective_rank must lie in [1, {largest}], got {effective!r}")
    if isinstance(rank, bool) or not isinstance(rank, int) or not 0 <= rank <= largest:
        problems.append(f"numerical_rank must be an integer in [0, {largest}], got {rank!r:.40}")
    if problems:
        raise ValueError(f"{path}: field {where}: {problems[0]}")
    return values


def analysis_evaluation(analysis: Mapping[str, Any], path: Path) -> Evaluation:
    """The evaluation in an analysis (the one metric record's population error and bound record, read by
    `Evaluation.read`); ValueError naming the file and the field, or saying the analysis predates the recipe."""
    try:
        evaluation = Evaluation.read(analysis)
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from None
    if evaluation is None:
        raise ValueError(
            f"{path}: field {POPULATION_KEYS[0]} is missing (written by an older `attnrank analyze`; run it again)"
        )
    return evaluation


def read_analysis(run_dir: Path, config: TrainConfig) -> dict[str, Any]:
    """``analysis.json`` of ``run_dir``, checked field by field and against the run's config."""
    path = RunDirectory(run_dir).analysis
    if not os.path.lexists(path):
        raise ValueError(f"{path} not found; run `attnrank analyze {run_dir}` first")
    analysis = _read_json(path)
    if not isinstance(analysis, dict) or not isinstance(analysis.get("run"), dict):
        raise ValueError(f"{path}: field run is missing; not written by `attnrank analyze`")
    for key in _RUN_FIELDS:
        if analysis["run"].get(key) != getattr(config, key):
            raise ValueError(
                f"{path}: field run.{key} is {analysis['run'].get(key)!r} but the run's config has "
                f"{getattr(config, key)!r}; stale analysis, run `attnrank analyze {run_dir}` again"
            )
    layers = analysis.get("layers")
    if not isinstance(layers, list) or len(layers) != config.layers:
        raise ValueError(f"{path}: field layers must list {config.layers} layer(s)")
    for index, layer in enumerate(layers):
        if not isinstance(layer, dict) or not isinstance(layer.get("per_head"), list):
            raise ValueError(f"{path}: field layers[{index}].per_head is missing")
        if len(layer["per_head"]) != config.heads:
            raise ValueError(
                f"{path}: field layers[{index}].per_head lists {len(layer['per_head'])} heads, not {config.heads}"
            )
        size = layer.get("d_model")
        if size is not None and (isinstance(size, bool) or not isinstance(size, int) or size < 1):
            raise ValueError(f"{path}: field layers[{index}].d_model must be an integer >= 1, got {size!r:.40}")
        _check_summary(layer.get("sum"), f"layers[{index}].sum", path, size)
        for h, head in enumerate(layer["per_head"]):
            _check_summary(head, f"layers[{index}].per_head[{h}]", path, size)
    analysis_evaluation(analysis, path)
    return analysis


def _fmt(value: Any, digits: int = 4) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, int):
        return str(value)
    return "nan" if math.isnan(value) else f"{value:.{digits}g}"


def _layer_section(index: int, layer: Mapping[str, Any]) -> list[str]:
    lines = [
        f"### Layer {index}: {len(layer['per_head'])} heads of rank {layer.get('rank', '?')}",
        "",
        "| head | angle to I (deg) | angle to -I (deg) | effective rank | numerical rank | norm of M |",
        "|---|---|---|---|---|---|",
    ]
    rows = [("sum", layer["sum"])] + [(str(h), head) for h, head in enumerate(layer["per_head"])]
    for name, summary in rows:
        cells = [_fmt(_number(summary[key]), 5) for key in _SUMMARY_FIELDS]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return lines + [""]


def write_run_report(run_dir: Path | str) -> Path:
    """Write ``<run_dir>/report.md`` (see the module docstring); its path.

    Args:
        run_dir: a run directory holding config.json and analysis.json.

    Returns:
        the report's path.
    """
    run_dir = Path(run_dir)
    files = RunDirectory(run_dir)
    config = files.read_config()
    analysis = read_analysis(run_dir, config)
    lines = [f"# attnrank run report: `{run_dir}`", ""]
    lines += [
        f"Model `{config.model}`, task `{config.task}` (d = {config.d}, N = {config.N}"
        + (f", keys {config.keys}" if config.task == "nearest" else "")
        + f"), {config.layers} layer(s) of H = {config.heads} heads of rank r = {config.rank} "
        f"(width c = {config.width}), positional `{config.positional}`"
        + (f" (p = {config.positional_dim})" if config.positional_dim else "")
        + (f", feed-forward width {config.ffn_dim}" if model_kind(config.model).feed_forward else "")
        + ".",
        "",
    ]
    record_path = files.import_record
    if os.path.lexists(record_path):
        record = _read_json(record_path)
        if not isinstance(record, dict) or not all(isinstance(record.get(k), str) for k in ("format", "source")):
            raise ValueError(f"{record_path}: field format or source is missing or not text; not an import record")
        lines += [
            f"Imported with `attnrank import --from {record['format']}` from `{record['source']}` "
            f"(sha256 `{record.get('source_sha256', '?')}`, {record.get('container', '?')}); nothing was trained here.",
            "",
        ]
        notes = record.get("notes")
        if isinstance(notes, list) and notes:
            lines += [f"- {note}" for note in notes if isinstance(note, str)] + [""]
    if os.path.lexists(files.result):
        result = files.read_result()  # checked field by field: a damaged result is refused, never printed
        shown = {"steps": result.steps, "final_loss": result.final_loss, "best_loss": result.best_loss}
        shown["diverged"] = result.diverged
        lines += ["Training: " + ", ".join(f"{k} {_fmt(v)}" for k, v in shown.items()) + ".", ""]
    evaluation = analysis_evaluation(analysis, files.analysis)
    population = evaluation.population
    lines += [
        "## Population error on the task",
        "",
        f"{_fmt(population.error)} +- {_fmt(population.stderr, 2)} (one "
        f"standard error; {population.samples} held-out samples of `{config.task}`, the "
        "one evaluation recipe of `experiments.training.evaluation`).",
        "",
    ]
    bound = evaluation.theorem2
    if bound is not None:
        applies = bound.applies
        cells = (bound.d, bound.r, bound.H, population.error, population.upper, bound.lower, applies, bound.consistent)
        lines += [
            "## Theorem 2",
            "",
            "| d | r | H | error | + 4 s.e. | lower bound | bound applies | consistent |",
            "|---|---|---|---|---|---|---|---|",
            "| " + " | ".join(_fmt(cell) for cell in cells) + " |",
            "",
            "The bound holds for every H-head rank-r generalized attention on nearest-neighbour retrieval with N = 2 "
            "(D_2 keys)"
            + (
                "."
                if applies
                else "; this model (residual, norms, feed-forward) lies outside that class, so the "
                "bound is shown for comparison, not as a constraint."
            ),
            "",
        ]
    lines += ["## Attention layers: score forms M_h = s Q_h^T K_h", ""]
    for index, layer in enumerate(analysis["layers"]):
        lines += _layer_section(index, layer)
    report = run_dir / REPORT_NAME
    write_text_atomically(report, "\n".join(lines))
    return report
