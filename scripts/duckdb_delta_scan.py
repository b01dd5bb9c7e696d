#!/usr/bin/env python3
"""Reads Delta tables with DuckDB's own Delta reader (`delta_scan`), for interop_check.py.

Usage: PYTHONPATH=DIR duckdb_delta_scan.py SPEC_JSON

DIR holds `duckdb` and `duckdb_extension_delta` of one version (the extension's package
pins its DuckDB; `scripts/test` installs both into .emulators/duckdb-delta, apart from
the venv's DuckDB). SPEC_JSON is interop_check.py's spec; for each table this prints, as
one JSON object by path: its row count, and for each of its `typed` columns the type
DuckDB gives it and its non-null values (timestamps as microseconds since the epoch,
the rest as text), sorted.
"""
import glob
import json
import os
import sys

import duckdb
import duckdb_extension_delta


def value_sql(column: str, kind: str) -> str:
    quoted = '"' + column.replace('"', '""') + '"'
    if kind == "timestamp":
        return f"epoch_us({quoted})"
    return f"CAST({quoted} AS VARCHAR)"


def main() -> int:
    spec = json.load(open(sys.argv[1]))
    folder = os.path.dirname(duckdb_extension_delta.__file__)
    extension = glob.glob(os.path.join(folder, "extensions", "*", "delta.duckdb_extension"))[0]
    con = duckdb.connect(config={"allow_unsigned_extensions": "true"})
    con.execute(f"LOAD '{extension}'")
    out = {}
    for t in spec["tables"]:
        scan = "delta_scan($path)"
        params = {"path": t["path"]}
        rows = con.execute(f"SELECT count(*) FROM {scan}", params).fetchall()[0][0]
        described = dict((r[0], r[1]) for r in con.execute(f"DESCRIBE SELECT * FROM {scan}", params).fetchall())
        typed = {}
        for c in t.get("typed", []):
            values = con.execute(
                f"SELECT {value_sql(c['column'], c['kind'])} AS v FROM {scan} WHERE v IS NOT NULL",
                params,
            ).fetchall()
            typed[c["column"]] = {
                "type": described.get(c["column"]),
                "values": sorted(str(v[0]) for v in values),
            }
        out[t["path"]] = {"rows": rows, "typed": typed}
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
