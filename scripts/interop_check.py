#!/usr/bin/env python3
"""Reads bronze tables with other engines and compares with bronze's own reader.

Usage: interop_check.py EXPECTED_JSON

EXPECTED_JSON (written by the Rust test `tests/it/interop.rs`):
  {"tables": [{"path": ".../bronze/quote", "version": 5, "rows": 20,
               "old_version": 2, "old_rows": 10, "columns": ["_id", ...]}, ...]}

Each table is read with deltalake (delta-rs Python), Polars (read_delta), DuckDB's
Parquet reader over the files deltalake lists and DuckDB's own Delta reader
(`delta_scan`, scripts/duckdb_delta_scan.py: the extension's package pins its DuckDB, so
it runs apart, from BRONZE_DUCKDB_DELTA, default .emulators/duckdb-delta) at its current
version, and with deltalake and Polars by time travel at an earlier one.

A table may list `typed` columns (`{"column": "ts", "kind": "timestamp"}`, kinds
`timestamp`, `date` and `decimal(P,S)`, with their expected `values`: timestamps as
microseconds since the epoch, dates as YYYY-MM-DD, decimals as text with their scale):
every reader must see the type (a UTC timestamp, a date, the decimal) and the values; with
`"spark": true` in the spec, Spark's Parquet reader (local mode) too.

The keys join in deltalake, Polars and DuckDB: every child row's `_parent_id` is the `_id`
of a row of the listed tables and its `_root_id` the `_id` of a topic row. Exits 1 with
one line per mismatch.
"""
import datetime
import json
import os
import subprocess
import sys

import duckdb
import polars as pl
from deltalake import DeltaTable, QueryBuilder
from deltalake.exceptions import DeltaProtocolError


REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)


def micros(v: datetime.datetime) -> int:
    return (v - EPOCH) // datetime.timedelta(microseconds=1)


def as_text(kind: str, v) -> str:
    """A value as the spec has it."""
    if kind == "timestamp":
        return str(micros(v))
    if kind == "date":
        return v.isoformat()
    return str(v)


def type_ok(engine: str, kind: str, shown: str) -> bool:
    """Whether `engine` shows `kind` as such (a timestamp must carry UTC: Fabric's SQL
    endpoint drops a timestamp without a time zone)."""
    if kind == "timestamp":
        return {
            "deltalake": shown in ("timestamp[us, tz=UTC]", "timestamp[us, tz=+00:00]"),
            "polars": shown in ("Datetime(time_unit='us', time_zone='UTC')",),
            "duckdb": shown == "TIMESTAMP WITH TIME ZONE",
            "spark": shown == "timestamp",
        }[engine]
    if kind == "date":
        return {"deltalake": shown == "date32[day]", "polars": shown == "Date",
                "duckdb": shown == "DATE", "spark": shown == "date"}[engine]
    p, s = kind[len("decimal("):-1].split(",")
    return {
        "deltalake": shown == f"decimal128({p}, {s})",
        "polars": shown == f"Decimal(precision={p}, scale={s})",
        "duckdb": shown == f"DECIMAL({p},{s})",
        "spark": shown == f"decimal({p},{s})",
    }[engine]


def check_typed(path, typed, engine, shown_and_values, problems):
    """Compares one engine's types and values of a table's typed columns with the spec."""
    for c in typed:
        got = shown_and_values.get(c["column"])
        if got is None:
            problems.append(f"{path}: {engine} has no column {c['column']}")
            continue
        shown, values = got
        if not type_ok(engine, c["kind"], shown):
            problems.append(f"{path}: {engine} reads {c['column']} as {shown}, not {c['kind']}")
        if sorted(values) != sorted(c["values"]):
            problems.append(f"{path}: {engine} reads {c['column']} as {sorted(values)}, expected {sorted(c['values'])}")


def arrow_typed(table, typed):
    out = {}
    for c in typed:
        if c["column"] in table.column_names:
            col = table.column(c["column"])
            out[c["column"]] = (str(col.type), [as_text(c["kind"], v) for v in col.to_pylist() if v is not None])
    return out


def polars_typed(frame, typed):
    out = {}
    for c in typed:
        if c["column"] in frame.columns:
            col = frame.get_column(c["column"])
            out[c["column"]] = (str(col.dtype), [as_text(c["kind"], v) for v in col.to_list() if v is not None])
    return out


def duckdb_delta(spec_path):
    """DuckDB's `delta_scan` of every table, by path (scripts/duckdb_delta_scan.py)."""
    folder = os.environ.get("BRONZE_DUCKDB_DELTA", os.path.join(REPO, ".emulators", "duckdb-delta"))
    if not os.path.isdir(folder):
        raise SystemExit(f"DuckDB's Delta reader is not installed in {folder}: run scripts/test, or set BRONZE_DUCKDB_DELTA")
    out = subprocess.run(
        [sys.executable, os.path.join(REPO, "scripts", "duckdb_delta_scan.py"), spec_path],
        env={**os.environ, "PYTHONPATH": folder}, capture_output=True, text=True,
    )
    if out.returncode != 0:
        raise SystemExit(f"duckdb_delta_scan.py failed:\n{out.stderr}")
    return json.loads(out.stdout)


def spark_typed(tables, problems):
    """Spark's Parquet reader (local mode) over the files deltalake lists."""
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[1]")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    try:
        for t in tables:
            files = DeltaTable(t["path"]).file_uris()
            if not t.get("typed") or not files:
                continue
            frame = spark.read.option("mergeSchema", "true").parquet(*files)
            got = {}
            for c in t["typed"]:
                if c["column"] not in frame.columns:
                    continue
                q = f"`{c['column']}`"
                expr = f"unix_micros({q})" if c["kind"] == "timestamp" else f"CAST({q} AS STRING)"
                values = [str(r[0]) for r in frame.selectExpr(f"{expr} AS v").collect() if r[0] is not None]
                got[c["column"]] = (frame.schema[c["column"]].dataType.simpleString(), values)
            check_typed(t["path"], t["typed"], "spark", got, problems)
    finally:
        spark.stop()


def check_joins(tables, problems):
    """Every child row's `_parent_id` joins an `_id` of the tables, its `_root_id` a topic
    row's `_id`, read by deltalake (pyarrow), Polars and DuckDB's Parquet reader."""
    import pyarrow as pa
    import pyarrow.compute as pc

    child = [t["path"] for t in tables if "_parent_id" in t["columns"]]
    topic = [t["path"] for t in tables if "_parent_id" not in t["columns"] and "_id" in t["columns"]]
    if not child:
        return
    everything = child + topic
    ids = lambda paths: pa.chunked_array(
        [c for p in paths for c in DeltaTable(p).to_pyarrow_table(columns=["_id"]).column("_id").chunks],
        pa.string(),
    )
    all_ids, roots = ids(everything), ids(topic)
    pl_ids = lambda paths: pl.concat([pl.read_delta(p, columns=["_id"]) for p in paths]).get_column("_id")
    pl_all, pl_roots = pl_ids(everything), pl_ids(topic)
    files = lambda paths: [f for p in paths for f in DeltaTable(p).file_uris()]
    duck_all, duck_roots = files(everything), files(topic)
    for path in child:
        keys = DeltaTable(path).to_pyarrow_table(columns=["_parent_id", "_root_id"])
        frame = pl.read_delta(path, columns=["_parent_id", "_root_id"])
        mine = DeltaTable(path).file_uris()
        for key, arrow_set, polars_set, duck_files in (
            ("_parent_id", all_ids, pl_all, duck_all),
            ("_root_id", roots, pl_roots, duck_roots),
        ):
            orphans = {
                "deltalake": keys.num_rows - pc.sum(pc.is_in(keys[key], value_set=arrow_set.combine_chunks())).as_py()
                if keys.num_rows else 0,
                "polars": frame.filter(~pl.col(key).is_in(polars_set.implode())).height,
                "duckdb": duckdb.sql(
                    f"SELECT count(*) FROM read_parquet($mine, union_by_name = true) c "
                    f"ANTI JOIN (SELECT _id FROM read_parquet($all, union_by_name = true)) a ON c.{key} = a._id",
                    params={"mine": mine, "all": duck_files},
                ).fetchall()[0][0]
                if mine
                else 0,
            }
            for engine, n in orphans.items():
                if n:
                    problems.append(f"{path}: {engine} finds {n} rows whose {key} joins no row")


def polars_frame(path: str) -> pl.DataFrame:
    """The table as Polars reads it; a column-mapped table (reader version 2), which
    Polars' own Delta reader refuses whoever wrote it, through deltalake's Arrow."""
    try:
        return pl.read_delta(path)
    except Exception as e:  # Polars raises its ComputeError from the scan.
        if "column mapping" not in str(e):
            raise
        return pl.from_arrow(DeltaTable(path).to_pyarrow_table())


def deltalake_rows(dt: DeltaTable) -> int:
    """Rows deltalake reads: through pyarrow, or through its query engine for a table with
    reader features its pyarrow dataset refuses (deletion vectors)."""
    try:
        return dt.to_pyarrow_table().num_rows
    except DeltaProtocolError:
        out = QueryBuilder().register("t", dt).execute("SELECT count(*) AS n FROM t").read_all()
        return out.column("n")[0].as_py()


def main() -> int:
    spec = json.load(open(sys.argv[1]))
    problems = []
    scanned = duckdb_delta(sys.argv[1])
    for t in spec["tables"]:
        path = t["path"]
        dt = DeltaTable(path)
        if dt.version() != t["version"]:
            problems.append(f"{path}: deltalake sees version {dt.version()}, bronze {t['version']}")
        got = {
            "deltalake": deltalake_rows(dt),
            "polars": polars_frame(path).height,
            "duckdb": duckdb.sql(
                "SELECT count(*) FROM read_parquet($files, union_by_name = true)",
                params={"files": dt.file_uris()},
            ).fetchall()[0][0]
            if dt.file_uris()
            else 0,
            "duckdb delta_scan": scanned[path]["rows"],
        }
        for engine, rows in got.items():
            if rows != t["rows"]:
                problems.append(f"{path}: {engine} reads {rows} rows, bronze {t['rows']}")
        typed = t.get("typed", [])
        if typed:
            check_typed(path, typed, "deltalake", arrow_typed(dt.to_pyarrow_table(), typed), problems)
            check_typed(path, typed, "polars", polars_typed(polars_frame(path), typed), problems)
            duck = {k: (v["type"], v["values"]) for k, v in scanned[path]["typed"].items()}
            check_typed(path, typed, "duckdb", duck, problems)
        columns = set(polars_frame(path).columns)
        missing = set(t["columns"]) - columns
        if missing:
            problems.append(f"{path}: polars misses columns {sorted(missing)}")
        if t.get("old_version") is not None:
            old = DeltaTable(path, version=t["old_version"]).to_pyarrow_table().num_rows
            old_pl = pl.read_delta(path, version=t["old_version"]).height
            for engine, rows in (("deltalake", old), ("polars", old_pl)):
                if rows != t["old_rows"]:
                    problems.append(
                        f"{path}@{t['old_version']}: {engine} reads {rows} rows, bronze {t['old_rows']}"
                    )
    check_joins(spec["tables"], problems)
    engines = "deltalake, polars, duckdb and duckdb's delta_scan"
    if spec.get("spark"):
        spark_typed(spec["tables"], problems)
        engines += " and spark"
    for p in problems:
        print(p)
    print(f"checked {len(spec['tables'])} tables with {engines}: {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
