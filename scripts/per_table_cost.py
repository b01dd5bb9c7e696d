#!/usr/bin/env python3
"""The fixed cost of one more table in a run: two batches of the same lines and bytes
whose topics differ in number (so they write different numbers of tables), loaded
alternately into fresh catalogs; the difference of the median wall times over the
difference in tables written.

    scripts/per_table_cost.py RUNS BIN FEW MANY
    scripts/per_table_cost.py 11 target/release/bronze pt_10 pt_100

FEW and MANY are folders `batch_id=…` under $OUT/landing (default /tmp/bronze-bench),
made with `gen_batch --files 20 --lines-per-file 100 --topics 10|100 --profile dense`.
Each run's catalog is moved aside, not deleted, until the end: creating files next to
thousands of just-deleted inodes makes ext4 scan for free ones (`recently_deleted`, more
than half of such a run's CPU in `perf`), which is the benchmark's doing, not bronze's.
"""
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import time

if len(sys.argv) != 5:
    sys.exit(__doc__)
runs, binary, few, many = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
out = os.environ.get("OUT", "/tmp/bronze-bench")
lake, trash = f"{out}/pt-lake", f"{out}/pt-trash"
os.makedirs(trash, exist_ok=True)
walls = {few: [], many: []}
tables = {}
for _ in range(runs):
    for batch in (few, many):
        if os.path.exists(lake):
            os.rename(lake, f"{trash}/lake.{random.getrandbits(48)}")
        started = time.perf_counter()
        done = subprocess.run(
            [binary, "ingest", "--json", "--catalog", lake, f"{out}/landing/batch_id={batch}"],
            capture_output=True,
            text=True,
        )
        walls[batch].append(time.perf_counter() - started)
        if done.returncode > 1:
            sys.exit(done.stderr)
        report = json.loads(done.stdout)
        tables[batch] = len(report["tables"])
for batch in (few, many):
    print(f"{batch}: {tables[batch]} tables, median {statistics.median(walls[batch]) * 1e3:.1f} ms "
          f"(range {min(walls[batch]) * 1e3:.1f}-{max(walls[batch]) * 1e3:.1f})")
extra = tables[many] - tables[few]
cost = (statistics.median(walls[many]) - statistics.median(walls[few])) / extra
print(f"{extra} more tables: {cost * 1e3:.2f} ms wall per table")
shutil.rmtree(trash, ignore_errors=True)
shutil.rmtree(lake, ignore_errors=True)
