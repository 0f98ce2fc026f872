# Sourced, not run: how tools/gpu_stage.sh, tools/swap_model.sh and tools/judge_candidate.sh turn
# the rows of a bench split over lanes into one file and its summary.
#
# Why one file: each of the three shards a bench by --skip / --n over processes (one torch thread
# each) and then did the same two things in its own words: join the shards with
# tools/merge_bench.py, and print the summary by running bench again with the whole run's options
# and --resume, which finds every row done and decodes nothing. The three copies had drifted apart
# (two mixed stderr into the summary and filtered it with grep, one kept it apart; one hid bench's
# refusal of stale rows until session 39 fixed it); the rules live here once:
# - a merged file that exists is kept (finished results are never replaced; merge_bench.py refuses
#   to overwrite one anyway);
# - the summary is bench's stdout alone; its progress and "resuming" lines go to stderr, which is
#   shown (its last lines) only when bench fails, e.g. when it refuses rows decoded under other
#   weights, so that a caller stops with bench's own message instead of an empty summary.
#
#   source tools/bench_rows.sh   # from the repository root
#   merge_rows rows.csv parts/rows_0.csv parts/rows_100.csv
#   summarise_rows rows.csv --model tiny --tasks hard/chain --policies dense --skip 0 --n 200 > rows.summary

# merge_rows CSV PART...: the parts' rows, in the order given, into CSV unless CSV exists.
merge_rows() {
    local csv=$1; shift
    [[ -f $csv ]] && return 0
    python tools/merge_bench.py "$@" --out "$csv"
}

# summarise_rows CSV BENCH_OPTION...: bench's summary of CSV's rows on stdout (no decoding when every
# row of the options' problems is there), so a caller puts it where it wants, after a header of its
# own if it likes. SUMMARY_TIMEOUT (seconds), when set, bounds the call (tools/gpu_stage.sh's
# deadline). Returns bench's status; on failure bench's last stderr lines go to stderr, after a line
# naming the file they are about.
summarise_rows() {
    local csv=$1 errors status=0; shift
    errors=$(mktemp)
    local limit=(); [[ -n ${SUMMARY_TIMEOUT:-} ]] && limit=(timeout "$SUMMARY_TIMEOUT")
    "${limit[@]}" python -m dllm_viz bench "$@" --out "$csv" --resume 2> "$errors" || status=$?
    if [[ $status -ne 0 ]]; then
        echo "the summary of $csv failed (exit $status):" >&2
        grep -v '^\[[0-9]*/[0-9]*\] \|^resuming' "$errors" | tail -3 >&2
    fi
    rm -f "$errors"
    return "$status"
}
