#!/usr/bin/env bash
# Times `bronze ingest` end to end (wall time, peak RSS) on generated batches, the way a
# user runs it, beside the simd-json parse-only baseline over the same files in the same
# run. Figures go to BENCHMARKS.md with the machine they ran on.
#
#   scripts/bench_cli.sh                 # daily (200 files) and historical (8,533 files)
#   FILES="200 2000 8533 20000" scripts/bench_cli.sh       # linear scaling
#   TOPICS="10 100" FILES=2000 scripts/bench_cli.sh        # cost per MB vs topics
#   DAYS=5 scripts/bench_cli.sh          # + daily batches into one growing catalog
#   FILES="200 2000 8533 20000" BUDGET=114443384 scripts/bench_cli.sh   # fixed budget
#   RUNS=3 ...                           # runs per measurement (default 3, best kept)
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/bronze-target}"
cargo build --release --bin bronze --example gen_batch --example parse_only
BIN="$CARGO_TARGET_DIR/release/bronze"
GEN="$CARGO_TARGET_DIR/release/examples/gen_batch"
PARSE="$CARGO_TARGET_DIR/release/examples/parse_only"
OUT="${OUT:-/tmp/bronze-bench}"
RUNS="${RUNS:-3}"
mkdir -p "$OUT"
# Lakes of earlier runs are moved aside and deleted when the script ends, not before each
# run: ext4 passes over inodes freed in the last 30 s when it allocates new ones
# (`recently_deleted`), which cost a run right after an `rm -rf` of the last lake up to
# 9 % of its CPU (2,000 files, 100 topics: 115 tables) -- a cost of this loop, not of a
# load.
TRASH="$OUT/trash.$$"
mkdir -p "$TRASH"
trap 'rm -rf "$TRASH"' EXIT
aside() { if [ -e "$1" ]; then mv "$1" "$TRASH/$(basename "$1").$RANDOM$RANDOM"; fi; }
echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(uname -sr), $(rustc --version)"

# measure label lake args...: best wall of $RUNS runs (each into a fresh copy of `lake`'s
# starting state), its peak RSS; prints MB/s of the batch folder (last arg).
measure() {
  local label=$1 base=$2; shift 2
  local dir=${*: -1} best="" best_rss=0 lake="$OUT/lake-$label"
  local bytes; bytes=$(du -sb "$dir" | cut -f1)
  for _ in $(seq "$RUNS"); do
    aside "$lake"
    if [ -n "$base" ]; then cp -r "$base" "$lake"; fi
    sync
    /usr/bin/time -f "%e %M" -o "$OUT/$label.time" "$BIN" ingest --catalog "$lake" "$@" > "$OUT/$label.report" 2>/dev/null || true
    read -r wall rss < <(tail -1 "$OUT/$label.time")
    if [ -z "$best" ] || awk "BEGIN {exit !($wall < $best)}"; then best=$wall best_rss=$rss; fi
  done
  local mbs; mbs=$(awk "BEGIN {printf \"%.0f\", $bytes / 1e6 / $best}")
  printf '%-32s wall %6.2f s  %5s MB/s  peak RSS %5d MB' "$label" "$best" "$mbs" $((best_rss / 1024))
  if [ -n "${PARSE_MBS:-}" ]; then
    printf '  = %s %% of parse-only (tape), %s %% (DOM), %s %% (owned)' \
      "$(awk "BEGIN {printf \"%.0f\", 100 * $mbs / $PARSE_MBS}")" \
      "$(awk "BEGIN {printf \"%.0f\", 100 * $mbs / $DOM_MBS}")" \
      "$(awk "BEGIN {printf \"%.0f\", 100 * $mbs / $OWNED_MBS}")"
  fi
  echo "   $(head -1 "$OUT/$label.report" | cut -c1-100)"
}

# parse_only dir: sets PARSE_MBS (tape), DOM_MBS (borrowed DOM, buffers reused) and
# OWNED_MBS (default API, `to_owned_value` per line), best of $RUNS.
parse_only() {
  PARSE_MBS=0 DOM_MBS=0 OWNED_MBS=0
  for _ in $(seq "$RUNS"); do
    local out; out=$("$PARSE" "$1")
    local t d o
    t=$(echo "$out" | awk '/tape/ {print $(NF-3)}')
    d=$(echo "$out" | awk '/DOM/ {print $(NF-3)}')
    o=$(echo "$out" | awk '/owned/ {print $(NF-3)}')
    PARSE_MBS=$(( t > PARSE_MBS ? t : PARSE_MBS )) DOM_MBS=$(( d > DOM_MBS ? d : DOM_MBS ))
    OWNED_MBS=$(( o > OWNED_MBS ? o : OWNED_MBS ))
  done
  echo "parse-only baseline, same files, 2 threads: simd-json tape $PARSE_MBS MB/s, DOM $DOM_MBS MB/s, owned $OWNED_MBS MB/s"
}

# Idle: the same binary on the 39 KB fixture batch (code, runtime, pools).
PARSE_MBS="" measure "idle_fixture" "" fixtures/landing/market/events/batch_id=2026-04-05_001

for topics in ${TOPICS:-36}; do
  for files in ${FILES:-200 8533}; do
    name="gen_${files}"
    [ "$topics" = 36 ] || name="gen_${files}_t${topics}"
    dir="$OUT/landing/batch_id=$name"
    [ -d "$dir" ] || "$GEN" --files "$files" --topics "$topics" --batch-id "$name" --out "$OUT/landing" > /dev/null
    parse_only "$dir"
    measure "files_${files}_topics_${topics}" "" "$dir"
    # Memory bound: a batch over the budget is staged in chunks that spill.
    if [ -n "${BUDGET:-}" ]; then
      measure "files_${files}_budget_${BUDGET}" "" --memory-budget "$BUDGET" "$dir"
    fi
  done
done

# Daily batches into one catalog that grows: day N writes into tables holding N-1 days.
if [ -n "${DAYS:-}" ]; then
  base="$OUT/lake-days-base"
  aside "$base"
  for day in $(seq "$DAYS"); do
    dir="$OUT/landing/batch_id=day_$day"
    [ -d "$dir" ] || "$GEN" --files 200 --seed $((100 + day)) --batch-id "day_$day" --out "$OUT/landing" > /dev/null
    [ "$day" = 1 ] && parse_only "$dir"
    if [ -d "$base" ]; then measure "daily_day_${day}" "$base" "$dir"; else measure "daily_day_${day}" "" "$dir"; fi
    aside "$base" && cp -r "$OUT/lake-daily_day_${day}" "$base"
  done
  measure "daily_rerun_day_${DAYS}" "$base" "$dir"
fi
