#!/usr/bin/env bash
# Everything a swap of the bundled tiny model has to measure again, in one background run on a
# 2-core CPU machine: put CANDIDATE's weights in dllm_viz/assets/tiny, retrain the TSPD controller
# and the Learn2PD filter for them, re-measure issue #19's item 5, recalibrate AdaBlock's tau_D,
# CORA's (delta_p, m) and TSPD's tau_fix (with CE), the easy split and ParallelBench's curves, count the floors' slices, and run
# the bundled model's tests.
#
# Why one script: sessions 15 and 18 each spent a session doing these by hand, one at a time; they
# are 35-45 minutes of two one-thread lanes that need nobody (the nine-layer model: 74 minutes, then 23 for
# the long chains' lanes, session 48; the three-family calibrations since session 49 add ~40-60, run
# last; session 56's swap: 100 minutes before them). Each step leaves a marker in RUN and is skipped when
# its marker exists; a bench or calibration cut short continues from its rows (--resume), and a
# controller its trajectories, so after an interruption the same command carries on. What stays
# by hand: merging the candidate's MODEL_CARD.md into the bundled one, the numbers into BENCHMARKS.md and
# docs/TESTBED.md, the floors in tests/test_bundled_model.py from RUN/floors.log (RUN/tests.log
# says whether the old ones still hold), and RUN/bundled_bench/* (the new model's dense rows on item
# 5 and AdaBlock's on its long chains) over training/bundled_bench/'s, which the next candidates are paired with.
#
#   CANDIDATE=training/hard_export nohup bash tools/swap_model.sh > runs/swap.log 2>&1 &
#   tail -f runs/swap/progress.log      # one line a step; the tables are in RUN/*.summary
#
# A dry run checks the plumbing in ~3 minutes without touching the shipped files (no CANDIDATE, the
# controller steps marked done so the shipped controllers are not retrained, 2 problems a family):
#   mkdir -p /tmp/dry && touch /tmp/dry/controller_{tspd,learn2pd}.done
#   RUN=/tmp/dry N_HARD=2 N_EASY=2 bash tools/swap_model.sh
# Nothing else should run beside it (two lanes use both cores; a third process slows every lane
# and the wall-speedup columns measure the contention). Without CANDIDATE it measures the model
# already bundled (e.g. to finish a run whose copy step is done). Knobs (environment): RUN (default
# runs/swap), N_HARD problems per hard family (default 100: item 5's 200, and the calibrations'
# 50 + 50 of each family), N_EASY (default 200), SKIP_CALIBRATE=1 to leave the calibrations out.
set -uo pipefail
cd "$(dirname "$0")/.."
source tools/bench_rows.sh
RUN=${RUN:-runs/swap}; N_HARD=${N_HARD:-100}; N_EASY=${N_EASY:-200}
export OMP_NUM_THREADS=1 PYTHONUNBUFFERED=1
mkdir -p "$RUN"
log() { echo "$(date -u +%H:%M:%S) $*" | tee -a "$RUN/progress.log"; }
# step <name> <command...>: run it unless RUN/<name>.done exists; output in RUN/<name>.log.
step() {
    local name=$1; shift
    if [[ -f "$RUN/$name.done" ]]; then log "$name: done before, skipped"; return 0; fi
    log "$name: start"
    if "$@" > "$RUN/$name.log" 2>&1; then touch "$RUN/$name.done"; log "$name: done"
    else log "$name: FAILED (exit $?, $RUN/$name.log)"; return 1; fi
}

# bench_into <out> <bench options...>: bench into <out>, continuing the rows a run cut short left there.
bench_into() {
    local out=$1 resume=(); shift
    [[ -f "$out" ]] && resume=(--resume)
    python -m dllm_viz bench "$@" --out "$out" "${resume[@]}"
}
# joined <name> <part> <part> <bench options of the whole run...>: the two halves merged into
# RUN/<name>.csv (tools/merge_bench.py) and summarised from it into RUN/<name>.summary (no decoding).
joined() {
    local name=$1 first=$2 second=$3; shift 3
    merge_rows "$RUN/$name.csv" "$first" "$second" && summarise_rows "$RUN/$name.csv" "$@" > "$RUN/$name.summary"
}
# in_halves <name> <n> <bench options...>: the options' problems 0..n-1 benched in two one-thread lanes
# (steps <name>_0 and <name>_<n/2>, into RUN/<name>_0.csv and RUN/<name>_<n/2>.csv), then joined into
# RUN/<name>.csv and summarised (step <name>_summary) once both are done.
in_halves() {
    local name=$1 n=$2 half=$(($2 / 2)); shift 2
    step "${name}_0" bench_into "$RUN/${name}_0.csv" "$@" --n "$half" &
    step "${name}_$half" bench_into "$RUN/${name}_$half.csv" "$@" --skip "$half" --n "$((n - half))" &
    wait
    [[ -f "$RUN/${name}_0.done" && -f "$RUN/${name}_$half.done" ]] && step "${name}_summary" \
        joined "$name" "$RUN/${name}_0.csv" "$RUN/${name}_$half.csv" "$@" --n "$n"
}

if [[ -n "${CANDIDATE:-}" ]]; then
    [[ -f "$CANDIDATE/model.safetensors" ]] || { log "CANDIDATE=$CANDIDATE holds no model.safetensors"; exit 2; }
    # The card is merged by hand (its history and accuracy sections); the files outputs depend on are copied.
    for file in config.json generation_config.json model.safetensors tokenizer.json tokenizer_config.json; do
        cp "$CANDIDATE/$file" dllm_viz/assets/tiny/"$file"
    done
    log "copied $CANDIDATE's weights, config and tokenizer into dllm_viz/assets/tiny (MODEL_CARD.md by hand)"
fi

# controller <kind>: retrained by the recipe its shipped card records (tasks, prompts, canvas, block, epochs, rollouts).
controller() {
    local kind=$1 weights=dllm_viz/assets/controllers/$1_tiny.safetensors recipe resume=() tasks=()
    # An interrupted run kept its dense trajectories (checked against the weights' fingerprint on reuse).
    [[ -d "${weights%.safetensors}.trajectories" ]] && resume=(--resume)
    recipe=$(python -c 'import json, sys; c = json.load(open(sys.argv[1])); k = c["config"]
print(c["prompts"], k["gen_length"], k["block_length"], k["epochs"], k["rollouts"], c.get("tasks") or "")
' "${weights%.safetensors}.json") || return 1
    read -r n gen block epochs rollouts card_tasks <<< "$recipe"
    # A card from before train-controller --tasks names none: its default (the tasks those were trained on).
    [[ -n "$card_tasks" ]] && tasks=(--tasks "$card_tasks")
    python -m dllm_viz train-controller --kind "$kind" "${tasks[@]}" --n "$n" --gen-length "$gen" \
        --block-length "$block" --epochs "$epochs" --rollouts "$rollouts" --out "$weights" --force --threads 1 \
        "${resume[@]}"
}
step controller_tspd controller tspd &
step controller_learn2pd controller learn2pd &
wait

# Item 5 (BENCHMARKS.md "Summary: the hard split", session 18's command), one family a lane, then the long
# chains.
ITEM5=(--model tiny --gen-length 256 --block-length 32 --threads 1
       --policies 'dense,threshold,cora,cora+kalman,threshold+kalman,tspd,tspd+kalman,adablock+threshold,threshold+dual'
       --sweep 'threshold(threshold=0.5:0.99:6)')
step item5_chain bench_into "$RUN/item5_chain.csv" "${ITEM5[@]}" --tasks hard/chain --n "$N_HARD" &
step item5_breadth bench_into "$RUN/item5_breadth.csv" "${ITEM5[@]}" --tasks hard/breadth --n "$N_HARD" &
wait
[[ -f "$RUN/item5_chain.done" && -f "$RUN/item5_breadth.done" ]] && step item5_summary \
    joined item5 "$RUN/item5_chain.csv" "$RUN/item5_breadth.csv" "${ITEM5[@]}" --tasks hard/chain,hard/breadth \
    --n "$N_HARD" --plot "$RUN/item5_frontier.html"
# The long chains (depth at length, in the split's mix since session 48), half the problems a lane: on
# their own (RUN/item5_long.summary) and with the two families above (RUN/item5_all.summary), so that
# item 5 reads both over the 200 problems every earlier model was measured on and over all three.
in_halves item5_long "$N_HARD" "${ITEM5[@]}" --tasks hard/long
[[ -f "$RUN/item5_summary.done" && -f "$RUN/item5_long_summary.done" ]] && step item5_all_summary \
    joined item5_all "$RUN/item5.csv" "$RUN/item5_long.csv" "${ITEM5[@]}" --tasks hard/chain,hard/breadth,hard/long \
    --n "$N_HARD" --plot "$RUN/item5_all_frontier.html"
# Item 5's dense rows alone, and AdaBlock's on the long chains, the bundled model's rows a candidate is
# paired with (tools/judge_candidate.sh ITEM5=1 and ADA=1, training/bundled_bench/README.md): copied there
# by hand with the rest.
bundled_rows() {
    local set
    for set in chain breadth; do
        merge_rows "$RUN/bundled_bench/item5_$set.csv" "$RUN/item5_$set.csv" --configs dense || return 1
    done
    merge_rows "$RUN/bundled_bench/item5_long_ada.csv" "$RUN/item5_long.csv" --configs dense,adablock+threshold
}
[[ -f "$RUN/item5_summary.done" && -f "$RUN/item5_long_summary.done" ]] && step bundled_rows bundled_rows

# The easy split at gen 128 (the >= 98% dense target, and the controllers on held-out arithmetic),
# half the problems a lane.
EASY=(--model tiny --tasks arith --gen-length 128 --block-length 32 --threads 1
      --policies dense,threshold,tspd,learn2pd)
in_halves easy "$N_EASY" "${EASY[@]}"

# ParallelBench against its closed forms (BENCHMARKS.md), then the bundled model's own tests.
curves() {
    for op in copy replace_index shuffle replace_random; do
        python -m dllm_viz.tasks.parallelbench_theory --op "$op" --n 5 --model tiny --problems 16 || return 1
    done
}
step parallelbench curves
# The regression slices' counts behind the floors in tests/test_bundled_model.py, and the code set's first
# 40 (the card's row, one decode with the floor's 20), for the floors' comments and the card.
step floors python tools/floor_counts.py
step tests python -m pytest -q tests/test_bundled_model.py tests/test_controllers.py

# The calibrations (docs/TESTBED.md, "Recalibrating a family default"): on the three families of item
# 5 (the long chains since session 49), dense from item 5's rows of all three, so each measures its grid
# points only. Last, since session 56: at ~45-60 minutes they are the longest steps, and the swap's own
# measurements (easy split, floors, tests) are what a commit of the new weights needs first; a session
# that ends during them resumes their rows. TSPD's grid spans both sides of the paper's 0.5: the gate's
# scale is the retrained controller's (step 112000's: 0.6 with the hard-split controller, session 57; the
# arith-and-code one committed everything below 0.46, session 56).
calibrate() {
    local policy=$1 grid=$2 name=$3 resume=() half=$((N_HARD / 2))
    [[ -f "$RUN/${name}_rows.jsonl" ]] && resume=(--resume)
    rm -f "$RUN/$name.json"  # written at the end only; a run cut short left none, a finished one is marked done
    python -m dllm_viz calibrate --model tiny --policy "$policy" --grid "$grid" \
        --tasks hard/chain,hard/breadth,hard/long --n "$half" --check-n "$half" --gen-length 256 --block-length 32 \
        --threads 1 --dense-rows "$RUN/item5_all.csv" --rows "$RUN/${name}_rows.jsonl" --out "$RUN/$name.json" \
        "${resume[@]}"
}
if [[ -z "${SKIP_CALIBRATE:-}" && -f "$RUN/item5_all_summary.done" ]]; then
    step calibrate_cora calibrate cora 'delta_p=0.97,0.99,0.995,0.999;m=1,2' cora_calibration &
    { step calibrate_adablock calibrate 'adablock+threshold' 'delimiter_threshold=0.1,0.5,0.9' \
        adablock_calibration; step calibrate_tspd calibrate 'tspd+kalman' 'tau_fix=0.3,0.4,0.5,0.6,0.7' \
        tspd_calibration; } &
    wait
fi
log "finished: tables in $RUN/*.summary, $RUN/*_calibration.log, $RUN/parallelbench.log, $RUN/floors.log (with the card's code row), $RUN/tests.log"
