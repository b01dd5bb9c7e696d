"""`bronze.spark.ingest_pending` on a standalone cluster in one machine (Spark's
`local-cluster` master: a standalone master and two workers, each executor its own JVM
and Python workers), with a batch busy in another process meanwhile."""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path

import pytest

import bronze
from conftest import FIRST, expected, make_landing, table_rows

pytest.importorskip("pyspark")


@pytest.fixture(scope="module")
def cluster():
    from pyspark.sql import SparkSession

    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    started = (
        SparkSession.builder.master("local-cluster[2,1,1024]")  # 2 workers, 1 core each
        .appName("bronze-tests-cluster")
        .config("spark.ui.enabled", "false")
        .getOrCreate()
    )
    yield started
    started.stop()


def test_a_batch_held_elsewhere_is_a_busy_row_and_loads_next_time(cluster, tmp_path: Path) -> None:
    from bronze.spark import ingest_pending

    landing, catalog = tmp_path / "landing", tmp_path / "lakehouse"
    made = make_landing(landing / "market", ["trades", "quotes"], 3)
    held = landing / "market" / "quotes" / "batch_id=2026-05-02_001"

    # This (driver) process loads one batch and pauses inside it, holding its lease.
    inside, release = threading.Event(), threading.Event()

    def pause(stage: str, done: int, total: int) -> None:
        if stage == "parse" and not inside.is_set():
            inside.set()
            release.wait(120)

    holder = threading.Thread(target=lambda: bronze.ingest(held, catalog, progress=pause))
    holder.start()
    try:
        assert inside.wait(60)
        rows = {(r.landing_path, r.batch_id): r for r in ingest_pending(cluster, landing, catalog).collect()}
    finally:
        release.set()
        holder.join(120)

    status = {k: r.status for k, r in rows.items()}
    assert status[("market/quotes", "2026-05-02_001")] == "busy"
    assert "lease" in rows[("market/quotes", "2026-05-02_001")].reason
    # The entity's later batch waits; the other entity is not held back.
    assert status[("market/quotes", "2026-05-03_001")] == "waiting"
    assert status[("market/quotes", "2026-05-01_001")] == "loaded"
    assert all(status[("market/trades", f"2026-05-0{d}_001")] == "loaded" for d in (1, 2, 3))
    assert {r.task for r in rows.values()} == {0, 1}  # one task per entity

    # Next time: the held batch was loaded by its holder; the waiting one loads now.
    again = {r.batch_id: r.status for r in ingest_pending(cluster, landing, catalog).collect()}
    assert again == {"2026-05-03_001": "loaded"}
    assert table_rows(catalog) == {t: len(made) * n for t, n in expected(FIRST).items()}


def test_unordered_spreads_one_entitys_backfill_over_both_executors_and_loses_no_column(
    cluster, tmp_path: Path
) -> None:
    """``ordered=False``: one entity's 40 batches, each adding a column to the child table
    its two topics share, load over both executors at once; every batch exactly once, every
    added column with exactly its batch's values."""
    import json

    from deltalake import DeltaTable

    from bronze.spark import ingest_pending

    landing, catalog = tmp_path / "landing", tmp_path / "lakehouse"
    entity = landing / "feed" / "prices"
    for k in range(1, 41):
        folder = entity / f"batch_id=b{k:03d}"
        folder.mkdir(parents=True)
        lines = [
            json.dumps(
                {
                    "topic": topic,
                    "message_id": f"{topic}-{k}-{m}",
                    "payload": {"symbol": "X", "currentprice": [{"px": k + m, f"extra_{k}": k}]},
                }
            )
            for topic in ("quote", "trade")
            for m in range(3)
        ]
        (folder / "part-00000.jsonl").write_text("\n".join(lines) + "\n")
    rows = ingest_pending(cluster, landing, catalog, ordered=False, parallelism=2).collect()
    assert sorted((r.batch_id, r.status) for r in rows) == [(f"b{k:03d}", "loaded") for k in range(1, 41)]
    assert {r.task for r in rows} == {0, 1}, "both executors' tasks loaded batches"
    prices = DeltaTable(str(catalog / "bronze" / "currentprice")).to_pyarrow_table()
    assert prices.num_rows == 40 * 2 * 3
    for k in range(1, 41):
        values = [v for v in prices.column(f"extra_{k}").to_pylist() if v is not None]
        assert values == [k] * 6, f"extra_{k}"
    runs = DeltaTable(str(catalog / "bronze" / "_run_control")).to_pyarrow_table().to_pylist()
    ok = sorted(r["_batch_id"] for r in runs if r["table"] == "(batch)" and r["status"] == "ok")
    assert ok == [f"b{k:03d}" for k in range(1, 41)], "one successful run per batch"
    assert ingest_pending(cluster, landing, catalog, ordered=False).count() == 0
