#!/usr/bin/env bash
# The fig1-d64-replay 100k-step runs (issue 47): start or resume them on this machine, and snapshot them into the
# repository. Run from the repository root.
#
#   bash scripts/replay_100k.sh start      # a worktree at the frozen revision, the carried runs restored, the
#                                          # drivers and the milestone watcher started in the background
#   bash scripts/replay_100k.sh snapshot   # store, curves, milestones, report, docs blocks, index, tutorials into
#                                          # the repository (then commit); add `carry` to also carry the
#                                          # unfinished runs' checkpoints (about 10 MB a run) into the store's carried/
#   bash scripts/replay_100k.sh stop       # stop the drivers and the watcher (they resume from their checkpoints)
#
# The runs train at the store's frozen revision (FROZEN below), one torch thread each, under jemalloc; re-running
# `start` after `stop` resumes them bitwise. WORK (default $HOME/replay-100k) holds the worktree, the sweep directory
# and the watcher's records: a machine's own folder, never committed.
set -euo pipefail
FROZEN=b0d12d9
STORE=results/fig1-d64-replay-cpu
WORK=${WORK:-$HOME/replay-100k}
TREE=$WORK/tree SWEEP=$WORK/sweep MILESTONES=$WORK/milestones
REPO=$(pwd)

drivers() {
    # A: L = 3 r = 32 data seed 0, then data seed 1; B: L = 3 r = 64, then L = 1 r = 32
    local run="python -m experiments.cli.main sweep fig1-d64-replay --scale cpu --out $SWEEP --workers 1 --no-pack --no-progress --set steps=100000"
    local env="OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 MPLBACKEND=Agg LD_PRELOAD=libjemalloc.so.2 MALLOC_CONF=dirty_decay_ms:-1,muzzy_decay_ms:-1 ATTNRANK_ALLOCATOR=jemalloc-applied"
    (cd "$TREE" && nohup env $env bash -c "$run --only layers=3 --only rank=32 --only data_seed=null; $run --only layers=3 --only rank=32 --only data_seed=1" >"$WORK/driverA.log" 2>&1 &)
    (cd "$TREE" && nohup env $env bash -c "$run --only rank=64; $run --only layers=1" >"$WORK/driverB.log" 2>&1 &)
    (cd "$TREE" && nohup env PYTHONPATH="$TREE" OMP_NUM_THREADS=1 nice -n 5 python "$REPO/scripts/milestone_evaluations.py" "$SWEEP" "$MILESTONES" --every 20000 --poll 30 >"$WORK/watcher.log" 2>&1 &)
}

case "${1:-}" in
start)
    mkdir -p "$WORK" "$MILESTONES"  # the watcher writes there (a dangling link here once cost it the 20k milestone)
    [ -d "$TREE" ] || git worktree add --detach "$TREE" "$FROZEN"
    if [ ! -d "$SWEEP" ]; then
        mkdir -p "$SWEEP"
        cp "$STORE/results.sqlite" "$SWEEP/"  # the store goes on: every earlier run stays in it
        [ -d "$STORE/carried" ] && python scripts/carry_runs.py restore "$STORE/carried" "$SWEEP"
    fi
    drivers
    echo "started: logs in $WORK"
    ;;
snapshot)
    python scripts/snapshot_store.py "$SWEEP" "$STORE"
    [ -d "$MILESTONES" ] && python scripts/collect_milestones.py "$MILESTONES" "$STORE"
    attnrank report "$STORE" >/dev/null  # again, now with milestones.csv
    if [ "${2:-}" = carry ]; then python scripts/carry_runs.py save "$SWEEP" "$STORE/carried"; fi
    attnrank report --index results >/dev/null
    attnrank report --docs . >/dev/null
    python scripts/execute_tutorials.py  # tutorial 03 reads this store
    git status --short
    ;;
stop)
    pkill -f "sweep fig1-d64-replay --scale cpu --out" || true
    pkill -f "milestone_evaluations.py" || true
    ;;
*)
    echo "usage: bash scripts/replay_100k.sh start | snapshot [carry] | stop" >&2
    exit 2
    ;;
esac
