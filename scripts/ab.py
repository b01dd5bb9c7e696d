#!/usr/bin/env python3
"""A/B of `bronze ingest` binaries on one generated batch, runs interleaved.

    scripts/ab.py RUNS BATCH LABEL=BINARY [LABEL=BINARY ...]
    scripts/ab.py 7 gen_8533 base=/tmp/bin_base new=target/release/bronze

BATCH is a folder `batch_id=BATCH` under $OUT/landing (default /tmp/bronze-bench, where
scripts/bench_cli.sh generates its batches). Each run loads the batch into a fresh
catalog ($OUT/ab-lake; the previous one is moved aside, not deleted: see bench_cli.sh on
ext4's recently deleted inodes) and records wall time, CPU (user + system), peak RSS and
minor page faults of the process. The binaries alternate run by run, so a drift of the
machine's speed hits both alike; the medians are printed per label. A BINARY may be a
wrapper script that adds flags.
"""
import os
import random
import statistics
import subprocess
import sys
import time

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
        started = time.perf_counter()
        p = subprocess.Popen(
            [binary, "ingest", "--catalog", lake, batch_dir],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        _, _, usage = os.wait4(p.pid, 0)
        wall = time.perf_counter() - started
        cpu = usage.ru_utime + usage.ru_stime
        results[label].append((wall * 1e3, cpu * 1e3, usage.ru_maxrss / 1024, usage.ru_minflt))
for label, _ in specs:
    r = results[label]
    med = lambda k: statistics.median(x[k] for x in r)
    walls = [x[0] for x in r]
    print(
        f"{label:10s} wall median {med(0):7.1f} ms [{min(walls):.1f}-{max(walls):.1f}]"
        f"  CPU median {med(1):7.1f} ms  peak RSS {med(2):.0f} MB  minor faults {med(3):.0f}"
    )
print(f"{runs} runs each, interleaved; trash to delete: {trash}")
