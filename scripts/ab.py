#!/usr/bin/env python3
"""A/B of `bronze ingest` binaries on one generated batch, runs interleaved.

    scripts/ab.py RUNS BATCH LABEL=BINARY [LABEL=BINARY ...]
    scripts/ab.py 7 gen_8533 base=/tmp/bin_base new=target/release/bronze

BATCH is a folder `batch_id=BATCH` under $OUT/landing (default /tmp/bronze-bench, where
scripts/bench_cli.sh generates its batches). Each run loads the batch into a fresh
catalog ($OUT/ab-lake; the previous one is moved aside, not deleted: see bench_cli.sh on
ext4's recently deleted inodes) and records wall time, user and system CPU, peak RSS, peak
anonymous memory (RssAnon) and minor page faults of the process (scripts/measure.py). The binaries alternate run by run, so a drift of the
machine's speed hits both alike; the medians are printed per label. A BINARY may be a
wrapper script that adds flags.
"""
import os
import random
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from measure import run  # noqa: E402

if len(sys.argv) < 4:
    sys.exit(__doc__)
runs, batch = int(sys.argv[1]), sys.argv[2]
specs = [a.split("=", 1) for a in sys.argv[3:]]
out = os.environ.get("OUT", "/tmp/bronze-bench")
batch_dir = f"{out}/landing/batch_id={batch}"
lake, trash = f"{out}/ab-lake", f"{out}/ab-trash"
os.makedirs(trash, exist_ok=True)
results = {label: [] for label, _ in specs}
for _ in range(runs):
    for label, binary in specs:
        if os.path.exists(lake):
            os.rename(lake, f"{trash}/lake.{random.getrandbits(48)}")
        m = run([binary, "ingest", "--catalog", lake, batch_dir], ok=(0, 1))
        results[label].append(m)
for label, _ in specs:
    r = results[label]
    med = lambda k: statistics.median(x[k] for x in r)
    walls = [x["wall_s"] * 1e3 for x in r]
    print(
        f"{label:10s} wall median {med('wall_s') * 1e3:7.1f} ms [{min(walls):.1f}-{max(walls):.1f}]"
        f"  user {med('user_s'):.2f} s  sys {med('sys_s'):.2f} s"
        f"  peak RSS {med('peak_rss_mb'):.0f} MB  RssAnon {med('peak_rss_anon_mb'):.0f} MB"
        f"  minor faults {med('minor_faults'):.0f}"
    )
print(f"{runs} runs each, interleaved; trash to delete: {trash}")
