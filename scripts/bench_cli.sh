#!/usr/bin/env bash
# Times `bronze ingest` end to end (wall time, peak RSS) on generated batches, the way a
# user runs it. Figures go to BENCHMARKS.md with the machine they ran on.
#
#   scripts/bench_cli.sh                 # daily (200 files) and historical (8,533 files)
#   FILES="200 2000" scripts/bench_cli.sh
#   FILES="200 2000 8533 20000" BUDGET=114443384 scripts/bench_cli.sh   # fixed budget
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/bronze-target}"
cargo build --release --bin bronze --example gen_batch
BIN="$CARGO_TARGET_DIR/release/bronze"
GEN="$CARGO_TARGET_DIR/release/examples/gen_batch"
OUT="${OUT:-/tmp/bronze-bench}"
mkdir -p "$OUT"

measure() { # label, args...
  local label=$1; shift
  local lake="$OUT/lake-$label"
  rm -rf "$lake"
  /usr/bin/time -v "$BIN" ingest --catalog "$lake" "$@" > "$OUT/$label.report" 2> "$OUT/$label.time" || true
  local wall rss
  wall=$(grep "Elapsed (wall clock)" "$OUT/$label.time" | awk '{print $NF}')
  rss=$(grep "Maximum resident set size" "$OUT/$label.time" | awk '{print $NF}')
  printf '%-28s wall %-9s peak RSS %6d MB   %s\n' "$label" "$wall" $((rss / 1024)) "$(head -1 "$OUT/$label.report" | cut -c1-150)"
}

# Idle: the same binary on the 39 KB fixture batch (code, runtime, pools).
measure "idle_fixture" fixtures/landing/market/events/batch_id=2026-04-05_001

for files in ${FILES:-200 8533}; do
  dir="$OUT/landing/batch_id=gen_$files"
  [ -d "$dir" ] || "$GEN" --files "$files" --out "$OUT/landing" > /dev/null
  bytes=$(du -sb "$dir" | cut -f1)
  measure "files_${files}" "$dir"
  measure "files_${files}_sequential" "$dir" --max-parallel 1
  # Memory bound: a batch three times the budget is staged in chunks that spill.
  if [ -n "${BUDGET:-}" ]; then
    measure "files_${files}_budget_${BUDGET}" "$dir" --memory-budget "$BUDGET"
  else
    measure "files_${files}_budget_third" "$dir" --memory-budget $((bytes / 3))
  fi
done
