#!/usr/bin/env bash
# One training stage of the bundled model on a lent GPU, measured before anyone decides to ship it.
#
# Why one script: a GPU is lent to some sessions only, for ~15 device minutes in all, and each call
# costs a machine start. One call of the device tool runs this whole script: it continues INIT
# (below) on the hard mix (docs/TESTBED.md), packs the export, benches it and the bundled
# model on the same problems (dense and threshold 0.9: the split that decides a swap, BENCHMARKS.md
# "Summary: the hard split"; tools/compare_models.py pairs the two by problem), runs the `gpu`
# tests, and leaves at most 8 files in $OUT (the device tool's limit): export.tar, the two last
# snapshots before it (snapshot_<step>.tar: checkpoints a few thousand CPU steps apart have differed by
# tens of points on the chains, so a CPU session benches them too before choosing), bench.tar,
# train.log, bench.log, summary.txt, gpu_tests.log. The `gpu` tests run beside the training (the tiny
# model leaves most of the card idle) so that a bench cut short by the deadline cannot starve them.
#
#   bash tools/device_wheels.sh   # here, first: the wheels the device's image lacks, into .whl/
#   run(command="bash tools/gpu_stage.sh", carry=[".whl"], timeout_s=600)
#
# A dry run on CPU checks the plumbing in ~5 minutes (no export: minutes of CPU never beat the starting
# model's held-out score, so only the bundled model is benched):
#   OUT=/tmp/stage DEVICE=cpu MINUTES=0.5 WORKERS=0 BATCH=8 N_HARD=2 N_EASY=2 SHARDS=2 bash tools/gpu_stage.sh
# and with INIT set to a weak export (e.g. one from `train-tiny --minutes 0.2 --hidden-size 32
# --num-layers 1 --num-heads 2 --intermediate-size 64 --export-dir /tmp/weak`) the stage beats it, so the export branch
# (export.tar, the stage's benches, tools/compare_models.py) runs too.
# Knobs (environment): MINUTES of training (default 5), BENCH_S (seconds the benches may take in
# all: past it they stop and what they wrote comes back; default 180: with 5 minutes of training it
# fits one 600 s call, as session 28's 5.5 + 150 s did in 548 s), INIT (the export to continue;
# default training/hard_export, the candidate a CPU session left, when it holds a model, else the
# bundled model; the benches always set the stage against the bundled one), DEVICE, WORKERS (batch
# builders), BATCH (word problems a step), GROW (layers added at the warm start, each starting as the
# identity: train-tiny --grow-layers; 0 keeps the depth), SEED, LR (default 1e-3: the bundled model's
# CPU stages peaked at 3e-4 to 5e-4 on batches of 32, and 1e-3 there cost 2-4 points of held-out
# score at the peak; 8x the rows a step allows about sqrt(8) times the rate; session 28's stage at
# 1e-3 dipped 1 point and gained 0.7), HARD_WEIGHT (space-separated `train-tiny --hard-weight
# FAMILY=WEIGHT`s, e.g. "hard/chain=0.5 parallelbench/sort=0.15 parallelbench/shuffle=0.15", the
# binding recipe of session 29; empty keeps the held-out mix), LIST_BATCH (rows of a list drill
# step, default BATCH), EVAL_EVERY and SNAPSHOT_EVERY (steps), N_HARD
# problems per hard family and N_EASY easy arithmetic problems (held out, the first ones), N_LONG
# hard/long problems (default 0: no bench; a stage that trains on it, HARD_WEIGHT "... hard/long=0.4",
# benches both models on it at gen 256 too), SHARDS
# processes per bench (problems are split by --skip and joined with tools/merge_bench.py), TESTS_S
# (seconds the `gpu` tests may take, beside the training and the benches; default 460).
set -uo pipefail
: "${OUT:?set OUT to the folder whose files come back}"
mkdir -p "$OUT"  # the device makes it; a dry run here may name a new folder
DEVICE=${DEVICE:-cuda}; MINUTES=${MINUTES:-5}; WORKERS=${WORKERS:-14}; BATCH=${BATCH:-256}
LIST_BATCH=${LIST_BATCH:-$BATCH}
if [[ -z "${INIT:-}" ]]; then
    INIT=dllm_viz/assets/tiny; [[ -f training/hard_export/model.safetensors ]] && INIT=training/hard_export
fi
GROW=${GROW:-0}; SEED=${SEED:-20}; LR=${LR:-1e-3}; HARD_WEIGHT=${HARD_WEIGHT:-}
EVAL_EVERY=${EVAL_EVERY:-250}; SNAPSHOT_EVERY=${SNAPSHOT_EVERY:-1000}; BENCH_S=${BENCH_S:-180}; TESTS_S=${TESTS_S:-460}
N_HARD=${N_HARD:-100}; N_EASY=${N_EASY:-200}; N_LONG=${N_LONG:-0}; SHARDS=${SHARDS:-4}
SETS=(chain breadth arith); [[ $N_LONG -gt 0 ]] && SETS+=(long)
export PYTHONUNBUFFERED=1
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
cd "$(dirname "$0")/.."
source tools/bench_rows.sh
command -v python > /dev/null || python() { python3 "$@"; }  # the image's interpreter is python3
# The device's image has its own torch / transformers (last seen 2.11 / 5.17, requirements.txt pins
# 2.13 / 5.24) and no diffusers: wheels downloaded here by tools/device_wheels.sh and carried as .whl
# go in first, then the versions are named, so a failure below can be told from a version gap.
: > "$OUT/summary.txt"
if compgen -G ".whl/*.whl" > /dev/null; then
    python -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
        && export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH} || echo "wheel install from .whl failed" >> "$OUT/summary.txt"
fi
python -c "import sys, torch, transformers; print('python', sys.version.split()[0], 'torch', torch.__version__,
  'transformers', transformers.__version__, 'cuda', torch.cuda.is_available())" >> "$OUT/summary.txt" 2>&1

TESTS_PID=
if [[ $DEVICE == cuda* ]]; then
    # Only the files that hold `gpu` tests: the others import the app's packages (streamlit, plotly),
    # which the image lacks, and one collection error stops pytest before any test runs. The
    # LLaDA-8B-shaped test is left out: it takes minutes and session 9 ran it. -v logs each test's
    # result as it ends: a run stopped at TESTS_S prints no summary (session 28 saw only '.F').
    # test_policy_bench_on_cuda takes ~120 s alone but did not finish beside the training in 460 s
    # (session 30, which then ran it alone on the warm machine: -k test_policy_bench_on_cuda).
    timeout "$TESTS_S" python -m pytest -m gpu -v -s -k "not 8b" $(grep -l 'mark.gpu' tests/*.py) \
        > "$OUT/gpu_tests.log" 2>&1 &
    TESTS_PID=$!
fi
hard_weight=(); for weight in $HARD_WEIGHT; do hard_weight+=(--hard-weight "$weight"); done
python -m dllm_viz train-tiny --init-from "$INIT" --out "$WORK/run" --export-dir "$WORK/export" \
    --minutes "$MINUTES" --hard-fraction 0.6 --code-fraction 0.1 --drill-every 3 --list-drill-every 3 \
    --lr "$LR" --warmup-steps 200 --seed "$SEED" --device "$DEVICE" --data-workers "$WORKERS" \
    --batch-size "$BATCH" --drill-batch-size $((BATCH * 2)) --list-drill-batch-size "$LIST_BATCH" --grow-layers "$GROW" \
    --eval-every "$EVAL_EVERY" --snapshot-every "$SNAPSHOT_EVERY" "${hard_weight[@]}" \
    > "$OUT/train.log" 2>&1 || echo "train-tiny failed: see train.log" >> "$OUT/summary.txt"
# The two last snapshots other than the exported step, one tar each (a tar of all would pass the
# device tool's 16 MiB a file).
export_step=$(sed -n 's/^done: .*best step \([0-9]*\).*/\1/p' "$OUT/train.log" | tail -1)
for snap in $(ls -d "$WORK"/run/snapshots/step_* 2>/dev/null | sort -V | grep -v "step_${export_step:-none}\$" | tail -2); do
    tar -cf "$OUT/snapshot_${snap##*step_}.tar" -C "$(dirname "$snap")" "$(basename "$snap")"
done
if [[ ! -f "$WORK/export/model.safetensors" ]]; then
    echo "no export: the stage never beat its starting model's held-out score ($INIT; train.log's eval lines)" \
        >> "$OUT/summary.txt"
    MODELS=(tiny); TAGS=(bundled)
else
    tar -cf "$OUT/export.tar" -C "$WORK" export
    MODELS=(tiny "$WORK/export"); TAGS=(bundled stage)
fi

# bench <label> <model> <task> <n> <gen length>: SHARDS processes over disjoint slices, then merged,
# each command stopped at the benches' deadline (a stopped shard keeps the rows it wrote). One torch
# thread a process: session 28's 24 bench processes on the 16 cores each took torch's default of 16
# threads and got through 37 of 100 chain problems in 150 s (~60 ms a pass of the tiny model).
deadline=$((SECONDS + BENCH_S))
left() { echo $(( deadline - SECONDS > 1 ? deadline - SECONDS : 1 )); }
bench() {
    local label=$1 model=$2 task=$3 n=$4 gen=$5 per=$(( ($4 + SHARDS - 1) / SHARDS )) parts=() pids=()
    local common=(--model "$model" --device "$DEVICE" --tasks "$task" --gen-length "$gen" --block-length 32
                  --policies dense,threshold --dtype float32 --threads 1)
    for ((skip = 0; skip < n; skip += per)); do
        local part="$WORK/bench/${label}_${skip}.csv" size=$(( n - skip < per ? n - skip : per ))
        timeout "$(left)" python -m dllm_viz bench "${common[@]}" --skip "$skip" --n "$size" --out "$part" \
            > "$part.log" 2>&1 &
        pids+=($!); parts+=("$part")
    done
    wait "${pids[@]}"
    merge_rows "$WORK/bench/$label.csv" "${parts[@]}" >> "$OUT/bench.log" 2>&1
    { echo "== $label: $model, $task, n $n, gen $gen"
      SUMMARY_TIMEOUT=$(( $(left) + 20 )) summarise_rows "$WORK/bench/$label.csv" "${common[@]}" --skip 0 --n "$n" 2>&1
    } > "$WORK/bench/$label.summary"
}
mkdir -p "$WORK/bench"
benches=()  # waited for by id: a bare `wait` would reap the gpu tests too and lose their exit status
for i in "${!MODELS[@]}"; do
    bench "${TAGS[i]}_chain" "${MODELS[i]}" hard/chain "$N_HARD" 256 & benches+=($!)
    bench "${TAGS[i]}_breadth" "${MODELS[i]}" hard/breadth "$N_HARD" 256 & benches+=($!)
    bench "${TAGS[i]}_arith" "${MODELS[i]}" arith "$N_EASY" 128 & benches+=($!)
    if [[ $N_LONG -gt 0 ]]; then bench "${TAGS[i]}_long" "${MODELS[i]}" hard/long "$N_LONG" 256 & benches+=($!); fi
done
wait "${benches[@]}"
for tag in "${TAGS[@]}"; do  # in a fixed order: the benches above finish in any
    for set in "${SETS[@]}"; do cat "$WORK/bench/${tag}_$set.summary" >> "$OUT/summary.txt"; done
done
if [[ ${#TAGS[@]} -gt 1 ]]; then  # the swap's evidence: the export against the bundled model, problem by problem
    for task in "${SETS[@]}"; do
        python tools/compare_models.py "$WORK/bench/bundled_$task.csv" "$WORK/bench/stage_$task.csv" \
            --names bundled stage >> "$OUT/summary.txt" 2>&1
    done
fi
cat "$WORK"/bench/*.log >> "$OUT/bench.log" 2>/dev/null
tar -cf "$OUT/bench.tar" -C "$WORK" bench

if [[ -n $TESTS_PID ]]; then
    wait "$TESTS_PID"
    echo "gpu tests: exit $? (gpu_tests.log)" >> "$OUT/summary.txt"
fi
cat "$OUT/summary.txt"
