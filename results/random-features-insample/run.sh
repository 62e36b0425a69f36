#!/usr/bin/env bash
# Issue 19, item 2: in-sample and exact population error of random rank-1 heads whose output weights are fitted on n
# Monte Carlo samples (attnrank construct random-features --fit-samples N), d = 8.
# Usage (from the repository root): results/random-features-insample/run.sh H SEED N [N ...]
#   N = 0 means no --fit-samples (the exact population optimum of the same heads).
# Appends one JSON object per call to results/random-features-insample/runs.jsonl: the command's --json output plus
# the exact command, wall seconds, peak resident memory (GNU time), load average before the call and git revision.
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
dir=results/random-features-insample
H=$1 SEED=$2
shift 2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for n in "$@"; do
  cmd=(attnrank construct random-features --d 8 --heads "$H" --seed "$SEED" --out "$tmp/rf.safetensors" --json)
  [ "$n" != 0 ] && cmd+=(--fit-samples "$n")
  load=$(cut -d' ' -f1-3 /proc/loadavg)
  OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 nice -n 10 /usr/bin/time -f '%e %M' -o "$tmp/time" "${cmd[@]}" >"$tmp/out.json"
  python - "$tmp/out.json" "$tmp/time" "$load" "${cmd[*]}" >>"$dir/runs.jsonl" <<'PY'
import json, subprocess, sys
out = json.load(open(sys.argv[1]))
wall, rss_kb = open(sys.argv[2]).read().split()[-2:]
out.pop("path", None)
out.update(
    command="OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 nice -n 10 " + sys.argv[4].replace(sys.argv[4].split("--out ")[1].split()[0], "rf.safetensors"),
    wall_s=float(wall), max_rss_mb=int(rss_kb) / 1024, loadavg_before=sys.argv[3],
    git_revision=subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip(),
)
print(json.dumps(out))
PY
  tail -n 1 "$dir/runs.jsonl"
  if [ "$n" = 0 ]; then cp "$tmp/rf.safetensors" "/tmp/rf_exact_H${H}_s${SEED}.safetensors"; fi  # for sandwich.py
done
