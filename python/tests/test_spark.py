"""`bronze.spark.ingest_pending` on Spark in local mode (pyspark from PyPI, Java 17):
3 entities x 10 batches over 2 executor threads, a task killed mid-batch and retried by
Spark, and the tables read back by deltalake, Polars and DuckDB."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

import bronze
from conftest import FIRST, expected, kill_once, make_landing, table_rows

pyspark = pytest.importorskip("pyspark")


@pytest.fixture(scope="module")
def spark():
    from pyspark.sql import SparkSession

    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    started = (
        SparkSession.builder.master("local[2,4]")  # 2 threads; a task may fail 4 times
        .appName("bronze-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .getOrCreate()
    )
    yield started
    started.stop()


def test_a_backlog_over_spark_executors_loads_each_batch_once(spark, tmp_path: Path) -> None:
    landing, catalog = tmp_path / "landing", tmp_path / "lakehouse"
    made = make_landing(landing / "market", ["trades", "quotes", "books"], 10)
    marker = tmp_path / "killed"

    from bronze.spark import ingest_pending

    result = ingest_pending(spark, landing, catalog, parallelism=2, progress=kill_once(marker))
    rows = result.collect()

    assert marker.exists(), "no task was killed"
    assert sorted((r.landing_path, r.batch_id) for r in rows) == sorted(
        (f"market/{e}", b) for e, b in made
    )
    # The killed task's retry found the batches it had finished recorded, and took over
    # the killed batch's lease (its holder's pid is gone) and loaded it.
    assert {r.status for r in rows} <= {"loaded", "already_loaded"}, [
        (r.batch_id, r.status, r.reason) for r in rows if r.status not in ("loaded", "already_loaded")
    ]
    # Every table's rows exact: 30 copies of the fixture batch, none twice.
    assert table_rows(catalog) == {t: 30 * n for t, n in expected(FIRST).items()}
    # One successful run per batch in _run_control.
    from deltalake import DeltaTable

    runs = DeltaTable(str(catalog / "bronze" / "_run_control")).to_pyarrow_table().to_pylist()
    ok = {}
    for r in runs:
        if r["table"] == "(batch)" and r["status"] == "ok":
            ok.setdefault((r["landing_paths"], r["_batch_id"]), set()).add(r["run_id"])
    assert {k: len(v) for k, v in ok.items()} == {(f"market/{e}", b): 1 for e, b in made}

    # Nothing left: a second call finds no pending batch.
    assert ingest_pending(spark, landing, catalog).count() == 0
    assert bronze.pending(landing, catalog) == []

    # Interop: the same rows through Polars and DuckDB.
    import duckdb
    import polars as pl

    trade = str(catalog / "bronze" / "trade")
    assert pl.read_delta(trade).height == 30 * expected(FIRST)["trade"]
    con = duckdb.connect()
    arrow = DeltaTable(trade).to_pyarrow_dataset()
    assert con.execute("select count(*) from arrow").fetchone()[0] == 30 * expected(FIRST)["trade"]
    assert con.execute("select count(distinct _batch_id) from arrow").fetchone()[0] == 10


def test_the_plan_keeps_each_entity_in_one_task_in_batch_id_order() -> None:
    from bronze.spark import plan

    batches = [bronze.Batch(f"f/{e}/{b}", e, b) for e in ("a", "b", "c") for b in ("3", "1", "2")]
    batches += [bronze.Batch("f/d/1", "d", "1")]
    groups = plan(batches, 2)
    assert len(groups) == 2
    for g in groups:
        for entity in {b["landing_path"] for b in g}:
            ids = [b["batch_id"] for b in g if b["landing_path"] == entity]
            assert ids == sorted(ids)
    assert sorted(len(g) for g in groups) == [4, 6]
    assert sum(len(g) for g in groups) == len(batches)
    assert len(plan(batches, 64)) == 4  # at most one task per entity
    assert plan([], 4) == []


def test_a_task_parses_with_its_own_cpus_unless_threads_is_given() -> None:
    import json

    from bronze.spark import _task_settings

    class Task:
        def cpus(self) -> int:
            return 3

    settings = bronze._settings("lake", schema="bronze")
    assert json.loads(_task_settings(settings, Task()))["threads"] == 3
    given = bronze._settings("lake", threads=8)
    assert json.loads(_task_settings(given, Task()))["threads"] == 8
    assert "threads" not in json.loads(_task_settings(settings, None))
