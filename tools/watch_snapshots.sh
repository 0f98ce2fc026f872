#!/usr/bin/env bash
# Measure each snapshot of a training run as it appears, while the run goes on.
#
# Why: a CPU stage on the long chains (hard/long) runs for hours in the background, and its held-out
# score says nothing about them (hard/long is outside the mix), so each snapshot is measured on them:
# `diagnose`'s by-line table (how far down a chain each line's operation and result are still right,
# the lines above given: a low-noise signal on every line of 20 problems, though one pass with the lines
# above given can rank two snapshots opposite to their whole decodes, as session 39's did on the story
# chains; tools/judge_candidate.sh decides) and a dense + threshold 0.9
# bench of N_LONG problems at gen 256, blocks of 32 (accuracy and passes, BENCHMARKS.md's table). One
# thread. Beside a two-thread training run on two cores it slows the run several times over while it
# measures (docs/TESTBED.md, "give one run both cores"), so either start it after the run (any dead
# pid: it measures every snapshot and stops) or run it beside a one-thread run, with N_LONG=0 to keep
# to the by-line table (~35 s a snapshot; the dense bench of 16 long problems takes ~2 minutes).
#
#   nohup bash tools/watch_snapshots.sh runs/s36/long_train3 <train pid> > /dev/null 2>&1 &
#
# Writes RUN_DIR/watch/step_N.{lines,csv,log,done} and appends a line a snapshot to RUN_DIR/watch/summary.txt;
# a snapshot already measured is skipped, so a restarted watcher goes on where it stopped. It stops
# when the training process has ended and every snapshot is measured.
# Knobs (environment): N_LONG (default 16; 0: no bench), LINES_N (default 20), POLL_S (default 60).
set -euo pipefail

run_dir=${1:?usage: watch_snapshots.sh RUN_DIR TRAIN_PID}
train_pid=${2:?usage: watch_snapshots.sh RUN_DIR TRAIN_PID}
n_long=${N_LONG:-16}
lines_n=${LINES_N:-20}
poll_s=${POLL_S:-60}
watch="$run_dir/watch"
mkdir -p "$watch"

measure() {  # $1: a snapshot directory
  local snap=$1 name
  name=$(basename "$snap")
  python -m dllm_viz diagnose --model "$snap" --threads 1 --n 1 --ratios 1.0 --list-n 0 --lines-n "$lines_n" \
    > "$watch/$name.lines" 2> "$watch/$name.log" || echo "diagnose failed: $watch/$name.log" >> "$watch/summary.txt"
  if [ "$n_long" -gt 0 ]; then
    python -m dllm_viz bench --model "$snap" --tasks hard/long --n "$n_long" --policies dense,threshold \
      --gen-length 256 --block-length 32 --threads 1 --out "$watch/$name.csv" >> "$watch/$name.log" 2>&1 \
      || echo "bench failed: $watch/$name.log" >> "$watch/summary.txt"
  fi
  touch "$watch/$name.done"
  {
    echo "== $name $(date -u +%H:%M)"
    grep -E '^\| (by line|hard/)' "$watch/$name.lines" || true  # the story chains' rows warn of what a stage loses
    if [ "$n_long" -gt 0 ]; then
      grep -E '^ +accuracy|^(dense|threshold) ' "$watch/$name.log" | cut -c1-90 || tail -3 "$watch/$name.log"
    fi
  } >> "$watch/summary.txt"
}

while true; do
  running=0
  kill -0 "$train_pid" 2> /dev/null && running=1
  for snap in $(ls -d "$run_dir"/snapshots/step_* 2> /dev/null | sort -V); do
    [ -f "$watch/$(basename "$snap").done" ] && continue  # an export appears whole (renamed into place)
    measure "$snap"
  done
  [ "$running" = 1 ] || break
  sleep "$poll_s"
done
