#!/usr/bin/env python3
"""The DuckDB baseline of BENCHMARKS.md: what a user scripts with DuckDB for one batch.

    .venv/bin/python scripts/duckdb_baseline.py BATCH_DIR OUT_DIR [THREADS]

Reads every `*.jsonl` of BATCH_DIR with `read_json` (a fixed envelope: topic, message
id, the payload kept as JSON; corrupt lines skipped with `ignore_errors`), drops
duplicate message ids, and per topic infers the payload's structure
(`json_group_structure`), parses it (`from_json`), unnests its nested objects into
columns (`unnest(..., recursive := true)`; arrays stay lists) and writes one Parquet
file per topic under OUT_DIR. Prints one line: wall seconds, lines kept, topics. On
THREADS threads (default 2, this machine's cores).
"""
import os
import shutil
import sys
import time

import duckdb


def main() -> None:
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    batch, out = sys.argv[1], sys.argv[2]
    threads = int(sys.argv[3]) if len(sys.argv) > 3 else 2
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    started = time.perf_counter()
    con = duckdb.connect()
    con.execute(f"SET threads = {threads}")
    con.execute(
        f"""
        CREATE TEMP TABLE raw AS
        SELECT topic, message_id, payload FROM read_json(
            '{batch}/*.jsonl',
            format = 'newline_delimited',
            columns = {{'topic': 'VARCHAR', 'message_id': 'VARCHAR', 'payload': 'JSON'}},
            ignore_errors = true)
        WHERE topic IS NOT NULL AND payload IS NOT NULL
        QUALIFY row_number() OVER (PARTITION BY message_id) = 1
        """
    )
    topics = [t for (t,) in con.execute("SELECT DISTINCT topic FROM raw ORDER BY 1").fetchall()]
    kept = con.execute("SELECT count(*) FROM raw").fetchone()[0]
    for topic in topics:
        (structure,) = con.execute(
            "SELECT json_group_structure(payload) FROM raw WHERE topic = ?", [topic]
        ).fetchone()
        structure = structure.replace("'", "''")
        safe = "".join(c if c.isalnum() else "_" for c in topic)
        con.execute(
            f"""
            COPY (
                SELECT message_id, unnest(from_json(payload, '{structure}'), recursive := true)
                FROM raw WHERE topic = ?
            ) TO '{out}/{safe}.parquet' (FORMAT parquet)
            """,
            [topic],
        )
    wall = time.perf_counter() - started
    print(f"{wall:.3f} s, {kept} lines kept, {len(topics)} topics")


if __name__ == "__main__":
    main()
