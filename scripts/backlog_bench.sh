#!/usr/bin/env bash
# Issue 23 speed: a backlog of 200 daily batches (hard-linked copies of the dense
# 200-file batch) through one `bronze ingest --pending`, against the same batches each
# loaded by its own `bronze ingest` process; then 2 entities x 100 batches by 1 and by 2
# worker processes. Needs $OUT/landing/batch_id=dense_200 (`cargo run --release --example
# gen_batch -- --profile dense --files 200 --out $OUT/landing --batch-id dense_200`); makes
# $OUT/backlog from it (hard links) when missing. Exit code 1 of a load (its corrupt
# lines) is expected.
set -uo pipefail
BIN=${BIN:-/tmp/rel-target/release/bronze}
OUT=${OUT:-/tmp/bronze-bench}
now() { date +%s.%N; }
if [ ! -d $OUT/backlog/src/ent ]; then
  mkdir -p $OUT/backlog/src/ent
  for i in $(seq -w 1 200); do cp -al $OUT/landing/batch_id=dense_200 $OUT/backlog/src/ent/batch_id=b$i; done
fi
rm -rf $OUT/bl-lake* $OUT/backlog2
# 1. one --pending run over 200 batches of one entity
s=$(now); $BIN ingest --pending $OUT/backlog --catalog $OUT/bl-lake1 > /tmp/bl1.txt; e=$(now)
echo "pending 200 batches, 1 process: $(echo "$e - $s" | bc) s"; tail -1 /tmp/bl1.txt
# 2. the same 200 batches, one process each
s=$(now)
for d in $OUT/backlog/src/ent/batch_id=*; do $BIN ingest $d --catalog $OUT/bl-lake2 > /dev/null || [ $? -eq 1 ]; done
e=$(now); echo "200 single-batch processes: $(echo "$e - $s" | bc) s"
# 3. 2 entities x 100 batches: 1 worker, then 2 workers
mkdir -p $OUT/backlog2/src/a $OUT/backlog2/src/b
for i in $(seq -w 1 100); do cp -al $OUT/backlog/src/ent/batch_id=b$i $OUT/backlog2/src/a/; cp -al $OUT/backlog/src/ent/batch_id=b$i $OUT/backlog2/src/b/; done
s=$(now); $BIN ingest --pending $OUT/backlog2 --catalog $OUT/bl-lake3 > /tmp/bl3.txt; e=$(now)
echo "2x100 batches, 1 worker: $(echo "$e - $s" | bc) s"; tail -1 /tmp/bl3.txt
s=$(now)
$BIN ingest --pending $OUT/backlog2 --catalog $OUT/bl-lake4 > /tmp/bl4a.txt & p1=$!
$BIN ingest --pending $OUT/backlog2 --catalog $OUT/bl-lake4 > /tmp/bl4b.txt & p2=$!
wait $p1 || true; wait $p2 || true
$BIN ingest --pending $OUT/backlog2 --catalog $OUT/bl-lake4 > /tmp/bl4c.txt || true
e=$(now); echo "2x100 batches, 2 workers (+ a sweep): $(echo "$e - $s" | bc) s"; for f in /tmp/bl4a.txt /tmp/bl4b.txt /tmp/bl4c.txt; do tail -n 1 $f; done
