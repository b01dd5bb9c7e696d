#!/usr/bin/env python3
"""What a daily run costs after N batches of history, on a local catalog: the history
curve of BENCHMARKS.md ("Years of batches").

    scripts/history_curve.py BRONZE GEN_BATCH WORKDIR [--points 10,1000] [--repeat 3]

BRONZE is the `bronze` binary, GEN_BATCH the `gen_batch` example binary (both release
builds: `cargo build --release --bin bronze --example gen_batch`). One entity
(`src/entity`), batches of 4 files x 30 lines over 36 topics (~100 KB each, a new seed
per batch). At each point the history is loaded with one `ingest --pending` up to N
batches and, on a local catalog, copied aside (`WORKDIR/at-<N>`; a copy an earlier
invocation left there is measured as it is, and the history goes on from where the
work folder's stands); then every point is
measured in --repeat rounds, the points interleaved within each round, and the medians
printed: the next batch (`ingest <folder>` of a new folder, which then joins that
history; its mean too, as a day that writes checkpoints or compacts counts in full: use
--repeat 10 or more to cover a checkpoint cycle), a no-op `ingest --pending`, and
`status`. Also printed: `_run_control`'s live
files and the catalog's size on disk. Prints one Markdown table row per point.

With --s3 the landing zone and the catalog are in moto's S3 (`scripts/moto_server.py`,
started here, behind `scripts/faulty_proxy.py --log` which counts requests, logged in
WORKDIR/requests.log after a `# bronze …` line per command): each new
batch is uploaded to `s3://landing/zone/src/entity/`, the catalog is `s3://lake/hist`,
and every measured command's requests are printed beside its time (each point measured
when the history reaches it). Needs the repo's venv (boto3, moto): run it with
`.venv/bin/python`.

With --s3 --upload DIR, the history is not loaded into S3 but uploaded: DIR's landing
zone and catalog (a local history this script made, e.g. WORKDIR/at-10000 of an earlier
run, with the same --tiny or not) are copied object by object into the buckets, and that
one point is measured: 10,000 batches of history in minutes instead of hours.

With --tiny each batch is one line of one topic (GEN_BATCH is not run): what a long
history costs by itself, 10,000 batches loaded in minutes.

With --daily (local catalogs) each batch comes a day after the one before, as in
production: every `bronze` command runs under libfaketime (Debian's `faketime`) a day
later per batch, the log entries it writes get that day as their mtime, the history is
loaded a week at a time (`ingest --pending` at the week's last day), and `bronze
maintain` runs every --maintain-every days. Retention then does what it does in a
lakehouse loaded daily: log entries older than 30 days and tombstones older than 7 go.
"""
import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import threading
import time

ap = argparse.ArgumentParser()
ap.add_argument("bronze")
ap.add_argument("gen_batch")
ap.add_argument("workdir")
ap.add_argument("--points", default="10,1000")
ap.add_argument("--repeat", type=int, default=3)
ap.add_argument("--s3", action="store_true")
ap.add_argument("--daily", action="store_true")
ap.add_argument("--upload", type=pathlib.Path,
                help="with --s3: a local history (landing/ and lakehouse/) to upload and measure")
ap.add_argument("--maintain-every", type=int, default=7)
ap.add_argument("--tiny", action="store_true",
                help="batches of one line of one topic (a child table beside it): the "
                     "history's own cost (ledger, landing listing, logs) without the data's")
args = ap.parse_args()
if args.daily and args.s3:
    raise SystemExit("--daily is for local catalogs")
if args.upload and not args.s3:
    raise SystemExit("--upload is for --s3")
FAKETIME = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"
if args.daily and not os.path.exists(FAKETIME):
    raise SystemExit(f"--daily needs {FAKETIME}: apt-get install faketime")
DAY = 86_400

work = pathlib.Path(args.workdir)
entity = work / "landing" / "src" / "entity"
entity.mkdir(parents=True, exist_ok=True)
made = len(list(entity.glob("batch_id=*")))
repo = pathlib.Path(__file__).resolve().parents[1]
env = dict(os.environ)
if args.s3:
    import atexit
    import signal
    import socket

    # Killed (a timeout's SIGTERM): exit normally, so atexit stops the servers started here.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    import boto3

    def start(cmd, ready):
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        atexit.register(proc.kill)
        for line in proc.stdout:
            if ready in line:
                threading.Thread(target=proc.stdout.read, daemon=True).start()
                return line
        raise SystemExit(f"{cmd[1]} exited before it was ready")

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        moto_port = sock.getsockname()[1]
    python = sys.executable
    start([python, str(repo / "scripts/moto_server.py"), "-H", "127.0.0.1", "-p", str(moto_port)],
          "Running on")
    request_log = work / "requests.log"
    request_log.write_text("")
    said = start([python, str(repo / "scripts/faulty_proxy.py"), f"http://127.0.0.1:{moto_port}",
                  "--log", str(request_log)], "listening on")
    endpoint = f"http://127.0.0.1:{said.split()[-1]}"
    env.update(AWS_ENDPOINT_URL=endpoint, AWS_ALLOW_HTTP="true", AWS_ACCESS_KEY_ID="testing",
               AWS_SECRET_ACCESS_KEY="testing", AWS_REGION="us-east-1")
    s3 = boto3.client("s3", endpoint_url=f"http://127.0.0.1:{moto_port}", aws_access_key_id="testing",
                      aws_secret_access_key="testing", region_name="us-east-1")
    for bucket in ("landing", "lake"):
        s3.create_bucket(Bucket=bucket)
    catalog = "s3://lake/hist"
    landing = "s3://landing/zone"
    entity_root = "s3://landing/zone/src/entity"
else:
    catalog = str(work / "lakehouse")
    landing = str(work / "landing")
    entity_root = str(entity)


def requests():
    """Requests the proxy has forwarded so far (0 on a local catalog); the log's `# …`
    lines mark where each command's requests start."""
    if not args.s3:
        return 0
    with open(request_log) as f:
        return sum(1 for line in f if not line.startswith("#"))


def batch_id(n):
    return f"d{n:06d}"


def make(upto):
    global made
    while made < upto:
        made += 1
        if args.tiny:
            folder = entity / f"batch_id={batch_id(made)}"
            folder.mkdir(parents=True, exist_ok=True)
            line = {"topic": "trade", "message_id": f"m{made}", "source": "s",
                    "ts": "2026-01-01T00:00:00Z",
                    "payload": {"px": made, "sym": "é", "currentprice": [{"px": 1.0}]}}
            (folder / "part-0.jsonl").write_text(json.dumps(line) + "\n")
        else:
            subprocess.run(
                [args.gen_batch, "--files", "4", "--lines-per-file", "30", "--topics", "36",
                 "--seed", str(made), "--batch-id", batch_id(made), "--out", str(entity)],
                check=True, stdout=subprocess.DEVNULL)
        if args.s3:
            folder = entity / f"batch_id={batch_id(made)}"
            for f in folder.iterdir():
                s3.upload_file(str(f), "landing", f"zone/src/entity/{folder.name}/{f.name}")


def today():
    """With --daily, the environment that runs a command on batch `made`'s day."""
    if not args.daily:
        return env
    return dict(env, LD_PRELOAD=FAKETIME, FAKETIME=f"+{made}d", FAKETIME_DONT_FAKE_MONOTONIC="1")


def date_log_entries(since):
    """With --daily, gives the log entries written since `since` (real time) today's
    date as their mtime: log clean-up goes by it."""
    if not args.daily:
        return
    now = time.time() + 1
    for log in pathlib.Path(catalog).glob("*/*/_delta_log"):
        for f in log.iterdir():
            st = f.stat()
            # Written by this command (entries dated before are in the future by now).
            if since <= st.st_mtime <= now:
                os.utime(f, (st.st_atime, st.st_mtime + made * DAY))


def bronze(*a):
    """Runs `bronze *a --catalog CATALOG`: its seconds, requests and stdout."""
    before = requests()
    if args.s3:
        with open(request_log, "a") as log:
            log.write(f"# bronze {' '.join(a)}\n")
    since = time.time() - 1
    t = time.perf_counter()
    out = subprocess.run([args.bronze, *a, "--catalog", catalog], env=today(),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    took = time.perf_counter() - t
    if out.returncode >= 2:
        raise SystemExit(f"bronze {' '.join(a)} failed:\n{out.stderr.decode()}")
    date_log_entries(since)
    return took, requests() - before, out.stdout


def load_history(upto):
    """Loads the history up to `upto` batches: in one `ingest --pending`, or with
    --daily a week at a time with `maintain` every --maintain-every days."""
    if not args.daily:
        make(upto)
        bronze("ingest", "--pending", landing)
        return
    while made < upto:
        make(min(upto, made + args.maintain_every - made % args.maintain_every))
        bronze("ingest", "--pending", landing)
        if made % args.maintain_every == 0:
            bronze("maintain")


def upload(root):
    """Copies the local history at `root` into the buckets (straight to moto, not through
    the counting proxy) and makes its landing zone the one new batches join."""
    global entity, made
    from concurrent.futures import ThreadPoolExecutor

    jobs = [(f, "landing", "zone/" + str(f.relative_to(root / "landing")))
            for f in (root / "landing").rglob("*") if f.is_file()]
    jobs += [(f, "lake", "hist/" + str(f.relative_to(root / "lakehouse")))
             for f in (root / "lakehouse").rglob("*") if f.is_file()]
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda j: s3.upload_file(str(j[0]), j[1], j[2]), jobs))
    entity = work / "landing" / "src" / "entity"
    subprocess.run(["cp", "-a", str(root / "landing"), str(work)], check=True)
    made = len(list(entity.glob("batch_id=*")))
    print(f"{len(jobs):,} objects of {root} uploaded, {made:,} batches", file=sys.stderr,
          flush=True)


def catalog_bytes():
    if not args.s3:
        return sum(f.stat().st_size for f in pathlib.Path(catalog).rglob("*") if f.is_file())
    pages = s3.get_paginator("list_objects_v2").paginate(Bucket="lake", Prefix="hist/")
    return sum(o["Size"] for page in pages for o in page.get("Contents", []))


def live_files(table):
    out = subprocess.run([args.bronze, "health", "--json", "--catalog", catalog], env=today(),
                         stdout=subprocess.PIPE, check=True).stdout
    parsed = json.loads(out)
    tables = parsed if isinstance(parsed, list) else parsed.get("tables", [])
    for t in tables:
        if t.get("table") == table:
            return t.get("files")
    return None


def cell(runs, mean=False):
    """Median seconds (and requests, on S3) of `bronze()` results; with `mean`, the mean
    too (a day that writes checkpoints or compacts counts in full)."""
    took = f"{statistics.median(r[0] for r in runs):.3f} s"
    if mean:
        took += f" (mean {statistics.mean(r[0] for r in runs):.3f} s)"
    if not args.s3:
        return took
    req = f"{int(statistics.median(r[1] for r in runs))} req"
    if mean:
        req += f" (mean {statistics.mean(r[1] for r in runs):.1f})"
    return f"{took}, {req}"


def measure(runs):
    """One round at the lake in use: the next batch, a no-op `--pending` and `status`."""
    make(made + 1)
    runs["next"].append(bronze("ingest", f"{entity_root}/batch_id={batch_id(made)}"))
    # One round folds the new run into the ledger; the no-op after it is measured.
    bronze("ingest", "--pending", landing)
    runs["noop"].append(bronze("ingest", "--pending", landing))
    runs["status"].append(bronze("status", landing))


def row(point, runs):
    return (f"| {point:,} | {cell(runs['next'], mean=True)} | {cell(runs['noop'])} | {cell(runs['status'])} "
            f"| {live_files('_run_control')} | {catalog_bytes() / 1e6:.0f} MB |")


def use(root):
    """Makes the local lake at `root` (the work folder or a copy of it) the one in use."""
    global work, entity, catalog, landing, entity_root, made
    work = root
    entity = work / "landing" / "src" / "entity"
    catalog = str(work / "lakehouse")
    landing = str(work / "landing")
    entity_root = str(entity)
    made = len(list(entity.glob("batch_id=*")))


print("| history | next batch | no-op `--pending` | `status` | `_run_control` live files | catalog |")
print("|---|---|---|---|---|---|")
points = [int(p) for p in args.points.split(",")]
if args.s3 and args.upload:
    upload(args.upload)
    runs = {"next": [], "noop": [], "status": []}
    for _ in range(args.repeat):
        measure(runs)
    print(row(made, runs), flush=True)
elif args.s3:
    for point in points:
        load_history(point)
        runs = {"next": [], "noop": [], "status": []}
        for _ in range(args.repeat):
            measure(runs)
        print(row(point, runs), flush=True)
else:
    main = work
    copies = {}
    for point in points:
        copies[point] = main / f"at-{point}"
        if (copies[point] / "lakehouse").is_dir():
            # Copied by an earlier invocation on this WORKDIR: measured as it is.
            print(f"history of {point:,}: {copies[point]} kept", file=sys.stderr, flush=True)
            continue
        use(main)
        load_history(point)
        subprocess.run(["rm", "-rf", str(copies[point])], check=True)
        copies[point].mkdir()
        for part in ("landing", "lakehouse"):
            subprocess.run(["cp", "-a", str(main / part), str(copies[point])], check=True)
        print(f"history of {point:,} loaded and copied", file=sys.stderr, flush=True)
    runs = {point: {"next": [], "noop": [], "status": []} for point in points}
    for _ in range(args.repeat):
        for point in points:
            use(copies[point])
            measure(runs[point])
    for point in points:
        use(copies[point])
        print(row(point, runs[point]), flush=True)
