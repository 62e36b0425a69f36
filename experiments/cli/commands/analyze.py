"""`attnrank analyze DIR`: the learned Q^T K of a trained run against +-I, its rank, and error against Theorem 2."""

from __future__ import annotations

import argparse
import json

from experiments.analysis.trained import analyze_run
from experiments.cli.arguments import check_output_file, path_argument
from experiments.cli.output import emit
from experiments.json_files import jsonable, write_json
from experiments.training.evaluation import EVALUATION_SAMPLES
from experiments.training.run_directory import RunDirectory
from experiments.training.run_record import POPULATION_KEYS, Evaluation
from theory.validation import check_sample_count

HEAD_ROWS = 32
"""Heads per layer printed without --per-head (the JSON output and analysis.json always hold every head)."""


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "analyze",
        help="analyse a trained run's attention layers (Q^T K vs +-I, rank, error vs Theorem 2's bound)",
        description="For every attention layer of the run in DIR: angle and Frobenius norm of the learned score form "
        "M = s Q^T K (per head and summed over heads, in input coordinates) against +I (0 degrees) and -I "
        "(180 degrees), its effective rank (exp of the entropy of the normalised singular values) and numerical "
        "rank. Every run gets its evaluation by the one recipe (population error on held-out samples, with its "
        "standard error; JSON keys population_error, population_stderr, population_samples); for a one-layer run on "
        "task nearest with N = 2 and orthonormal keys (Theorem 2's setting) it stands next to "
        "theory.bounds.rank_lower_bound(d, r, H) (key theorem2); for an icl run the error against the number of "
        "in-context examples, next to the least-squares and averaging baselines. Text output: per layer the summed "
        "form, then one line per head (angle to +-I, effective and numerical rank, norm). Writes DIR/analysis.json.",
    )
    parser.add_argument(
        "run_dir",
        type=path_argument,
        metavar="DIR",
        help="run directory written by `attnrank train` or `attnrank import`",
    )
    parser.add_argument(
        "--samples", type=int, default=EVALUATION_SAMPLES, help="held-out samples (default %(default)s)"
    )
    parser.add_argument(
        "--per-head",
        action="store_true",
        help=f"print every head of every layer (text output; by default the first {HEAD_ROWS} of each layer)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(handler=run)


def print_head_table(layer: int, heads: list[dict], *, everything: bool) -> None:
    """One line per head of ``layer``: angle of M_h to +I and -I, effective and numerical rank, Frobenius norm."""
    shown = heads if everything else heads[:HEAD_ROWS]
    print(f"layer {layer}, per head: score form M_h = s Q_h^T K_h")
    print(f"  {'head':>5}  {'angle to I':>10}  {'angle to -I':>11}  {'eff. rank':>9}  {'num. rank':>9}  {'|M|_F':>10}")
    for h, head in enumerate(shown):
        print(
            f"  {h:>5}  {head['angle_to_I_deg']:>10.2f}  {head['angle_to_minus_I_deg']:>11.2f}  "
            f"{head['effective_rank']:>9.3f}  {head['numerical_rank']:>9d}  {head['frobenius_norm']:>10.4g}"
        )
    if len(shown) < len(heads):
        print(f"  ... {len(heads) - len(shown)} more heads (--per-head prints every head; --json holds them all)")


def run(args: argparse.Namespace) -> int:
    if not args.run_dir.is_dir():
        raise ValueError(f"DIR: run directory not found: {args.run_dir}")
    check_sample_count("--samples", args.samples)
    files = RunDirectory(args.run_dir)
    check_output_file(files.analysis, "DIR")
    report = analyze_run(args.run_dir, samples=args.samples)
    write_json(files.analysis, report)
    if args.json:
        print(json.dumps(jsonable(report), allow_nan=False))
        return 0
    emit(report["run"], as_json=False, title=f"run {args.run_dir}")
    for index, layer in enumerate(report["layers"]):
        emit(
            layer["sum"], as_json=False, title=f"layer {index}: sum over {layer['heads']} heads of rank {layer['rank']}"
        )
        print_head_table(index, layer["per_head"], everything=args.per_head)
    error = {key: report[key] for key in POPULATION_KEYS}
    emit(error, as_json=False, title=f"population error on the task ({report['run']['task']}; held-out samples)")
    evaluation = Evaluation.read(report)
    if evaluation is not None and evaluation.theorem2 is not None:
        bound, population = evaluation.theorem2.fields(), evaluation.population
        shown = {k: bound[k] for k in ("d", "r", "H")}  # the bound record beside the error it bounds
        shown.update(error=population.error, error_upper_4se=population.upper)
        shown.update({k: v for k, v in bound.items() if k not in shown})
        emit(shown, as_json=False, title="trained error vs Theorem 2 lower bound")
    if "icl" in report:
        curves = report["icl"]
        names = list(curves)
        print("in-context regression error (squared error / d) by number of in-context examples")
        print("  examples  " + "  ".join(f"{name:>20}" for name in names))
        for i in curves[names[0]]["examples"]:
            cells = [f"{curves[n]['error'][i]:>10.4g} +- {curves[n]['stderr'][i]:<6.2g}" for n in names]
            print(f"  {i:>8}  " + "  ".join(cells))
    return 0
