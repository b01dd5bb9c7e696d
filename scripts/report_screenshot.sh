#!/usr/bin/env bash
# Makes docs/report.png, docs/operations.md's picture of `bronze report --html`: 14 daily
# batches (generated, field-dense payloads, 40 files each, a growing size) into a fresh
# catalog, a rerun of one, a run whose row accounting fails (the `lose_a_row`
# failpoint, so the binary is built with the `failpoints` feature), then the page,
# rendered by headless Chromium (Debian's `chromium`; `apt-get install chromium`).
# Usage: scripts/report_screenshot.sh [OUT.png]
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="${1:-docs/report.png}"
case "$OUT" in /*) ;; *) OUT="$PWD/$OUT" ;; esac
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/bronze-target}"
cargo build --quiet --features failpoints --bin bronze --example gen_batch
BIN="$CARGO_TARGET_DIR/debug"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
for day in $(seq -w 1 14); do
  "$BIN/examples/gen_batch" --files 40 --lines-per-file $((20 + 3 * 10#$day)) --profile dense \
    --seed "$day" --batch-id "2026-11-$day" --out "$WORK/landing/feed/market" > /dev/null
done
for day in $(seq -w 1 14); do
  "$BIN/bronze" ingest --catalog "$WORK/lake" "$WORK/landing/feed/market/batch_id=2026-11-$day" > /dev/null || true
done
"$BIN/bronze" ingest --catalog "$WORK/lake" "$WORK/landing/feed/market/batch_id=2026-11-07" > /dev/null || true
BRONZE_FAILPOINT=lose_a_row "$BIN/bronze" ingest --catalog "$WORK/lake" \
  "$WORK/landing/feed/market/batch_id=2026-11-14" > /dev/null 2>&1 || true
"$BIN/bronze" optimize currentprice --catalog "$WORK/lake" > /dev/null
"$BIN/bronze" report --html "$WORK/report.html" --landing "$WORK/landing" --catalog "$WORK/lake"
chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
  --disable-background-networking --disable-component-update --disable-sync \
  --user-data-dir="$WORK/profile" --hide-scrollbars --window-size=1040,1900 \
  --screenshot="$OUT" "file://$WORK/report.html" 2> /dev/null
echo "wrote $OUT"
