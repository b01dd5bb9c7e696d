#!/usr/bin/env bash
# Issue 23 speed: 2 worker processes on the 2 entities x 100 batches that
# scripts/backlog_bench.sh makes ($OUT/backlog2), with extra flags for both
# (e.g. `--threads 1`), then a sweep; commits planned again and mean batch time.
set -uo pipefail
BIN=${BIN:-/tmp/rel-target/release/bronze}
OUT=${OUT:-/tmp/bronze-bench}
FLAGS="$*"
rm -rf $OUT/bl-lake5
now() { date +%s.%N; }
s=$(now)
$BIN ingest --pending $OUT/backlog2 --catalog $OUT/bl-lake5 --json $FLAGS > /tmp/bl5a.json & p1=$!
$BIN ingest --pending $OUT/backlog2 --catalog $OUT/bl-lake5 --json $FLAGS > /tmp/bl5b.json & p2=$!
wait $p1; wait $p2
$BIN ingest --pending $OUT/backlog2 --catalog $OUT/bl-lake5 --json $FLAGS > /tmp/bl5c.json
e=$(now); echo "2x100 batches, 2 workers $FLAGS (+ a sweep): $(echo "$e - $s" | bc) s"
python3 -c "
import json
for f in ['/tmp/bl5a.json','/tmp/bl5b.json','/tmp/bl5c.json']:
    o=json.load(open(f)); rs=[x['report'] for x in o if x.get('report')]
    print(f, sum(1 for x in o if x['status']=='loaded'), 'loaded; replans', sum(r['commit_replans'] for r in rs), 'mean elapsed', round(sum(r['elapsed'] for r in rs)/max(1,len(rs)),3))
"
