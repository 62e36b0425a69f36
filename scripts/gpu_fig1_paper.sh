#!/usr/bin/env bash
# Figure 1's deciding cells at the paper's size on one GPU, in calls of under 9 minutes each (issue 29): d = 64,
# N = 16, c = 1, FFN 2048, batch 256, lr 0.01, layers starting as copies, L = 1 and L = 3, r in {64, 32, 8}, with TF32
# matmuls (matmul_precision=high) and an fp32 control (highest) of the first seed beside every TF32 cell.
#
# REGIME=paper (the default; issue 47) trains the fig1 paper scale's cells: the paper's regime, one initialisation
# and data seeds 0-2, each run replaying one fixed set of 100 batches drawn by the reference's sampler (drawn once on
# the CPU, bitwise the reference's, and moved to the GPU), the learning rate stepped once per epoch (warm-up 50 of 1000
# epochs). REGIME=fresh trains the fig1 fresh scale's cells instead (fresh batches every step, initialisation seeds
# 0-2, per-step warm-up 5000 of 100k), with the device path: batches drawn on the GPU (--set sampler=device). Either
# way the step is captured as a CUDA graph (capture=graph):
#   CALL=1  L = 3, TF32, r x seeds 0-2 (9 runs, one pack)    projected  93 s of GPU time at 2x the matmul time
#   CALL=2  L = 3, fp32 control, r x seed 0 (3 runs)          projected 248 s
#   CALL=3  L = 1, TF32 (9 runs) and its fp32 control (3 runs) projected  31 s + 83 s
#           (REGIME=paper: CALL=3 the TF32 group, CALL=5 its fp32 control; each report adds a figure, and a call
#           brings back at most 8 files)
# (benchmarks/bench_device_step.py's FLOP model at issue 29's assumed H200 rates, TF32 400 / fp32 50 TFLOP/s, for the
# fresh regime's step; all nine fp32 L = 3 runs would need 745 s at 2x, more than a call.)
#
# A call cannot resume what an earlier call started (each gets a fresh machine) and at most 8 files of 16 MiB come
# back from $OUT, so each call trains whole runs and brings back stores, reports and figures, never checkpoints. Each
# group's runs are one pack in one process (`attnrank.train_packed`, each run in the run directory `attnrank sweep`
# gives it), under a time limit (BUDGET_S); its finished runs are then recorded in the group's store by one
# `attnrank sweep fig1 --scale SCALE --only ...` driver per run (each finds its run finished), so the store and report
# are the sweep's own.
#
# REGIME=replay trains the fig1-d64-replay preset's paper-scale runs (issue 38: the paper's data regime with the
# per-step warm-up its CPU store was started with); CALL=4 trains them:
#   CALL=4  REGIME=replay: L = 3 at r = 32 (data seeds 0, 1) and r = 64 (3 runs, one pack), then L = 1 r = 32, TF32
#
# Usage (repository root):
#   CALL=1 scripts/gpu_fig1_paper.sh [OUT_DIR]          # on the GPU machine; OUT_DIR defaults to $OUT, else runs/
#   DRY_RUN=1 WORK_DIR=/tmp/w scripts/gpu_fig1_paper.sh /tmp/o   # CPU rehearsal of every call: 2 steps, batch 2, FFN 8
# Environment: CALL (1, 2, 3; REGIME=paper also 5; REGIME=replay: 4; DRY_RUN: "all" by default), REGIME (paper | fresh | replay), STEPS
# (100000: the whole schedule; fewer trains a prefix; >= 100 in the replayed regimes, one pass over the set),
# BUDGET_S (420: seconds of training per call, shared by its groups in order), CAPTURE (graph | compile | none),
# BENCH (0; 1 runs the step benchmark first, its table into OUT_DIR), WORK_DIR (runs/gpu-fig1-paper: run directories
# with checkpoints, never copied), DRY_RUN (0).
# Writes OUT_DIR/fig1-paper-<group>/{results.sqlite, report.md, fig1-<scale>.png} per group, OUT_DIR/timing.json
# (per group: wall seconds, limit, stopped, runs finished) and OUT_DIR/gpu.txt (device, torch, revision).
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="${PYTHONPATH:+$PYTHONPATH:}$(pwd)"
DRY_RUN="${DRY_RUN:-0}"
REGIME="${REGIME:-paper}"
OUT_DIR="${1:-${OUT:-runs/gpu-fig1-paper-out}}"
WORK_DIR="${WORK_DIR:-runs/gpu-fig1-paper}"
STEPS="${STEPS:-100000}"
BUDGET_S="${BUDGET_S:-420}"
CAPTURE="${CAPTURE:-graph}"
BENCH="${BENCH:-0}"

fail() { echo "gpu_fig1_paper.sh: error: $1" >&2; exit 2; }
[[ "$DRY_RUN" == 0 || "$DRY_RUN" == 1 ]] || fail "DRY_RUN must be 0 or 1, got '$DRY_RUN'"
# The timing lines are JSON written by printf: a path with a quote or a backslash would break them.
[[ "$WORK_DIR" != *[\"\\]* ]] || fail "WORK_DIR must not contain a double quote or a backslash, got '$WORK_DIR'"
[[ "$REGIME" == paper || "$REGIME" == fresh || "$REGIME" == replay ]] \
  || fail "REGIME must be paper, fresh or replay, got '$REGIME'"
if [[ "$DRY_RUN" == 1 ]]; then CALL="${CALL:-all}"; else CALL="${CALL:-}"; fi
export SCALE=paper  # read by scripts/fig1_paper_cells.py, with PRESET
[[ "$REGIME" == fresh ]] && SCALE=fresh
if [[ "$REGIME" == replay ]]; then
  export PRESET=fig1-d64-replay
  case "$CALL" in
    4|all) [[ "$CALL" == 4 || "$DRY_RUN" == 1 ]] || fail "CALL=all is a rehearsal only (DRY_RUN=1)"
           GROUPS_OF_CALL="R3-tf32 R1-tf32" ;;
    *) fail "CALL must be 4 with REGIME=replay (or all with DRY_RUN=1), got '$CALL'" ;;
  esac
else
  export PRESET=fig1
  # The paper scale's report draws a second figure per group (the paper's statistic beside the population error), so
  # its L = 1 groups take a call each (4 files a group; a call brings back 8): CALL=3 and CALL=5.
  calls="1, 2 or 3"
  [[ "$REGIME" == paper ]] && calls="1, 2, 3 or 5"
  case "$CALL" in
    1) GROUPS_OF_CALL="L3-tf32" ;;
    2) GROUPS_OF_CALL="L3-fp32" ;;
    3) GROUPS_OF_CALL="L1-tf32 L1-fp32"; [[ "$REGIME" == paper ]] && GROUPS_OF_CALL="L1-tf32" ;;
    5) [[ "$REGIME" == paper ]] || fail "CALL must be $calls with REGIME=$REGIME, got '5'"
       GROUPS_OF_CALL="L1-fp32" ;;
    all) [[ "$DRY_RUN" == 1 ]] || fail "CALL=all is a rehearsal only (DRY_RUN=1); a GPU call is CALL=$calls"
         GROUPS_OF_CALL="L3-tf32 L3-fp32 L1-tf32 L1-fp32" ;;
    *) fail "CALL must be $calls with REGIME=$REGIME (or all with DRY_RUN=1; 4 with REGIME=replay), got '$CALL'" ;;
  esac
fi
[[ "$STEPS" =~ ^[1-9][0-9]*$ ]] && (( STEPS <= 100000 )) || fail "STEPS must be an integer in [1, 100000], got '$STEPS'"
if [[ "$REGIME" != fresh && "$DRY_RUN" == 0 ]] && (( STEPS < 100 )); then
  fail "STEPS must be >= 100 with REGIME=$REGIME (one pass over the 100-batch set), got '$STEPS'"
fi
[[ "$BUDGET_S" =~ ^[1-9][0-9]*$ ]] || fail "BUDGET_S must be an integer >= 1 (seconds), got '$BUDGET_S'"
[[ " none graph compile " == *" $CAPTURE "* ]] || fail "CAPTURE must be none, graph or compile, got '$CAPTURE'"
[[ "$BENCH" == 0 || "$BENCH" == 1 ]] || fail "BENCH must be 0 or 1, got '$BENCH'"

SAMPLER=()   # the paper and replay regimes keep the preset's reference sampler
[[ "$REGIME" == fresh ]] && SAMPLER=(--set sampler=device)
SETS=("${SAMPLER[@]}" --set "capture=$CAPTURE" --set "steps=$STEPS" --set checkpoint_every=10000)
if [[ "$DRY_RUN" == 1 ]]; then
  # Every run keeps its shape but for FFN width and batch; 2 steps; on the CPU (a replayed set of 1 batch).
  SETS=("${SAMPLER[@]}" --set "capture=$CAPTURE" --set steps=2 --set batch_size=2 --set ffn_dim=8
        --set log_every=1 --set checkpoint_every=1 --set device=cpu)
  [[ "$REGIME" != fresh ]] && SETS+=(--set train_batches=1)
fi
mkdir -p "$OUT_DIR" "$WORK_DIR"
python scripts/gpu_outputs.py machine "$OUT_DIR/gpu.txt" "$DRY_RUN" \
  "regime $REGIME ($PRESET, scale $SCALE); call $CALL; groups $GROUPS_OF_CALL"
if [[ "$BENCH" == 1 ]]; then
  bench_device=cuda; bench_extra=(--ks 1 9 --precision high)
  [[ "$DRY_RUN" == 1 ]] && { bench_device=cpu; bench_extra=(--ks 1 --tiny --repeats 1); }
  python benchmarks/bench_device_step.py --device "$bench_device" "${bench_extra[@]}" --no-cpu-cell \
    --record "$OUT_DIR" >&2
fi

started=$(date +%s)
set -- $GROUPS_OF_CALL
left=$#
timing="$WORK_DIR/timing.jsonl"
: > "$timing"
for group in $GROUPS_OF_CALL; do
  case "$group" in
    L3-tf32) layers=3; precision=high; seeds="0 1 2" ;;   # data seeds in the paper regime
    L3-fp32) layers=3; precision=highest; seeds="0" ;;
    L1-tf32) layers=1; precision=high; seeds="0 1 2" ;;
    L1-fp32) layers=1; precision=highest; seeds="0" ;;
    R3-tf32) layers=3; precision=high; seeds="0 1" ;;   # data seeds (the replay preset's runs share seed 0)
    R1-tf32) layers=1; precision=high; seeds="0" ;;
  esac
  sweep_dir="$WORK_DIR/fig1-paper-$group"
  group_sets=("${SETS[@]}" --set "matmul_precision=$precision")
  spent=$(( $(date +%s) - started ))
  limit=$(( (BUDGET_S - spent) / left ))
  (( limit >= 1 )) || limit=1
  left=$(( left - 1 ))
  t0=$(date +%s.%N)
  status=0
  # The group's runs as one pack, in the run directories the sweep gives them (runs/<config hash>).
  timeout --kill-after=20 "$limit" python scripts/fig1_paper_cells.py train "$sweep_dir" "$layers" "$seeds" \
    "${group_sets[@]}" > "$sweep_dir.train.json" 2> "$sweep_dir.train.err" || status=$?
  # Record each finished run in the group's store: one sweep driver per run (disjoint --only selections), each of
  # which finds its run finished; a run the pack did not finish is left out (its driver would train it).
  drivers=()
  seed_field=seed
  [[ "$REGIME" != fresh ]] && seed_field=data_seed
  while read -r rank seed; do
    python -m experiments.cli.main sweep "$PRESET" --scale "$SCALE" --out "$sweep_dir" "${group_sets[@]}" --workers 1 \
      --no-pack --only "layers=$layers" --only width=1 --only "rank=$rank" --only "$seed_field=$seed" --no-progress --json \
      > "$sweep_dir.record-r$rank-s$seed.json" 2>> "$sweep_dir.record.err" &
    drivers+=($!)
  done < <(python scripts/fig1_paper_cells.py finished "$sweep_dir" "$layers" "$seeds" "${group_sets[@]}")
  for pid in "${drivers[@]}"; do wait "$pid" || echo "$group: a recording driver exited with $?" >&2; done
  t1=$(date +%s.%N)
  printf '{"key": "%s", "sweep_dir": "%s", "keep_as": "%s", "limit_s": %s, "start": %s, "end": %s, "status": %s, %s}\n' \
    "$group" "$sweep_dir" "fig1-paper-$group" "$limit" "$t0" "$t1" "$status" \
    '"missing": "no results store: no run of the group finished"' >> "$timing"
  echo "$group: pack exit status $status after $(python -c "print(round($t1 - $t0, 1))") s (limit $limit s)" >&2
done

# The kept copies (store, report, figure; no run directories), written where they are kept.
python scripts/gpu_outputs.py keep "$OUT_DIR" "$timing" timing.json
