#!/usr/bin/env python3
"""What a daily run costs after N batches of history, on a local catalog: the history
curve of BENCHMARKS.md ("Years of batches").

    scripts/history_curve.py BRONZE GEN_BATCH WORKDIR [--points 10,1000] [--repeat 3]

BRONZE is the `bronze` binary, GEN_BATCH the `gen_batch` example binary (both release
builds: `cargo build --release --bin bronze --example gen_batch`). One entity
(`src/entity`), batches of 4 files x 30 lines over 36 topics (~100 KB each, a new seed
per batch). At each point the history is loaded with one `ingest --pending` up to N
batches; then, medians of --repeat: the next batch (`ingest <folder>` of a new
folder, which then joins the history), a no-op `ingest --pending`, and `status`. Also
printed: `_run_control`'s live files and the catalog's size on disk. Prints one
Markdown table row per point.
"""
import argparse
import json
import os
import pathlib
import statistics
import subprocess
import time

ap = argparse.ArgumentParser()
ap.add_argument("bronze")
ap.add_argument("gen_batch")
ap.add_argument("workdir")
ap.add_argument("--points", default="10,1000")
ap.add_argument("--repeat", type=int, default=3)
args = ap.parse_args()

work = pathlib.Path(args.workdir)
entity = work / "landing" / "src" / "entity"
catalog = work / "lakehouse"
entity.mkdir(parents=True, exist_ok=True)
made = len(list(entity.glob("batch_id=*")))


def batch_id(n):
    return f"d{n:06d}"


def make(upto):
    global made
    while made < upto:
        made += 1
        subprocess.run(
            [args.gen_batch, "--files", "4", "--lines-per-file", "30", "--topics", "36",
             "--seed", str(made), "--batch-id", batch_id(made), "--out", str(entity)],
            check=True, stdout=subprocess.DEVNULL)


def bronze(*a):
    t = time.perf_counter()
    out = subprocess.run([args.bronze, *a, "--catalog", str(catalog)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    took = time.perf_counter() - t
    if out.returncode >= 2:
        raise SystemExit(f"bronze {' '.join(a)} failed:\n{out.stderr.decode()}")
    return took, out.stdout


def du(path):
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def live_files(table):
    out = subprocess.run([args.bronze, "health", "--json", "--catalog", str(catalog)],
                         stdout=subprocess.PIPE, check=True).stdout
    parsed = json.loads(out)
    tables = parsed if isinstance(parsed, list) else parsed.get("tables", [])
    for t in tables:
        if t.get("table") == table:
            return t.get("files")
    return None


print("| history | next batch | no-op `--pending` | `status` | `_run_control` live files | catalog on disk |")
print("|---|---|---|---|---|---|")
for point in [int(p) for p in args.points.split(",")]:
    make(point)
    bronze("ingest", "--pending", str(work / "landing"))
    nexts = []
    for _ in range(args.repeat):
        make(made + 1)
        took, _ = bronze("ingest", str(entity / f"batch_id={batch_id(made)}"))
        nexts.append(took)
    # One round folds the new runs into the ledger; the no-ops after it are measured.
    bronze("ingest", "--pending", str(work / "landing"))
    noop = [bronze("ingest", "--pending", str(work / "landing"))[0] for _ in range(args.repeat)]
    status = [bronze("status", str(work / "landing"))[0] for _ in range(args.repeat)]
    med = statistics.median
    print(f"| {point:,} | {med(nexts):.3f} s | {med(noop):.3f} s | {med(status):.3f} s "
          f"| {live_files('_run_control')} | {du(catalog) / 1e6:.0f} MB |", flush=True)
