#!/usr/bin/env bash
# The paper's multi-layer claims on one GPU in one ~10-minute call: the deciding cells of fig1, posn, conjecture6 and
# icl at the paper's model sizes (`attnrank sweep PRESET --scale gpu`: GPU_STEPS in each figure module of
# experiments/studies/ gives each preset's reduced step count), one sweep per preset, each under a time limit,
# then one report per preset.
#
# Time: BUDGET_S seconds (default 450) are shared by the sweeps: each preset gets the budget still left divided by the
# presets still to run, so time a fast preset leaves goes to the next. A sweep that reaches its limit is stopped with
# its worker processes (GNU timeout signals its whole process group); its runs checkpoint every tenth of their steps,
# so running the same command again resumes them. Reports and copies take about a minute more.
#
# Usage (repository root):
#   scripts/gpu_paper.sh [OUT_DIR]                     # on the GPU machine; OUT_DIR defaults to $OUT (else results)
#   DRY_RUN=1 WORK_DIR=/tmp/w scripts/gpu_paper.sh /tmp/o   # CPU rehearsal: 2 steps of batch 2, FFN 8, 64 held-out samples
# Environment: PRESETS ("fig1 posn conjecture6 icl"), BUDGET_S (450), WORKERS (4), WORK_DIR (runs/gpu-paper: the
# sweeps' run directories with their checkpoints, never copied to OUT_DIR), DRY_RUN (0).
# Writes OUT_DIR/<preset>-gpu/{results.sqlite, report.md, <preset>-gpu.png}, OUT_DIR/gpu-timing.json (per preset: wall
# seconds, limit, whether it was stopped, runs finished, failed) and OUT_DIR/gpu.txt (device, torch, revision).
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="${PYTHONPATH:+$PYTHONPATH:}$(pwd)"
ALLOWED="fig1 posn conjecture6 icl"
OUT_DIR="${1:-${OUT:-results}}"
PRESETS="${PRESETS:-$ALLOWED}"
BUDGET_S="${BUDGET_S:-450}"
WORKERS="${WORKERS:-4}"
WORK_DIR="${WORK_DIR:-runs/gpu-paper}"
DRY_RUN="${DRY_RUN:-0}"

fail() { echo "gpu_paper.sh: error: $1" >&2; exit 2; }
for preset in $PRESETS; do
  [[ " $ALLOWED " == *" $preset "* ]] || fail "PRESETS: unknown preset '$preset' (allowed: $ALLOWED)"
done
[[ -n "${PRESETS// /}" ]] || fail "PRESETS is empty (allowed: $ALLOWED)"
[[ "$BUDGET_S" =~ ^[1-9][0-9]*$ ]] || fail "BUDGET_S must be an integer >= 1 (seconds), got '$BUDGET_S'"
[[ "$WORKERS" =~ ^[1-9][0-9]*$ ]] || fail "WORKERS must be an integer >= 1, got '$WORKERS'"
[[ "$DRY_RUN" == 0 || "$DRY_RUN" == 1 ]] || fail "DRY_RUN must be 0 or 1, got '$DRY_RUN'"
# The timing lines are JSON written by printf: a path with a quote or a backslash would break them.
[[ "$WORK_DIR" != *[\"\\]* ]] || fail "WORK_DIR must not contain a double quote or a backslash, got '$WORK_DIR'"

SETS=()
if [[ "$DRY_RUN" == 1 ]]; then
  # The same runs' plumbing at toy cost: every config keeps its shape but for FFN width, batch and the held-out
  # evaluation (64 samples: at 20 000, each of conjecture6's N = 32 models, 512 heads a layer, took 18 min on a core
  # shared with two training runs; 54 s per 1024 samples, measured 2026-12-07).
  SETS=(--set steps=2 --set batch_size=2 --set ffn_dim=8 --set log_every=1 --set checkpoint_every=1 --set device=cpu
        --set eval_samples=64)
  WORKERS=1
fi
# Split the host's cores between the worker processes rather than letting each take all of them (torch's default).
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-$(( $(nproc) / WORKERS > 0 ? $(nproc) / WORKERS : 1 ))}"
mkdir -p "$OUT_DIR" "$WORK_DIR"
python scripts/gpu_outputs.py machine "$OUT_DIR/gpu.txt" "$DRY_RUN"

started=$(date +%s)
set -- $PRESETS
left=$#
timing="$WORK_DIR/timing.jsonl"
: > "$timing"
for preset in $PRESETS; do
  spent=$(( $(date +%s) - started ))
  limit=$(( (BUDGET_S - spent) / left ))
  (( limit >= 1 )) || limit=1
  left=$(( left - 1 ))
  sweep_dir="$WORK_DIR/$preset-gpu"
  t0=$(date +%s.%N)
  status=0
  timeout --kill-after=20 "$limit" python -m experiments.cli.main sweep "$preset" --scale gpu --out "$sweep_dir" \
    --workers "$WORKERS" "${SETS[@]}" --no-progress --json > "$sweep_dir.sweep.json" 2> "$sweep_dir.sweep.err" \
    || status=$?
  t1=$(date +%s.%N)
  printf '{"key": "%s", "sweep_dir": "%s", "keep_as": "%s", "limit_s": %s, "start": %s, "end": %s, "status": %s, %s}\n' \
    "$preset" "$sweep_dir" "$preset-gpu" "$limit" "$t0" "$t1" "$status" \
    '"missing": "no results store: the sweep stopped before registering its runs"' >> "$timing"
  echo "$preset: sweep exit status $status after $(python -c "print(round($t1 - $t0, 1))") s (limit $limit s)" >&2
done

# The kept copies (store, report, figure; no run directories) and their reports, written where they are kept.
python scripts/gpu_outputs.py keep "$OUT_DIR" "$timing" gpu-timing.json
