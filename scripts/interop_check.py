#!/usr/bin/env python3
"""Reads bronze tables with other engines and compares with bronze's own reader.

Usage: interop_check.py EXPECTED_JSON

EXPECTED_JSON (written by the Rust test `tests/it/interop.rs`):
  {"tables": [{"path": ".../bronze/quote", "version": 5, "rows": 20,
               "old_version": 2, "old_rows": 10, "columns": ["_id", ...]}, ...]}

Each table is read with deltalake (delta-rs Python), Polars (read_delta) and DuckDB
(read_parquet over the files deltalake lists: DuckDB's delta extension needs a download
this machine cannot make), at its current version and, by time travel, at an earlier
one. Exits 1 with one line per mismatch.
"""
import json
import sys

import duckdb
import polars as pl
from deltalake import DeltaTable


def main() -> int:
    spec = json.load(open(sys.argv[1]))
    problems = []
    for t in spec["tables"]:
        path = t["path"]
        dt = DeltaTable(path)
        if dt.version() != t["version"]:
            problems.append(f"{path}: deltalake sees version {dt.version()}, bronze {t['version']}")
        got = {
            "deltalake": dt.to_pyarrow_table().num_rows,
            "polars": pl.read_delta(path).height,
            "duckdb": duckdb.sql(
                "SELECT count(*) FROM read_parquet($files, union_by_name = true)",
                params={"files": dt.file_uris()},
            ).fetchall()[0][0]
            if dt.file_uris()
            else 0,
        }
        for engine, rows in got.items():
            if rows != t["rows"]:
                problems.append(f"{path}: {engine} reads {rows} rows, bronze {t['rows']}")
        columns = set(pl.read_delta(path).columns)
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
    for p in problems:
        print(p)
    print(f"checked {len(spec['tables'])} tables with deltalake, polars and duckdb: {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
