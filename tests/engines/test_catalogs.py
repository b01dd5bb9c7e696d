"""Bronze's tables registered in Apache Hive's standalone metastore 3.1.3 (started by
`scripts/hive_metastore.sh` from the jars `scripts/test` copies into .emulators/jvm/hive),
beside a table Spark registered itself, then read by name by Spark with Delta and Hive
support: a Spark session that knows only the metastore's URI, never the lakehouse's
folder. One Spark process per session (the tests' shared session has no Hive catalog,
and a session's catalog is fixed at start)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from conftest import JVM, REPO, _jars, bronze, ingest, land, rows_deltalake

# A Spark session with Delta and the metastore at argv[1] as its catalog; runs the SQL
# statements of argv[4], then reads each `database.table` of argv[2] by name and prints
# {name: {"columns", "rows"}} as JSON.
SPARK_BY_NAME = r"""
import json, sys, tempfile
from pyspark.sql import SparkSession
uri, names, jars, warehouse = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3], tempfile.mkdtemp()
statements = json.loads(sys.argv[4])
spark = (SparkSession.builder.master("local[2]").appName("bronze-hms-read")
         .config("spark.jars", jars)
         .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
         .config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog")
         .config("spark.sql.catalogImplementation", "hive")
         .config("spark.hadoop.hive.metastore.uris", uri)
         .config("spark.sql.warehouse.dir", warehouse)
         .config("spark.ui.enabled", "false")
         .config("spark.sql.shuffle.partitions", "2")
         .config("spark.sql.session.timeZone", "UTC")
         .getOrCreate())
spark.sparkContext.setLogLevel("ERROR")
for statement in statements:
    spark.sql(statement)
out = {}
for name in names:
    df = spark.table(name)
    out[name] = {"columns": df.columns,
                 "rows": [r.asDict(recursive=True) for r in df.collect()]}
print("RESULT " + json.dumps(out, default=str))
spark.stop()
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def hive_metastore(tmp_path: Path):
    """The metastore on a free port, stopped after the test on every path."""
    port = _free_port()
    proc = subprocess.Popen(
        [str(REPO / "scripts" / "hive_metastore.sh"), str(tmp_path / "hms"), str(port)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "BRONZE_JVM": str(JVM)},
    )
    try:
        seen = []
        for line in proc.stderr:
            seen.append(line)
            if "Started the new metaserver on port" in line:
                break
        else:
            pytest.fail("the Hive metastore exited before it listened:\n" + "".join(seen[-40:]))
        # Its further output drained so it never blocks on a full pipe.
        threading.Thread(target=proc.stderr.read, daemon=True).start()
        yield f"thrift://127.0.0.1:{port}"
    finally:
        proc.kill()
        proc.wait()


def spark_by_name(uri: str, names: list[str], statements: list[str] = ()) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", SPARK_BY_NAME, uri, json.dumps(names), ",".join(_jars("spark")),
         json.dumps(list(statements))],
        capture_output=True,
        text=True,
    )
    result = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert done.returncode == 0 and result, done.stderr[-4000:]
    return json.loads(result[0][len("RESULT "):])


def test_spark_reads_bronze_tables_by_name_from_the_hive_metastore(hive_metastore, tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    flags = ["--metastore", "hive", "--metastore-uri", hive_metastore,
             "--metastore-database", "bronze_{entity}"]
    # A first batch loaded with no catalog; a user registers one of its tables in Spark
    # by hand (Spark stores a placeholder column, `col array<string>`).
    first = land(tmp_path / "landing", "b1", [
        {"topic": "quote", "message_id": "1", "payload": {"sym": "AÉ", "px": 1.5, "legs": [{"k": 1}, {"k": 2}]}},
        {"topic": "quote", "message_id": "2", "payload": {"sym": "B", "px": 2.0, "legs": []}},
    ])
    ingest(lake, first)
    got = spark_by_name(hive_metastore, ["bronze_events.quote"], [
        "CREATE DATABASE IF NOT EXISTS bronze_events",
        f"CREATE TABLE bronze_events.quote USING DELTA LOCATION '{lake / 'bronze' / 'quote'}'",
    ])
    assert sorted(r["sym"] for r in got["bronze_events.quote"]["rows"]) == ["AÉ", "B"]
    # The next batch, with the catalog: a new column in Spark's table (its entry kept as
    # Spark made it), a new topic's table registered by bronze.
    second = land(tmp_path / "landing", "b2", [
        {"topic": "quote", "message_id": "3", "payload": {"sym": "C", "px": 3.0, "venue": "XETR"}},
        {"topic": "trade", "message_id": "4", "payload": {"sym": "C", "qty": 7}},
    ])
    ingest(lake, second, *flags)
    # `bronze register` catches up with the first batch's child table.
    registered = bronze("register", "--catalog", str(lake), "--metastore", "hive",
                        "--metastore-uri", hive_metastore, "--metastore-database", "bronze_events")
    said = registered.stdout
    assert "bronze_events.legs: created" in said, said
    assert "bronze_events.quote: kept" in said, said
    assert "bronze_events.trade: unchanged" in said, said
    # A fresh session, knowing only the metastore, reads all three by name.
    names = ["bronze_events.quote", "bronze_events.legs", "bronze_events.trade"]
    got = spark_by_name(hive_metastore, names)
    quote = got["bronze_events.quote"]
    assert "venue" in quote["columns"], quote["columns"]
    assert sorted((r["sym"], r["venue"]) for r in quote["rows"]) == [("AÉ", None), ("B", None), ("C", "XETR")]
    legs = got["bronze_events.legs"]
    want = rows_deltalake(lake / "bronze" / "legs")
    assert len(legs["rows"]) == len(want) == 2, legs
    assert set(legs["columns"]) == set(want[0]), legs["columns"]
    trade = got["bronze_events.trade"]
    assert [(r["sym"], r["qty"]) for r in trade["rows"]] == [("C", 7)]
