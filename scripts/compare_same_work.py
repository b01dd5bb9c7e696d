#!/usr/bin/env python3
"""Bronze vs a peer doing the same work on one batch: time and rows. Peers: DuckDB
(`scripts/duckdb_same_work.py`, default) or the source notebook's design on Spark with
Delta in local mode (`scripts/spark_same_work.py`, `--peer spark`).

    .venv/bin/python scripts/compare_same_work.py BATCH_DIR [--repeat 3] [--bronze PATH] [--peer spark]

(`--bronze` defaults to $BRONZE_BIN, else `target/release/bronze` under $CARGO_TARGET_DIR
or the repo.) Each run's user and system CPU, peak RSS and peak anonymous memory
(RssAnon) are printed too (scripts/measure.py).

Runs `bronze ingest BATCH_DIR --catalog <fresh temp folder>` (exit 0, or 1 when corrupt
lines were kept) and the DuckDB script (into a fresh temp folder), interleaved, N times
each; prints the wall-clock median of each (whole processes, so interpreter start and
imports count for the script, as process start does for bronze; the script's own time
is shown beside it) and the ratio, with the load average before and after (on a shared
machine the medians drift; the ratio of interleaved runs drifts less).

Then compares the tables, by name: row counts (topic tables, child tables,
`_corrupt_records`); the rows themselves by key (the message id, file and line of every
topic row: which duplicate won; the (root id, topic, index) of every child row; file and
line of every corrupt line); the columns each side has; their Arrow types; and the values
of every column both have (except `_id` and `_parent_id` of child rows, which are bronze's
positional ids (`<message id>/<path>/<index>`) vs the script's md5, `_loaded_at`, `_source_file` compared by file name, and
`_reason` up to its first `:`). Where a table's row count differs it says, per topic,
where, and the known reason. Exits 1 when any table differs in its rows.
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections import Counter

import pyarrow.parquet as pq
from deltalake import DeltaTable

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import measure  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
PEERS = {
    "duckdb": os.path.join(HERE, "duckdb_same_work.py"),
    "spark": os.path.join(HERE, "spark_same_work.py"),
}
# `cargo build --release`'s binary, or $BRONZE_BIN.
BRONZE = os.environ.get("BRONZE_BIN") or os.path.join(
    os.environ.get("CARGO_TARGET_DIR") or os.path.join(os.path.dirname(HERE), "target"),
    "release",
    "bronze",
)
PEER_NAME = "duckdb"  # the peer being compared, for the printed labels
SYSTEM_TABLES = {"_run_control", "_bronze_leases", "_bronze_ledger"}


def run_bronze(bronze, batch, catalog):
    """One bronze run: its measures (scripts/measure.py) and the report's first line."""
    shutil.rmtree(catalog, ignore_errors=True)
    with tempfile.TemporaryFile("w+") as said:
        m = measure.run([bronze, "ingest", batch, "--catalog", catalog], ok=range(256), stdout=said, stderr=said)
        said.seek(0)
        text = said.read()
    if m["exit"] not in (0, 1):
        sys.exit(f"bronze exited {m['exit']}:\n{text}")
    return m, text.splitlines()[0] if text else ""


def run_peer(peer, batch, out, threads):
    """One run of the peer script: its measures, its own time (for Spark: from the
    SparkSession's creation on) and its last line."""
    with tempfile.TemporaryFile("w+") as said:
        cmd = [sys.executable, PEERS[peer], batch, out]
        if peer == "duckdb":
            cmd += ["--threads", str(threads)]
        m = measure.run(cmd, ok=range(256), stdout=said, stderr=subprocess.DEVNULL)
        said.seek(0)
        text = said.read()
    if m["exit"] not in (0, 1):
        sys.exit(f"{os.path.basename(PEERS[peer])} exited {m['exit']}:\n{text}")
    line = text.strip().splitlines()[-1]
    own = float(line.split(" s,")[0])
    return m, own, line


def bronze_tables(catalog):
    root = os.path.join(catalog, "bronze")
    out = {}
    for name in sorted(os.listdir(root)):
        if name in SYSTEM_TABLES or not os.path.isdir(os.path.join(root, name, "_delta_log")):
            continue
        out[name] = DeltaTable(os.path.join(root, name)).to_pyarrow_table()
    return out


def peer_tables(out):
    """The peer's tables: Parquet files (DuckDB) or Delta tables (Spark) under `out`."""
    tables = {}
    for f in sorted(os.listdir(out)):
        path = os.path.join(out, f)
        if f.endswith(".parquet"):
            tables[f[: -len(".parquet")]] = pq.read_table(path)
        elif os.path.isdir(os.path.join(path, "_delta_log")):
            tables[f] = DeltaTable(path).to_pyarrow_table()
    return tables


def keys(table):
    cols = table.column_names
    base = [os.path.basename(f) for f in table.column("_source_file").to_pylist()] if "_source_file" in cols else None
    if "_root_id" in cols:  # a child table: which element of which message of which topic
        # the parent's index path is not in the row; (root, topic, idx, line) with counts
        return Counter(
            zip(table.column("_root_id").to_pylist(), table.column("_topic").to_pylist(),
                table.column("_idx").to_pylist())
        )
    if "_corrupt_record" in cols:
        return Counter(zip(base, table.column("_line").to_pylist()))
    return Counter(zip(table.column("_id").to_pylist(), base, table.column("_line").to_pylist()))


IGNORED = {"_id", "_parent_id", "_loaded_at", "_source_file"}


def value_diff(b, p):
    """Columns of both whose values differ (as multisets, rows matched by their keys)."""
    cols = [c for c in b.column_names if c in p.column_names and c not in IGNORED]
    if "_root_id" not in b.column_names and "_id" in b.column_names:
        order = [("_id", "ascending")]
    elif "_root_id" in b.column_names:
        order = [("_root_id", "ascending"), ("_topic", "ascending"), ("_idx", "ascending")]
    else:
        order = [("_source_file", "ascending"), ("_line", "ascending")]
    diff = []
    for c in cols:
        if "_root_id" in b.column_names:  # nested rows share (root, idx): compare multisets
            bv, pv = Counter(map(repr, b.column(c).to_pylist())), Counter(map(repr, p.column(c).to_pylist()))
        else:
            bv = b.sort_by(order).column(c).to_pylist()
            pv = p.sort_by(order).column(c).to_pylist()
        if c == "_reason":  # bronze's reason adds where the parser stopped
            bv, pv = ([v.split(":")[0] for v in x] for x in (bv, pv))
        if bv != pv:
            diff.append(c)
    return diff


def explain(name, kind, b, p, peer):
    """Where a table's rows differ: per topic, with the known reasons."""
    if "_topic" not in b.column_names or "_topic" not in p.column_names:
        return ""
    bt, pt = Counter(b.column("_topic").to_pylist()), Counter(p.column("_topic").to_pylist())
    parts = []
    for topic in sorted(set(bt) | set(pt)):
        if bt[topic] != pt[topic]:
            why = ""
            if kind == "child" and pt[topic] == 0 and PEER_NAME == "duckdb":
                why = (" (the DuckDB script keeps this path as JSON text in the parent: in this"
                       " batch it holds arrays in some messages and other values in others, and"
                       " DuckDB's inferred structure is one type per path)")
            parts.append(f"{topic}: bronze {bt[topic]}, {PEER_NAME} {pt[topic]}{why}")
    return ": " + "; ".join(parts) if parts else ""


def topic_of(name, table):
    return "child" if "_root_id" in table.column_names else ("corrupt" if name == "_corrupt_records" else "topic")


def compare(bronze, peer):
    ok = True
    rows = []
    for name in sorted(set(bronze) | set(peer)):
        b, p = bronze.get(name), peer.get(name)
        kind = topic_of(name, b if b is not None else p)
        if b is None or p is None:
            ok = False
            rows.append((name, kind, b.num_rows if b is not None else "-", p.num_rows if p is not None else "-",
                         "only in " + ("bronze" if p is None else PEER_NAME)))
            continue
        note = ""
        if b.num_rows != p.num_rows:
            ok = False
            note = "ROW COUNT DIFFERS" + explain(name, kind, b, p, peer)
        elif keys(b) != keys(p):
            ok = False
            note = "SAME COUNT, DIFFERENT ROWS"
        elif (diff := value_diff(b, p)):
            note = "same rows, values differ in " + ", ".join(diff)
        else:
            bcols = {c for c in b.column_names}
            pcols = {c for c in p.column_names}
            extra_b, extra_p = sorted(bcols - pcols), sorted(pcols - bcols)
            note = "same rows, columns and values"
            types = [c for c in sorted(bcols & pcols) if b.schema.field(c).type != p.schema.field(c).type]
            if types:
                note += "; types differ: " + ", ".join(
                    f"{c} {b.schema.field(c).type} vs {p.schema.field(c).type}" for c in types)
            if extra_b or extra_p:
                note += f"; columns only in bronze {extra_b}, only in {PEER_NAME} {extra_p}"
        rows.append((name, kind, b.num_rows, p.num_rows, note))
    w = max(len(r[0]) for r in rows)
    print(f"{'table':<{w}}  kind     bronze   {PEER_NAME:>6}  check")
    for r in rows:
        print(f"{r[0]:<{w}}  {r[1]:<7} {r[2]:>7}  {r[3]:>7}  {r[4]}")
    for kind in ("topic", "child", "corrupt"):
        sel = [r for r in rows if r[1] == kind]
        same = sum(1 for r in sel if r[4].startswith("same rows"))
        print(f"{kind} tables: {same}/{len(sel)} the same rows "
              f"({sum(r[2] for r in sel if isinstance(r[2], int))} rows in bronze, "
              f"{sum(r[3] for r in sel if isinstance(r[3], int))} in {PEER_NAME})")
    return ok


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("batch")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2, help="DuckDB threads")
    ap.add_argument("--bronze", default=BRONZE)
    ap.add_argument("--peer", choices=sorted(PEERS), default="duckdb")
    args = ap.parse_args()
    global PEER_NAME
    PEER_NAME = args.peer
    batch = os.path.normpath(args.batch)
    tmp = tempfile.mkdtemp(prefix="compare_same_work_")
    catalog, out = os.path.join(tmp, "lake"), os.path.join(tmp, args.peer)
    b_runs, p_runs, p_owns = [], [], []
    print("load average before: %.2f %.2f %.2f" % os.getloadavg())
    try:
        for i in range(args.repeat):
            b, bline = run_bronze(args.bronze, batch, catalog)
            p, own, pline = run_peer(args.peer, batch, out, args.threads)
            b_runs.append(b)
            p_runs.append(p)
            p_owns.append(own)
            print(f"run {i + 1}: bronze {b['wall_s']:.3f} s, {args.peer} {p['wall_s']:.3f} s (script's own {own:.3f} s)")
            for name, m in (("bronze", b), (args.peer, p)):
                print(f"  {name}: user {m['user_s']:.2f} s, sys {m['sys_s']:.2f} s, peak RSS "
                      f"{m['peak_rss_mb']:.0f} MB, RssAnon {m['peak_rss_anon_mb']:.0f} MB")
        b_walls = [m["wall_s"] for m in b_runs]
        p_walls = [m["wall_s"] for m in p_runs]
        print("load average after: %.2f %.2f %.2f" % os.getloadavg())
        print(f"bronze: {bline}")
        print(f"{args.peer}: {pline}")
        bm, pm, om = (statistics.median(x) for x in (b_walls, p_walls, p_owns))
        start = "the JVM's start" if args.peer == "spark" else "interpreter start"
        print(f"median wall: bronze {bm:.3f} s, {args.peer} {pm:.3f} s (script's own {om:.3f} s); "
              f"{args.peer}/bronze = {pm / bm:.2f}x ({om / bm:.2f}x without {start})")
        print()
        same = compare(bronze_tables(catalog), peer_tables(out))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("all tables agree" if same else "tables differ (see above)")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
