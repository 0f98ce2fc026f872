#!/usr/bin/env bash
# Judge a CPU stage's snapshot against the candidate it continued, on the two chain sets that decide
# whether it replaces training/hard_export, problem by problem.
#
# Why: sessions 37 and 38 ran the same benches by hand after each stage, ~45 minutes of typing
# and waiting: the story chains dense (hard/chain 0-49: their accuracy swings by 8 problems between
# snapshots 1,000 steps apart) and the long chains dense and under threshold 0.9 (hard/long 0-63:
# 32 problems could not tell a halving from noise), for the snapshot AND for the starting model, then
# tools/merge_bench.py and tools/compare_models.py. The benches are deterministic (session 38's rerun
# of step 85000 reproduced session 37's rows exactly), so the starting model's rows are committed
# beside it (BASE_ROWS, default BASE/bench) and a run only decodes what is not there yet: the
# snapshot's rows, and the base's once after the candidate changes.
#
#   bash tools/judge_candidate.sh runs/s39/big/snapshots/step_87000 runs/s39/judge_87000
#
# Two lanes (both cores, one torch thread each): nothing else should run beside it, a training
# run least of all (docs/TESTBED.md, "give one run both cores"). ~10 minutes for a snapshot whose base
# rows exist (problems split into shards of 25 chains / 16 long ones). Writes OUT/{chain,long}.csv and
# .summary and OUT/judge.txt (both summaries and the paired comparison, printed at the end); a set
# whose merged csv exists is not decoded again, and a shard cut short continues from its rows
# (`bench --resume`), so after an interruption the same command carries on. Base rows decoded under
# other weights (a candidate replaced without its rows) stop it with bench's refusal.
# A dry run checks the plumbing in ~3 minutes (one lane, two problems a set, the bundled model judged
# against the candidate, rows kept out of the repository):
#   BASE_ROWS=/tmp/judge/base N_CHAIN=2 N_LONG=2 LANES=1 bash tools/judge_candidate.sh dllm_viz/assets/tiny /tmp/judge/cand
# ITEM5=1 also decides whether the candidate is worth a swap: it benches the candidate dense on issue
# #19 item 5's problems (hard/chain and hard/breadth 0 to N_ITEM5 - 1; the chains below N_CHAIN are the
# rows above) and pairs them with the bundled model's committed rows (BUNDLED_ROWS, default
# training/bundled_bench, whose README says how they were made): ~13 more minutes at the default 100.
# Dry run of that part (~3 minutes, the committed bundled rows paired on their first problems):
#   BASE_ROWS=/tmp/judge/base N_CHAIN=2 N_LONG=2 ITEM5=1 N_ITEM5=3 LANES=1 bash tools/judge_candidate.sh dllm_viz/assets/tiny /tmp/judge/cand
# ADA=1 adds item 5's AdaBlock claim on the long chains, where AdaBlock + threshold 0.9 trails dense by ~25
# points (BENCHMARKS.md, sessions 49-51): the candidate under it on hard/long 0 to N_ADA - 1, paired with the
# bundled model's committed rows (BUNDLED_ROWS/item5_long_ada.csv), dense beside it (bench's baseline): ~15
# more minutes at the default 100 (sessions 50 and 51 ran it by hand, the bundled model's rows each time too).
# PROMOTE=NOTE.md then makes the candidate the new base when the judgement says so: BASE becomes the
# candidate's model files, its judged rows (renamed to BASE, so the next judgement pairs against them)
# with fresh summaries, and its card with NOTE.md (a section that starts "## This copy": what the stages
# were and what the judgement found, the one part written by hand) after the card's title. The old
# BASE is kept until the new one's summaries are written and put back if they fail. Run it after the
# judgement (the rows are there, so only the summaries run, ~1 minute); a dry run on a copy (~2 minutes):
#   cp -r training/hard_export /tmp/promo_base && rm -r /tmp/promo_base/bench
#   BASE=/tmp/promo_base N_CHAIN=2 N_LONG=2 LANES=1 PROMOTE=/tmp/note.md bash tools/judge_candidate.sh dllm_viz/assets/tiny /tmp/promo_cand
# Knobs (environment): BASE (default training/hard_export), BASE_ROWS, N_CHAIN (default 50), N_LONG
# (default 64), LANES (default 2), ITEM5 (default 0), N_ITEM5 (default 100), ADA (default 0), N_ADA
# (default 100), BUNDLED_ROWS, PROMOTE.
set -euo pipefail
candidate=${1:?usage: judge_candidate.sh CANDIDATE_MODEL_DIR OUT_DIR}
out=${2:?usage: judge_candidate.sh CANDIDATE_MODEL_DIR OUT_DIR}
cd "$(dirname "$0")/.."
source tools/bench_rows.sh
BASE=${BASE:-training/hard_export}; BASE=${BASE%/}; BASE_ROWS=${BASE_ROWS:-$BASE/bench}
N_CHAIN=${N_CHAIN:-50}; N_LONG=${N_LONG:-64}; LANES=${LANES:-2}
ITEM5=${ITEM5:-0}; N_ITEM5=${N_ITEM5:-100}; BUNDLED_ROWS=${BUNDLED_ROWS:-training/bundled_bench}
ADA=${ADA:-0}; N_ADA=${N_ADA:-100}
judged_sets="chain long"  # what decides a judgement: decoded for base and candidate, carried by a promotion
candidate_sets=$judged_sets
# needs_bundled_rows KNOB FILE...: refused before any decoding when a pairing's bundled rows are missing.
needs_bundled_rows() {
  local knob=$1 file; shift
  for file in "$@"; do
    [[ -f $BUNDLED_ROWS/$file ]] || { echo "judge_candidate: $knob=1 needs the bundled model's rows $BUNDLED_ROWS/$file (training/bundled_bench/README.md)" >&2; exit 2; }
  done
}
if [[ $ITEM5 == 1 ]]; then
  (( N_ITEM5 >= N_CHAIN )) || { echo "judge_candidate: N_ITEM5=$N_ITEM5 is below N_CHAIN=$N_CHAIN; item 5's chains extend the judged ones, so set N_ITEM5 >= N_CHAIN" >&2; exit 2; }
  needs_bundled_rows ITEM5 item5_chain.csv item5_breadth.csv
  candidate_sets+=" item5_chain item5_breadth"
fi
if [[ $ADA == 1 ]]; then
  needs_bundled_rows ADA item5_long_ada.csv
  candidate_sets+=" ada_long"
fi
export OMP_NUM_THREADS=1 PYTHONUNBUFFERED=1
PROMOTE=${PROMOTE:-}
if [[ -n $PROMOTE ]]; then  # refused before any decoding: a promotion must not fail after the judgement
  [[ -f $PROMOTE && $(head -n 1 "$PROMOTE") == "## This copy"* ]] \
    || { echo "judge_candidate: PROMOTE=$PROMOTE must be a file whose first line starts \"## This copy\" (the card's section on the new base)" >&2; exit 2; }
  [[ $BASE_ROWS == "$BASE/bench" ]] \
    || { echo "judge_candidate: PROMOTE keeps the new base's rows in BASE/bench; leave BASE_ROWS unset (it is $BASE_ROWS)" >&2; exit 2; }
  [[ -f $candidate/MODEL_CARD.md ]] || { echo "judge_candidate: PROMOTE needs the candidate's card $candidate/MODEL_CARD.md" >&2; exit 2; }
fi
for model in "$BASE" "$candidate"; do
  [[ -f $model/model.safetensors ]] || { echo "judge_candidate: $model holds no model.safetensors" >&2; exit 2; }
done
mkdir -p "$out" "$BASE_ROWS"

# The options of one set: task, problems, policies (the same for both models and every shard).
set_options() {  # $1: chain | long | item5_chain | item5_breadth | ada_long
  case $1 in
    chain | item5_chain) echo "--tasks hard/chain --policies dense --gen-length 256 --block-length 32 --threads 1" ;;
    item5_breadth) echo "--tasks hard/breadth --policies dense --gen-length 256 --block-length 32 --threads 1" ;;
    long) echo "--tasks hard/long --policies dense,threshold --gen-length 256 --block-length 32 --threads 1" ;;
    ada_long) echo "--tasks hard/long --policies adablock+threshold --gen-length 256 --block-length 32 --threads 1" ;;
  esac
}
# The first problem decoded, the problems in all, the shard: item 5's chains start where the judged
# ones end (their merged file joins chain.csv's rows), so no problem is decoded twice.
set_size() {
  case $1 in
    chain) echo "0 $N_CHAIN 25" ;; long) echo "0 $N_LONG 16" ;;
    item5_chain) echo "$N_CHAIN $N_ITEM5 25" ;; item5_breadth) echo "0 $N_ITEM5 25" ;;
    ada_long) echo "0 $N_ADA 25" ;;
  esac
}
sets_of() { if [[ $1 == "$out" ]]; then echo "$candidate_sets"; else echo "$judged_sets"; fi; }  # $1: a rows folder
# The summary of one set's merged rows, DIR/SET.summary (no decoding). bench refuses rows whose model
# files changed since (it keeps their fingerprint): a candidate replaced without its rows stops here,
# with bench's message, instead of being judged against.
summarise_set() {  # $1: the set, $2: its rows folder, $3: the model they were decoded under
  local first n shard; read -r first n shard <<< "$(set_size "$1")"
  # shellcheck disable=SC2046
  summarise_rows "$2/$1.csv" --model "$3" $(set_options "$1") --skip 0 --n "$n" > "$2/$1.summary"
}

# Every shard not yet merged, one line each for the lanes below: its rows file (where its log goes),
# then its `bench` arguments.
job_list=$(mktemp); trap 'rm -f "$job_list"' EXIT
for pair in "$BASE:$BASE_ROWS" "$candidate:$out"; do
  model=${pair%%:*} dir=${pair#*:}
  for set in $(sets_of "$dir"); do
    [[ -f $dir/$set.csv ]] && continue
    read -r first n shard <<< "$(set_size $set)"
    mkdir -p "$dir/parts"
    for ((skip = first; skip < n; skip += shard)); do
      size=$(( n - skip < shard ? n - skip : shard )) part="$dir/parts/${set}_$skip.csv"
      resume=""; [[ -f $part ]] && resume=" --resume"  # no trailing blank: xargs -L would join the next line
      echo "$part --model $model $(set_options $set) --skip $skip --n $size --out $part$resume" >> "$job_list"
    done
  done
done
if [[ -s $job_list ]]; then
  echo "judge_candidate: $(wc -l < "$job_list") shards on $LANES lanes ($(date -u +%H:%M))"
  xargs -P "$LANES" -L 1 sh -c 'python -m dllm_viz bench "$@" > "${0%.csv}.log" 2>&1 || echo "bench failed: ${0%.csv}.log" >&2' \
    < "$job_list"
fi

# Merge each set's shards (in problem order) and print its summary from the rows (no decoding).
for pair in "$BASE:$BASE_ROWS" "$candidate:$out"; do
  model=${pair%%:*} dir=${pair#*:}
  for set in $(sets_of "$dir"); do
    read -r first n shard <<< "$(set_size $set)"
    if [[ ! -f $dir/$set.csv ]]; then
      parts=(); for ((skip = first; skip < n; skip += shard)); do parts+=("$dir/parts/${set}_$skip.csv"); done
      # item 5's chains: the judged chains' rows first (chain.csv, merged above), then the rest
      if [[ $set == item5_chain ]]; then merge_rows "$dir/$set.csv" "$dir/chain.csv" ${parts[@]+"${parts[@]}"}
      else merge_rows "$dir/$set.csv" "${parts[@]}"; fi
      for part in ${parts[@]+"${parts[@]}"}; do rm -f "$part" "$part.settings.json" "${part%.csv}.log"; done
      rmdir "$dir/parts" 2> /dev/null || true  # the merged file holds every row (the base's is committed)
    fi
    summarise_set "$set" "$dir" "$model" || { echo "judge_candidate: stopped" >&2; exit 2; }
  done
done

{
  for set in $judged_sets; do
    echo "== $set: base $BASE"; cat "$BASE_ROWS/$set.summary"
    echo "== $set: candidate $candidate"; cat "$out/$set.summary"
    python tools/compare_models.py "$BASE_ROWS/$set.csv" "$out/$set.csv" --names base candidate
  done
  if [[ $ITEM5 == 1 ]]; then  # the swap's question: the candidate against the bundled model, paired
    for set in chain breadth; do
      echo "== item 5, hard/$set 0-$((N_ITEM5 - 1)), dense: candidate $candidate"; cat "$out/item5_$set.summary"
      python tools/compare_models.py "$BUNDLED_ROWS/item5_$set.csv" "$out/item5_$set.csv" --names bundled candidate
    done
  fi
  if [[ $ADA == 1 ]]; then  # AdaBlock's windows on the long chains: the claim the bundled model misses most
    echo "== item 5, hard/long 0-$((N_ADA - 1)), AdaBlock + threshold 0.9: candidate $candidate"; cat "$out/ada_long.summary"
    python tools/compare_models.py "$BUNDLED_ROWS/item5_long_ada.csv" "$out/ada_long.csv" --names bundled candidate
  fi
} > "$out/judge.txt" 2>&1
cat "$out/judge.txt"

# The promotion (PROMOTE=NOTE.md): built beside BASE, swapped in, summarised under BASE's name.
[[ -z $PROMOTE ]] && exit 0
stage=$(mktemp -d "$BASE.promote.XXXXXX") old="$BASE.replaced.$$"
chmod 755 "$stage"  # mktemp makes it private; the base is an ordinary folder
trap 'rm -f "$job_list"; rm -rf "$stage"' EXIT
# every file of the candidate but its card (rewritten below): the rows' fingerprint covers them all
find "$candidate" -maxdepth 1 -type f ! -name MODEL_CARD.md -exec cp {} "$stage/" \;
mkdir "$stage/bench"
for set in $judged_sets; do cp "$out/$set.csv" "$stage/bench/"; done
# their settings, renamed to BASE, each checked against the staged files first
# shellcheck disable=SC2086
python - "$out" "$stage" "$BASE" $judged_sets <<'PY'
import json, sys
from pathlib import Path
sys.path.insert(0, ".")
from dllm_viz.cli.results import settings_path, write_settings  # the format bench reads back on --resume
from dllm_viz.models.loading import weights_fingerprint
out, stage, model, *sets = sys.argv[1:]
staged = weights_fingerprint(stage)
for name in sets:
    source = settings_path(Path(out) / f"{name}.csv")
    settings = json.loads(source.read_text())
    if settings.get("model_weights") != staged:  # refused here, before the base is touched
        sys.exit(f"judge_candidate: {source} was decoded under other weights than the candidate's files "
                 f"(fingerprint {settings.get('model_weights')} against {staged}); judge it again into a new OUT")
    write_settings(Path(stage) / "bench" / f"{name}.csv", {**settings, "model": model})
PY
python - "$candidate/MODEL_CARD.md" "$PROMOTE" "$stage/MODEL_CARD.md" <<'PY'
import sys
from pathlib import Path
card, note, target = (Path(a) for a in sys.argv[1:])
lines = card.read_text().splitlines(keepends=True)
first = next((i for i, line in enumerate(lines) if line.startswith("## ")), len(lines))  # after the title and intro
target.write_text("".join(lines[:first]) + note.read_text().rstrip("\n") + "\n\n" + "".join(lines[first:]))
PY
undo_promotion() { rm -rf "$BASE" && mv "$old" "$BASE"; echo "judge_candidate: promotion undone, $BASE is as it was" >&2; exit 2; }
mv "$BASE" "$old"
mv "$stage" "$BASE" || undo_promotion
for set in $judged_sets; do
  summarise_set "$set" "$BASE/bench" "$BASE" || undo_promotion
done
rm -rf "$old"
echo "judge_candidate: $BASE is now $candidate (card: $BASE/MODEL_CARD.md; rows and summaries: $BASE/bench)"
