#!/usr/bin/env bash
# Figure 1 on one GPU at a reduced schedule: fig1's paper scale, the paper's whole grid in the paper's regime (issue
# 47: 7 ranks x 3 widths x 3 depths x data seeds 0-4 with one initialisation = 315 runs, d = 64, N = 16, FFN 2048,
# batch 256, one fixed set of 100 reference-sampler batches replayed every epoch, the rate stepped per epoch; and the 6
# supplementary c = 64, L = 3 runs of batch 64), the first STEPS optimiser steps of each run's schedule (default 10000
# = 10% of the paper's 100k), the five data seeds of every cell trained together in one process (--batch-seeds: a
# seed pack, one step for all), WORKERS processes sharing the GPU. SCALE=fresh trains the same grid on fresh batches
# with five initialisation seeds instead (fig1's fresh scale). Records wall time, runs per second, the GPU, and writes
# the report with the figures.
#
# Usage (repository root):
#   scripts/gpu_fig1.sh [OUT_DIR]                 # on the GPU machine; OUT_DIR defaults to $OUT/fig1-gpu or runs/fig1-gpu
#   DRY_RUN=1 scripts/gpu_fig1.sh /tmp/fig1-dry   # CPU rehearsal: fig1 at scale quick with 5 steps (checks the plumbing)
# Environment: STEPS (10000; >= 100 at scale paper, one pass over the set), WORKERS (8), PRESET (fig1), SCALE (paper;
# fresh), DRY_RUN (0).
# Re-running the same command resumes: finished runs are skipped, a killed pack resumes from its checkpoints.
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="${PYTHONPATH:+$PYTHONPATH:}$(pwd)"
DEFAULT_OUT="${OUT:-runs}/fig1-gpu"
OUT_DIR="${1:-$DEFAULT_OUT}"
PRESET="${PRESET:-fig1}"
SCALE="${SCALE:-paper}"
STEPS="${STEPS:-10000}"
WORKERS="${WORKERS:-8}"
EXTRA=()
if [[ "${DRY_RUN:-0}" == "1" ]]; then
  SCALE=quick; STEPS=5; WORKERS=1; EXTRA=(--set device=cpu)
fi
CHECKPOINT=$(( STEPS / 10 > 0 ? STEPS / 10 : 1 ))
mkdir -p "$OUT_DIR"
{ command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader; } \
  > "$OUT_DIR/gpu.txt" 2>/dev/null || echo "no GPU (nvidia-smi not found)" > "$OUT_DIR/gpu.txt"
python -c "import torch; print('torch', torch.__version__, 'cuda', torch.cuda.is_available())" | tee -a "$OUT_DIR/gpu.txt"
start=$(date +%s.%N)
python -m experiments.cli.main sweep "$PRESET" --scale "$SCALE" --out "$OUT_DIR" --workers "$WORKERS" --batch-seeds \
  --set "steps=$STEPS" --set "checkpoint_every=$CHECKPOINT" "${EXTRA[@]}" --no-progress --json | tee "$OUT_DIR/sweep.json"
end=$(date +%s.%N)
python -m experiments.cli.main report "$OUT_DIR" --json | tee "$OUT_DIR/report.json"
python - "$OUT_DIR" "$start" "$end" "$STEPS" "$WORKERS" <<'PY'
import json, sys
out, start, end, steps, workers = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
sweep = json.load(open(f"{out}/sweep.json"))
wall = end - start
executed = sweep["runs"] - sweep["skipped"]
timing = {"wall_s": wall, "runs": sweep["runs"], "executed": executed, "runs_per_s": executed / wall,
          "steps": steps, "workers": workers, "failed": sweep["failed"], "gpu": open(f"{out}/gpu.txt").read().strip()}
json.dump(timing, open(f"{out}/timing.json", "w"), indent=2)
print(json.dumps(timing))
PY
